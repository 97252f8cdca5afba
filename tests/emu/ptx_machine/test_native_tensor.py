"""Warp-level tensor instructions (wmma.load/mma/store, mma.sync) in the native tier: nvcc-compiled kernels run with
the tier off (GPUTWIN_JIT=0) and compiled at first sight (force) must give the same bits, on random operands with
NaN, infinities, subnormals and magnitudes far apart (where the exact sum is not a float64 sum), and the same error
for a fault or a partial warp. Both are also checked against numpy where its float64 matmul is exact."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import GputwinError

SRC = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>
using namespace nvcuda;

// one 16x16x16 tile per warp: A row-major (lda), B col-major (ldb), C/D row-major f32 (ldc)
extern "C" __global__ void wmma_f32(float* D, const __half* A, const __half* B, const float* C, int lda, int ldb,
                                   int ldc) {
  int w = threadIdx.x / 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(a, A + w * 16 * lda, lda);
  wmma::load_matrix_sync(b, B, ldb);
  wmma::load_matrix_sync(c, C + w * 16 * ldc, ldc, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D + w * 16 * ldc, c, ldc, wmma::mem_row_major);
}

// every lane its own base and leading dimension (PTX leaves that undefined; the tiers still agree): the native
// tier's direct path, one range check for the whole warp, must step aside for the per-element one
extern "C" __global__ void wmma_lanes(float* D, const __half* A, const __half* B, const float* C) {
  int l = threadIdx.x;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(a, A + (l & 3) * 16, 16 + 16 * (l & 1));
  wmma::load_matrix_sync(b, B, 16);
  wmma::load_matrix_sync(c, C + l, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

// 32x8x16, A col-major, B row-major, f16 accumulators (C and D column-major)
extern "C" __global__ void wmma_f16(__half* D, const __half* A, const __half* B, const __half* C) {
  wmma::fragment<wmma::matrix_a, 32, 8, 16, __half, wmma::col_major> a;
  wmma::fragment<wmma::matrix_b, 32, 8, 16, __half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 32, 8, 16, __half> c;
  wmma::load_matrix_sync(a, A, 32);
  wmma::load_matrix_sync(b, B, 8);
  wmma::load_matrix_sync(c, C, 32, wmma::mem_col_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 32, wmma::mem_col_major);
}

// bf16 operands staged in shared memory (wmma.load from .shared), 8x32x16
extern "C" __global__ void wmma_bf16(float* D, const __nv_bfloat16* A, const __nv_bfloat16* B) {
  __shared__ __align__(32) __nv_bfloat16 sa[8 * 16], sb[16 * 32];
  for (int i = threadIdx.x; i < 8 * 16; i += 32) sa[i] = A[i];
  for (int i = threadIdx.x; i < 16 * 32; i += 32) sb[i] = B[i];
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 8, 32, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 8, 32, 16, __nv_bfloat16, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 8, 32, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  wmma::load_matrix_sync(a, sa, 16);
  wmma::load_matrix_sync(b, sb, 32);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 32, wmma::mem_row_major);
}

// tf32 (the f32 bits as given: the instruction drops the low 13), 16x16x8
extern "C" __global__ void wmma_tf32(float* D, const float* A, const float* B, const float* C) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::load_matrix_sync(a, A, 8);
  wmma::load_matrix_sync(b, B, 8);
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

// s8 x u8 is not a wmma form: s8 x s8 -> s32, 16x16x16
extern "C" __global__ void wmma_s8(int* D, const signed char* A, const signed char* B, const int* C) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> c;
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

// ldmatrix .x4 and .x2.trans from .shared, stmatrix .x4.trans back: each lane's registers and the stored tiles
extern "C" __global__ void ldsm(uint32_t* regs, uint16_t* out, const uint16_t* in, int skew) {
  __shared__ __align__(16) uint16_t s[4 * 64 + 64], o[4 * 64];
  int l = threadIdx.x;
  for (int i = l; i < 4 * 64 + 64; i += 32) s[i] = in[i];
  __syncwarp();
  uint32_t r[4], t[2];
  unsigned p = (unsigned)__cvta_generic_to_shared(&s[(l / 8) * 64 + (l % 8) * 8 + skew]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(t[0]), "=r"(t[1]) : "r"(p + 128));
  unsigned q = (unsigned)__cvta_generic_to_shared(&o[(l / 8) * 64 + (l % 8) * 8]);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};"
               :: "r"(q), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
  __syncwarp();
  for (int k = 0; k < 4; k++) regs[k * 32 + l] = r[k];
  for (int k = 0; k < 2; k++) regs[(4 + k) * 32 + l] = t[k];
  for (int i = l; i < 4 * 64; i += 32) out[i] = o[i];
}

// mma.sync: each lane's fragment registers straight from memory (in[r * 32 + lane]), D's back the same way
#define MMA(name, shape, types, NA, NB, NC)                                                                     \
extern "C" __global__ void name(uint32_t* out, const uint32_t* in) {                                          \
  int l = threadIdx.x;                                                                                         \
  uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0}, c[4] = {0, 0, 0, 0}, d[4];                                      \
  for (int r = 0; r < NA; r++) a[r] = in[r * 32 + l];                                                          \
  for (int r = 0; r < NB; r++) b[r] = in[(4 + r) * 32 + l];                                                    \
  for (int r = 0; r < NC; r++) c[r] = in[(6 + r) * 32 + l];                                                    \
  MMA_ASM_##NA##NB##NC(shape types)                                                                           \
  for (int r = 0; r < NC; r++) out[r * 32 + l] = d[r];                                                         \
}
#define MMA_ASM_424(s) asm volatile("mma.sync.aligned." s " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" \
  : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),   \
    "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
#define MMA_ASM_422(s) asm volatile("mma.sync.aligned." s " {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"         \
  : "=r"(d[0]), "=r"(d[1]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]),     \
    "r"(c[1]));
MMA(mma_f16_f32, "m16n8k16.row.col", ".f32.f16.f16.f32", 4, 2, 4)
MMA(mma_f16_f16, "m16n8k16.row.col", ".f16.f16.f16.f16", 4, 2, 2)
MMA(mma_bf16, "m16n8k16.row.col", ".f32.bf16.bf16.f32", 4, 2, 4)
MMA(mma_tf32, "m16n8k8.row.col", ".f32.tf32.tf32.f32", 4, 2, 4)
MMA(mma_s8_sat, "m16n8k32.row.col.satfinite", ".s32.s8.u8.s32", 4, 2, 4)
MMA(mma_e4m3, "m16n8k32.row.col", ".f32.e4m3.e5m2.f32", 4, 2, 4)
"""


