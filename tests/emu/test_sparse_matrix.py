"""Sparse matrix instructions (CDNA3/CDNA4 V_SMFMAC_*, RDNA4 V_SWMMAC_*) on both tiers, against numpy's dense product.
The kernels are clang-22's (tests/emu/kernels/sparse.cl: one instruction each). Where each element of A (two of every
four k of a row, compressed), B, the accumulator and each 2-bit sparse index sits is written here, in terms of the
dense k and the slot s of a stored value within its group of four, from the CDNA3/CDNA4 ISA guides' SMFMAC tables
(B, index sets) and AMD's Matrix Instruction Calculator (v1.3.1: its gfx9 and gfx12 register equations),
independently of gputwin/emu/amd/matrix.py's tables; the equations are anchored on the vendors' printed examples."""
import numpy as np
import pytest

from gputwin.emu import launch, native

from tests.emu.test_mfma_layouts import _out_at  # (the calculator's gfx9 C/D equations)

# kernel: (M, K, A's and B's kind, result kind, index set, the set field is ABID (CDNA) or index_key (RDNA4))
CDNA = {
  "f16_16x16x32": (16, 32, "f16", "f32", 0), "f16_32x32x16": (32, 16, "f16", "f32", 0),
  "bf16_16x16x32": (16, 32, "bf16", "f32", 0), "i8_16x16x64": (16, 64, "i8", "i32", 0),
  "i8_32x32x32": (32, 32, "i8", "i32", 0), "fp8_16x16x64": (16, 64, "fp8", "f32", 0),
  "bf8fp8_32x32x32": (32, 32, "bf8/fp8", "f32", 0), "f16_16x16x32_a3": (16, 32, "f16", "f32", 3),
  "f16_16x16x32_c1a2": (16, 32, "f16", "f32", 0), "i8_16x16x64_a1": (16, 64, "i8", "i32", 1),
}
CDNA4 = {"f16_16x16x64": (16, 64, "f16", "f32", 0), "f16_32x32x32_a1": (32, 32, "f16", "f32", 1),
         "i8_16x16x128": (16, 128, "i8", "i32", 0), "fp8_32x32x64": (32, 64, "fp8", "f32", 0)}
RDNA4 = {"w_f16": (16, 32, "f16", "f32", 0), "w_bf16": (16, 32, "bf16", "f32", 0),
         "w_f16_f16": (16, 32, "f16", "f16", 0), "w_bf16_bf16": (16, 32, "bf16", "bf16", 0),
         "w_iu8": (16, 32, "i8", "i32", 0), "w_iu4": (16, 32, "i4", "i32", 0),
         "w_iu4_k64": (16, 64, "i4", "i32", 0), "w_fp8_bf8": (16, 32, "fp8/bf8", "f32", 0),
         "w_f16_key1": (16, 32, "f16", "f32", 1)}
BITS = {"f16": 16, "bf16": 16, "i8": 8, "fp8": 8, "bf8": 8, "i4": 4}


