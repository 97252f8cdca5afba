// CDNA matrix instructions of several blocks, f64, and the broadcast controls (CBSZ/ABID/BLGP), as clang-22 emits
// them. Each kernel (one wave64) loads A, B and C from register images the test builds (element -> register and
// lane by AMD's Matrix Instruction Calculator: tests/emu/test_mfma_layouts.py), runs one instruction and stores D's
// registers: image[v * 64 + lane] is register v of lane l; A and B: lane l's elements, in order.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define MX(NAME, TA, TE, NR, CALL)                                                                              \
  __kernel void NAME(__global TE *D, __global const TA *A, __global const TA *B, __global const TE *C) {         \
    typedef TE vec __attribute__((ext_vector_type(NR)));                                                        \
    int l = __builtin_amdgcn_workitem_id_x();                                                                   \
    TA a = A[l], b = B[l];                                                                                      \
    vec c;                                                                                                      \
    for (int v = 0; v < NR; v++) c[v] = C[v * 64 + l];                                                          \
    vec d = CALL;                                                                                               \
    for (int v = 0; v < NR; v++) D[v * 64 + l] = d[v];                                                          \
  }

#if defined(__gfx942__) || defined(__gfx950__)
MX(f32_4x4x1, float, float, 4, __builtin_amdgcn_mfma_f32_4x4x1f32(a, b, c, 0, 0, 0))
MX(f32_16x16x1, float, float, 16, __builtin_amdgcn_mfma_f32_16x16x1f32(a, b, c, 0, 0, 0))
MX(f32_32x32x1, float, float, 32, __builtin_amdgcn_mfma_f32_32x32x1f32(a, b, c, 0, 0, 0))
MX(f16_4x4x4, half4, float, 4, __builtin_amdgcn_mfma_f32_4x4x4f16(a, b, c, 0, 0, 0))
MX(f16_16x16x4, half4, float, 16, __builtin_amdgcn_mfma_f32_16x16x4f16(a, b, c, 0, 0, 0))
MX(f16_32x32x4, half4, float, 32, __builtin_amdgcn_mfma_f32_32x32x4f16(a, b, c, 0, 0, 0))
MX(bf16_4x4x4, short4, float, 4, __builtin_amdgcn_mfma_f32_4x4x4bf16_1k(a, b, c, 0, 0, 0))
MX(bf16_16x16x4, short4, float, 16, __builtin_amdgcn_mfma_f32_16x16x4bf16_1k(a, b, c, 0, 0, 0))
MX(bf16_32x32x4, short4, float, 32, __builtin_amdgcn_mfma_f32_32x32x4bf16_1k(a, b, c, 0, 0, 0))
MX(i8_4x4x4, int, int, 4, __builtin_amdgcn_mfma_i32_4x4x4i8(a, b, c, 0, 0, 0))
MX(i8_16x16x4, int, int, 16, __builtin_amdgcn_mfma_i32_16x16x4i8(a, b, c, 0, 0, 0))
MX(i8_32x32x4, int, int, 32, __builtin_amdgcn_mfma_i32_32x32x4i8(a, b, c, 0, 0, 0))
MX(f64_16x16x4, double, double, 4, __builtin_amdgcn_mfma_f64_16x16x4f64(a, b, c, 0, 0, 0))
MX(f64_4x4x4, double, double, 2, (vec)(__builtin_amdgcn_mfma_f64_4x4x4f64(a, b, c[0], 0, 0, 0), 0.0))
// the broadcast controls: CBSZ, ABID, BLGP (f64: BLGP is NEG of A, B, C)
MX(f32_4x4x1_c2a1b3, float, float, 4, __builtin_amdgcn_mfma_f32_4x4x1f32(a, b, c, 2, 1, 3))
MX(f32_4x4x1_c4a9b7, float, float, 4, __builtin_amdgcn_mfma_f32_4x4x1f32(a, b, c, 4, 9, 7))
MX(f16_16x16x4_c1a1b5, half4, float, 16, __builtin_amdgcn_mfma_f32_16x16x4f16(a, b, c, 1, 1, 5))
MX(f16_16x16x4_c2a3b1, half4, float, 16, __builtin_amdgcn_mfma_f32_16x16x4f16(a, b, c, 2, 3, 1))
MX(f32_32x32x1_c1a1b2, float, float, 32, __builtin_amdgcn_mfma_f32_32x32x1f32(a, b, c, 1, 1, 2))
MX(i8_16x16x4_c0a0b6, int, int, 16, __builtin_amdgcn_mfma_i32_16x16x4i8(a, b, c, 0, 0, 6))
MX(f16_16x16x16_b4, half4, float, 4, __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 4))
MX(f64_16x16x4_neg5, double, double, 4, __builtin_amdgcn_mfma_f64_16x16x4f64(a, b, c, 0, 0, 5))
MX(f64_4x4x4_c2a2, double, double, 2, (vec)(__builtin_amdgcn_mfma_f64_4x4x4f64(a, b, c[0], 2, 2, 0), 0.0))
#endif
