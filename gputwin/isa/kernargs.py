"""The launch contract: the kernarg segment of a dispatch and its stats, one set of argument rules for every launcher
(gputwin.emu's `launch` and `Emulator`, gputwin.runtime's `Device.launch` and `Program.__call__`), read from the code
object's metadata.

    ka = pack(kern, args, grid, block, arch=arch, pointer=map_array, queue_va=q, apertures=(shared_hi, private_hi))
    ka.data (the segment), ka.lds_size (static + dynamic LDS bytes)

Rules. With argument metadata: one argument per non-hidden entry; `global_buffer` takes a device address (an int) or
whatever the launcher's `pointer` maps (numpy arrays; the runtime also its Buffers), an array's item size checked
against the pointee type; `by_value` numbers are packed by the metadata's type name (else its size);
`dynamic_shared_pointer` (`__local T *`) takes a byte count, placed after the static LDS, 16-byte aligned; `hidden_*`
arguments are filled as the HSA runtime does (AMDGPUUsage, code object v5). Without metadata (a bare
`.amdhsa_kernel` block): pointers (arrays, anything `pointer` maps) become 8-byte addresses, Python ints and floats
4-byte i32/f32, numpy scalars their own size, each naturally aligned."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from gputwin.errors import CodeObjectError, LaunchError

NUMPY_OF = {"float": "f4", "double": "f8", "half": "f2", "int": "i4", "uint": "u4", "long": "i8", "ulong": "u8",
            "short": "i2", "ushort": "u2", "char": "i1", "uchar": "u1", "bool": "u1", "unsigned int": "u4",
            "unsigned long": "u8", "unsigned short": "u2", "unsigned char": "u1", "size_t": "u8"}
NUMBER = (int, float, np.integer, np.floating, bool)


@dataclass
class LaunchStats:
  """What a launch returns, through the emulator and through the runtime alike."""
  kernel: str
  arch: str
  waves: int = 0
  workgroups: int = 0
  instructions: int = 0  # wave-instructions
  lane_instructions: int = 0  # sum over wave-instructions of the lanes EXEC enabled
  native_instructions: int = 0  # wave-instructions the emulator's native tier (emu/native/) ran
  seconds: float = 0.0
  wave_size: int = 32
  trace: list = field(default_factory=list, repr=False)

  @property
  def wave_instructions_per_s(self) -> float: return self.instructions / self.seconds if self.seconds else 0.0


@dataclass
class Kernargs:
  data: bytearray  # the segment (at least the descriptor's kernarg_size, 256 bytes, the metadata's extent)
  lds_size: int  # group segment bytes: the descriptor's static LDS plus every dynamic (`__local T *`) argument


def read_code(path, arch: str | None = None) -> tuple[bytes, str | None]:
  """A launcher's code-object file: .co/.o bytes as they are, `.s` assembled by gputwin.isa (for `arch`, else the
  target its `.amdgcn_target` names). Returns (bytes, arch)."""
  p = Path(path)
  try:
    raw = p.read_bytes()
  except OSError as e:
    raise CodeObjectError(f"cannot read: {e.strerror}", str(p)) from None
  if p.suffix != ".s":
    return raw, arch
  from gputwin.isa.codeobj import assemble_code_object
  text = raw.decode(errors="replace")
  mt = re.search(r"\.amdgcn_target\s+\"amdgcn-amd-amdhsa--(gfx\w+)", text)
  arch = arch or (mt.group(1) if mt else None)
  if arch is None:
    raise CodeObjectError("an assembly file needs --arch (or an .amdgcn_target directive)", str(p))
  return assemble_code_object(text, arch, path=str(p)), arch


def three(v, what: str) -> tuple[int, int, int]:
  """A grid or block: 1 to 3 positive integers -> (x, y, z)."""
  t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
  if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
    raise LaunchError(f"{what} must be 1 to 3 positive integers, got {v!r}")
  return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def pack_number(arg, meta, where: str) -> bytes:
  """A by-value argument, packed by the metadata's type name (or size)."""
  ty = (meta.type_name or "").strip()
  code = NUMPY_OF.get(ty)
  if code is None or int(code[1]) != meta.size:
    code = ("i" if isinstance(arg, (int, np.integer)) else "f") + str(meta.size)
  if isinstance(arg, np.ndarray) and arg.size == 1:
    arg = arg.reshape(-1)[0]
  if not isinstance(arg, NUMBER):
    raise LaunchError(f"{where} ({ty or meta.value_kind}) is a by-value {meta.size}-byte number; "
                      f"got {type(arg).__name__}")
  try:
    if code[0] in "iu" and isinstance(arg, (float, np.floating)) and float(arg) != int(arg):
      raise ValueError("not an integer")
    return np.array(arg).astype(code).tobytes()[:meta.size].ljust(meta.size, b"\0")
  except (ValueError, OverflowError) as e:
    raise LaunchError(f"{where} ({ty}): cannot pack {arg!r}: {e}") from None


def hidden_value(kind: str, grid, block, queue_va: int, apertures: tuple[int, int]) -> int | None:
  """Implicit ("hidden_*") kernel arguments the runtime fills (AMDGPUUsage, code object v5 metadata);
  `apertures`: the high 32 bits of the shared (LDS) and private (scratch) aperture bases."""
  return {"hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
          "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
          "hidden_grid_dims": 1 + (grid[1] * block[1] > 1 or grid[2] * block[2] > 1) + (grid[2] * block[2] > 1),
          "hidden_queue_ptr": queue_va, "hidden_shared_base": apertures[0],
          "hidden_private_base": apertures[1]}.get(kind)