# ---- where elements sit: (register, lane, bit offset)
def cdna_b(N, K, bits, k, j):
  """SMFMAC's dense B (CDNA3 ISA guide, "Matrix B Layout" of the sparse chapter: a lane group of N lanes holds
  consecutive k, 16 bytes or 8 halves, v0 k 0-3 of group 0 and k 16-19 of group 1 (8-bit); the CDNA4 guide's tables
  for its wider shapes: runs of 16 bytes or 8 halves, the groups taking turns, v4 of group 0 holds k 64-67 of
  16x16x128 and 32-33 of 16x16x64 f16)."""
  E, G, run = K * N // 64, 64 // N, 128 // bits
  if E <= run:
    return bits * (k % E) // 32, N * (k // E) + j, bits * (k % E) % 32
  r = k // run
  e = run * (r // G) + k % run
  return bits * e // 32, N * (r % G) + j, bits * e % 32


def cdna_a(M, K, bits, i, k, s):
  """The compressed A: a lane's A covers the dense k of the same lane's B, in order: item e of the lane is the stored
  value e % 2 of the lane's B group e // 2 of four k (the guides: "each lane has K=8 values which requires 4 indices
  per lane"; the calculator's CDNA3 equations agree)."""
  reg, lane, bit = cdna_b(M, K, bits, k, i)
  e = 2 * ((32 * reg + bit) // bits // 4) + s
  return bits * e // 32, lane, bits * e % 32


def cdna_idx(M, K, bits, i, k, s, iset):
  """The index of the stored value s of group k // 4: A's lane, bits 2e of index set `iset` (2 bits an A item)."""
  reg, lane, bit = cdna_a(M, K, bits, i, k, s)
  return 0, lane, 2 * ((32 * reg + bit) // bits) + (K // 2 * M // 64) * 2 * iset


def rdna4_a(M, K, bits, i, k, s):
  """gfx12 wave32 SWMMAC A (dense k, stored value s of its group)."""
  if bits == 16:
    return 2 * (k // 16) + k // 4 % 2, 16 * (k // 8 % 2) + i, 16 * s
  if bits == 8:
    return k // 8 % 2, 16 * (k // 16) + i, 16 * (k // 4 % 2) + 8 * s
  if K == 32:
    return 0, 16 * (k // 16) + i, 8 * (k // 4 % 4) + 4 * s
  return k // 16 % 2, 16 * (k // 32) + i, 8 * (k // 4 % 4) + 4 * s


def rdna4_b(N, K, bits, k, j):
  if bits == 16:
    return 4 * (k // 16) + k // 2 % 4, 16 * (k // 8 % 2) + j, 16 * (k % 2)
  if bits == 8:
    return k // 4 % 4, 16 * (k // 16) + j, 8 * (k % 4)
  return k // 8 % (2 if K == 32 else 4), 16 * (k // (16 if K == 32 else 32)) + j, 4 * (k % 8)


def rdna4_idx(M, K, bits, i, k, s, iset):
  lane = rdna4_a(M, K, bits, i, k, s)[1]
  base = 8 * (k // 16) + 4 * (k // 4 % 2) if bits == 16 else 4 * (k // 4 % (4 if bits == 8 or K == 32 else 8))
  return 0, lane, base + 2 * s + 16 * iset


def test_equations_reproduce_the_vendors_examples():
  """The printed examples (README: K[2][31] = v0{50}.[7:4] for CDNA3 V_SMFMAC_F32_16X16X32_F16, v0{50}.[31:28] with
  ABID 3; v0{18}.[15:12] for RDNA4 V_SWMMAC_F32_16X16X32_F16, [31:28] with OPSEL 1) and others run through it."""
  assert cdna_idx(16, 32, 16, 2, 31, 0, 0)[1:] == (50, 4) and cdna_idx(16, 32, 16, 2, 31, 1, 3)[1:] == (50, 30)
  assert rdna4_idx(16, 32, 16, 2, 31, 0, 0)[1:] == (18, 12) and rdna4_idx(16, 32, 16, 2, 31, 1, 1)[1:] == (18, 30)
  assert cdna_a(16, 32, 16, 2, 31, 0)[:2] == (1, 50) and cdna_b(16, 32, 16, 31, 7) == (3, 55, 16)
  assert cdna_a(16, 64, 8, 2, 63, 0) == (1, 50, 16) and cdna_idx(16, 64, 8, 2, 63, 0, 1)[1:] == (50, 28)
  assert cdna_b(32, 32, 8, 21, 20) == (1, 52, 8) and cdna_idx(32, 16, 16, 3, 13, 0, 0)[1:] == (35, 4)
  # the CDNA4 guide's tables: 16x16x128 8-bit B, group 0 v4 byte 0 is k 64; 16x16x64 f16 B, group 0 v4 is k 32
  assert cdna_b(16, 128, 8, 64, 0) == (4, 0, 0) and cdna_b(16, 128, 8, 16, 0) == (0, 16, 0)
  assert cdna_b(16, 64, 16, 32, 0) == (4, 0, 0) and cdna_b(16, 64, 16, 8, 0) == (0, 16, 0)
  assert cdna_b(16, 64, 8, 63, 0) == (3, 48, 24)  # (CDNA3 8-bit: v3 of group 3 holds k 60-63)
  assert rdna4_a(16, 32, 16, 2, 31, 0)[:2] == (3, 18) and rdna4_b(16, 32, 16, 31, 7) == (7, 23, 16)
  assert rdna4_a(16, 32, 8, 2, 31, 0) == (1, 18, 16) and rdna4_idx(16, 32, 8, 5, 9, 0, 0)[1:] == (5, 8)
  assert rdna4_b(16, 32, 8, 9, 3) == (2, 3, 8) and rdna4_a(16, 64, 4, 2, 63, 0) == (1, 18, 24)
  assert rdna4_idx(16, 64, 4, 2, 63, 0, 0)[1:] == (18, 28)


def _codes(kind: str, x: np.ndarray, arch: str) -> np.ndarray:
  """Small integers `x` as raw element codes (uint32) of `kind`; 8-bit floats as the target's (gfx942: FNUZ)."""
  if kind == "f16":
    return x.astype(np.float16).view(np.uint16).astype(np.uint32)
  if kind == "bf16":
    return x.astype(np.float32).view(np.uint32) >> 16
  if kind in ("i8", "i4"):
    return x.astype(np.int64).astype(np.uint32) & (0xff if kind == "i8" else 0xf)
  ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the float8 oracle) is not installed")
  ty = {("fp8", True): ml.float8_e4m3fnuz, ("bf8", True): ml.float8_e5m2fnuz, ("fp8", False): ml.float8_e4m3fn,
        ("bf8", False): ml.float8_e5m2}[kind, arch == "gfx942"]
  return x.astype(ty).view(np.uint8).astype(np.uint32)


def _put(img: np.ndarray, at, code: int) -> None:
  reg, lane, bit = at
  img[lane, reg] |= np.uint32(int(code) << bit)


def _run(clang_co, monkeypatch, arch, kernels):
  rng = np.random.default_rng(5)
  co = clang_co(arch, "sparse")
  rdna = arch.startswith("gfx12")
  L = 32 if rdna else 64
  for name, (M, K, kinds, res, iset) in kernels.items():
    ka, kb = (kinds.split("/") * 2)[:2]
    bits = BITS[ka]
    lim = 2 if res == "bf16" else 4
    pos = np.sort(np.stack([rng.choice(4, 2, replace=False) for _ in range(M * K // 4)]).reshape(M, K // 4, 2), -1)
    vals = rng.integers(-lim, lim + 1, (M, K // 4, 2))
    Bm, Cm = rng.integers(-lim, lim + 1, (K, M)), rng.integers(-lim, lim + 1, (M, M)) * (1 if res == "bf16" else 8)
    Ad = np.zeros((M, K), np.int64)
    regs = lambda n, b: n * b // 32 // L  # registers a lane holds for n elements of b bits
    Ai = np.zeros((L, regs(M * K // 2, bits)), np.uint32)
    Bi = np.zeros((L, regs(K * M, bits)), np.uint32)
    Ii = rng.integers(0, 1 << 32, L, dtype=np.uint64).astype(np.uint32)  # (the other index sets: noise)
    a_at, b_at = (rdna4_a, rdna4_b) if rdna else (cdna_a, cdna_b)
    for i in range(M):
      for g in range(K // 4):
        for s in range(2):
          k = 4 * g + int(pos[i, g, s])
          Ad[i, k] = vals[i, g, s]
          _put(Ai, a_at(M, K, bits, i, 4 * g, s), _codes(ka, np.array([vals[i, g, s]]), arch)[0])
          _, lane, bit = (rdna4_idx if rdna else cdna_idx)(M, K, bits, i, 4 * g, s, iset)
          Ii[lane] = Ii[lane] & ~np.uint32(3 << bit) | np.uint32(pos[i, g, s] << bit)
    for k in range(K):
      for j in range(M):
        _put(Bi, b_at(M, K, bits, k, j), _codes(kb, np.array([Bm[k, j]]), arch)[0])
    nacc = M * M // L
    at = (lambda i, j: (i % 8, 16 * (i // 8) + j)) if rdna else (lambda i, j: _out_at(M, M, 1, False, 0, i, j))
    host = {"f32": np.float32, "i32": np.int32, "f16": np.float16, "bf16": np.uint16}[res]
    Ci = np.zeros((nacc, L), host)
    for i in range(M):
      for j in range(M):
        Ci[at(i, j)] = _codes("bf16", np.array([Cm[i, j]]), arch)[0] if res == "bf16" else Cm[i, j]
    out = {}
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = np.zeros_like(Ci)
      st = launch(co, name, grid=1, block=L, args=[D, Ai, Bi, Ci.copy(), Ii], checks=False)
      out[mode] = (D, st)
    (di, _), (dn, sn) = out["0"], out["force"]
    assert np.array_equal(di.view(np.uint8), dn.view(np.uint8)), name
    got = np.array([[dn[at(i, j)] for j in range(M)] for i in range(M)])
    if res == "bf16":
      got = (got.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(got.astype(np.float64), (Ad @ Bm + Cm).astype(np.float64), err_msg=name)
    assert sn.native_instructions >= 0.9 * sn.instructions, (name, sn)
  assert not native.FAILED, native.FAILED[:3]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_smfmac_matches_numpy_on_both_tiers(clang_co, monkeypatch, arch):
  _run(clang_co, monkeypatch, arch, CDNA | (CDNA4 if arch == "gfx950" else {}))


def test_swmmac_matches_numpy_on_both_tiers(clang_co, monkeypatch):
  _run(clang_co, monkeypatch, "gfx1200", RDNA4)


@pytest.mark.parametrize("arch,name,lane", [("gfx942", "f16_16x16x32", 50), ("gfx1200", "w_f16", 18)])
def test_sparse_checker_flags_an_unordered_index_pair(clang_co, monkeypatch, arch, name, lane):
  """The `sparse` checker: the guides require index 0 < index 1 in each pair; a pair (2, 1) in one lane stops the
  launch there with the same text on both tiers, and ordered pairs (random, the other sets noise) run clean."""
  from gputwin.errors import EmuCheckError
  L = 64 if arch == "gfx942" else 32
  co = clang_co(arch, "sparse")
  regs = {"gfx942": (2, 4, 4), "gfx1200": (4, 8, 8)}[arch]
  rng = np.random.default_rng(3)
  good = rng.integers(0, 1 << 16, L).astype(np.uint32) << 16  # (the other index sets: noise)
  for e in range(0, 8, 2):  # (every pair of the first set ordered)
    pairs = np.array([(a, b) for a in range(4) for b in range(a + 1, 4)])[rng.integers(0, 6, L)]
    good |= (pairs[:, 0] << 2 * e | pairs[:, 1] << 2 * e + 2).astype(np.uint32)
  args = lambda idx: [np.zeros((regs[2], L), np.float32), np.zeros((L, regs[0]), np.uint32),
                      np.zeros((L, regs[1]), np.uint32), np.zeros((regs[2], L), np.float32), idx]
  bad = good.copy()
  bad[lane] = bad[lane] & ~np.uint32(0xf0) | np.uint32(2 << 4 | 1 << 6)  # (the second pair of the lane: (2, 1))
  texts = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    launch(co, name, grid=1, block=L, args=args(good.copy()))
    want = rf"sparse index pair \(2, 1\) .*lane {lane} bits \[7:4\].*index 0 < index 1"
    with pytest.raises(EmuCheckError, match=want) as ei:
      launch(co, name, grid=1, block=L, args=args(bad))
    texts.append(str(ei.value))
  assert texts[0] == texts[1], texts