@pytest.fixture(scope="module")
def ptx(tmp_path_factory):
  if not shutil.which("nvcc"):
    pytest.skip("nvcc (CUDA 13) not installed")
  d = tmp_path_factory.mktemp("native_tensor")
  cu = d / f"t{hashlib.sha1(SRC.encode()).hexdigest()[:8]}.cu"
  cu.write_text(SRC)
  out = d / "t.ptx"
  r = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", "-O3", str(cu), "-o", str(out)], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  return out.read_text()


def tiers(monkeypatch, ptx: str, kernel: str, args: list, out: int, block: int = 32, native: float = 0.9,
          checks: bool = False):
  """The output buffer `out` after a launch with the tier off and with it compiled at first sight: both must hold
  the same bits, and the latter must have run at least a `native` share of the instructions natively."""
  got = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    st = launch(ptx, kernel, grid=1, block=block, args=a, arch="sm_90", checks=checks)
    got.append((a[out], st))
  (ref, _), (nat, st) = got
  assert ref.tobytes() == nat.tobytes(), f"{kernel}: the tiers differ"
  assert st.native_instructions >= native * st.instructions
  return ref


def wild(rng, shape, dtype, specials=True) -> np.ndarray:
  """Random values over most of the type's exponent range, some subnormal, with a few NaN/inf/-0."""
  info = np.finfo(dtype)
  e = rng.integers(int(np.log2(info.smallest_subnormal)) if dtype != np.float32 else -140, info.maxexp - 8, shape)
  x = (rng.standard_normal(shape) * np.exp2(e.astype(np.float64))).astype(dtype)
  if specials:
    flat = x.reshape(-1)
    k = rng.choice(flat.size, 6, replace=False)
    flat[k] = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, info.smallest_subnormal], dtype)
  return x


