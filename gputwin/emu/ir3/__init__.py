"""The Qualcomm Adreno ir3 frontend of the shared machine (a6xx/a7xx): 64-bit instructions (gputwin.isa.ir3) bound
to our ir3 pcode (decode.py, gputwin.pcode.ir3), effective addresses of global, shared, private, IBO (bindless SSBO)
and UBO accesses (memory.py), the fiber-level control events below, and launches of Mesa ir3 output (launch.py).
`FRONTEND` implements gputwin.emu.frontend.Frontend with per-fiber PCs (`simt`): waves of 64 or 128 fibers whose
threads reconverge where their paths meet (the lowest PC runs first: core.run_simt), which is where Mesa puts its
(jp) join points.
"""
from __future__ import annotations

import numpy as np

from gputwin.emu.ir3 import decode, events, memory
from gputwin.emu.program import Op

U32 = np.uint32


class Ir3:
  name, align, simt = "ir3", 8, True
  its = False  # no independent thread scheduling: a wave's fibers reconverge before any runs ahead (core.run_simt)
  va_bits = 64
  buffers = ("ibo", "ubo")  # the bound-buffer tables (Engine.res, binding.Buffer.kind) in the native tier's order
  special_inputs = {"EXEC": ("mask",), "EXEC_LO": ("mask",)}
  sgprs = decode.SROWS  # the scalar file: shared registers, the machine's EXEC/M0/NULL, the const file
  memop = staticmethod(memory.memop)
  bind = staticmethod(decode.bind)
  regname = staticmethod(decode.regname)

  @staticmethod
  def decode(text, arch: str, offset: int, wave: int):
    return decode.locate(text, arch, offset)

  @staticmethod
  def special(family: str) -> dict[str, int]:
    return {"exec": decode.EXEC, "vcc": decode.EXEC, "m0": decode.M0, "null": decode.NULL}

  @staticmethod
  def computed(code: int) -> bool:
    return False

  @staticmethod
  def sreg(eng, ix, code: int, dwords: int) -> np.ndarray:
    r = eng.S[ix, code:code + dwords]
    return (r[:, 0] if dwords == 1 else eng.join(r, axis=1))[:, None]

  @staticmethod
  def select_inputs(eng, st: dict, op: Op) -> None:
    """Sources the machine's operand fetch does not form: r<a0.x + n> / c<a0.x + n> (per fiber), a half const read
    by a float op (its f32 value converted to f16: Mesa's ir3_cp.c), integer (neg)/(abs)."""
    for name, (_, file, off, half) in op.info.get("rel", {}).items():
      st[name] = memory.relative(eng, op, file, off, half)
    for name in op.info.get("f16const", ()):
      v = np.asarray(st[name]).astype(U32).view(np.float32).astype(np.float16).view(np.uint16).astype(U32)
      st[name] = v
    for name, (kind, mods) in op.info.get("imods", {}).items():
      st[name] = _modify(np.asarray(st[name]), kind, mods, 16 if op.ins[name].bits == 16 or name in
                         op.info.get("f16const", ()) else 32)

  @staticmethod
  def select_output(new, old, op: Op):
    return new

  @staticmethod
  def event(eng, op: Op, ix, sel, m) -> np.ndarray:
    """The fiber-level events (pcode/ir3.py EVENTS). Returns the fibers that move on to the next instruction."""
    return events.run(eng, op, ix, sel, m)


def _modify(v: np.ndarray, kind: str, mods: int, bits: int) -> np.ndarray:
  """(abs) then (neg): the sign bit for floats, two's complement for integers, on `bits`-wide values."""
  mask = (1 << bits) - 1
  v = v.astype(np.int64) & mask
  if kind == "f":
    sign = 1 << (bits - 1)
    v = v & ~sign if mods & 2 else v
    return (v ^ sign if mods & 1 else v).astype(U32)
  s = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
  s = np.abs(s) if mods & 2 else s
  s = -s if mods & 1 else s
  return (s & mask).astype(U32)


FRONTEND = Ir3()
__all__ = ["FRONTEND", "Ir3"]
