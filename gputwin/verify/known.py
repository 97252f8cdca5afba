"""Known bugs outside gputwin from FINDINGS.md (today one, clang-22's), as shims that correct their effect after
the faulty instruction ran, through the Emulator object API's hooks. A fuzz mismatch that disappears when the shims
are on is *explained* (counted as a known bug, not as a new mismatch); one that stays is reduced and saved. Bugs of
our own isa/pcode/emu are fixed where they live, never shimmed here.

Each shim: fn(engine, op, waves) called after every executed instruction (emu.api.Dispatch.hook)."""
from __future__ import annotations

import numpy as np


def _bits(eng, W, x) -> np.ndarray:
  """A 32-bit operand's bits per (wave, lane), modifiers applied (abs clears, neg flips the sign bit)."""
  v = eng.V[W, x.index] if x.file == "v" else np.broadcast_to(
    (eng.S[W, x.index] if x.file == "s" else np.full(len(W), x.value, np.uint32))[:, None], (len(W), eng.L))
  v = v & np.uint32(~x.abs & 0xffffffff) if x.abs else v
  return v ^ np.uint32(x.neg) if x.neg else v


def select_minmax_zero(eng, op, ix) -> None:
  """Not an emulator bug — clang-22's (FINDINGS.md #5): it lowers `x < C ? x : C` (and the max form) to
  v_min_f32 C, x even for C = ±0.0, where the vendor pseudocode orders -0.0 below +0.0 and the C source does not.
  Model the source's answer (C = S0 when both are zeros) to tell such mismatches apart from new ones."""
  if not op.text.startswith(("v_min_f32", "v_max_f32", "v_min_num_f32", "v_max_num_f32")):
    return
  d, a, b = op.outs.get("D0"), op.ins.get("S0"), op.ins.get("S1")
  if d is None or a is None or b is None:
    return
  W = np.arange(eng.W)[ix]
  ex, mag = np.asarray(eng.exec_mask(ix)), np.uint32(0x7fffffff)
  if any(x.file == "v" and x.index == d.index for x in (a, b)):
    # D overwrote x (clang-22 on gfx11/gfx12: v_min_f32_e32 v1, 0, v1): with C a ±0.0 constant, a zero result means
    # both were zeros (or x > 0 for min / x < 0 for max, where the answer is C too), so the source's answer is C
    c = next((x for x in (a, b) if x.file == "k"), None)
    if c is None or int(c.value or 0) & 0x7fffffff:
      return
    out = eng.V[W, d.index]
    eng.V[W, d.index] = np.where(ex & ((out & mag) == 0), _bits(eng, W, c), out)
    return
  x, y = _bits(eng, W, a), _bits(eng, W, b)
  zeros = ((x & mag) == 0) & ((y & mag) == 0) & ex
  eng.V[W, d.index] = np.where(zeros, x, eng.V[W, d.index])


KNOWN = {
  "clang-select-minmax-zero": ("clang-22: select on a ±0.0 constant lowered to v_min/v_max (FINDINGS.md #5)",
                               select_minmax_zero),
}