def tame(rng, shape, dtype) -> np.ndarray:
  """Small dyadic values (float64 sums of their products are exact: numpy's matmul is then the oracle)."""
  return (rng.integers(-8, 9, shape) / 8).astype(dtype)


def test_wmma_f16_f32_tiers_agree(ptx, monkeypatch):
  rng = np.random.default_rng(1)
  A, B, C = wild(rng, (64, 24), np.float16), wild(rng, (16, 20), np.float16), wild(rng, (64, 16), np.float32)
  D = np.zeros((64, 16), np.float32)
  tiers(monkeypatch, ptx, "wmma_f32", [D, A, B, C, np.int32(24), np.int32(20), np.int32(16)], 0, block=128)
  # no NaN or infinities, magnitudes far apart: the exact sums, rounded once
  A, B = wild(rng, (64, 16), np.float16, False), wild(rng, (16, 16), np.float16, False)
  C = wild(rng, (64, 16), np.float32, False)
  tiers(monkeypatch, ptx, "wmma_f32", [D, A, B, C, np.int32(16), np.int32(16), np.int32(16)], 0, block=128)
  A, B, C = tame(rng, (64, 16), np.float16), tame(rng, (16, 16), np.float16), tame(rng, (64, 16), np.float32)
  got = tiers(monkeypatch, ptx, "wmma_f32", [D, A, B, C, np.int32(16), np.int32(16), np.int32(16)], 0, block=128)
  want = np.concatenate([A[16 * w:16 * w + 16].astype(np.float64) @ B.astype(np.float64).T for w in range(4)]) + C
  np.testing.assert_array_equal(got, want.astype(np.float32))


def test_wmma_sums_at_the_edge_of_a_double(ptx, monkeypatch):
  """Rows whose exact sum needs just over 53 bits, where a float64 sum rounds and that rounding moves the f32 result:
  products 2**-48, 64, 2**-18 (in that k order) sum to 64 * (1 + 2**-24 + 2**-54), just above the f32 tie between 64
  and 64 + 2**-17, so IEEE's single rounding gives 64 + 2**-17, while a float64 running sum (64 + 2**-48 rounds to 64)
  lands on the tie and gives 64. The native tier must see that its sum is inexact: the terms' span does not fit its
  window (2**-48 .. 16 * 8 * 8), and its step check must catch the first step although 64 - 2**-48 rounds back to
  64 (the small term came first). Other rows: the same terms in other orders and signs, and exact ones."""
  A, B = np.zeros((64, 16), np.float16), np.zeros((16, 16), np.float16)
  C = np.zeros((64, 16), np.float32)
  roots = np.float16([2.0**-24, 8, 2.0**-9])  # (each product A[m, k] * B[k, n] is a root squared)
  orders = [(0, 1, 2), (1, 0, 2), (2, 1, 0), (0, 2, 1)]
  for g, order in enumerate(orders):  # k = 3g .. 3g + 2: the three terms in this order (B col-major: B[n, k])
    B[:, 3 * g:3 * g + 3] = roots[list(order)]
  for m in range(8):
    g = m // 2
    A[m, 3 * g:3 * g + 3] = (1 if m % 2 == 0 else -1) * roots[list(orders[g])]
  A[8:16] = (np.arange(8 * 16).reshape(8, 16) % 7 - 3) / 4  # exact rows: numpy's float64 matmul is exact
  C[6:8, 0] = 2.0**-60  # rows 6, 7, column 0: one more term, far below
  D = np.zeros((64, 16), np.float32)
  got = tiers(monkeypatch, ptx, "wmma_f32", [D, A, B, C, np.int32(16), np.int32(16), np.int32(16)], 0, block=128)
  for m in range(8):
    sign = 1 if m % 2 == 0 else -1
    np.testing.assert_array_equal(got[m], np.float32(sign * (64 + 2.0**-17)), err_msg=f"row {m}")
  want = A[8:16].astype(np.float64) @ B.astype(np.float64).T + C[8:16]
  np.testing.assert_array_equal(got[8:16], want.astype(np.float32))


