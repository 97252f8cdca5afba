// gfx1100 and gfx1200 WMMA in wave64 (built with -mwavefrontsize64): one wave computes D = A * B + C. Lane l loads
// its A and B words (A[l], B[l]) and its C/D registers (C[l], D[l]) from images the test builds from the element ->
// lane equations it states; the instruction is the only arithmetic.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half half4 __attribute__((ext_vector_type(4)));
typedef short short4 __attribute__((ext_vector_type(4)));
typedef float float4 __attribute__((ext_vector_type(4)));
typedef int int2 __attribute__((ext_vector_type(2)));
typedef int int4 __attribute__((ext_vector_type(4)));
typedef half half8 __attribute__((ext_vector_type(8)));
typedef half half16 __attribute__((ext_vector_type(16)));
typedef short short8 __attribute__((ext_vector_type(8)));
typedef short short16 __attribute__((ext_vector_type(16)));

#define W64(NAME, TA, TC, CALL)                                                                                   \
  __kernel void NAME(__global TC *D, __global const TA *A, __global const TA *B, __global const TC *C) {            \
    int l = __builtin_amdgcn_workitem_id_x();                                                                   \
    TA a = A[l], b = B[l];                                                                                      \
    D[l] = CALL;                                                                                                \
  }

#if defined(__gfx1100__)
W64(f32_f16, half16, float4, __builtin_amdgcn_wmma_f32_16x16x16_f16_w64(a, b, C[l]))
W64(f32_bf16, short16, float4, __builtin_amdgcn_wmma_f32_16x16x16_bf16_w64(a, b, C[l]))
W64(f16_f16, half16, half8, __builtin_amdgcn_wmma_f16_16x16x16_f16_w64(a, b, C[l], false))
W64(f16_f16_hi, half16, half8, __builtin_amdgcn_wmma_f16_16x16x16_f16_w64(a, b, C[l], true))
W64(bf16_bf16, short16, short8, __builtin_amdgcn_wmma_bf16_16x16x16_bf16_w64(a, b, C[l], false))
W64(i32_iu8, int4, int4, __builtin_amdgcn_wmma_i32_16x16x16_iu8_w64(true, a, false, b, C[l], false))
W64(i32_iu4, int2, int4, __builtin_amdgcn_wmma_i32_16x16x16_iu4_w64(true, a, false, b, C[l], false))
#endif

#if defined(__gfx1200__)
W64(f32_f16, half4, float4, __builtin_amdgcn_wmma_f32_16x16x16_f16_w64_gfx12(a, b, C[l]))
W64(f32_bf16, short4, float4, __builtin_amdgcn_wmma_f32_16x16x16_bf16_w64_gfx12(a, b, C[l]))
W64(f16_f16, half4, half4, __builtin_amdgcn_wmma_f16_16x16x16_f16_w64_gfx12(a, b, C[l]))
W64(bf16_bf16, short4, short4, __builtin_amdgcn_wmma_bf16_16x16x16_bf16_w64_gfx12(a, b, C[l]))
W64(i32_iu8, int, int4, __builtin_amdgcn_wmma_i32_16x16x16_iu8_w64_gfx12(true, a, false, b, C[l], false))
W64(f32_fp8_bf8, int, float4, __builtin_amdgcn_wmma_f32_16x16x16_fp8_bf8_w64_gfx12(a, b, C[l]))
W64(f32_bf8_bf8, int, float4, __builtin_amdgcn_wmma_f32_16x16x16_bf8_bf8_w64_gfx12(a, b, C[l]))
W64(i32_iu4, int, int4, __builtin_amdgcn_wmma_i32_16x16x16_iu4_w64_gfx12(true, a, false, b, C[l], false))
#endif
