"""Dispatches: code object -> cached program, guest memory with kernargs and a real dispatch packet, the initial
register state the AMDGPU ABI promises (AMDGPUUsage "Initial Kernel Execution State"), run, copy results back.
"""
from __future__ import annotations

import functools
import hashlib
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gputwin.emu import core
from gputwin.emu.checks import Checks
from gputwin.emu.memory import GuestMemory
from gputwin.emu.program import Program
from gputwin.errors import CodeObjectError, EmuError, EmuFault, EmuTrap, GputwinError, LaunchError
from gputwin.isa.codeobj import CodeObject, assemble_code_object, load_code_object
from gputwin.isa.targets import target
from gputwin.pcode import family_of


@dataclass
class LaunchStats:
  kernel: str
  arch: str
  waves: int = 0
  workgroups: int = 0
  instructions: int = 0  # wave-instructions
  lane_instructions: int = 0  # wave-instructions x active lanes
  seconds: float = 0.0
  wave_size: int = 32
  trace: list = field(default_factory=list, repr=False)

  @property
  def wave_instructions_per_s(self) -> float: return self.instructions / self.seconds if self.seconds else 0.0


# ------------------------------------------------------------------------------------------ code objects
@functools.lru_cache(maxsize=32)
def _load(data: bytes, arch: str | None) -> CodeObject:
  return load_code_object(data, arch=arch)


def code_object(obj, arch: str | None = None) -> CodeObject:
  """bytes, a CodeObject, or a path to .co/.o/.s -> CodeObject (cached by content)."""
  if isinstance(obj, CodeObject):
    return obj
  if isinstance(obj, (str, Path)):
    p = Path(obj)
    try:
      raw = p.read_bytes()
    except OSError as e:
      raise CodeObjectError(f"cannot read: {e.strerror}", str(p)) from None
    if p.suffix == ".s":
      text = raw.decode(errors="replace")
      if arch is None:
        import re
        mt = re.search(r"\.amdgcn_target\s+\"amdgcn-amd-amdhsa--(gfx\w+)", text)
        arch = mt.group(1) if mt else None
      if arch is None:
        raise CodeObjectError("an assembly file needs --arch (or an .amdgcn_target directive)", str(p))
      raw = assemble_code_object(text, arch, path=str(p))
    return _load(raw, arch)
  return _load(bytes(obj), arch)


@functools.lru_cache(maxsize=64)
def _program(key: bytes, text: bytes, base: int, arch: str, wave: int) -> Program:
  return Program(text, base, arch, family_of(arch), wave)


def program_for(co: CodeObject, wave: int) -> Program:
  key = hashlib.sha1(co.text).digest()
  return _program(key, co.text, co.text_address, co.arch, wave)


# ------------------------------------------------------------------------------------------ arguments
_NP = {"float": "f4", "double": "f8", "half": "f2", "int": "i4", "uint": "u4", "long": "i8", "ulong": "u8",
       "short": "i2", "ushort": "u2", "char": "i1", "uchar": "u1", "bool": "u1", "unsigned int": "u4",
       "unsigned long": "u8", "unsigned short": "u2", "unsigned char": "u1", "size_t": "u8"}


def _pack(arg, meta, kernel: str, i: int) -> bytes:
  ty = (meta.type_name or "").strip()
  code = _NP.get(ty)
  if code is None or int(code[1]) != meta.size:
    code = ("i" if isinstance(arg, (int, np.integer)) else "f") + str(meta.size)
  if isinstance(arg, np.ndarray) and arg.size == 1:
    arg = arg.reshape(-1)[0]
  if not isinstance(arg, (int, float, np.integer, np.floating, bool)):
    raise LaunchError(f"argument {i} ({ty or meta.value_kind}) of {kernel} is a by-value {meta.size}-byte number; "
                      f"got {type(arg).__name__}")
  try:
    if code[0] in "iu" and isinstance(arg, (float, np.floating)) and float(arg) != int(arg):
      raise ValueError("not an integer")
    v = np.array(arg).astype(code)
  except (ValueError, OverflowError) as e:
    raise LaunchError(f"argument {i} of {kernel} ({ty}): cannot pack {arg!r}: {e}") from None
  return v.tobytes()[:meta.size].ljust(meta.size, b"\0")


def _hidden(kind: str, size: int, grid, block, packet_va: int, queue_va: int) -> bytes | None:
  vals = {"hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
          "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
          "hidden_grid_dims": 1 + (grid[1] * block[1] > 1 or grid[2] * block[2] > 1) + (grid[2] * block[2] > 1),
          "hidden_queue_ptr": queue_va, "hidden_shared_base": core.SHARED_HI, "hidden_private_base": core.PRIVATE_HI}
  if kind in vals:
    return int(vals[kind]).to_bytes(size, "little")
  return None


# ------------------------------------------------------------------------------------------ launch
def _three(v, what: str) -> tuple[int, int, int]:
  t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
  if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
    raise LaunchError(f"{what} must be 1 to 3 positive integers, got {v!r}")
  return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def launch(code_object_, kernel: str, *, grid, block, args, arch: str | None = None, serial: bool = False,
           checks=True, trace=None, max_instructions: int | None = None) -> LaunchStats:
  """Run `kernel` of `code_object_` (bytes, path to .co/.o/.s, or CodeObject) over `grid` workgroups of `block`
  work-items. `args` match the kernel's argument metadata: numpy arrays are copied into guest memory before and
  back into the same arrays after; numbers are packed by the metadata's size and type. Returns LaunchStats.
  `checks`: True (all), False, or a set of checker names (see gputwin.emu.checks). `trace`: a list to append
  per-instruction records to (see Emulator.trace), or a path to write them to."""
  from gputwin.emu.api import Emulator
  emu = Emulator(code_object_, arch=arch)
  return emu.launch(kernel, grid=grid, block=block, args=args, serial=serial, checks=checks, trace=trace,
                    max_instructions=max_instructions)


def where(eng, st: Stop | None, kernel: str, arch: str) -> str:
  """'[gfx1100] kernel saxpy, wave 3, PC 0x1940: global_load_b32 v2, v[2:3], off'."""
  op = st.op if st is not None else None
  pc = op.pc if op is not None else (int(eng.pc[st.wave]) if st is not None and st.wave >= 0 else -1)
  ins = f": {op.text}" if op is not None else ""
  return f"[{arch}] kernel {kernel}, wave {st.wave if st else '?'}, PC {pc:#x}{ins}"


Stop = core.Stop


def raise_stop(st: core.Stop, eng, kernel: str, arch: str):
  loc = where(eng, st, kernel, arch)
  pc = st.op.pc if st.op is not None else (int(eng.pc[st.wave]) if st.wave >= 0 else -1)
  inst = st.op.text if st.op is not None else ""
  if st.kind == "fault":
    f = st.fault
    raise EmuFault(f.va, f.size, f.access, arch, kernel, pc, inst, str(f)) from None
  if st.kind == "trap":
    raise EmuTrap(f"{loc}: {st.msg}", arch, kernel, pc, inst) from None
  if st.kind == "check":
    from gputwin.errors import EmuCheckError
    raise EmuCheckError(f"{loc}: {st.msg}", arch, kernel, pc, inst) from None
  raise EmuError(f"{loc}: {st.msg}", arch, kernel, pc, inst) from None