def test_wmma_lanes_apart(ptx, monkeypatch):
  rng = np.random.default_rng(5)
  A, B, C = wild(rng, 1024, np.float16, False), wild(rng, 256, np.float16, False), wild(rng, 512, np.float32, False)
  tiers(monkeypatch, ptx, "wmma_lanes", [np.zeros(256, np.float32), A, B, C], 0)


def test_wmma_f16_accumulators(ptx, monkeypatch):
  rng = np.random.default_rng(2)
  A, B, C = wild(rng, 32 * 16, np.float16), wild(rng, 16 * 8, np.float16), wild(rng, 32 * 8, np.float16)
  tiers(monkeypatch, ptx, "wmma_f16", [np.zeros(32 * 8, np.float16), A, B, C], 0)
  A, B, C = wild(rng, 32 * 16, np.float16, False), wild(rng, 16 * 8, np.float16, False), tame(rng, 256, np.float16)
  tiers(monkeypatch, ptx, "wmma_f16", [np.zeros(32 * 8, np.float16), A, B, C], 0)


def test_wmma_bf16_shared_tf32_s8(ptx, monkeypatch):
  rng = np.random.default_rng(3)
  bf = lambda x: (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
  A, B = bf(wild(rng, 8 * 16, np.float32)), bf(wild(rng, 16 * 32, np.float32, False))
  tiers(monkeypatch, ptx, "wmma_bf16", [np.zeros(8 * 32, np.float32), A, B], 0)
  A, B, C = wild(rng, 16 * 8, np.float32), wild(rng, 16 * 8, np.float32, False), wild(rng, 256, np.float32)
  # (nvcc leaves this kernel's wmma.load/store generic: they stay interpreted, the mma runs natively)
  tiers(monkeypatch, ptx, "wmma_tf32", [np.zeros(256, np.float32), A, B, C], 0, native=8 / 12)
  A, B = rng.integers(-128, 128, 256).astype(np.int8), rng.integers(-128, 128, 256).astype(np.int8)
  C = rng.integers(-2**31, 2**31, 256).astype(np.int32)
  got = tiers(monkeypatch, ptx, "wmma_s8", [np.zeros(256, np.int32), A, B, C], 0)
  want = (A.reshape(16, 16).astype(np.int64) @ B.reshape(16, 16).astype(np.int64).T + C.reshape(16, 16))
  np.testing.assert_array_equal(got, (want & 0xffffffff).astype(np.uint32).view(np.int32).reshape(-1))


def test_tensor_blocks_run_natively_with_checkers(ptx, monkeypatch):
  """With the checkers on (launch's default) tensor blocks run natively too: the fragments they write count as
  written for the uninit checker (a read of one later is no error), their full member mask is whole-warp."""
  rng = np.random.default_rng(4)
  A, B = rng.integers(-128, 128, 256).astype(np.int8), rng.integers(-128, 128, 256).astype(np.int8)
  C = rng.integers(-2**31, 2**31, 256).astype(np.int32)
  got = tiers(monkeypatch, ptx, "wmma_s8", [np.zeros(256, np.int32), A, B, C], 0, checks=True)
  want = (A.reshape(16, 16).astype(np.int64) @ B.reshape(16, 16).astype(np.int64).T + C.reshape(16, 16))
  np.testing.assert_array_equal(got, (want & 0xffffffff).astype(np.uint32).view(np.int32).reshape(-1))
  rng = np.random.default_rng(1)
  A, B, C = tame(rng, (64, 16), np.float16), tame(rng, (16, 16), np.float16), tame(rng, (64, 16), np.float32)
  D = np.zeros((64, 16), np.float32)
  tiers(monkeypatch, ptx, "wmma_f32", [D, A, B, C, np.int32(16), np.int32(16), np.int32(16)], 0, block=128,
        checks=True)
  src = rng.integers(0, 2**32, 10 * 32, dtype=np.uint64).astype(np.uint32)  # (mma.sync: its D is stored by st.global)
  for kernel in ("mma_s8_sat", "mma_f16_f32"):
    tiers(monkeypatch, ptx, kernel, [np.zeros(4 * 32, np.uint32), src], 0, checks=True)


@pytest.mark.parametrize("kernel", ["mma_f16_f32", "mma_f16_f16", "mma_bf16", "mma_tf32", "mma_s8_sat", "mma_e4m3"])
def test_mma_sync_tiers_agree(ptx, monkeypatch, kernel):
  """Random register bits: every encoding of the element types (NaNs, infinities, subnormals, both zeros)."""
  rng = np.random.default_rng(zlib.crc32(kernel.encode()))
  src = rng.integers(0, 2**32, 10 * 32, dtype=np.uint64).astype(np.uint32)
  tiers(monkeypatch, ptx, kernel, [np.zeros(4 * 32, np.uint32), src], 0)
  # and small exponents: far fewer NaN/inf, more exact and inexact finite sums
  keep = {"mma_f16_f32": 0x3fff3fff, "mma_f16_f16": 0x3fff3fff, "mma_bf16": 0x3fff3fff, "mma_tf32": 0x3fffffff,
          "mma_s8_sat": 0xffffffff, "mma_e4m3": 0x3f3f3f3f}[kernel]
  tiers(monkeypatch, ptx, kernel, [np.zeros(4 * 32, np.uint32), src & np.uint32(keep)], 0)


def test_faults_and_partial_warps_say_the_same(ptx, monkeypatch):
  """A wmma.load past the end of a buffer (in the third warp), and a warp of 16 threads: the same error text."""
  rng = np.random.default_rng(4)
  A, B, C = tame(rng, (40, 16), np.float16), tame(rng, (16, 16), np.float16), tame(rng, (64, 16), np.float32)
  D = np.zeros((64, 16), np.float32)
  args = [D, A, B, C, np.int32(16 << 12), np.int32(16), np.int32(16)]
  for block in (128, 16):
    msgs = []
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      with pytest.raises(GputwinError) as e:
        launch(ptx, "wmma_f32", grid=1, block=block, args=list(args), arch="sm_90", checks=False)
      msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    assert ("fault" in msgs[0] or "address" in msgs[0]) if block == 128 else ".sync.aligned" in msgs[0]


def test_ldmatrix_stmatrix(ptx, monkeypatch):
  """Fragments against the manual's figure (lane l holds row l / 4, columns 2(l % 4) and 2(l % 4) + 1 of each 8x8
  matrix, transposed with .trans), and a row address off its 16-byte alignment: the same error on both tiers."""
  rng = np.random.default_rng(5)
  src = rng.integers(0, 2**16, 4 * 64 + 64).astype(np.uint16)
  args = [np.zeros(6 * 32, np.uint32), np.zeros(4 * 64, np.uint16), src, np.int32(0)]
  regs = tiers(monkeypatch, ptx, "ldsm", args, 0, native=0.6)
  out = tiers(monkeypatch, ptx, "ldsm", args, 1, native=0.6)
  m = src[:256].reshape(4, 8, 8).astype(np.uint32)
  lane = np.arange(32)
  r, c = lane // 4, 2 * (lane % 4)
  for k in range(4):
    np.testing.assert_array_equal(regs[k * 32:(k + 1) * 32], m[k, r, c] | m[k, r, c + 1] << 16)
  t = src[64:192].reshape(2, 8, 8).astype(np.uint32)  # (.x2 at p + 128 bytes: matrices 1 and 2, transposed)
  for k in range(2):
    np.testing.assert_array_equal(regs[(4 + k) * 32:(5 + k) * 32], t[k, c, r] | t[k, c + 1, r] << 16)
  np.testing.assert_array_equal(out.reshape(4, 8, 8), m.transpose(0, 2, 1).astype(np.uint16))
  msgs = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    with pytest.raises(GputwinError) as e:
      launch(ptx, "ldsm", grid=1, block=32, args=args[:3] + [np.int32(4)], arch="sm_90", checks=False)
    msgs.append(str(e.value))
  assert msgs[0] == msgs[1] and "16-aligned" in msgs[0]
