"""What both execution tiers (the interpreter, core.py, and the native tier, native/) take from one place when they
run a decoded instruction (program.Op): the LDS address layout, effective-address plans (`Address`), which
instructions branch or run once per wave, and how the executor stops a launch. Where pcode inputs that are no operand come from is the frontend's
`special_inputs` table (gputwin/emu/amd/decode.py SPECIAL_INPUTS), read by both tiers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gputwin.emu.program import Op, Src
from gputwin.errors import GPUPageFault

LDS_SHIFT, LDS_BITS = 20, 19  # DS ADDR: workgroup slot << 20 | LDS address mod 2**19 (core.Engine.lds_address)
# The bits of a hardware register S_SETREG may write, by the names the manuals' texts call it (RDNA3's
# writeableBitMask, RDNA4's and CDNA's HwRegWriteMask): every bit (no privileged state is modelled)
WRITE_MASKS = frozenset({"writeableBitMask", "HwRegWriteMask"})

@dataclass(frozen=True)
class Address:
  """How a memory instruction's effective address is formed: the plan both tiers follow (the interpreter evaluates
  it, core.Engine.address; the native tier emits it, native/codegen.Compiler.addresses). The sum of `terms` (register
  operands, zero-extended: per lane for v, one per wave for s) and `offset`, wrapped to `width` bits, aligned down to
  `align` bytes, in `space`: "mem" (guest memory), "lds", "scratch", or "split" (per-lane windows the frontend
  routes: AMD's flat apertures, PTX's generic windows). A frontend that forms an address otherwise (AMD buffer V#s,
  PTX frame- and launch-relative variables) leaves it None and computes it in its memop."""
  terms: tuple[Src, ...]
  offset: int = 0
  width: int = 64
  align: int = 1
  space: str = "mem"


@dataclass(frozen=True)
class Buffer:
  """An access relative to a bound buffer (ir3's IBOs and UBOs): the plan both tiers follow (the frontend's memop
  evaluates it, native/codegen.Compiler.addresses emits it). Buffer `index` (an operand) of the launch's table
  `kind` (Engine.res[kind]: index -> (guest address, bytes)); the byte offset is coord * scale + offset (coord a
  32-bit operand, zero-extended); the access's `nbytes` bytes must lie inside the buffer, and an unbound index faults
  as well."""
  kind: str
  index: Src
  coord: Src
  scale: int
  offset: int
  nbytes: int


class Stop(Exception):
  """Raised by the executor with (kind, message, wave, op); launch turns it into the public error classes."""

  def __init__(self, kind: str, msg: str, wave: int = -1, op: Op | None = None, fault: GPUPageFault | None = None):
    super().__init__(msg)
    self.kind, self.msg, self.wave, self.op, self.fault = kind, msg, wave, op, fault


def float_result(d) -> bool:
  """Is operand `d` a floating-point value (its pcode format FMT_*_F16/F32/F64/BF16)? VOP3's output modifiers (omod,
  clamp to [0, 1]) apply to those; on an integer result clamp means saturation instead (not modelled)."""
  return bool(re.search(r"_B?F\d+$", getattr(d, "fmt", "") or ""))


def scalar_valu(op: Op) -> bool:
  """A VALU op with only scalar sources and an SGPR result that is no lane mask (gfx12 pseudo-scalar
  transcendentals: `v_s_rcp_f32 s3, s0`): one value per wave, written whatever EXEC is. Masking it by EXEC left
  the result of an inactive lane 0 in the SGPR (FINDINGS.md #6, clang-22 divides by a uniform value with it inside
  divergent code)."""
  f = op.info.get("_scalar_valu")
  if f is None:
    d, sem = op.outs.get("D0"), op.sem
    lanes_in = any(isinstance(op.ins.get(n), Src) and op.ins[n].file in "va" for n in sem.inputs)
    f = op.info["_scalar_valu"] = bool(op.vector and d is not None and d.file == "s" and not lanes_in
                                      and not (sem.program.per_lane or sem.wave_level or sem.cross_lane))
  return f


def va_bits(op: Op, frontend) -> int:
  """How many bits of a guest-memory address `op` reaches: the frontend's virtual-address width (`va_bits`: AMD 32,
  guest VAs handed out below 4 GiB; PTX 64, as NVIDIA's UVM VAs), and no more than the ADDR its body declares. Both
  tiers fault an access at or above 2**bits and hand the body its address in those bits."""
  b = op.info.get("_va_bits")
  if b is None:
    b = op.info["_va_bits"] = min(getattr(frontend, "va_bits", 32),
                                 op.sem.inputs.get("ADDR", 64) if op.sem is not None else 64)
  return b


def sets_pc(op: Op) -> bool:
  """A branch: its body writes PC (every other instruction leaves each wave at pc + size)."""
  return op.kind in ("alu", "mem") and op.sem is not None and "PC" in op.sem.outputs


def elect(op: Op) -> bool:
  """A per-thread-PC branch that every thread running it takes but the lowest, which falls through (ir3's getone,
  given to the native tier as such a jump: decode.py; the interpreter's event keeps the same fiber, events.py)."""
  return bool(op.info.get("elect"))


def join_point(op: Op) -> bool:
  """A per-thread-PC instruction threads can reach other than from the one before it (op.info["join"]: ir3's branch
  targets and call returns, decode.py): threads that branched there may wait while the rest of their warp runs the
  instructions before it, to meet them there."""
  return bool(op.info.get("join"))


def plain_barrier(op: Op) -> bool:
  """A per-thread-PC barrier (op.info["bar"]: id, thread count, reduction predicate) that completes as soon as every
  live thread of its CTA arrives: a constant id, no thread count, reduction, arrive-only form or guard. When every
  live thread of the batch reaches it together (core._at_once), it completes at once for every CTA."""
  bar = op.info.get("bar")
  if bar is None:
    return False
  ids, count, pred = bar
  return count is None and pred is None and ids.file == "k" and not op.info.get("arrive") and \
      op.info.get("guard") is None
