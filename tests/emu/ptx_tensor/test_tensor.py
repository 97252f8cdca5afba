"""Warp-wide matrix instructions (mma.sync, ldmatrix/stmatrix, wmma) of our CUDA kernels (kernels/tensor.cu) run on
the PTX emulator and checked against numpy (and Fractions): fragment layouts as PTX ISA 9.0 9.7.14.5 draws them,
one exact sum rounded once per instruction (gputwin/emu/ptx/tensor.py)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import EmuError

F32, F64 = np.float32, np.float64


def steps(A, B, C, k):
  """C + A @ B one mma of depth k at a time, each exact in float64 (the operands' products and these sums are) and
  rounded once to f32."""
  C = C.astype(F32)
  for k0 in range(0, A.shape[1], k):
    C = (C.astype(F64) + A[:, k0:k0 + k].astype(F64) @ B[k0:k0 + k].astype(F64)).astype(F32)
  return C


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ldmatrix_mma_f16_gemm(ptx, arch):
  rng = np.random.default_rng(1)
  M, N, K = 32, 32, 48
  A = rng.standard_normal((M, K)).astype(np.float16)
  B = rng.standard_normal((K, N)).astype(np.float16)
  C = np.full((M, N), np.nan, F32)
  launch(ptx("tensor", arch), "ldmatrix_mma_f16", grid=M * N // 128 // 4, block=128,
         args=[C, A, np.ascontiguousarray(B.T), np.int32(M), np.int32(N), np.int32(K)], arch=arch)
  np.testing.assert_array_equal(C, steps(A, B, np.zeros((M, N)), 16))


def test_ldmatrix_trans_stmatrix(ptx):
  x = np.arange(256, dtype=np.uint16) * 7 + 3
  out = np.zeros(320, np.uint16)
  launch(ptx("tensor"), "ldmatrix_trans", grid=1, block=32, args=[out, x])
  mats = x.reshape(4, 8, 8)
  np.testing.assert_array_equal(out[:256].reshape(4, 8, 8), mats.transpose(0, 2, 1))
  lane = np.arange(32)  # .trans: lane l holds rows 2(l%4), 2(l%4)+1 of column l/4 of the stored matrix
  np.testing.assert_array_equal(out[256:288], mats[0, 2 * (lane % 4), lane // 4])
  np.testing.assert_array_equal(out[288:], mats[0, 2 * (lane % 4) + 1, lane // 4])


def test_ldmatrix_x1_generic_and_stmatrix_trans(ptx):
  x = np.arange(128, dtype=np.uint16) * 5 + 1
  frag, out = np.zeros(32, np.uint32), np.zeros(128, np.uint16)
  launch(ptx("tensor"), "ldmatrix_x1_x2", grid=1, block=32, args=[frag, out, x])
  mats, lane = x.reshape(2, 8, 8), np.arange(32)
  row, col = lane // 4, 2 * (lane % 4)  # lane l: row l/4, columns 2(l%4) and 2(l%4)+1 (low half first)
  np.testing.assert_array_equal(frag, mats[1, row, col] | mats[1, row, col + 1].astype(np.uint32) << 16)
  np.testing.assert_array_equal(out.reshape(2, 8, 8), mats.transpose(0, 2, 1))


@pytest.mark.parametrize("sat", [0, 1])
def test_mma_s8(ptx, sat):
  rng = np.random.default_rng(2)
  A = rng.integers(-128, 128, (16, 32), dtype=np.int8)
  B = rng.integers(-128, 128, (32, 8), dtype=np.int8)
  Cin = rng.integers(-1000, 1000, (16, 8)).astype(np.int32)
  Cin[0, :4] = [2**31 - 1, -2**31, 2**31 - 100, -2**31 + 100]  # row 0 of A @ B: 516128, -520192, 4064, -4064
  A[0, :] = 127
  B[:, 0], B[:, 1], B[:, 2], B[:, 3] = 127, -128, 1, -1
  D = np.zeros((16, 8), np.int32)
  launch(ptx("tensor"), "mma_s8", grid=1, block=32, args=[D, A, B, Cin, np.int32(sat)])
  exact = A.astype(np.int64) @ B.astype(np.int64) + Cin
  want = np.clip(exact, -2**31, 2**31 - 1) if sat else (exact & 0xffffffff).astype(np.uint32).view(np.int32)
  assert (exact != np.clip(exact, -2**31, 2**31 - 1)).any()  # the corner cases do overflow
  np.testing.assert_array_equal(D, want)


def test_mma_tf32_ignores_low_bits(ptx):
  """Our documented reading of a .tf32 register (tensor.py): the f32 bits without the low 13."""
  rng = np.random.default_rng(3)
  A = rng.standard_normal((16, 8)).astype(F32)
  B = rng.standard_normal((8, 8)).astype(F32)
  A.view(np.uint32)[...] |= 0x1fff  # every bit below tf32's 10-bit mantissa set
  B.view(np.uint32)[...] |= 0x1fff
  D = np.zeros((16, 8), F32)
  launch(ptx("tensor"), "mma_tf32", grid=1, block=32, args=[D, A, B])
  tf32 = lambda x: (x.view(np.uint32) & np.uint32(0xffffe000)).view(F32)
  want = (tf32(A).astype(F64) @ tf32(B).astype(F64)).astype(F32)
  assert not np.array_equal(want, (A.astype(F64) @ B.astype(F64)).astype(F32))
  np.testing.assert_array_equal(D, want)


def test_mma_f64_exact_sum_rounded_once(ptx):
  rng = np.random.default_rng(4)
  A, B, C = rng.standard_normal((8, 4)), rng.standard_normal((4, 8)), rng.standard_normal((8, 8))
  A[0] = [1.0, 2.0**-60, -1.0, 2.0**-60]  # left to right in doubles: 2**-60 lost twice; exact: 2**-59 survives
  B[:, 0], C[0, 0] = 1.0, 0.0
  D = np.zeros((8, 8))
  launch(ptx("tensor"), "mma_f64", grid=1, block=32, args=[D, A, B, C])
  want = np.array([[float(sum((Fraction(A[i, k]) * Fraction(B[k, j]) for k in range(4)), Fraction(C[i, j])))
                    for j in range(8)] for i in range(8)])
  assert want[0, 0] == 2.0**-59
  np.testing.assert_array_equal(D, want)


def e4m3(b):
  """PTX ISA 9.0 5.2.3 .e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal."""
  b = b.astype(np.int64)
  e, f = (b >> 3) & 15, b & 7
  mag = np.where(e == 0, f / 8 * 2.0**-6, (1 + f / 8) * 2.0**(e - 7))
  return np.where(b >> 7, -mag, mag)


def test_mma_e4m3(ptx):
  rng = np.random.default_rng(5)
  A = rng.integers(0, 256, (16, 32)).astype(np.uint8)
  B = rng.integers(0, 256, (32, 8)).astype(np.uint8)
  A[(A & 0x7f) == 0x7f] = 0x3f  # no NaN encodings
  B[(B & 0x7f) == 0x7f] = 0x41
  D = np.zeros((16, 8), F32)
  launch(ptx("tensor"), "mma_e4m3", grid=1, block=32, args=[D, A, B])
  np.testing.assert_array_equal(D, (e4m3(A) @ e4m3(B)).astype(F32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_wmma_f16_gemm(ptx, arch):
  rng = np.random.default_rng(6)
  M, N, K = 32, 48, 32
  A = rng.standard_normal((M, K)).astype(np.float16)
  B = rng.standard_normal((K, N)).astype(np.float16)
  C = rng.standard_normal((M, N)).astype(F32)
  want = steps(A, B, C, 16) * F32(0.5)
  launch(ptx("tensor", arch), "wmma_f16", grid=M * N // 256 // 2, block=64,
         args=[C, A, np.ascontiguousarray(B.T), np.int32(M), np.int32(N), np.int32(K)], arch=arch)
  np.testing.assert_array_equal(C, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_wmma_bf16_from_shared_memory(ptx, arch):
  rng = np.random.default_rng(8)
  K = 48
  bf16 = lambda x: (x.astype(F32).view(np.uint32) & np.uint32(0xffff0000)).view(F32)  # exact bf16 values
  A, B = bf16(rng.standard_normal((16, K))), bf16(rng.standard_normal((K, 16)))
  hi = lambda x: (x.view(np.uint32) >> 16).astype(np.uint16)
  C = np.zeros((16, 16), F32)
  launch(ptx("tensor", arch), "wmma_bf16_shared", grid=1, block=32, args=[C, hi(A), hi(B), np.int32(K)], arch=arch)
  np.testing.assert_array_equal(C.T, steps(A, B, np.zeros((16, 16)), 16))  # stored column-major


def test_mma_rounds_once():
  """1 + sixteen products of 2**-25: f32 additions one at a time would never move 1.0; the exact sum does."""
  text = PTX_ROUND
  D = np.zeros(128, F32)
  launch(text, "round_once", grid=1, block=32, args=[D])
  assert (D == F32(1 + 2.0**-21)).all()


def test_stmatrix_needs_sm90(ptx):
  with pytest.raises(EmuError, match="sm_90"):
    launch(ptx("tensor", "sm_80"), "ldmatrix_trans", grid=1, block=32,
           args=[np.zeros(320, np.uint16), np.zeros(256, np.uint16)], arch="sm_80")


def test_mma_needs_whole_warp(ptx):
  with pytest.raises(EmuError, match="every thread of the warp"):
    launch(ptx("tensor"), "mma_tf32", grid=1, block=16,
           args=[np.zeros((16, 8), F32), np.zeros((16, 8), F32), np.zeros((8, 8), F32)])


# m16n8k16 f16 -> f32 with A = 2**-13 everywhere, B = 2**-12, C = 1.0: each product is 2**-25 (below half an ulp of
# 1.0f), the exact sum 1 + 2**-21. Each lane stores its 4 accumulator elements.
PTX_ROUND = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry round_once(.param .u64 d) {
  .reg .b32 %r<4>; .reg .f32 %f<5>; .reg .b64 %rd<4>;
  mov.b32 %r1, 0x08000800;
  mov.b32 %r2, 0x0c000c00;
  mov.f32 %f1, 0f3F800000;
  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r1,%r1,%r1}, {%r2,%r2}, {%f1,%f1,%f1,%f1};
  ld.param.u64 %rd1, [d];
  mov.u32 %r3, %tid.x;
  mul.wide.u32 %rd2, %r3, 16;
  add.u64 %rd3, %rd1, %rd2;
  st.global.v4.f32 [%rd3], {%f1,%f2,%f3,%f4};
  ret;
}
"""


@pytest.mark.parametrize("inst, arch, match", [
  ("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4,%f1,%f2,%f3,%f4}, {%r1,%r1}, {%r1,%r1}, "
   "{%f1,%f2,%f3,%f4,%f1,%f2,%f3,%f4};", "sm_90", "no mma.sync m8n8k4"),  # the quad-pair f16 form: not modelled
  ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%f1,%f2,%f3,%f4}, {%r1,%r1,%r1,%r1}, {%r1,%r1}, "
   "{%f1,%f2,%f3,%f4};", "sm_80", "needs sm_89"),
])
def test_mma_errors(inst, arch, match):
  text = f""".version 8.7
.target {arch}
.address_size 64
.visible .entry k() {{
  .reg .b32 %r<2>; .reg .f32 %f<5>;
  mov.b32 %r1, 0;
  {inst}
  ret;
}}
"""
  with pytest.raises(EmuError, match=match):
    launch(text, "k", grid=1, block=32, args=[], arch=arch)
