"""The MATRIX_MULTIPLY_ACCUMULATE built-in the vendor pseudocode of WMMA (RDNA3/RDNA4) and MFMA (CDNA3/CDNA4)
leaves to its caller: which lane and register holds which matrix element ("operand layout is per-encoding").
Shapes, element types and the layout kind of each opcode are rows of isa/data/matrix.json (isa.hwdata.matrix);
a row whose layout is null is not modelled and raises.

Layout kinds (element e of lane l; 16-bit elements pack two per VGPR, 8-bit four):
  wmma_rdna3, 16x16x16 (wave32): A lane l: row l%16, k=e (lanes 16-31 repeat 0-15); B lane l: col l%16, k=e;
    C/D (32-bit) register v of lane l: row 2v + l//16, col l%16          (RDNA3 ISA guide, "WMMA" section)
  wmma_rdna4, 16x16x16 (wave32): A lane l: row l%16, k = 8*(l//16) + e; B the same with col;
    C/D: row v + 8*(l//16), col l%16                                       (RDNA4 ISA guide, "WMMA" section)
  mfma, MxNxK single block (M=N=16 or 32, G = 64/M lane groups, K/G elements per lane):
    A lane l: row l%M, k = (K/G)*(l//M) + e; B lane l: col l%M, same k; C/D register v of lane l: col l%M,
    row 4*(l//16) + v (M=16) or 8*(v//4) + 4*(l//32) + v%4 (M=32)
    (AMD Instinct MI300 ISA, "Matrix fused multiply-add")
The products are accumulated in float64 (int64 for integers) and rounded once to the result type.
"""
from __future__ import annotations

import functools

import numpy as np

from gputwin.errors import GputwinError
from gputwin.isa import hwdata

U32 = np.uint32


_BITS = {"F16": 16, "BF16": 16, "IU8": 8, "I8": 8, "F32": 32}  # input element types the layouts take


@functools.lru_cache(maxsize=None)
def layout(family: str, name: str, L: int):
  """(M, N, K, accumulator type, input type, input bits, elements per lane, A/B map, C/D map) of `name` in wave`L`:
  the A/B map gives per element (row or column, k) lane arrays, the C/D map per register (row, column)."""
  row = hwdata.matrix(family, name)
  if row is None or row.layout is None or (row.layout.startswith("wmma") and L != 32) or row.a not in _BITS:
    raise GputwinError(f"{name}: matrix layout not modelled (wave{L})")
  return _layout(row.layout, row.m, row.n, row.k, row.c, row.a, L)


def _layout(kind: str, M: int, N: int, K: int, acc: str, ins: str, L: int):
  bits = _BITS[ins]
  lane = np.arange(L)
  if kind == "wmma_rdna3":
    ne = K
    a = [(lane % 16, np.full(L, e)) for e in range(ne)]
    c = [(2 * v + lane // 16, lane % 16) for v in range(M * N // L)]
  elif kind == "wmma_rdna4":
    ne = K // 2
    a = [(lane % 16, 8 * (lane // 16) + e) for e in range(ne)]
    c = [(v + 8 * (lane // 16), lane % 16) for v in range(M * N // L)]
  else:
    G = L // M
    ne = K // G
    a = [(lane % M, ne * (lane // M) + e) for e in range(ne)]
    row = (lambda v: 4 * (lane // 16) + v) if M == 16 else (lambda v: 8 * (v // 4) + 4 * (lane // 32) + v % 4)
    c = [(row(v), lane % M) for v in range(M * N // L)]
  return M, N, K, acc, ins, bits, ne, a, c


def _elems(regs: np.ndarray, bits: int, ne: int) -> np.ndarray:
  """(W, nregs, L) raw VGPRs -> (W, ne, L) raw elements."""
  per = 32 // bits
  out = [(regs[:, e // per] >> U32(bits * (e % per))) & U32((1 << bits) - 1) for e in range(ne)]
  return np.stack(out, axis=1)


def _value(raw: np.ndarray, ins: str, signed: bool):
  if ins == "F16":
    return raw.astype(np.uint16).view(np.float16).astype(np.float64)
  if ins == "BF16":
    return (raw.astype(U32) << U32(16)).view(np.float32).astype(np.float64)
  if ins == "F32":
    return raw.astype(U32).view(np.float32).astype(np.float64)
  return (raw.astype(np.uint8).view(np.int8) if signed else raw.astype(np.uint8)).astype(np.int64)


def execute(eng, op, ix) -> None:
  """D = A x B + C for every wave in `ix` (EXEC is ignored: matrix instructions require all lanes)."""
  fam, name, L = eng.fam, op.inst.op, eng.L
  M, N, K, acc, ins, bits, ne, a_map, c_map = layout(fam, name, L)
  f = op.inst.f
  if f.get("cbsz", 0) or f.get("abid", 0) or f.get("blgp", 0):
    raise GputwinError(f"{name}: cbsz/abid/blgp broadcast controls are not modelled")
  n = eng.nwaves(ix)
  # IU8: neg_lo bits 0/1 say A/B are signed (RDNA3 WMMA); I8 is signed
  sa, sb = (bool(f.get("neg", 0) & 1), bool(f.get("neg", 0) & 2)) if ins == "IU8" else (ins == "I8",) * 2
  for k, s in (("A", op.ins["S0"]), ("B", op.ins["S1"]), ("C", op.ins["S2"]), ("D", op.outs["D0"])):
    if s.file not in ("v", "a") and not (k == "C" and s.file == "k"):   # llvm-mc-22: "Invalid register" (VReg_N)
      raise GputwinError(f"{name}: the {k} matrix must be in VGPRs{' or AGPRs' if fam == 'cdna' else ''}, "
                         f"not {s.file!r} registers")
  regs = lambda s: (eng.V if s.file == "v" else eng.A)[ix, s.index:s.index + s.dwords]
  A = _value(_elems(regs(op.ins["S0"]), bits, ne), ins, sa)  # (W, ne, L)
  B = _value(_elems(regs(op.ins["S1"]), bits, ne), ins, sb)
  dt = np.int64 if acc == "I32" else np.float64
  Am, Bm = np.zeros((n, M, K), dt), np.zeros((n, K, N), dt)
  for e, (r, k) in enumerate(a_map):
    Am[:, r, k] = A[:, e]
    Bm[:, k, r] = B[:, e]
  c = op.ins["S2"]
  Cm = np.zeros((n, M, N), dt)
  if c.file != "k":
    raw = regs(c)
    for v, (r, col) in enumerate(c_map):
      Cm[:, r, col] = raw[:, v].view(np.int32) if acc == "I32" else raw[:, v].view(np.float32)
  elif c.value:
    raise GputwinError(f"{name}: a non-zero constant C operand is not modelled")
  D = Am @ Bm + Cm
  out = np.stack([D[:, r, col] for r, col in c_map], axis=1)  # (W, nregs, L)
  raw = out.astype(np.int64).astype(np.uint64).astype(U32) if acc == "I32" else out.astype(np.float32).view(U32)
  d = op.outs["D0"]
  eng.mark(d.file, d.index, d.dwords)
  (eng.V if d.file == "v" else eng.A)[ix, d.index:d.index + d.dwords] = raw