# The largest kernarg segment a launch accepts. The kernel descriptor's KERNARG_SIZE is a u32 and no runtime reads it
# as a promise to allocate 4 GiB: the largest parameter space a GPU vendor documents is CUDA's 32,764 bytes of
# __global__ parameters (CUDA 12.1+, sm_70+; 4 KB before), AMD's OpenCL runtime reports CL_DEVICE_MAX_PARAMETER_SIZE
# 1,024, and code object v5 adds 256 bytes of hidden arguments. Twice CUDA's figure leaves room for every compiler's
# output and refuses a corrupt or hostile descriptor before it allocates.
MAX_KERNARG_SIZE = 64 << 10


def segment_size(kern, arch: str = "") -> int:
  """Bytes of `kern`'s kernarg segment: the descriptor's kernarg_size, the metadata's extent, at least 256; a
  LaunchError naming the field when either is past MAX_KERNARG_SIZE."""
  sizes = [kern.descriptor.kernarg_size] + [a.offset + a.size for a in kern.args]
  for k, n in enumerate(sizes):
    if n > MAX_KERNARG_SIZE:
      a = kern.args[k - 1] if k else None
      what = "the kernel descriptor's kernarg_size" if a is None else \
          f"argument {k - 1} ({a.value_kind}) at offset {a.offset} + {a.size} bytes in the metadata"
      raise LaunchError(f"[{arch}] kernel {kern.name}: {what} asks for a {n:#x}-byte kernarg segment, past the "
                        f"{MAX_KERNARG_SIZE} bytes a launch accepts (gputwin.isa.kernargs.MAX_KERNARG_SIZE)", arch,
                        kern.name)
  return max(256, *sizes)


def pack(kern, args, grid, block, *, arch: str, pointer: Callable[[object], int | None], queue_va: int = 0,
         apertures: tuple[int, int] = (0, 0)) -> Kernargs:
  """The kernarg segment of `kern` (a codeobj.Kernel) for `args` (rules: module docstring). `pointer(a)` maps a
  pointer argument that is not a plain address and returns its device address, or None when it cannot."""
  kd, metas, name = kern.descriptor, kern.args, kern.name
  buf = bytearray(segment_size(kern, arch))
  lds = -(-kd.group_segment_fixed_size // 16) * 16
  args = list(args)

  def address(a, i, what: str) -> bytes:
    va = pointer(a)
    if va is None:
      raise LaunchError(f"[{arch}] argument {i} of {name} is a pointer ({what}); pass a buffer (a numpy array to "
                        f"launch) or a device address, got {type(a).__name__}", arch, name)
    return int(va).to_bytes(8, "little")

  if not metas:  # a bare .amdhsa_kernel: no metadata to check against
    off = 0
    for i, a in enumerate(args):
      if isinstance(a, np.generic):
        v = np.asarray(a).tobytes()
      elif isinstance(a, NUMBER):
        v = np.array(a, "f4" if isinstance(a, float) else "i4").tobytes()
      else:
        v = address(a, i, "no metadata")
      off = -(-off // len(v)) * len(v)
      if off + len(v) > len(buf):
        raise LaunchError(f"[{arch}] kernel {name}: the arguments need {off + len(v)} bytes of kernargs, the "
                          f"descriptor gives {len(buf)}", arch, name)
      buf[off:off + len(v)] = v
      off += len(v)
    return Kernargs(buf, lds)
  user = [m for m in metas if not m.value_kind.startswith("hidden")]
  if len(args) != len(user):
    raise LaunchError(f"[{arch}] kernel {name} takes {len(user)} arguments "
                      f"({', '.join(m.type_name or m.value_kind for m in user)}), got {len(args)}", arch, name)
  for i, (a, m) in enumerate(zip(args, user)):
    where = f"[{arch}] argument {i} of {name}"
    if m.value_kind == "by_value":
      v = pack_number(a, m, where)
    elif m.value_kind == "dynamic_shared_pointer":  # `__local T *`: its size in bytes
      if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or a < 0:
        raise LaunchError(f"{where} is a __local pointer: pass its size in bytes, got {a!r}", arch, name)
      v, lds = lds.to_bytes(m.size, "little"), lds + -(-int(a) // 16) * 16
    elif m.value_kind != "global_buffer":
      raise LaunchError(f"{where}: {m.value_kind} arguments are not supported", arch, name)
    elif isinstance(a, (int, np.integer)) and not isinstance(a, bool):  # a raw device address
      v = int(a).to_bytes(8, "little")
    else:
      want = NUMPY_OF.get((m.type_name or "").rstrip("*").strip())
      if isinstance(a, np.ndarray) and want and np.dtype(want).itemsize != a.dtype.itemsize:
        raise LaunchError(f"{where} is {m.type_name}; got a {a.dtype} array", arch, name)
      v = address(a, i, m.type_name)
    buf[m.offset:m.offset + m.size] = v[:m.size]
  for m in metas:
    h = hidden_value(m.value_kind, grid, block, queue_va, apertures)
    if h is not None:
      buf[m.offset:m.offset + m.size] = int(h).to_bytes(m.size, "little")
  return Kernargs(buf, lds)
