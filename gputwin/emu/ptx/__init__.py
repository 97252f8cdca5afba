"""The NVIDIA PTX frontend of the shared machine (sm_80, sm_90): PTX modules (gputwin.isa.ptx) laid out for the
machine (image.py), bound to our PTX pcode (decode.py, gputwin.pcode.ptx), effective addresses and generic windows
(memory.py), calls with per-thread frames and vector moves (the events below), and launches (launch.py).
`FRONTEND` implements gputwin.emu.frontend.Frontend with per-thread PCs (`simt`): 32-lane warps whose threads each
have a PC (core.run_simt)."""
from __future__ import annotations

import numpy as np

from gputwin.emu.program import Op
from gputwin.emu.ptx import decode, memory

U32, U64 = np.uint32, np.uint64


class Ptx:
  name, align, simt = "ptx", 1, True
  va_bits = 64  # global addresses: all 64 bits (UVM VAs such as 0x7fxx_xxxx_xxxx), binding.va_bits
  apertures = (decode.SHARED_BASE >> 32, decode.LOCAL_BASE >> 32)
  # the time registers (an operand naming one: decode.operand) read the warp's instruction count, deterministic,
  # shifted right by the bits given: %clock_hi and %globaltimer_hi are the upper 32 bits of the 64-bit ones
  special_inputs = {"EXEC": ("mask",), "EXEC_LO": ("mask",), "%clock": ("clock", 0), "%clock_hi": ("clock", 32),
                    "%clock64": ("clock", 0), "%globaltimer": ("clock", 0), "%globaltimer_lo": ("clock", 0),
                    "%globaltimer_hi": ("clock", 32)}
  @staticmethod
  def bind(loc, pc: int, family: str, wave: int) -> Op:
    """decode.build_op, or tensor.bind for the warp-wide fragment and async-copy opcodes (tensor.OPCODES)."""
    from gputwin.emu.ptx import tensor
    op = decode.build_op(loc, pc, family, wave) if loc.inst.opcode not in tensor.OPCODES else None
    return op if op is not None else tensor.bind(Op(loc, pc, 1, "tensor", info={"guard": decode.guard(loc)}), loc)
  memop = staticmethod(memory.memop)

  @staticmethod
  def decode(text, arch: str, offset: int, wave: int):
    return text[offset]

  @staticmethod
  def special(family: str) -> dict[str, int]:
    return {"exec": 126, "vcc": 106, "m0": 125, "null": 124}  # no scalar file: codes no PTX operand uses

  @staticmethod
  def computed(code: int) -> bool:
    return False

  @staticmethod
  def event(eng, op: Op, ix, sel, m) -> np.ndarray:
    """Frontend events (core.step_simt): call/ret (frames.py) and vector moves. Returns the lanes that move on to
    the next instruction."""
    from gputwin.emu.ptx import frames
    if op.kind == "pack":
      if m.any():
        _pack(eng, op, ix, m)
      return sel
    if op.kind == "tensor":
      from gputwin.emu.ptx import tensor
      tensor.execute(eng, op, ix, m)
      return sel
    if op.kind == "brx":  # the threads that run it jump to table[index]; an index past the table is an error
      if m.any():
        i = np.broadcast_to(np.asarray(eng.fetch(op.ins["S0"], ix)).astype(np.int64), m.shape)
        t = op.info["table"]
        if (m & (i >= len(t))).any():
          from gputwin.emu.binding import Stop
          raise Stop("unsupported", f"brx.idx index {int(i[m & (i >= len(t))][0])} is past its {len(t)}-entry "
                     "table (undefined behaviour)", int(np.arange(eng.W)[ix][0]), op)
        eng.lpc[ix] = np.where(m, t[np.minimum(i, len(t) - 1)], eng.lpc[ix])
      return sel & ~m
    if op.kind == "call":
      frames.call(eng, op, ix, m)
      return sel & ~m
    if op.kind == "ret":
      frames.ret(eng, op, ix, m)
      return sel & ~m
    raise AssertionError(op.kind)


def _pack(eng, op: Op, ix, m) -> None:
  """`mov.bN {a, b, ...}, x` / `mov.bN x, {a, b, ...}` (PTX ISA 9.0 9.7.9.10): the sources' bits, element 0 lowest,
  split into the destinations' widths."""
  dst_bits, src_bits = op.info["bits"]
  acc, sh = np.zeros(m.shape, object if sum(src_bits) > 64 else U64), 0
  for s, b in zip(op.info["src"], src_bits):
    v = np.broadcast_to(np.asarray(eng.fetch(s, ix)), m.shape)
    v = v.astype(object) if acc.dtype == object else v.astype(U64)
    mask = (1 << b) - 1
    acc = acc | ((v & (mask if acc.dtype == object else U64(mask))) << (sh if acc.dtype == object else U64(sh)))
    sh += b
  sh = 0
  for d, b in zip(op.info["dst"], dst_bits):
    if not (d.file == "k"):
      part = (acc >> (sh if acc.dtype == object else U64(sh)))
      part = part & ((1 << b) - 1) if acc.dtype == object else part & U64((1 << b) - 1 if b < 64 else (1 << 64) - 1)
      eng.store(d, np.asarray(part).astype(U64) if acc.dtype == object else part, ix, m)
    sh += b


FRONTEND = Ptx()
