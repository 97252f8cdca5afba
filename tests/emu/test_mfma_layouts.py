"""CDNA MFMA of several blocks, f64 MFMA, and the broadcast controls CBSZ/ABID/BLGP (f64: NEG), on both tiers, against
numpy. The kernels are clang-22's (tests/emu/kernels/mfma_blocks.cl: one instruction each, its registers loaded from
and stored to images); where each matrix element sits is written here from AMD's Matrix Instruction Calculator (its
element -> register and lane equations for gfx9 MFMA, and its BLGP/CBSZ/ABID descriptions), independently of
gputwin/emu/amd/matrix.py's register -> element tables."""
import numpy as np
import pytest

from gputwin.emu import launch, native

ARCHS = ["gfx942", "gfx950"]
# kernel: (M, N, K, blocks, element kind, CBSZ, ABID, BLGP)
KERNELS = {
  "f32_4x4x1": (4, 4, 1, 16, "f32", 0, 0, 0), "f32_16x16x1": (16, 16, 1, 4, "f32", 0, 0, 0),
  "f32_32x32x1": (32, 32, 1, 2, "f32", 0, 0, 0), "f16_4x4x4": (4, 4, 4, 16, "f16", 0, 0, 0),
  "f16_16x16x4": (16, 16, 4, 4, "f16", 0, 0, 0), "f16_32x32x4": (32, 32, 4, 2, "f16", 0, 0, 0),
  "bf16_4x4x4": (4, 4, 4, 16, "bf16", 0, 0, 0), "bf16_16x16x4": (16, 16, 4, 4, "bf16", 0, 0, 0),
  "bf16_32x32x4": (32, 32, 4, 2, "bf16", 0, 0, 0), "i8_4x4x4": (4, 4, 4, 16, "i8", 0, 0, 0),
  "i8_16x16x4": (16, 16, 4, 4, "i8", 0, 0, 0), "i8_32x32x4": (32, 32, 4, 2, "i8", 0, 0, 0),
  "f64_16x16x4": (16, 16, 4, 1, "f64", 0, 0, 0), "f64_4x4x4": (4, 4, 4, 4, "f64", 0, 0, 0),
  "f32_4x4x1_c2a1b3": (4, 4, 1, 16, "f32", 2, 1, 3), "f32_4x4x1_c4a9b7": (4, 4, 1, 16, "f32", 4, 9, 7),
  "f16_16x16x4_c1a1b5": (16, 16, 4, 4, "f16", 1, 1, 5), "f16_16x16x4_c2a3b1": (16, 16, 4, 4, "f16", 2, 3, 1),
  "f32_32x32x1_c1a1b2": (32, 32, 1, 2, "f32", 1, 1, 2), "i8_16x16x4_c0a0b6": (16, 16, 4, 4, "i8", 0, 0, 6),
  "f16_16x16x16_b4": (16, 16, 16, 1, "f16", 0, 0, 4), "f64_16x16x4_neg5": (16, 16, 4, 1, "f64", 0, 0, 5),
  "f64_4x4x4_c2a2": (4, 4, 4, 4, "f64", 2, 2, 0),
}
# per kind: the kernel's A/B element type on the host (bf16: its bits), C/D's, elements a lane loads for A and B
HOST = {"f32": (np.float32, np.float32), "f16": (np.float16, np.float32), "bf16": (np.uint16, np.float32),
        "i8": (np.int8, np.int32), "f64": (np.float64, np.float64)}


