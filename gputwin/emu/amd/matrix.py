"""The MATRIX_MULTIPLY_ACCUMULATE built-in the vendor pseudocode of WMMA (RDNA3/RDNA4) and MFMA (CDNA3/CDNA4)
leaves to its caller: which lane and register holds which matrix element ("operand layout is per-encoding").
Shapes, element types and the layout kind of each opcode are rows of isa/data/matrix.json (isa.hwdata.matrix);
a row whose layout is null is not modelled and raises.

Layout kinds (element e of lane l; 16-bit elements pack two per VGPR, 8-bit four):
  wmma_rdna3, 16x16x16: A lane l: row l%16, k=e (lanes 16-31 repeat 0-15; wave64: 16-63); B lane l: col l%16, k=e;
    C/D (32-bit) register v of lane l: row 2v + l//16, col l%16 (RDNA3 ISA guide, "WMMA" section); wave64: row 4v +
    l//16 (AMD's FPSan gfx11 WMMA tests, checked against wave64 hardware)
  wmma_rdna4 (wave32; wave64 below): A lane l: row l%16, k = 2R*(e//R) + R*(l//16) + e%R, runs of R = min(64 bits /
    element bits, elements a lane) k alternating between the lane halves (16-bit 16x16x16: lane 0 holds k 0-3 and
    8-11, lane 16 k 4-7 and 12-15; 8-bit: lane 0 k 0-7, lane 16 k 8-15); B the same with col; C/D: row v + 8*(l//16),
    col l%16 (RDNA4 ISA guide, "WMMA"; AMD's Matrix Instruction Calculator, its gfx12 equations, which IREE's gfx12
    notes and tinygrad's emulator match for 16-bit; a dense product cannot tell pairings of A and B apart but by the
    order of its float64 sum). SWMMAC's dense B: runs of 128 bits (16-bit: lane 0 k 0-7 and 16-23). Wave64 (dense, 8-
    and 16-bit A/B): lane l holds wave32 lane l%32's A, B elements and D registers of the second half when l >= 32
    (C/D register v: row v + 4*(l//32) + 8*(l%32//16): a layout test of gfx1200 wave64 hardware, AMD's FPSan WMMA
    tests; its A/B k order is the wave32 one split, which an exact product cannot tell apart); 4-bit A/B and SWMMAC in
    wave64 are not modelled.
  mfma, MxNxK in B blocks (AMD Matrix Instruction Calculator, gfx9 rules; AMD Instinct MI300 and CDNA4 ISA guides,
    "Matrix fused multiply-add", "Dense matrix layouts"): a lane holds E = K*M*B/L k of one row (A) or column (B);
    lane l: block (l//M) % B, row l%M, lane group g = l // (M*B) of G = L/(M*B), k = R*(G*(e//R) + g) + e%R: runs
    of R = min(128 bits, E elements) k, the groups taking turns (consecutive k where a lane holds one run, as all
    CDNA3 shapes; gfx950's F8F6F4 fp8: lanes 0-15 of 16x16x128 hold k 0-15 and 64-79; its fp4 and fp6 32
    consecutive k, 6-bit runs not dividing 128 bits). D element (b, i, j) is in slot b*(M*N/L) + H*(i // (H*R)) +
    i%H, lane
    N*(b%P) + P*N*((i//H) % R) + j, where a slot is a VGPR (H = 4 rows) or a VGPR pair (f64: H = 1), R = L/N and
    P = ceil(L*H/(M*N)) the blocks one slot holds. CBSZ/ABID: block b reads A's block (b >> CBSZ << CBSZ) + ABID;
    BLGP (not f64, where the field is NEG): B's lane l is read from lane l%32 (1), l%32 + 32 (2), (l + 16)%64 (3),
    l%16 + 16*(BLGP-4) (4-7).
Sparse A (SMFMAC, SWMMAC; matrix.json "sparse"): of every four k of a row A holds two, in the layout of a dense A of
K/2 columns (compressed column c = 2*(k//4) + s, s the stored value's place in its group of four; mfma: runs of 64
bits, so that a lane's A covers the dense k of its B); S2 holds each one's 2-bit place in its group: column c of
lane l (its element e) at bits 2e + 2*n*set of lane l, n the columns a lane holds, `set` the low bits of ABID when
CBSZ is 0 (CDNA; else 0; one set: ABID ignored) or OPSEL[1:0] (RDNA4 index_key); the accumulator is D (AMD's Matrix
Instruction Calculator v1.3.1, gfx9 and gfx12; the CDNA3/CDNA4 ISA guides' SMFMAC B and index tables). Column c
multiplies B's row 4*(c//2) + its index (a multiplexer per stored value: two equal indices add both products; the
guides require index 0 < index 1).
A B-block instruction is computed as one (B*M) x K x (B*N) product whose diagonal blocks D reads: the off-diagonal
products are computed and never read (B times the multiplies, the same bits), so both tiers keep one loop nest.
`tables` turns a layout into the register facts every consumer reads (this interpreter and the native tier's
lowering, emu/native/matrix.py): which register, lane and bit offset holds A[m, k] and B[k, n], and which D element
register v of lane l holds. Arithmetic (the same in both tiers, bit for bit): each element converted exactly to float64
(int64 for integers), the products of D[m, n] summed in k order (sparse: A's column order) starting from -0.0 (in
float64 every product is exact and the order fixes the roundings), then C added and the sum rounded once (RNE) to f32
(integers: the low 32 bits, or saturated to int32 with CLMP); a NaN result is the default quiet NaN 0x7fc00000 (which
NaN operand the hardware returns is not documented; one fixed answer keeps both tiers identical). F64 (V_MFMA_F64_*): a
chain of fused multiply-adds in k order starting from C, each rounded once (RNE), a NaN the default 0x7ff8000000000000
(our model: the manual gives no order; each step is what V_FMA_F64 does). F16/BF16 results (V_WMMA_F16/BF16_*): the f32
rule with the sum rounded once to the 16-bit type (through f32 rounded to odd, so without double rounding), a NaN the
default NaN (0x7e00, 0x7fc0); RDNA3 writes them to the half of each D register OPSEL[2] selects (C read from the same
half), the other half unchanged (LLVM PR #69903, "Add tied wmma intrinsic": the instruction writes 16 of the 32 bits),
RDNA4 packs two per register (element v in half v%2 of register v//2, LLVM's order of a vector's elements). Denormals
are kept, inputs and results. FP8/BF8 elements (the target's formats, pcode.runtime.FP8) take the layouts of the 8-bit
integer opcodes of the same shape and are exact in float64 like the others; gfx950's F8F6F4 MFMA takes A's format from
CBSZ and B's from BLGP (fp8, bf8, fp6, bf6, fp4, OCP's E4M3, E5M2, E2M3, E3M2, E2M1; mixed widths too), each operand its
own layout and registers (8, 6, 4): a lane's elements pack from bit 0 of its first register on, element e at bits [w*e,
w*e + w) of the registers read as one (6-bit elements straddle registers: CDNA4 ISA).
Block scales (gfx950 V_MFMA_SCALE_*, matrix.json "scale"): A's row m is multiplied by 2**(e - 127) per block kb of 32
k, e the E8M0 byte of lane M*kb + m of S3 (B's column n: lane N*kb + n of S4), the byte OP_SEL_HI[i] * 2 + OP_SEL[i]
(i = 0 A, 1 B), code 0xFF NaN (CDNA4 ISA guide, "Matrix fused multiply-add with block scaling"). The guide applies
the scales to each block's dot product; we scale the elements (a power of two times an element is exact in float64,
so each product is the scaled product and the one k-order sum above is kept; the order of the roundings inside the
sum is our model, as above).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from gputwin.errors import GputwinError
from gputwin.isa import hwdata
from gputwin.pcode.runtime import FP8, f64_to_f32_odd, fp8_decode, rbf

U32 = np.uint32


_BITS = {"F16": 16, "BF16": 16, "IU8": 8, "I8": 8, "IU4": 4, "F32": 32, "F64": 64, "FP8": 8, "BF8": 8, "FP6": 6,
         "BF6": 6, "FP4": 4}
F8F6F4 = ("FP8", "BF8", "FP6", "BF6", "FP4")  # gfx950's F8F6F4 MFMA: A's format by CBSZ, B's by BLGP (formats.json)


@functools.lru_cache(maxsize=None)
def layout(family: str, name: str, L: int, ins: tuple[str, str] | None = None):
  """(M, N, K, blocks, accumulator type, A's and B's element types, input bits, A's and B's elements per lane, A map,
  B map, C/D map) of `name` in wave`L`: the A (B) map gives per element e (row (column), k) lane arrays, k of A
  counting the compressed columns of a sparse A (two of every four); the C/D map per slot (a register; f64: a register
  pair) (row, column) lane arrays, rows and columns of the (B*M) x (B*N) product. `ins`: the element types where the
  instruction picks them (F8F6F4)."""
  row = hwdata.matrix(family, name)
  ins = ins or (row.a, row.b) if row else None
  wave64 = row is not None and (row.layout == "wmma_rdna3" or row.layout == "wmma_rdna4" and not row.sparse and
                                min(_BITS.get(x, 0) for x in ins) >= 8)
  if row is None or row.layout is None or (row.layout.startswith("wmma") and L != 32 and not wave64) or \
     ins[0] not in _BITS or ins[1] not in _BITS:
    raise GputwinError(f"{name}: matrix layout not modelled (wave{L}{', ' + ' x '.join(ins) if ins else ''})")
  return _layout(row.layout, row.m, row.n, row.k, row.blocks, row.c, ins, L, row.sparse)


def _layout(kind: str, M: int, N: int, K: int, B: int, acc: str, ins: tuple[str, str], L: int, sparse: bool):
  bits = (_BITS[ins[0]], _BITS[ins[1]])
  lane = np.arange(L)
  ka = K // 2 if sparse else K  # A's columns
  if kind == "wmma_rdna3":
    na = nb = K
    a = b = [(lane % 16, np.full(L, e)) for e in range(K)]
    c = [(L // 16 * v + lane // 16, lane % 16) for v in range(M * N // L)]
  elif kind == "wmma_rdna4":  # (wave64: lane l holds the second half, l >= 32, of wave32 lane l % 32's elements)
    h, l32 = L // 32, lane % 32

    def runs(n: int, run_bits: int):  # n elements a wave32 lane; runs of `run_bits` of k alternate between the halves
      R, first = min(run_bits, n), n // h * (lane // 32)
      return [(l32 % 16, 2 * R * ((first + e) // R) + R * (l32 // 16) + (first + e) % R) for e in range(n // h)]
    na, nb = ka * M // L, K * N // L
    a, b = runs(ka * M // 32, 64 // bits[0]), runs(K * N // 32, (128 if sparse else 64) // bits[1])
    c = [(v + M * N // L * (lane // 32) + 8 * (l32 // 16), l32 % 16) for v in range(M * N // L)]
  else:
    na, nb = ka * M * B // L, K * N * B // L
    G, g = L // (M * B), lane // (M * B)  # lane groups of a block, each lane's

    def ks(n: int, run: int):  # k of element e: runs of `run` k, the lane groups taking turns (module docstring)
      R = min(run, n)
      return [R * (G * (e // R) + g) + e % R for e in range(n)]
    runs = [128 // w if 128 % w == 0 else n for n, w in ((na, bits[0]), (nb, bits[1]))]  # (fp6: no runs)
    if sparse:  # (a compressed run spans the dense k of B's)
      runs[0] //= 2
    a, b = ([(M * (lane // M % B) + lane % M, k) for k in ks(n, r)] for n, r in zip((na, nb), runs))
    H = 1 if acc == "F64" else 4  # rows a slot group spans (module docstring)
    R, P = L // N, -(-L * H // (M * N))
    rows, cols = np.full((B * M * N // L, L), -1), np.full((B * M * N // L, L), -1)
    for blk in range(B):
      for i in range(M):
        v, at = blk * (M * N // L) + H * (i // (H * R)) + i % H, N * (blk % P) + P * N * (i // H % R) + np.arange(N)
        rows[v, at], cols[v, at] = blk * M + i, blk * N + np.arange(N)
    assert (rows >= 0).all()
    c = list(zip(rows, cols))
  return M, N, K, B, acc, ins, bits, (na, nb), a, b, c


NAN = 0x7fc00000  # what a NaN result is (module docstring)
NAN64 = 0x7ff8000000000000


def _blgp_lanes(blgp: int, L: int) -> np.ndarray:
  """The lane each lane's B operand is read from under BLGP `blgp` (module docstring)."""
  lane = np.arange(L)
  return [lane, lane % 32, lane % 32 + 32, (lane + 16) % 64, *(lane % 16 + 16 * g for g in range(4))][blgp] % L


