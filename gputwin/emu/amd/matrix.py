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
`tables` turns a layout into the register facts every consumer reads (this interpreter and the native tier's
lowering, emu/native/matrix.py): which register, lane and bit offset holds A[m, k] and B[k, n], and which D element
register v of lane l holds. Arithmetic (the same in both tiers, bit for bit): each element converted exactly to
float64 (int64 for integers), the products of D[m, n] summed in k order starting from -0.0 (in float64 every
product is exact and the order fixes the roundings), then C added and the sum rounded once (RNE) to f32 (integers:
the low 32 bits); a NaN result is the default quiet NaN 0x7fc00000 (which NaN operand the hardware returns is not
documented; one fixed answer keeps both tiers identical). Denormals are kept, inputs and results. FP8/BF8 elements
(the target's formats, pcode.runtime.FP8) take the layouts of the 8-bit integer opcodes of the same shape and are
exact in float64 like the others.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from gputwin.errors import GputwinError
from gputwin.isa import hwdata
from gputwin.pcode.runtime import FP8, fp8_decode

U32 = np.uint32


_BITS = {"F16": 16, "BF16": 16, "IU8": 8, "I8": 8, "F32": 32, "FP8": 8, "BF8": 8}  # element types the layouts take


@functools.lru_cache(maxsize=None)
def layout(family: str, name: str, L: int):
  """(M, N, K, accumulator type, A's and B's element types, input bits, elements per lane, A/B map, C/D map) of
  `name` in wave`L`: the A/B map gives per element (row or column, k) lane arrays, the C/D map per register (row,
  column). A and B share a layout (same bits: FP8 x BF8 differ in type only)."""
  row = hwdata.matrix(family, name)
  if row is None or row.layout is None or (row.layout.startswith("wmma") and L != 32) or row.a not in _BITS or \
     _BITS.get(row.b) != _BITS[row.a]:
    raise GputwinError(f"{name}: matrix layout not modelled (wave{L})")
  return _layout(row.layout, row.m, row.n, row.k, row.c, (row.a, row.b), L)


def _layout(kind: str, M: int, N: int, K: int, acc: str, ins: tuple[str, str], L: int):
  bits = _BITS[ins[0]]
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


NAN = 0x7fc00000  # what a NaN result is (module docstring)


class Tables(NamedTuple):
  """A layout as register facts (`tables`): A[m, k] is in `a[m, k]` = (register, lane, bit offset) of the A operand
  (where several lanes hold an element, as RDNA3's lanes 16-31 repeat 0-15: the highest of them), B[k, n] in
  `b[k, n]`; C/D register v of lane l holds element `d[v, l]` = m * N + n; `regs`: registers of A, B, C/D."""
  m: int
  n: int
  k: int
  acc: str  # accumulator / result type: F32 | I32
  ins: tuple[str, str]  # A's and B's element types (matrix.json)
  bits: int  # input element bits
  a: np.ndarray  # (M, K, 3) int64
  b: np.ndarray  # (K, N, 3) int64
  d: np.ndarray  # (regs[2], L) int64
  regs: tuple


@functools.lru_cache(maxsize=None)
def tables(family: str, name: str, L: int) -> Tables:
  """The register tables of `name` in wave`L`, from its `layout` (GputwinError where none is modelled)."""
  M, N, K, acc, ins, bits, ne, amap, cmap = layout(family, name, L)
  per = 32 // bits
  a, b = np.full((M, K, 3), -1, np.int64), np.full((K, N, 3), -1, np.int64)
  for e, (rc, k) in enumerate(amap):
    for lane in range(L):  # (lanes in order: the highest holding an element wins)
      a[rc[lane], k[lane]] = b[k[lane], rc[lane]] = (e // per, lane, bits * (e % per))
  d = np.stack([r * N + col for r, col in cmap])
  assert (a >= 0).all() and (b >= 0).all() and sorted(d.ravel()) == list(range(M * N)), name
  for x in (a, b, d):
    x.setflags(write=False)
  return Tables(M, N, K, acc, ins, bits, a, b, d, (ne * bits // 32, ne * bits // 32, M * N // L))


def operands(family: str, op, L: int) -> tuple[Tables, str, str]:
  """(tables, A's element kind, B's) of matrix instruction `op`; a GputwinError for what the model lacks. Kinds
  (`_value`): F16, BF16, F32, I8 / U8 (signed or not), and the 8-bit floats of the target (pcode.runtime.FP8: fp8,
  bf8, fp8fnuz, bf8fnuz)."""
  name, f = op.inst.op, op.inst.f
  t = tables(family, name, L)
  if f.get("cbsz", 0) or f.get("abid", 0) or f.get("blgp", 0):
    raise GputwinError(f"{name}: cbsz/abid/blgp broadcast controls are not modelled")
  if f.get("clmp", 0):
    raise GputwinError(f"{name}: clamp is not modelled")
  if t.ins[0] != "IU8" and (f.get("neg", 0) or f.get("neg_hi", 0)):
    raise GputwinError(f"{name}: neg modifiers are not modelled")
  for k, s, need in zip("ABCD", (op.ins["S0"], op.ins["S1"], op.ins["S2"], op.outs["D0"]), t.regs + t.regs[2:]):
    if s.file not in ("v", "a") and not (k == "C" and s.file == "k"):  # llvm-mc-22: "Invalid register" (VReg_N)
      raise GputwinError(f"{name}: the {k} matrix must be in VGPRs{' or AGPRs' if family == 'cdna' else ''}, "
                         f"not {s.file!r} registers")
    if s.file == "k" and s.value:
      raise GputwinError(f"{name}: a non-zero constant C operand is not modelled")
    if s.file != "k" and s.dwords < need:
      raise GputwinError(f"{name}: the {k} matrix takes {need} registers, not {s.dwords}")
  def kind(ty: str, i: int) -> str:
    if ty == "IU8":  # neg_lo bits 0/1 say A/B are signed (RDNA3 WMMA)
      return "I8" if f.get("neg", 0) >> i & 1 else "U8"
    if ty in ("FP8", "BF8"):  # what they mean on this target (isa.targets' fp8 column, bound by amd/decode)
      return ty.lower() + ("fnuz" if op.info.get("fp8fnuz") else "")
    return ty
  return t, kind(t.ins[0], 0), kind(t.ins[1], 1)


def _gather(regs: np.ndarray, src: np.ndarray, bits: int) -> np.ndarray:
  """(W, nregs, L) raw registers -> (W, ...) raw elements at `src` (a table's (register, lane, offset) rows)."""
  return (regs[:, src[..., 0], src[..., 1]] >> src[..., 2].astype(U32)) & U32((1 << bits) - 1)


def _value(raw: np.ndarray, kind: str):
  """Raw elements as exact float64 (int64 for integers)."""
  if kind == "F16":
    return raw.astype(np.uint16).view(np.float16).astype(np.float64)
  if kind == "BF16":
    return (raw.astype(U32) << U32(16)).view(np.float32).astype(np.float64)
  if kind == "F32":
    return raw.astype(U32).view(np.float32).astype(np.float64)
  if kind in FP8:
    return fp8_decode(raw, kind).astype(np.float64)
  return (raw.astype(np.uint8).view(np.int8) if kind == "I8" else raw.astype(np.uint8)).astype(np.int64)


def execute(eng, op, ix) -> None:
  """D = A x B + C for every wave in `ix` (EXEC is ignored: matrix instructions require all lanes)."""
  t, ka, kb = operands(eng.fam, op, eng.L)
  with np.errstate(all="ignore"):  # (NaN and infinity operands, overflow to infinity: IEEE results)
    raw = _compute(eng, op, ix, t, ka, kb)
  d = op.outs["D0"]
  eng.mark(d.file, d.index, t.regs[2])
  (eng.V if d.file == "v" else eng.A)[ix, d.index:d.index + t.regs[2]] = raw


def _compute(eng, op, ix, t: Tables, ka: str, kb: str) -> np.ndarray:
  """The raw D registers (W, regs, L)."""
  n, integer = eng.nwaves(ix), t.acc == "I32"
  regs = lambda s, k: (eng.V if s.file == "v" else eng.A)[ix, s.index:s.index + t.regs[k]]
  A = _value(_gather(regs(op.ins["S0"], 0), t.a, t.bits), ka)  # (W, M, K)
  B = _value(_gather(regs(op.ins["S1"], 1), t.b, t.bits), kb)  # (W, K, N)
  acc = np.zeros((n, t.m, t.n), np.int64) if integer else np.full((n, t.m, t.n), -0.0)
  for k in range(t.k):  # in k order (module docstring)
    acc += A[:, :, k, None] * B[:, None, k, :]
  D = acc.reshape(n, -1)[:, t.d]  # (W, regs, L)
  c = op.ins["S2"]  # (a constant C is 0: operands)
  D = D + (0 if c.file == "k" else regs(c, 2).view(np.int32) if integer else regs(c, 2).view(np.float32))
  if integer:
    raw = D.astype(np.uint64).astype(U32)
  else:
    raw = D.astype(np.float32).view(U32)
    raw[np.isnan(D)] = NAN
  return raw
