"""Decoded, cached programs, ISA-neutral: every instruction of a kernel turned once into an `Op` the executor runs.

An Op knows its pcode semantics and, for every pcode input/output name, which operand (register file, index,
dwords, 16-bit half) or special register it binds to. The binding itself is the ISA frontend's (`Frontend.bind`,
gputwin/emu/amd/decode.py for AMD); nothing here knows an instruction's arithmetic or an encoding.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gputwin.errors import GputwinError

@dataclass(frozen=True)
class Src:
  """Where an operand's bits come from. file: v | a | s | k (a constant `value`)."""
  file: str
  index: int = 0
  dwords: int = 1
  value: int = 0
  hi: bool = False  # 16-bit operand in the high half (true16 .h, or VOP3 op_sel)
  bits: int = 32
  fmt: str = ""
  neg: int = 0  # bitmask of sign bits to flip (after abs); per-half for packed operands
  abs: int = 0
  pk: tuple = ()  # packed operand: (lo from the high element?, hi from the high element?, element bits)


@dataclass
class Op:
  inst: object  # the ISA layer's decoded instruction (gputwin.isa.Inst for AMD)
  pc: int
  size: int
  kind: str  # alu | mem | vopd | matrix | clock | nop | end | barrier | trap | bad | unsupported
  sem: object = None
  ins: dict = field(default_factory=dict)  # pcode input name -> Src | special name
  outs: dict = field(default_factory=dict)  # pcode output name -> Src | special name
  mem: str = ""  # smem | ds | global | flat | scratch | buffer
  vector: bool = True  # lanes (VALU/VMEM) or one value per wave (SALU/SMEM)
  info: dict = field(default_factory=dict)  # the binding's facts; keys starting with "_" are memos a tier adds
  # on first use (never part of the native cache's key: the same op, whichever tier ran it first)
  old: dict = field(default_factory=dict)  # outputs whose previous value the pcode needs (partial writes)
  atomic: bool = False  # the body reads and writes MEM: lanes must keep their EXEC mask (ordered RMW in pcode)
  _text: str | None = field(default=None, repr=False)

  @property
  def text(self) -> str:
    """The instruction as assembly, formatted on first use (traces, errors): a cold launch need not format any."""
    if self._text is None and hasattr(self.inst, "text"):  # the ISA layer formats its own (PTX)
      self._text = self.inst.text
    if self._text is None:
      try:
        from gputwin.isa import format_inst
        self._text = format_inst(self.inst)
      except Exception:
        self._text = self.inst.op.lower()
    return self._text



class Program:
  """A code blob decoded lazily, once per PC, into Ops (the cache the executor steps through); `frontend` decodes
  and binds (gputwin.emu.frontend.Frontend)."""

  def __init__(self, text: bytes, base: int, arch: str, family: str, wave: int, frontend):
    self.text, self.base, self.arch, self.family, self.wave, self.frontend = text, base, arch, family, wave, frontend
    self.ops: dict[int, Op] = {}

  def op(self, pc: int) -> Op:
    o = self.ops.get(pc)
    if o is None:
      if not (self.base <= pc < self.base + len(self.text)) or pc % self.frontend.align:
        raise GputwinError(f"PC {pc:#x} is outside the code [{self.base:#x}, {self.base + len(self.text):#x})")
      inst = self.frontend.decode(self.text, self.arch, pc - self.base, self.wave)
      o = self.ops[pc] = self.frontend.bind(inst, pc, self.family, self.wave)
    return o
