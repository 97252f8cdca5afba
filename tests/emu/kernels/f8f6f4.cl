// gfx950's F8F6F4 MFMA (A's format by CBSZ, B's by BLGP: 0 fp8, 1 bf8, 2 fp6, 3 bf6, 4 fp4), as clang-22 selects it
// from the scaled builtin with zero scales. Lane l loads its A and B words (32 bytes: 32 codes of 8, 6 or 4 bits
// packed from bit 0 on, the rest unused) from images the test builds, and C/D register v of lane l (image[v*64 + l]).
typedef int v8i __attribute__((ext_vector_type(8)));
typedef float v4f __attribute__((ext_vector_type(4)));
typedef float v16f __attribute__((ext_vector_type(16)));

#define F8F6F4(NAME, VEC, NR, BUILTIN, FA, FB)                                                                      \
  __kernel void NAME(__global float *D, __global const v8i *A, __global const v8i *B, __global const float *C) {  \
    int l = __builtin_amdgcn_workitem_id_x();                                                                   \
    VEC c;                                                                                                      \
    for (int v = 0; v < NR; v++) c[v] = C[v * 64 + l];                                                          \
    VEC d = BUILTIN(A[l], B[l], c, FA, FB, 0, 0, 0, 0);                                                         \
    for (int v = 0; v < NR; v++) D[v * 64 + l] = d[v];                                                          \
  }

#if defined(__gfx950__)
F8F6F4(m16_fp8_fp8, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 0, 0)
F8F6F4(m16_bf8_fp8, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 1, 0)
F8F6F4(m16_fp4_fp4, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 4, 4)
F8F6F4(m32_fp8_bf8, v16f, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 0, 1)
F8F6F4(m32_fp4_fp4, v16f, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 4, 4)
F8F6F4(m16_fp6_fp6, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 2, 2)
F8F6F4(m16_fp8_fp4, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 0, 4)
F8F6F4(m16_bf6_bf8, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 3, 1)
F8F6F4(m32_fp4_fp6, v16f, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 4, 2)
F8F6F4(m32_bf8_bf6, v16f, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 1, 3)
#endif

// The scaled form with per-lane E8M0 scales (clang-22: V_MFMA_SCALE_*): scale VGPR words SA[l] and SB[l], the byte
// OP_SEL picks (the builtin's opsel arguments: SELA, SELB).
#define SCALED(NAME, VEC, NR, BUILTIN, FA, FB, SELA, SELB)                                                          \
  __kernel void NAME(__global float *D, __global const v8i *A, __global const v8i *B, __global const float *C,     \
                     __global const int *SA, __global const int *SB) {                                             \
    int l = __builtin_amdgcn_workitem_id_x();                                                                   \
    VEC c;                                                                                                      \
    for (int v = 0; v < NR; v++) c[v] = C[v * 64 + l];                                                          \
    VEC d = BUILTIN(A[l], B[l], c, FA, FB, SELA, SA[l], SELB, SB[l]);                                           \
    for (int v = 0; v < NR; v++) D[v * 64 + l] = d[v];                                                          \
  }

#if defined(__gfx950__)
SCALED(s16_fp8_fp8, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 0, 0, 0, 0)
SCALED(s16_fp4_bf8_b1b2, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 4, 1, 1, 2)
SCALED(s16_fp6_fp8_b3b0, v4f, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 2, 0, 3, 0)
SCALED(s32_bf8_fp4_b2b3, v16f, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 1, 4, 2, 3)
SCALED(s32_bf6_fp6, v16f, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 3, 2, 0, 1)
#endif
