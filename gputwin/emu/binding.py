"""What both execution tiers (the interpreter, core.py, and the native tier, jit.py) take from one place when they
run a decoded instruction (program.Op): where pcode inputs that are no operand come from, the LDS address layout,
which instructions branch or run once per wave, and how the executor stops a launch.
"""
from __future__ import annotations

from gputwin.emu.program import EXECZ, VCCZ, Op, Src
from gputwin.errors import GPUPageFault

LDS_SHIFT, LDS_BITS = 20, 19  # pcode's 32-bit DS ADDR: workgroup slot << 20 | LDS address mod 2**19 (see core._lds)

# Pcode inputs that are no operand, and where both tiers (Engine.special, jit.Compiler.special) take them from:
# ("scc",) the wave's SCC; ("sgpr", key, dwords) a special SGPR (key of program.SPECIAL; 0 dwords: a lane mask, 2
# in wave64); ("zero", VCCZ/EXECZ) 1 when that mask is 0; ("pc",) this instruction's PC; ("ieee",) MODE.IEEE as the
# kernel descriptor sets it (Engine.ieee); ("round",) MODE's FP round bits (HW_REG 1, bits 3:0); ("field", key)
# an encoding field of the instruction (Op.info). Any other name reads 0 (address inputs only hooks read).
SPECIAL_INPUTS = {"SCC": ("scc",), "EXEC": ("sgpr", "exec", 0), "EXEC_LO": ("sgpr", "exec", 1),
                  "VCCZ": ("zero", VCCZ), "EXECZ": ("zero", EXECZ), "M0": ("sgpr", "m0", 1), "PC": ("pc",),
                  "WAVE_MODE.IEEE": ("ieee",), "ROUND_MODE": ("round",), "OFFSET": ("field", "offset"),
                  "OFFSET0": ("field", "offset0"), "OFFSET1": ("field", "offset1")}


class Stop(Exception):
  """Raised by the executor with (kind, message, wave, op); launch turns it into the public error classes."""

  def __init__(self, kind: str, msg: str, wave: int = -1, op: Op | None = None, fault: GPUPageFault | None = None):
    super().__init__(msg)
    self.kind, self.msg, self.wave, self.op, self.fault = kind, msg, wave, op, fault


def scalar_valu(op: Op) -> bool:
  """A VALU op with only scalar sources and an SGPR result that is no lane mask (gfx12 pseudo-scalar
  transcendentals: `v_s_rcp_f32 s3, s0`): one value per wave, written whatever EXEC is. Masking it by EXEC left
  the result of an inactive lane 0 in the SGPR (FINDINGS.md #6, clang-22 divides by a uniform value with it inside
  divergent code)."""
  f = op.info.get("scalar_valu")
  if f is None:
    d, sem = op.outs.get("D0"), op.sem
    lanes_in = any(isinstance(op.ins.get(n), Src) and op.ins[n].file in "va" for n in sem.inputs)
    f = op.info["scalar_valu"] = bool(op.vector and d is not None and d.file == "s" and not lanes_in
                                      and not (sem.program.per_lane or sem.wave_level or sem.cross_lane))
  return f


def sets_pc(op: Op) -> bool:
  """A branch: its body writes PC (every other instruction leaves each wave at pc + size)."""
  return op.kind in ("alu", "mem") and op.sem is not None and "PC" in op.sem.outputs
