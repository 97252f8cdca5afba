// Sparse matrix instructions (CDNA3/CDNA4 SMFMAC, RDNA4 SWMMAC) as clang-22 emits them. Each kernel (one wave) loads
// A, B, the accumulator and the sparse indices from register images the test builds (tests/emu/test_sparse_matrix.py:
// where each element and index sits, by AMD's Matrix Instruction Calculator), runs one instruction and stores D:
// image[v * WAVE + lane] is element v of lane l's accumulator vector; A and B: lane l's elements, in order.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

typedef half half4 __attribute__((ext_vector_type(4)));
typedef half half8 __attribute__((ext_vector_type(8)));
typedef half half16 __attribute__((ext_vector_type(16)));
typedef short short4 __attribute__((ext_vector_type(4)));
typedef short short8 __attribute__((ext_vector_type(8)));
typedef short short16 __attribute__((ext_vector_type(16)));
typedef int int2 __attribute__((ext_vector_type(2)));
typedef int int4 __attribute__((ext_vector_type(4)));
typedef int int8 __attribute__((ext_vector_type(8)));

#define SP(NAME, WAVE, TA, TB, TE, NR, CALL)                                                                       \
  __kernel void NAME(__global TE *D, __global const TA *A, __global const TB *B, __global const TE *C,           \
                     __global const int *I) {                                                                    \
    typedef TE vec __attribute__((ext_vector_type(NR)));                                                         \
    int l = __builtin_amdgcn_workitem_id_x();                                                                    \
    TA a = A[l];                                                                                                 \
    TB b = B[l];                                                                                                 \
    int ix = I[l];                                                                                               \
    vec c;                                                                                                       \
    for (int v = 0; v < NR; v++) c[v] = C[v * WAVE + l];                                                         \
    vec d = CALL;                                                                                                \
    for (int v = 0; v < NR; v++) D[v * WAVE + l] = d[v];                                                         \
  }

#if defined(__gfx942__) || defined(__gfx950__)
SP(f16_16x16x32, 64, half4, half8, float, 4, __builtin_amdgcn_smfmac_f32_16x16x32_f16(a, b, c, ix, 0, 0))
SP(f16_32x32x16, 64, half4, half8, float, 16, __builtin_amdgcn_smfmac_f32_32x32x16_f16(a, b, c, ix, 0, 0))
SP(bf16_16x16x32, 64, short4, short8, float, 4, __builtin_amdgcn_smfmac_f32_16x16x32_bf16(a, b, c, ix, 0, 0))
SP(i8_16x16x64, 64, int2, int4, int, 4, __builtin_amdgcn_smfmac_i32_16x16x64_i8(a, b, c, ix, 0, 0))
SP(i8_32x32x32, 64, int2, int4, int, 16, __builtin_amdgcn_smfmac_i32_32x32x32_i8(a, b, c, ix, 0, 0))
SP(fp8_16x16x64, 64, int2, int4, float, 4, __builtin_amdgcn_smfmac_f32_16x16x64_fp8_fp8(a, b, c, ix, 0, 0))
SP(bf8fp8_32x32x32, 64, int2, int4, float, 16, __builtin_amdgcn_smfmac_f32_32x32x32_bf8_fp8(a, b, c, ix, 0, 0))
// the index set: ABID with CBSZ 0; CBSZ != 0 ignores ABID (set 0)
SP(f16_16x16x32_a3, 64, half4, half8, float, 4, __builtin_amdgcn_smfmac_f32_16x16x32_f16(a, b, c, ix, 0, 3))
SP(f16_16x16x32_c1a2, 64, half4, half8, float, 4, __builtin_amdgcn_smfmac_f32_16x16x32_f16(a, b, c, ix, 1, 2))
SP(i8_16x16x64_a1, 64, int2, int4, int, 4, __builtin_amdgcn_smfmac_i32_16x16x64_i8(a, b, c, ix, 0, 1))
#endif

#if defined(__gfx950__)
SP(f16_16x16x64, 64, half8, half16, float, 4, __builtin_amdgcn_smfmac_f32_16x16x64_f16(a, b, c, ix, 0, 0))
SP(f16_32x32x32_a1, 64, half8, half16, float, 16, __builtin_amdgcn_smfmac_f32_32x32x32_f16(a, b, c, ix, 0, 1))
SP(i8_16x16x128, 64, int4, int8, int, 4, __builtin_amdgcn_smfmac_i32_16x16x128_i8(a, b, c, ix, 0, 0))
SP(fp8_32x32x64, 64, int4, int8, float, 16, __builtin_amdgcn_smfmac_f32_32x32x64_fp8_fp8(a, b, c, ix, 0, 0))
#endif

#if defined(__gfx1200__)
SP(w_f16, 32, half8, half16, float, 8, __builtin_amdgcn_swmmac_f32_16x16x32_f16_w32(a, b, c, ix))
SP(w_bf16, 32, short8, short16, float, 8, __builtin_amdgcn_swmmac_f32_16x16x32_bf16_w32(a, b, c, ix))
SP(w_f16_f16, 32, half8, half16, half, 8, __builtin_amdgcn_swmmac_f16_16x16x32_f16_w32(a, b, c, ix))
SP(w_bf16_bf16, 32, short8, short16, short, 8, __builtin_amdgcn_swmmac_bf16_16x16x32_bf16_w32(a, b, c, ix))
SP(w_iu8, 32, int2, int4, int, 8, __builtin_amdgcn_swmmac_i32_16x16x32_iu8_w32(1, a, 1, b, c, ix, 0))
SP(w_iu4, 32, int, int2, int, 8, __builtin_amdgcn_swmmac_i32_16x16x32_iu4_w32(1, a, 1, b, c, ix, 0))
SP(w_iu4_k64, 32, int2, int4, int, 8, __builtin_amdgcn_swmmac_i32_16x16x64_iu4_w32(1, a, 1, b, c, ix, 0))
SP(w_f16_key1, 32, half8, half16, float, 8, __builtin_amdgcn_swmmac_f32_16x16x32_f16_w32(a, b, c, (int)(ushort)(ix >> 16)))
SP(w_fp8_bf8, 32, int2, int4, float, 8, __builtin_amdgcn_swmmac_f32_16x16x32_fp8_bf8_w32(a, b, c, ix))
#endif
