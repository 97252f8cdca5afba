"""`launch()`, code-object loading (cached by content), the kernarg segment from the argument metadata, and the
translation of executor stops into the public errors (each names target, kernel, wave, PC and instruction)."""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gputwin.emu import core
from gputwin.emu.program import PRIVATE_HI, SHARED_HI, Program
from gputwin.errors import CodeObjectError, EmuCheckError, EmuError, EmuFault, EmuTrap, LaunchError
from gputwin.isa.codeobj import CodeObject, assemble_code_object, load_code_object
from gputwin.pcode import family_of


@dataclass
class LaunchStats:
  kernel: str
  arch: str
  waves: int = 0
  workgroups: int = 0
  instructions: int = 0  # wave-instructions
  lane_instructions: int = 0  # sum over wave-instructions of the lanes EXEC enabled
  native_instructions: int = 0  # wave-instructions the native tier (emu/jit.py) ran
  seconds: float = 0.0
  wave_size: int = 32
  trace: list = field(default_factory=list, repr=False)

  @property
  def wave_instructions_per_s(self) -> float: return self.instructions / self.seconds if self.seconds else 0.0


def launch(code_object, kernel: str, *, grid, block, args, arch: str | None = None, serial: bool = False,
           checks=True, trace=None, max_instructions: int | None = None) -> LaunchStats:
  """Run `kernel` of `code_object` (bytes, a path to .co/.o/.s, or a CodeObject) over `grid` workgroups (x, y, z)
  of `block` work-items. `args` match the kernel's argument metadata: numpy arrays become guest buffers (mapped in
  place when writeable, C-contiguous and overlapping no other argument; else copied in before and back after);
  numbers are packed by the metadata's size and type.
  `serial`: one wave at a time (the oracle schedule). `checks`: True, False or a set of checker names (checks.py).
  `trace`: a list to append (wave, pc, instruction, registers written) records to, or a path to write them to.
  `max_instructions`: a watchdog on wave-instructions. Returns LaunchStats."""
  from gputwin.emu.api import Emulator
  return Emulator(code_object, arch=arch).launch(kernel, grid=grid, block=block, args=args, serial=serial,
                                                  checks=checks, trace=trace, max_instructions=max_instructions)


# ------------------------------------------------------------------------------------------ code objects
@functools.lru_cache(maxsize=32)
def _load(data: bytes, arch: str | None) -> CodeObject:
  return load_code_object(data, arch=arch)


def load(obj, arch: str | None = None) -> CodeObject:
  """bytes, a CodeObject, or a path to .co/.o/.s -> CodeObject (cached by content; .s assembled by gputwin.isa)."""
  if isinstance(obj, CodeObject):
    return obj
  if not isinstance(obj, (str, Path)):
    return _load(bytes(obj), arch)
  p = Path(obj)
  try:
    st = p.stat()
    return _load_file(str(p), (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size), arch)
  except OSError as e:
    raise CodeObjectError(f"cannot read: {e.strerror}", str(p)) from None


@functools.lru_cache(maxsize=32)
def _load_file(path: str, stamp: tuple, arch: str | None) -> CodeObject:
  """A file's code object, cached while the file (device, inode, modification time, size) stays: a repeated launch
  skips the read."""
  p = Path(path)
  raw = p.read_bytes()
  if p.suffix == ".s":
    text = raw.decode(errors="replace")
    mt = re.search(r"\.amdgcn_target\s+\"amdgcn-amd-amdhsa--(gfx\w+)", text)
    arch = arch or (mt.group(1) if mt else None)
    if arch is None:
      raise CodeObjectError("an assembly file needs --arch (or an .amdgcn_target directive)", str(p))
    raw = assemble_code_object(text, arch, path=str(p))
  return _load(raw, arch)


@functools.lru_cache(maxsize=64)
def _program(key: bytes, text: bytes, base: int, arch: str, wave: int) -> Program:
  return Program(text, base, arch, family_of(arch), wave)


def program_for(co: CodeObject, wave: int) -> Program:
  """The decoded-once program of a code object's text (shared by every launch of any of its kernels)."""
  return _program(hashlib.sha1(co.text).digest(), co.text, co.text_address, co.arch, wave)


# ------------------------------------------------------------------------------------------ arguments
NUMPY_OF = {"float": "f4", "double": "f8", "half": "f2", "int": "i4", "uint": "u4", "long": "i8", "ulong": "u8",
            "short": "i2", "ushort": "u2", "char": "i1", "uchar": "u1", "bool": "u1", "unsigned int": "u4",
            "unsigned long": "u8", "unsigned short": "u2", "unsigned char": "u1", "size_t": "u8"}


def pack_number(arg, meta, where: str) -> bytes:
  """A by-value argument, packed by the metadata's type name (or size)."""
  ty = (meta.type_name or "").strip()
  code = NUMPY_OF.get(ty)
  if code is None or int(code[1]) != meta.size:
    code = ("i" if isinstance(arg, (int, np.integer)) else "f") + str(meta.size)
  if isinstance(arg, np.ndarray) and arg.size == 1:
    arg = arg.reshape(-1)[0]
  if not isinstance(arg, (int, float, np.integer, np.floating, bool)):
    raise LaunchError(f"{where} ({ty or meta.value_kind}) is a by-value {meta.size}-byte number; "
                      f"got {type(arg).__name__}")
  try:
    if code[0] in "iu" and isinstance(arg, (float, np.floating)) and float(arg) != int(arg):
      raise ValueError("not an integer")
    return np.array(arg).astype(code).tobytes()[:meta.size].ljust(meta.size, b"\0")
  except (ValueError, OverflowError) as e:
    raise LaunchError(f"{where} ({ty}): cannot pack {arg!r}: {e}") from None


def hidden_value(kind: str, grid, block, queue_va: int) -> int | None:
  """Implicit ("hidden_*") kernel arguments the runtime fills (AMDGPUUsage, code object v5 metadata)."""
  return {"hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
          "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
          "hidden_grid_dims": 1 + (grid[1] * block[1] > 1 or grid[2] * block[2] > 1) + (grid[2] * block[2] > 1),
          "hidden_queue_ptr": queue_va, "hidden_shared_base": SHARED_HI, "hidden_private_base": PRIVATE_HI}.get(kind)


def three(v, what: str) -> tuple[int, int, int]:
  t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
  if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
    raise LaunchError(f"{what} must be 1 to 3 positive integers, got {v!r}")
  return tuple(int(x) for x in t) + (1,) * (3 - len(t))


# ------------------------------------------------------------------------------------------ errors
def raise_stop(st: core.Stop, eng, kernel: str, arch: str, first_wave: int = 0):
  """Turn an executor stop into EmuFault / EmuTrap / EmuCheckError / EmuError naming where it happened (waves
  numbered across the dispatch: `first_wave` is the batch's first)."""
  op = st.op
  pc = op.pc if op is not None else (int(eng.pc[st.wave]) if st.wave >= 0 else -1)
  inst = op.text if op is not None else ""
  loc = f"[{arch}] kernel {kernel}, wave {first_wave + st.wave}, PC {pc:#x}" + (f": {inst}" if inst else "")
  if st.kind == "fault":
    f = st.fault
    raise EmuFault(f.va, f.size, f.access, arch, kernel, pc, inst, str(f)) from None
  cls = {"trap": EmuTrap, "check": EmuCheckError}.get(st.kind, EmuError)
  raise cls(f"{loc}: {st.msg}", arch, kernel, pc, inst) from None