def _in_lane(M, K, B, E, b, i, k):
  """The calculator's input lane: M * block + (M * blocks) * floor(k / E) + i (element k % E of the lane)."""
  return M * b + M * B * (k // E) + i


def _out_at(M, N, B, f64, b, i, j):
  """The calculator's output (register, lane) of D[b][i][j]: its printed equations per shape (f64: a register pair,
  counted in pairs)."""
  if f64:
    reg = i // 4 if B == 1 else 0
    return reg, 16 * (i % 4) + (N * b if M * N < 64 else 0) + j
  reg = {(4, 16): i, (16, 4): 4 * b + i % 4, (16, 1): i % 4, (32, 2): 16 * b + 4 * (i // 8) + i % 4,
         (32, 1): 4 * (i // 8) + i % 4}[M, B]
  lane = (N * (i // 4)) % 64 if N * M // 4 > 64 else N * (i // 4) if N * M // 4 == 64 else 0
  return reg, lane + (N * b if M * N < 64 else 0) + j


def _blgp(blgp, lane):
  """The lane B is read from (calculator: 1/2 broadcast the first/second 32 lanes, 3 rotates down by 16, 4-7
  broadcast the first/second/third/fourth 16 lanes)."""
  return [lane, lane % 32, 32 + lane % 32, (lane + 16) % 64, lane % 16, 16 + lane % 16, 32 + lane % 16,
          48 + lane % 16][blgp]


@pytest.mark.parametrize("arch", ARCHS)
def test_blocks_f64_and_broadcasts_match_numpy_on_both_tiers(clang_co, monkeypatch, arch):
  rng = np.random.default_rng(11)
  co = clang_co(arch, "mfma_blocks")
  for name, (M, N, K, B, kind, cbsz, abid, blgp) in KERNELS.items():
    f64 = kind == "f64"
    ti, to = HOST[kind]
    E = K * M * B // 64
    lim = 100 if kind == "i8" else 4
    vals = lambda shape: rng.integers(-lim, lim, shape)
    Am, Bm, Cm = vals((B, M, K)), vals((B, K, N)), vals((B, M, N)) * 8
    img = lambda: np.zeros((64, E) if E > 1 else 64, np.float64)
    Ai, Bi = img(), img()
    for b in range(B):
      for k in range(K):
        for i in range(M):
          Ai[(_in_lane(M, K, B, E, b, i, k),) + ((k % E,) if E > 1 else ())] = Am[b, i, k]
        for j in range(N):
          Bi[(_in_lane(N, K, B, E, b, j, k),) + ((k % E,) if E > 1 else ())] = Bm[b, k, j]
    regs = B * M * N // 64
    Ci = np.zeros((max(regs, 2), 64), to)  # (f64_4x4x4's kernel moves a pair of doubles: the second is unused)
    for b in range(B):
      for i in range(M):
        for j in range(N):
          Ci[_out_at(M, N, B, f64, b, i, j)] = Cm[b, i, j]
    host = lambda x: ((x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) if kind == "bf16" else
                      x.astype(ti).view(np.int32) if kind == "i8" else x.astype(ti))  # (four i8: the kernel's int)
    # what the hardware multiplies: A block (b >> CBSZ << CBSZ) + ABID, B from the BLGP lane (f64: BLGP is NEG)
    Ae = np.stack([Am[(b >> cbsz << cbsz) + abid] for b in range(B)])
    Be = np.zeros((B, K, N))
    for b in range(B):
      for k in range(K):
        for j in range(N):
          lane = _blgp(0 if f64 else blgp, _in_lane(N, K, B, E, b, j, k))
          Be[b, k, j] = Bi[(lane,) + ((k % E,) if E > 1 else ())]
    neg = [1 - 2 * (blgp >> t & 1) if f64 else 1 for t in range(3)]
    want = (neg[0] * Ae) @ (neg[1] * Be) + neg[2] * Cm
    out = {}
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = np.zeros_like(Ci)
      st = launch(co, name, grid=1, block=64, args=[D, host(Ai), host(Bi), Ci.copy()], checks=False)
      out[mode] = (D, st)
    (di, _), (dn, sn) = out["0"], out["force"]
    assert np.array_equal(di.view(np.uint8), dn.view(np.uint8)), name
    got = np.zeros((B, M, N))
    for b in range(B):
      for i in range(M):
        for j in range(N):
          got[b, i, j] = dn[_out_at(M, N, B, f64, b, i, j)]
    np.testing.assert_array_equal(got, want, err_msg=name)
    assert sn.native_instructions >= 0.9 * sn.instructions, (name, sn)
  assert not native.FAILED, native.FAILED[:3]


# gfx950 F8F6F4 (kernels/f8f6f4.cl): kernel -> (M, K, A's format, B's); formats as ml_dtypes types
F8F6F4 = {"m16_fp8_fp8": (16, 128, "fp8", "fp8"), "m16_bf8_fp8": (16, 128, "bf8", "fp8"),
          "m16_fp4_fp4": (16, 128, "fp4", "fp4"), "m32_fp8_bf8": (32, 64, "fp8", "bf8"),
          "m32_fp4_fp4": (32, 64, "fp4", "fp4"), "m16_fp6_fp6": (16, 128, "fp6", "fp6"),
          "m16_fp8_fp4": (16, 128, "fp8", "fp4"), "m16_bf6_bf8": (16, 128, "bf6", "bf8"),
          "m32_fp4_fp6": (32, 64, "fp4", "fp6"), "m32_bf8_bf6": (32, 64, "bf8", "bf6")}
WIDTH = {"fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4}


def f8f6f4_k(M: int, fmt: str, lane: int, e: int) -> int:
  """The k of element e of `lane` (row or column lane % M): AMD's CDNA4 ISA, "Dense matrix layouts" for the F8F6F4
  MFMA: 6- and 4-bit formats hold 32 consecutive k a lane group (of M lanes); 8-bit ones runs of 16 k, the groups
  taking turns (16x16x128: lanes 0-15 hold k 0-15 and 64-79, lanes 16-31 k 16-31 and 80-95)."""
  g, groups = lane // M, 64 // M
  return 32 * g + e if WIDTH[fmt] < 8 else 16 * (groups * (e // 16) + g) + e % 16


def c_image(Cm: np.ndarray) -> np.ndarray:
  """The C registers of the M x M f32 matrix `Cm` (one block; `_out_at`'s layout): (M * M // 64, 64 lanes)."""
  M = Cm.shape[0]
  Ci = np.zeros((M * M // 64, 64), np.float32)
  for i in range(M):
    for j in range(M):
      Ci[_out_at(M, M, 1, False, 0, i, j)] = Cm[i, j]
  return Ci


def f8f6f4_image(mat: np.ndarray, fmt: str, types: dict) -> np.ndarray:
  """The A (B: pass B transposed) registers of M-row `mat`: lane l holds row l % M, its 32 codes (ml_dtypes' `types`)
  packed from bit 0 on, element e at k = f8f6f4_k (64 lanes x 8 dwords)."""
  M, w, out = mat.shape[0], WIDTH[fmt], np.zeros((64, 32), np.uint8)
  for lane in range(64):
    codes = [int(np.float64(mat[lane % M, f8f6f4_k(M, fmt, lane, e)]).astype(types[fmt]).view(np.uint8))
             & (1 << w) - 1 for e in range(32)]
    out[lane] = np.frombuffer(sum(c << w * e for e, c in enumerate(codes)).to_bytes(32, "little"), np.uint8)
  return out.view(np.int32)


def test_f8f6f4_formats_match_numpy_on_both_tiers(clang_co, monkeypatch):
  """gfx950's F8F6F4 MFMA with fp8 (E4M3), bf8 (E5M2), fp6 (E2M3), bf6 (E3M2) and fp4 (E2M1) operands, mixed widths
  too: element e of a lane at bits [w*e, w*e + w) of its registers read as one (the ISA: the six registers of fp6
  operands are one 192-bit register, item 0 in bits 5-0), k by `f8f6f4_k`; C/D the 16x16 / 32x32 layouts above.
  Codes from ml_dtypes (an oracle of their own), numpy's product."""
  ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the float8/6/4 oracle) is not installed")
  types = {"fp8": ml.float8_e4m3fn, "bf8": ml.float8_e5m2, "fp6": ml.float6_e2m3fn, "bf6": ml.float6_e3m2fn,
           "fp4": ml.float4_e2m1fn}
  rng = np.random.default_rng(13)
  co = clang_co("gfx950", "f8f6f4")
  for name, (M, K, fa, fb) in F8F6F4.items():
    Am, Bm = rng.integers(-4, 5, (M, K)).astype(np.float64), rng.integers(-4, 5, (K, M)).astype(np.float64)  # (fp4)

    Cm = rng.integers(-50, 50, (M, M)).astype(np.float32)
    Ci = c_image(Cm)
    out = []
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = np.zeros_like(Ci)
      launch(co, name, grid=1, block=64, args=[D, f8f6f4_image(Am, fa, types), f8f6f4_image(Bm.T, fb, types),
                                               Ci.copy()], checks=False)
      out.append(D)
    assert np.array_equal(out[0].view(np.uint32), out[1].view(np.uint32)), name
    got = np.array([[out[1][_out_at(M, M, 1, False, 0, i, j)] for j in range(M)] for i in range(M)])
    np.testing.assert_array_equal(got, Am @ Bm + Cm, err_msg=name)
  assert not native.FAILED, native.FAILED[:3]


# gfx950 scaled F8F6F4 (kernels/f8f6f4.cl SCALED): kernel -> (M, K, A's format, B's, A's scale byte, B's)
SCALED = {"s16_fp8_fp8": (16, 128, "fp8", "fp8", 0, 0), "s16_fp4_bf8_b1b2": (16, 128, "fp4", "bf8", 1, 2),
          "s16_fp6_fp8_b3b0": (16, 128, "fp6", "fp8", 3, 0), "s32_bf8_fp4_b2b3": (32, 64, "bf8", "fp4", 2, 3),
          "s32_bf6_fp6": (32, 64, "bf6", "fp6", 0, 1)}


def test_scaled_f8f6f4_matches_exact_products_on_both_tiers(clang_co, monkeypatch):
  """gfx950's V_MFMA_SCALE_F32_*_F8F6F4: A's row m times 2**(e - 127) per block kb of 32 k, e the E8M0 byte of lane
  M*kb + m of the first scale VGPR (B's column n: lane N*kb + n of the second), the byte op_sel_hi[i]*2 + op_sel[i]
  (the CDNA4 ISA guide, "Matrix fused multiply-add with block scaling"); code 0xFF is NaN. The other bytes of the
  scale words are noise (0xFF among them); the blocks include the extreme codes 0 and 254 (2**-127 * 2**127: exact)
  and an overflow to infinity. Reference: the exact rational D rounded once to f32 (a NaN: the default NaN)."""
  from fractions import Fraction
  ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the float8/6/4 oracle) is not installed")
  types = {"fp8": ml.float8_e4m3fn, "bf8": ml.float8_e5m2, "fp6": ml.float6_e2m3fn, "bf6": ml.float6_e3m2fn,
           "fp4": ml.float4_e2m1fn}
  rng = np.random.default_rng(17)
  co = clang_co("gfx950", "f8f6f4")
  for name, (M, K, fa, fb, ba, bb) in SCALED.items():
    Am, Bm = rng.integers(-4, 5, (M, K)), rng.integers(-4, 5, (K, M))
    KB = K // 32
    sa, sb = rng.integers(122, 133, (M, KB)), rng.integers(122, 133, (KB, M))
    sa[3, 1], sb[1, 7] = 254, 0  # (a factor 2**127 * 2**-127)
    sa[4, 0], sb[0, 9] = 254, 254  # (2**254: infinity unless that block's dot product is 0)
    Am[4, :32] = Bm[:32, 9] = 1
    if name == "s32_bf6_fp6":
      sa[5, 1] = 0xFF  # (NaN: all of row 5)

    def scales(s, byte):  # the guide's lanes: (row or column i, block kb) in lane M*kb + i, byte `byte`
      words = rng.integers(0, 256, (64, 4), dtype=np.uint8)
      words[rng.integers(0, 64, 16), rng.integers(0, 4, 16)] = 0xFF
      for i in range(M):
        for kb in range(KB):
          words[M * kb + i, byte] = s[i, kb]
      return words.view(np.int32).ravel()

    Cm = rng.integers(-50, 50, (M, M)).astype(np.float32)
    Ci = c_image(Cm)
    args = [f8f6f4_image(Am, fa, types), f8f6f4_image(Bm.T, fb, types), Ci, scales(sa, ba), scales(sb.T, bb)]
    out = []
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = np.zeros_like(Ci)
      launch(co, name, grid=1, block=64, args=[D] + [a.copy() for a in args], checks=False)
      out.append(D.view(np.uint32))
    assert np.array_equal(out[0], out[1]), name
    got = np.array([[out[1][_out_at(M, M, 1, False, 0, i, j)] for j in range(M)] for i in range(M)])
    p2 = lambda e: Fraction(2) ** (int(e) - 127)
    want = np.zeros((M, M), np.uint32)
    for i in range(M):
      for j in range(M):
        if (sa[i] == 0xFF).any() or (sb[:, j] == 0xFF).any():
          want[i, j] = 0x7fc00000
          continue
        exact = sum(int(Am[i, k]) * int(Bm[k, j]) * p2(sa[i, k // 32]) * p2(sb[k // 32, j]) for k in range(K))
        with np.errstate(over="ignore"):  # (f64, then f32: one rounding of the exact value; may overflow)
          want[i, j] = np.float32(float(exact + Fraction(float(Cm[i, j])))).view(np.uint32)
    assert want[4, 9] in (0x7f800000, 0xff800000), name  # (the overflow is there)
    np.testing.assert_array_equal(got, want, err_msg=name)
  assert not native.FAILED, native.FAILED[:3]
