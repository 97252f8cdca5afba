"""The one rule that turns a PTX kernel's arguments into its `.param` buffer (PTX ISA 9.0 5.1.6 "Kernel Function
Parameters"), shared by the emulator (gputwin.emu.ptx.launch) and the runtime (gputwin.runtime.nv, which puts the
buffer in constant bank 0 at the offset ptxas reports).

    params = layout(fn.params)                                   # (name, type, offset, size, array) per .param
    raw = pack(params, args, address, where="[sm_90] kernel saxpy")

One argument per `.param` of the `.entry`, in order. Whatever `address(a)` maps (the emulator: a numpy array -> a
guest buffer; the runtime: arrays -> device buffers, Buffers -> their VA) fills a 64-bit param with that address; a
numpy scalar whose size matches the param is passed by its bits (nvcc declares `int` as `.u32`: np.int32(-3) arrives
as 0xfffffffd), of another width by value if it fits; a Python int fills an integer param (two's complement, or a
device address for a pointer), a Python float (or int) an `.f32`/`.f64` param; bytes fill a by-value struct
(`.align 8 .b8 p[24]`).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from gputwin.errors import LaunchError

# bytes of each fundamental type a .param may have (PTX ISA 5.2 "Fundamental Types")
SIZE = {"b8": 1, "u8": 1, "s8": 1, "pred": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "f16x2": 4,
        "bf16x2": 4, "b32": 4, "u32": 4, "s32": 4, "f32": 4, "tf32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8,
        "b128": 16, "e4m3x2": 2, "e5m2x2": 2}


@dataclass(frozen=True)
class Param:
  """One kernel parameter's place in the .param buffer."""
  name: str
  type: str
  offset: int
  size: int
  array: bool = False  # declared with dims (`.b8 p[24]`): a by-value aggregate

  @property
  def decl(self) -> str: return f".{self.type}{'[%d]' % self.size if self.array else ''}"


def layout(decls) -> list[Param]:
  """Offsets of an `.entry`'s parameters (VarDecls): each at its `.align` or its type's natural alignment, in order,
  as ptxas lays them out in the constant bank (EIATTR_KPARAM_INFO)."""
  out, off = [], 0
  for d in decls:
    n = SIZE.get(d.type, 4) * max(d.vec, 1)
    for k in d.dims: n *= max(k, 0)
    a = max(d.align, SIZE.get(d.type, 4), 1)
    off = -(-off // a) * a
    out.append(Param(d.name, d.type, off, n, bool(d.dims)))
    off += n
  return out


def size(params: Sequence[Param]) -> int:
  """Bytes the parameters span (EIATTR_CBANK_PARAM_SIZE)."""
  return max((p.offset + p.size for p in params), default=0)


def _int(v: int, n: int, what: Callable[[], str]) -> bytes:
  if not -(1 << (8 * n - 1)) <= int(v) < (1 << (8 * n)):
    raise LaunchError(f"{what()}: {v} does not fit {n} bytes")
  return (int(v) & ((1 << (8 * n)) - 1)).to_bytes(n, "little")


def _float(v, t: str) -> bytes: return struct.pack("<f" if t == "f32" else "<d", float(v))


def pack(params: Sequence[Param], args, address: Callable[[object], int | None], where: str,
         total: int | None = None) -> bytes:
  """The .param buffer (`total` bytes, default `size(params)`) for `args` by the rules of the module docstring.
  `address(a)` returns the device address of a pointer argument (a numpy array, a runtime Buffer), or None for an
  argument it does not map. Errors name `where`, the argument, its name and declaration."""
  args = list(args)
  if len(args) != len(params):
    raise LaunchError(f"{where} takes {len(params)} arguments ({', '.join(p.name for p in params)}), got {len(args)}")
  buf = bytearray(size(params) if total is None else total)
  for i, (a, p) in enumerate(zip(args, params)):
    t, n = p.type, p.size
    what = lambda i=i, p=p: f"{where}: argument {i} ({p.name}, {p.decl})"  # (an error's words, made on error)
    if isinstance(a, (bytes, bytearray)):
      if len(a) != n: raise LaunchError(f"{what()}: {len(a)} bytes given for {n}")
      raw = bytes(a)
    elif isinstance(a, np.generic):
      raw = a.tobytes()
      if len(raw) != n:
        if a.dtype.kind in "iub" and not t.startswith("f") and -(1 << (8 * n - 1)) <= int(a) < (1 << (8 * n)):
          raw = _int(int(a), n, what)   # another width: by value, if it fits
        elif a.dtype.kind == "f" and t in ("f32", "f64"):
          raw = _float(a, t)
        else:
          raise LaunchError(f"{what()}: a {a.dtype} ({len(raw)} bytes) does not fit {n} bytes")
    elif isinstance(a, (bool, int)):
      raw = _float(a, t) if t.startswith("f") else _int(a, n, what)
    elif isinstance(a, float):
      if t not in ("f32", "f64"):
        raise LaunchError(f"{what()}: a float for a non-float parameter (pass a numpy scalar to give its bits)")
      raw = _float(a, t)
    else:
      if isinstance(a, np.ndarray) and n != 8:
        raise LaunchError(f"{what()}: an array is passed by its 64-bit address, but the parameter has {n} bytes")
      va = address(a)
      if va is None: raise LaunchError(f"{what()}: cannot pass a {type(a).__name__}")
      if n != 8:
        raise LaunchError(f"{what()}: a {type(a).__name__} is passed by its 64-bit address, but the parameter has {n} "
                          f"bytes")
      raw = int(va).to_bytes(8, "little")
    buf[p.offset:p.offset + n] = raw
  return bytes(buf)
