"""Known emulator bugs (FINDINGS.md), as shims that correct their effect after the faulty instruction ran, through
the Emulator object API's hooks — the emulator itself is not ours to change. A fuzz mismatch that disappears when
the shims are on is *explained* (counted as a known bug, not as a new mismatch); one that stays is reduced and saved.

Each shim: fn(engine, op, waves) called after every executed instruction (emu.api.Dispatch.hook)."""
from __future__ import annotations

import re

import numpy as np

_NEG = re.compile(r"-(\||[vs]\d|[vs]\[)")


def cndmask_modifiers(eng, op, ix) -> None:
  """V_CNDMASK_B32 (VOP3) ignores its abs/neg source modifiers (FINDINGS.md #1): apply them to the lanes that
  selected the modified source. The result is the selected source's raw bits, so this is exact even if the
  destination overwrote a source."""
  if not op.text.startswith("v_cndmask_b32_e64"):
    return
  srcs = [s.strip() for s in op.text.split(None, 1)[1].split(",")][1:3]
  mods = [(bool(_NEG.match(s)), s.lstrip("-").startswith("|")) for s in srcs]  # "-1", "-0.5": constants, not neg
  if not any(n or a for n, a in mods):
    return
  d, m = op.outs["D0"], op.ins["VCC"]
  W = np.arange(eng.W)[ix]
  bits = np.ascontiguousarray(eng.S[W, m.index:m.index + eng.L // 32])
  sel = np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little").view(bool)[:, :eng.L]
  ex = np.asarray(eng.exec_mask(ix))
  v = eng.V[W, d.index].copy()
  for which, (neg, ab) in enumerate(mods):
    lanes = ex & (sel if which else ~sel)
    fixed = (v & np.uint32(0x7fffffff) if ab else v) ^ np.uint32(0x80000000 if neg else 0)
    v = np.where(lanes, fixed, v)
  eng.V[W, d.index] = v


KNOWN = {
  "cndmask-modifiers": ("v_cndmask_b32_e64 ignores abs/neg source modifiers (FINDINGS.md #1)", cndmask_modifiers),
}
