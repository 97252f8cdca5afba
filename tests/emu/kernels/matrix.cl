// One wave multiplies 16x16 f16 matrices with the target's matrix instruction: D = A * B + C (f32, row-major).
// Lane layouts per the vendor ISA guides (see gputwin/emu/matrix.py); the oracle is numpy's A @ B + C.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void mma16(__global float *D, __global const half *A, __global const half *B, __global const float *C) {
  int l = __builtin_amdgcn_workitem_id_x();
#if defined(__gfx1100__)
  half16 a, b; float8 c;
  for (int k = 0; k < 16; k++) { a[k] = A[(l % 16) * 16 + k]; b[k] = B[k * 16 + l % 16]; }
  for (int v = 0; v < 8; v++) c[v] = C[(2 * v + l / 16) * 16 + l % 16];
  float8 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
  for (int v = 0; v < 8; v++) D[(2 * v + l / 16) * 16 + l % 16] = d[v];
#elif defined(__gfx1200__)
  half8 a, b; float8 c;
  for (int e = 0; e < 8; e++) { a[e] = A[(l % 16) * 16 + 8 * (l / 16) + e]; b[e] = B[(8 * (l / 16) + e) * 16 + l % 16]; }
  for (int v = 0; v < 8; v++) c[v] = C[(v + 8 * (l / 16)) * 16 + l % 16];
  float8 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
  for (int v = 0; v < 8; v++) D[(v + 8 * (l / 16)) * 16 + l % 16] = d[v];
#else
  half4 a, b; float4 c;
  for (int e = 0; e < 4; e++) { a[e] = A[(l % 16) * 16 + 4 * (l / 16) + e]; b[e] = B[(4 * (l / 16) + e) * 16 + l % 16]; }
  for (int v = 0; v < 4; v++) c[v] = C[(4 * (l / 16) + v) * 16 + l % 16];
  float4 d = __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
  for (int v = 0; v < 4; v++) D[(4 * (l / 16) + v) * 16 + l % 16] = d[v];
#endif
}