class Tables(NamedTuple):
  """A layout as register facts (`tables`) of the (B*M) x K x (B*N) product: A[m, k] is in `a[m, k]` = (register,
  lane, bit offset) of the A operand (where several lanes hold an element, as RDNA3's lanes 16-31 repeat 0-15: the
  highest of them; a 64-bit element: its low register), B[k, n] in `b[k, n]`; D slot v (a register; f64: a
  register pair) of lane l holds element `d[v, l]` = row * n + column; `regs`: registers of A, B, C/D. A sparse A
  (`idx` not None) has k // 2 columns, the compressed ones: column c's 2-bit index is at `idx[m, c]` = (0, lane, bit
  offset) of S2, and it multiplies B's row 4 * (c // 2) + that index. A scaled instruction's A[m, k] is multiplied by
  the E8M0 scale at `scale[0][m, k]` = (0, lane, bit offset) of S3, B[k, n] by `scale[1][k, n]`'s of S4."""
  m: int
  n: int
  k: int
  acc: str  # accumulator / result type: F32 | I32 | F64
  ins: tuple[str, str]  # A's and B's element types (matrix.json)
  bits: tuple[int, int]  # A's and B's element bits
  a: np.ndarray  # (M, K, 3) int64 (sparse: (M, K // 2, 3))
  b: np.ndarray  # (K, N, 3) int64
  d: np.ndarray  # (slots, L) int64
  regs: tuple
  half: np.ndarray | None = None  # 16-bit results: slot v's place in a lane's D registers, 2 * register + high half
  idx: np.ndarray | None = None  # sparse A: (M, K // 2, 3) int64
  scale: tuple[np.ndarray, np.ndarray] | None = None  # scaled A, B: per element, its E8M0 scale's (0, lane, offset)


