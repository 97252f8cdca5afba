// FP8 (E4M3: OCP on gfx950/gfx12, FNUZ on gfx942) through the hardware conversions, as clang-22 selects them from
// the target builtins: each pair of floats packed to two 8-bit values (round to nearest even), then widened back.
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())
__kernel void roundtrip(__global float *y, __global const float *x) {
  int g = GID;
  int packed = __builtin_amdgcn_cvt_pk_fp8_f32(x[2 * g], x[2 * g + 1], 0, false);
  y[2 * g] = __builtin_amdgcn_cvt_f32_fp8(packed, 0);
  y[2 * g + 1] = __builtin_amdgcn_cvt_f32_fp8(packed, 1);
}

#if defined(__gfx942__) || defined(__gfx950__)
// One wave: D = A x B + C (16x16, f32, row-major) with V_MFMA_F32_16X16X32_FP8_FP8; A (16x32) and B (32x16) are
// row-major 8-bit codes. Lane l holds row/column l % 16, k = 8 * (l / 16) + byte; its D register v is row
// 4 * (l / 16) + v (AMD Instinct MI300 ISA, "Matrix fused multiply-add").
__kernel void mfma_fp8(__global float *D, __global const uchar *A, __global const uchar *B, __global const float *C) {
  int l = __builtin_amdgcn_workitem_id_x(), r = l % 16, k0 = 8 * (l / 16), m0 = 4 * (l / 16);
  long a = 0, b = 0;
  for (int e = 0; e < 8; e++) {
    a |= (long)A[r * 32 + k0 + e] << (8 * e);
    b |= (long)B[(k0 + e) * 16 + r] << (8 * e);
  }
  float4 c = (float4)(C[m0 * 16 + r], C[(m0 + 1) * 16 + r], C[(m0 + 2) * 16 + r], C[(m0 + 3) * 16 + r]);
  float4 d = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a, b, c, 0, 0, 0);
  D[m0 * 16 + r] = d.s0;
  D[(m0 + 1) * 16 + r] = d.s1;
  D[(m0 + 2) * 16 + r] = d.s2;
  D[(m0 + 3) * 16 + r] = d.s3;
}
#endif