@functools.lru_cache(maxsize=None)
def tables(family: str, name: str, L: int, cbsz: int = 0, abid: int = 0, blgp: int = 0, opsel: int = 0,
           ins: tuple[str, str] | None = None, iset: int = 0, scale_bytes: tuple[int, int] = (0, 0)) -> Tables:
  """The register tables of `name` in wave`L` with the CDNA broadcast controls, RDNA3's OPSEL[2], a sparse A's
  index set `iset` and the bytes of a scaled instruction's scale VGPRs (module docstring), from its `layout`
  (GputwinError where none is modelled)."""
  M, N, K, B, acc, ins, bits, (na, nb), amap, bmap, cmap = layout(family, name, L, ins)
  at = lambda e, w: (w * e // 32, w * e % 32)  # element e of w bits of a lane: (register, bit offset); 64-bit: low
  row = hwdata.matrix(family, name)
  sparse = row.sparse
  a, b = np.full((B * M, K // 2 if sparse else K, 3), -1, np.int64), np.full((K, B * N, 3), -1, np.int64)
  idx = np.full(a.shape, -1, np.int64) if sparse else None
  for e, (rc, k) in enumerate(amap):
    for lane in range(L):  # (lanes in order: the highest holding an element wins)
      a[rc[lane], k[lane]] = (at(e, bits[0])[0], lane, at(e, bits[0])[1])
      if sparse:  # (two bits an element, in the element's order, a set of 2 * na bits per index set)
        idx[rc[lane], k[lane]] = (0, lane, 2 * e + 2 * na * iset)
  for e, (rc, k) in enumerate(bmap):
    for lane in range(L):
      b[k[lane], rc[lane]] = (at(e, bits[1])[0], lane, at(e, bits[1])[1])
  d = np.stack([r * (B * N) + col for r, col in cmap])
  diagonal = [(bb * M + i) * (B * N) + bb * N + j for bb in range(B) for i in range(M) for j in range(N)]
  assert (a >= 0).all() and (b >= 0).all() and sorted(d.ravel()) == diagonal, name
  a = a.reshape(B, M, -1, 3)[(np.arange(B) >> cbsz << cbsz) + abid].reshape(B * M, -1, 3)
  b[..., 1] = _blgp_lanes(blgp, L)[b[..., 1]]
  scale = None
  if row.scale:  # (A's row m, k block kb: lane M * kb + m; B's column n: lane N * kb + n; one byte of the lane)
    kb = np.arange(K) // row.scale
    sa = np.stack(np.broadcast_arrays(0, M * kb[None, :] + np.arange(B * M)[:, None], 8 * scale_bytes[0]), -1)
    sb = np.stack(np.broadcast_arrays(0, N * kb[:, None] + np.arange(B * N)[None, :], 8 * scale_bytes[1]), -1)
    assert B == 1 and sa[..., 1].max() < L and sb[..., 1].max() < L, name
    scale = (sa.astype(np.int64), sb.astype(np.int64))
  for x in (a, b, d) + ((idx,) if sparse else ()) + (scale or ()):
    x.setflags(write=False)
  half, out = None, len(cmap) * (2 if acc == "F64" else 1)
  if acc in ("F16", "BF16"):  # (RDNA4 packs two per register; RDNA3 one, in the half OPSEL[2] picks)
    half = np.arange(len(cmap)) if row.layout == "wmma_rdna4" else \
        2 * np.arange(len(cmap)) + opsel
    half.setflags(write=False)
    out = int(half.max()) // 2 + 1
  return Tables(B * M, B * N, K, acc, ins, bits, a, b, d, (na * bits[0] // 32, nb * bits[1] // 32, out), half, idx,
                scale)


Neg = tuple[tuple[bool, bool], tuple[bool, bool], tuple[bool, bool]]  # A, B: (negate low-half, high-half
# elements: bit offset 0 or not); C: (negate, absolute value first)
NO_NEG: Neg = ((False, False),) * 3


class Mods(NamedTuple):
  """An instruction's modifiers the arithmetic applies (`operands`)."""
  neg: Neg = NO_NEG
  clamp: bool = False  # integer results: the exact A x B + C saturated to int32 (RDNA WMMA IU8/IU4's CLMP)


def operands(family: str, op, L: int) -> tuple[Tables, str, str, Mods]:
  """(tables, A's element kind, B's, the modifiers) of matrix instruction `op`; a GputwinError for what the
  model lacks. Kinds (`_value`): F16, BF16, F32, F64, I8 / U8 and I4 / U4 (signed or not), and the 8-bit floats of
  the target (pcode.runtime.FP8: fp8, bf8, fp8fnuz, bf8fnuz). Modifiers: RDNA float WMMA's NEG bit i negates the
  low-half elements of A (i = 0) or B (1) and C (2), NEG_HI's the high-half ones and takes |C| (AMD's Matrix
  Instruction Calculator; clang-22 folds -A into both bits and fabs(C) into NEG_HI[2]); CDNA f64's BLGP field is
  NEG of A, B, C."""
  name, f = op.inst.op, op.inst.f
  row = hwdata.matrix(family, name)
  cbsz, abid, blgp = f.get("cbsz", 0), f.get("abid", 0), f.get("blgp", 0)
  ins = None
  if row is not None and row.a == "F8F6F4":  # (CBSZ and BLGP are A's and B's formats here; a scaled one's ABID 1)
    if abid != bool(row.scale) or any(x >= len(F8F6F4) for x in (cbsz, blgp)):
      raise GputwinError(f"{name}: formats cbsz:{cbsz} blgp:{blgp} abid:{abid} not modelled (cbsz and blgp 0-4 "
                         f"name fp8, bf8, fp6, bf6, fp4; abid is {int(bool(row.scale))})")
    ins, cbsz, abid, blgp = (F8F6F4[cbsz], F8F6F4[blgp]), 0, 0, 0
  iset = 0
  if row is not None and row.sparse:  # the index set: ABID's low bits with CBSZ 0 (else 0), OPSEL[1:0] (index_key)
    sets = 16 * L // (row.m * row.k // 2)  # (32 bits, two an element of a lane's A)
    iset = (0 if cbsz else abid) & (sets - 1) if family == "cdna" else f.get("opsel", 0) & 3  # (the ISA guides)
    if iset >= sets:
      raise GputwinError(f"{name}: index set {iset} is past the index register ({sets} sets)")
    if blgp:
      raise GputwinError(f"{name}: blgp:{blgp} is not modelled on a sparse instruction")
    cbsz = abid = 0
  if cbsz or abid:  # (llvm-mc-22 takes any CBSZ < 8 and ABID < 16)
    if row is None or (1 << cbsz) > row.blocks or abid >= 1 << cbsz:
      raise GputwinError(f"{name}: cbsz:{cbsz} abid:{abid} not modelled (a block of A broadcast to 2**cbsz blocks "
                         f"of {row.blocks if row else '?'}, abid below 2**cbsz)")
  neg = NO_NEG
  if row is not None and row.a == "F64":  # (the BLGP field is NEG on f64: llvm-mc-22 prints neg:[a,b,c])
    neg, blgp = tuple((bool(blgp >> i & 1),) * 2 if i < 2 else (bool(blgp >> i & 1), False) for i in range(3)), 0
  scale_bytes = (0, 0)
  if row is not None and row.scale:  # the byte of A's (B's) scale VGPR: OP_SEL_HI[i] * 2 + OP_SEL[i] (CDNA4 guide)
    scale_bytes = tuple((f.get("opsel", 0) >> i & 1) + 2 * (f.get("opsel_hi", 0) >> i & 1) for i in range(2))
    for k in ("S3", "S4"):
      if op.ins[k].file != "v":  # (llvm-mc-22 takes VGPRs only there)
        raise GputwinError(f"{name}: the scales must be in VGPRs, not {op.ins[k].file!r} registers")
  t = tables(family, name, L, cbsz, abid, blgp, f.get("opsel", 0) >> 2 & 1 if row and row.c in ("F16", "BF16") else 0,
             ins, iset, scale_bytes)
  if f.get("clmp", 0) and t.acc != "I32":
    raise GputwinError(f"{name}: clamp is not modelled on float results")
  lo, hi = f.get("neg", 0), f.get("neg_hi", 0)
  if t.ins[0] not in ("IU8", "IU4") and (lo or hi):
    if min(t.bits) < 16 and (lo | hi) & 3:  # (llvm-mc-22 rejects them on 8-bit floats: which bytes a half is)
      raise GputwinError(f"{name}: neg modifiers on 8-bit A/B are not modelled")
    neg = tuple((bool(lo >> i & 1), bool(hi >> i & 1)) for i in range(3))
  for k, s, need in zip("ABCD", sources(op, t) + (op.outs["D0"],), t.regs + t.regs[2:]):
    if s.file not in ("v", "a") and not (k == "C" and s.file == "k"):  # llvm-mc-22: "Invalid register" (VReg_N)
      raise GputwinError(f"{name}: the {k} matrix must be in VGPRs{' or AGPRs' if family == 'cdna' else ''}, "
                         f"not {s.file!r} registers")
    if s.file == "k" and s.value:
      raise GputwinError(f"{name}: a non-zero constant C operand is not modelled")
    if s.file != "k" and s.dwords < need:
      raise GputwinError(f"{name}: the {k} matrix takes {need} registers, not {s.dwords}")
  if t.idx is not None and op.ins["S2"].file != "v":  # (the calculator: the indices must be in ArchVGPRs)
    raise GputwinError(f"{name}: the sparse indices must be in a VGPR, not {op.ins['S2'].file!r} registers")
  def kind(ty: str, i: int) -> str:
    if ty in ("IU8", "IU4"):  # neg_lo bits 0/1 say A/B are signed (RDNA WMMA)
      return ("I" if f.get("neg", 0) >> i & 1 else "U") + ty[2:]
    if ty in ("FP8", "BF8"):  # what they mean on this target (isa.targets' fp8 column, bound by amd/decode)
      return ty.lower() + ("fnuz" if op.info.get("fp8fnuz") else "")
    if ty in ("FP6", "BF6", "FP4"):  # OCP MX E2M3, E3M2, E2M1 (pcode.runtime.FP8)
      return ty.lower()
    return ty
  return t, kind(t.ins[0], 0), kind(t.ins[1], 1), Mods(neg, bool(f.get("clmp", 0)))


def sources(op, t: Tables) -> tuple:
  """The A, B and C operands of `op` (a sparse instruction's C is its D: S2 holds the indices)."""
  return op.ins["S0"], op.ins["S1"], op.outs["D0"] if t.idx is not None else op.ins["S2"]


def _gather(regs: np.ndarray, src: np.ndarray, bits: int) -> np.ndarray:
  """(W, nregs, L) raw registers -> (W, ...) raw elements at `src` (a table's (register, lane, offset) rows); an
  element past its register's top bit (64-bit, 6-bit ones) goes on in the next register."""
  lo = regs[:, src[..., 0], src[..., 1]]
  if bits == 64 or (src[..., 2] + bits > 32).any():
    hi = regs[:, np.minimum(src[..., 0] + 1, regs.shape[1] - 1), src[..., 1]]
    word = (lo.astype(np.uint64) | hi.astype(np.uint64) << np.uint64(32)) >> src[..., 2].astype(np.uint64)
    return word if bits == 64 else (word & np.uint64((1 << bits) - 1)).astype(U32)
  return (lo >> src[..., 2].astype(U32)) & U32((1 << bits) - 1)


def _pairs(rows: np.ndarray) -> np.ndarray:
  """(..., 2n, L) uint32 register rows -> (..., n, L) uint64 register pairs (low register first)."""
  return rows[..., 0::2, :].astype(np.uint64) | rows[..., 1::2, :].astype(np.uint64) << np.uint64(32)


def _value(raw: np.ndarray, kind: str):
  """Raw elements as exact float64 (int64 for integers)."""
  if kind == "F16":
    return raw.astype(np.uint16).view(np.float16).astype(np.float64)
  if kind == "BF16":
    return (raw.astype(U32) << U32(16)).view(np.float32).astype(np.float64)
  if kind == "F32":
    return raw.astype(U32).view(np.float32).astype(np.float64)
  if kind == "F64":
    return raw.view(np.float64)
  if kind in FP8:
    return fp8_decode(raw, kind).astype(np.float64)
  if kind in ("I4", "U4"):
    return raw.astype(np.int64) - (raw.astype(np.int64) >> 3 << 4 if kind == "I4" else 0)
  return (raw.astype(np.uint8).view(np.int8) if kind == "I8" else raw.astype(np.uint8)).astype(np.int64)


def round16(x: np.ndarray, kind: str) -> np.ndarray:
  """float64 `x` rounded to nearest even F16 or BF16 (raw uint16; a NaN: the default NaN), through f32 rounded to
  odd (pcode.runtime's, as its conversions from f64 do), so the one 16-bit rounding is exact."""
  if kind == "F16":
    r = f64_to_f32_odd(x).astype(np.float16).view(np.uint16)
  else:
    r = (rbf(x).view(U32) >> U32(16)).astype(np.uint16)
  r[np.isnan(x)] = 0x7e00 if kind == "F16" else 0x7fc0
  return r


def execute(eng, op, ix) -> None:
  """D = A x B + C for every wave in `ix` (EXEC is ignored: matrix instructions require all lanes)."""
  t, ka, kb, mods = operands(eng.fam, op, eng.L)
  with np.errstate(all="ignore"):  # (NaN and infinity operands, overflow to infinity: IEEE results)
    raw = _compute(eng, op, ix, t, ka, kb, mods)
  d = op.outs["D0"]
  eng.mark(d.file, d.index, t.regs[2])
  (eng.V if d.file == "v" else eng.A)[ix, d.index:d.index + t.regs[2]] = raw


def check(eng, op, ix) -> tuple[int, str] | None:
  """The `sparse` checker (emu/checks.py): (wave, message) for the first index pair of a sparse A, in waves `ix`,
  whose first index is not below its second (the CDNA3/CDNA4 guides require index 0 < index 1); None if all hold."""
  row = hwdata.matrix(eng.fam, op.inst.op)
  if row is None or not row.sparse:
    return None
  t = operands(eng.fam, op, eng.L)[0]
  s = op.ins["S2"]
  idx = _gather(eng.V[ix, s.index:s.index + 1], t.idx, 2)  # (W, M, K // 2)
  bad = idx[..., 0::2] >= idx[..., 1::2]
  if not bad.any():
    return None
  w, m, p = (int(x[0]) for x in np.nonzero(bad))
  _, lane, bit = (int(x) for x in t.idx[m, 2 * p])
  return int(np.arange(eng.W)[ix][w]), (
      f"sparse index pair ({idx[w, m, 2 * p]}, {idx[w, m, 2 * p + 1]}) of A row {m}, k {4 * p}-{4 * p + 3} (v{s.index} "
      f"lane {lane} bits [{bit + 3}:{bit}]): the ISA requires index 0 < index 1; the product is undefined")


def e8m0(raw: np.ndarray) -> np.ndarray:
  """E8M0 scale codes as float64: 2**(code - 127), code 0xFF NaN (OCP MX's scale format, no sign, no zero)."""
  return np.where(raw == 0xFF, np.nan, np.ldexp(1.0, raw.astype(np.int64) - 127))


def _negate(x: np.ndarray, tab: np.ndarray, flags: tuple[bool, bool]) -> np.ndarray:
  """Elements `x` (W, ...) at table `tab`'s places, negated where their half's flag is set (`Neg`)."""
  if not any(flags):
    return x
  return np.where(np.where(tab[..., 2] == 0, *flags), -x, x)


def _cmods(c: np.ndarray, flags: tuple[bool, bool]) -> np.ndarray:
  """C's values with its modifiers (`Neg`): the absolute value, then the negation."""
  c = np.abs(c) if flags[1] else c
  return -c if flags[0] else c


def _fma(x: float, y: float, z: float) -> float:
  """x * y + z rounded once to f64 (RNE; IEEE's special cases): the exact sum in Python integers, rounded by their
  correctly rounded true division."""
  if not (math.isfinite(x) and math.isfinite(y)):
    return x * y + z
  if not math.isfinite(z):
    return z
  (p, q), (r, s), (u, w) = x.as_integer_ratio(), y.as_integer_ratio(), z.as_integer_ratio()  # (q, s, w: 2**n)
  den = max(q * s, w)
  num = p * r * (den // (q * s)) + u * (den // w)
  if num == 0:  # (exact zero: -0 only as -0 + -0)
    return -0.0 if (p == 0 or r == 0) and math.copysign(1, x) * math.copysign(1, y) < 0 and \
        math.copysign(1, z) < 0 else 0.0
  try:
    return num / den
  except OverflowError:
    return math.inf if num > 0 else -math.inf


_fmas = np.frompyfunc(_fma, 3, 1)


def _compute(eng, op, ix, t: Tables, ka: str, kb: str, mods: Mods) -> np.ndarray:
  """The raw D registers (W, regs, L)."""
  neg = mods.neg
  n, integer = eng.nwaves(ix), t.acc == "I32"
  regs = lambda s, n: (eng.V if s.file == "v" else eng.A)[ix, s.index:s.index + n]  # (W, n, L)
  sa, sb, c = sources(op, t)  # (a constant C is 0: operands)
  A = _value(_gather(regs(sa, t.regs[0]), t.a, t.bits[0]), ka)  # (W, M, K) (sparse: (W, M, K // 2))
  B = _value(_gather(regs(sb, t.regs[1]), t.b, t.bits[1]), kb)  # (W, K, N)
  A, B = _negate(A, t.a, neg[0]), _negate(B, t.b, neg[1])
  if t.scale is not None:  # each element times its block's scale (exact in float64: a power of two, or NaN)
    A, B = (x * e8m0(_gather(regs(op.ins[s], 1), tab, 8)) for x, s, tab in zip((A, B), ("S3", "S4"), t.scale))
  if t.idx is not None:  # a sparse A's column c multiplies B's row 4 * (c // 2) + its index (Tables)
    sel = _gather(regs(op.ins["S2"], 1), t.idx, 2).astype(np.int64) + 4 * (np.arange(t.idx.shape[1]) // 2)
    B = B[np.arange(n)[:, None, None], sel]  # (W, M, K // 2, N): per row m, the B row each column multiplies
  if t.acc == "F64":
    acc = np.zeros((n,) + t.d.shape) if c.file == "k" else _cmods(_pairs(regs(c, t.regs[2])).view(np.float64), neg[2])
    m, col = np.divmod(t.d, t.n)
    for k in range(t.k):  # (k order: module docstring)
      acc = _fmas(A[:, m, k], B[:, k, col], acc).astype(np.float64)
    raw = acc.view(np.uint64)
    raw[np.isnan(acc)] = NAN64
    return np.stack([raw.astype(U32), (raw >> np.uint64(32)).astype(U32)], 2).reshape(n, t.regs[2], -1)
  acc = np.zeros((n, t.m, t.n), np.int64) if integer else np.full((n, t.m, t.n), -0.0)
  for k in range(A.shape[2]):  # in k order (module docstring)
    acc += A[:, :, k, None] * (B[:, :, k, :] if t.idx is not None else B[:, None, k, :])
  D = acc.reshape(n, -1)[:, t.d]  # (W, regs, L)
  if t.half is not None:  # 16-bit results into their halves of D's registers (the other halves stay)
    halves = lambda s: np.ascontiguousarray(regs(s, t.regs[2]).transpose(0, 2, 1)).view(np.uint16)  # (W, L, 2 * regs)
    H = halves(op.outs["D0"])
    D = D + (0 if c.file == "k" else _cmods(_value(halves(c)[:, :, t.half].transpose(0, 2, 1), t.acc), neg[2]))
    H[:, :, t.half] = round16(D, t.acc).transpose(0, 2, 1)
    return H.view(U32).transpose(0, 2, 1)
  D = D + (0 if c.file == "k" else regs(c, t.regs[2]).view(np.int32) if integer else
           _cmods(regs(c, t.regs[2]).view(np.float32).astype(np.float64), neg[2]))
  if integer:
    raw = (np.clip(D, -2 ** 31, 2 ** 31 - 1) if mods.clamp else D).astype(np.uint64).astype(U32)
  else:
    raw = D.astype(np.float32).view(U32)
    raw[np.isnan(D)] = NAN
  return raw
