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
  for (int e = 0; e < 8; e++) {  // (k: runs of four alternate between the lane halves)
    int k = 4 * (l / 16) + 8 * (e / 4) + e % 4;
    a[e] = A[(l % 16) * 16 + k];
    b[e] = B[k * 16 + l % 16];
  }
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

// CDNA 32x32x8 f16 (one block): A lane l row l%32, k = 4*(l/32)+e; C/D register v: row 8*(v/4) + 4*(l/32) + v%4.
__kernel void mma32(__global float *D, __global const half *A, __global const half *B, __global const float *C) {
  int l = __builtin_amdgcn_workitem_id_x();
#if defined(__gfx942__) || defined(__gfx950__)
  half4 a, b; float16 c;
  for (int e = 0; e < 4; e++) { a[e] = A[(l % 32) * 8 + 4 * (l / 32) + e]; b[e] = B[(4 * (l / 32) + e) * 32 + l % 32]; }
  for (int v = 0; v < 16; v++) c[v] = C[(8 * (v / 4) + 4 * (l / 32) + v % 4) * 32 + l % 32];
  float16 d = __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, 0, 0, 0);
  for (int v = 0; v < 16; v++) D[(8 * (v / 4) + 4 * (l / 32) + v % 4) * 32 + l % 32] = d[v];
#endif
}

// RDNA3 int8 WMMA (signed A and B): the same lane layout as the f16 one, four 8-bit elements per VGPR.
__kernel void wmma_i8(__global int *D, __global const char *A, __global const char *B, __global const int *C) {
  int l = __builtin_amdgcn_workitem_id_x();
#if defined(__gfx1100__)
  int4 a, b; int8 c;
  for (int k = 0; k < 16; k++) {
    ((char *)&a)[k] = A[(l % 16) * 16 + k];
    ((char *)&b)[k] = B[k * 16 + l % 16];
  }
  for (int v = 0; v < 8; v++) c[v] = C[(2 * v + l / 16) * 16 + l % 16];
  int8 d = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(true, a, true, b, c, false);
  for (int v = 0; v < 8; v++) D[(2 * v + l / 16) * 16 + l % 16] = d[v];
#endif
}

// int4 WMMA, A signed and B unsigned: RDNA3 the layout above with sixteen 4-bit elements in two VGPRs (element k in
// VGPR k/8, bits 4*(k%8)); RDNA4 16x16x16 eight per lane in one VGPR, k as for f16 above (bits 4*e).
__kernel void wmma_i4(__global int *D, __global const char *A, __global const char *B, __global const int *C) {
  int l = __builtin_amdgcn_workitem_id_x();
#if defined(__gfx1100__)
  int2 a = 0, b = 0; int8 c;
  for (int k = 0; k < 16; k++) {
    a[k / 8] |= (A[(l % 16) * 16 + k] & 15) << (4 * (k % 8));
    b[k / 8] |= (B[k * 16 + l % 16] & 15) << (4 * (k % 8));
  }
  for (int v = 0; v < 8; v++) c[v] = C[(2 * v + l / 16) * 16 + l % 16];
  int8 d = __builtin_amdgcn_wmma_i32_16x16x16_iu4_w32(true, a, false, b, c, false);
  for (int v = 0; v < 8; v++) D[(2 * v + l / 16) * 16 + l % 16] = d[v];
#elif defined(__gfx1200__)
  int a = 0, b = 0; int8 c;
  for (int e = 0; e < 8; e++) {
    int k = 4 * (l / 16) + 8 * (e / 4) + e % 4;
    a |= (A[(l % 16) * 16 + k] & 15) << (4 * e);
    b |= (B[k * 16 + l % 16] & 15) << (4 * e);
  }
  for (int v = 0; v < 8; v++) c[v] = C[(v + 8 * (l / 16)) * 16 + l % 16];
  int8 d = __builtin_amdgcn_wmma_i32_16x16x16_iu4_w32_gfx12(true, a, false, b, c, false);
  for (int v = 0; v < 8; v++) D[(v + 8 * (l / 16)) * 16 + l % 16] = d[v];
#endif
}

// 16-bit results, D = A * B + C in f16 (bf16: its bits as shorts): RDNA3 element (i, j) in register i / 2, lane
// 16 * (i % 2) + j, the low half (high with OPSEL[2]: vector element 2 * (i / 2) + 1); RDNA4 packs them, element v
// (v + 8 * (l / 16), l % 16) in half v % 2 of register v / 2. A and B as the f16 kernel above.
#define HALF_OUT(NAME, T, T8, T16, W11, W12, SEL)                                                                  \
  __kernel void NAME(__global T *D, __global const T *A, __global const T *B, __global const T *C) {              \
    int l = __builtin_amdgcn_workitem_id_x();                                                                   \
    HALF_BODY(T8, T16, W11, W12, SEL)                                                                           \
  }
#if defined(__gfx1100__)
#define HALF_BODY(T8, T16, W11, W12, SEL)                                                                          \
  T16 a, b, c = 0;                                                                                              \
  for (int k = 0; k < 16; k++) { a[k] = A[(l % 16) * 16 + k]; b[k] = B[k * 16 + l % 16]; }                      \
  for (int v = 0; v < 8; v++) c[2 * v + SEL] = C[(2 * v + l / 16) * 16 + l % 16];                               \
  T16 d = W11(a, b, c, SEL);                                                                                    \
  for (int v = 0; v < 8; v++) D[(2 * v + l / 16) * 16 + l % 16] = d[2 * v + SEL];
#elif defined(__gfx1200__)
#define HALF_BODY(T8, T16, W11, W12, SEL)                                                                          \
  T8 a, b, c;                                                                                                   \
  for (int e = 0; e < 8; e++) {                                                                                 \
    int k = 4 * (l / 16) + 8 * (e / 4) + e % 4;                                                                 \
    a[e] = A[(l % 16) * 16 + k];                                                                                \
    b[e] = B[k * 16 + l % 16];                                                                                  \
  }                                                                                                             \
  for (int v = 0; v < 8; v++) c[v] = C[(v + 8 * (l / 16)) * 16 + l % 16];                                      \
  T8 d = W12(a, b, c);                                                                                          \
  for (int v = 0; v < 8; v++) D[(v + 8 * (l / 16)) * 16 + l % 16] = d[v];
#endif
#ifdef HALF_BODY
HALF_OUT(wmma_f16, half, half8, half16, __builtin_amdgcn_wmma_f16_16x16x16_f16_w32,
         __builtin_amdgcn_wmma_f16_16x16x16_f16_w32_gfx12, 0)
HALF_OUT(wmma_f16_hi, half, half8, half16, __builtin_amdgcn_wmma_f16_16x16x16_f16_w32,
         __builtin_amdgcn_wmma_f16_16x16x16_f16_w32_gfx12, 1)
HALF_OUT(wmma_bf16, short, short8, short16, __builtin_amdgcn_wmma_bf16_16x16x16_bf16_w32,
         __builtin_amdgcn_wmma_bf16_16x16x16_bf16_w32_gfx12, 0)
#endif

// RDNA4 float WMMA with negated and absolute operands: clang-22 folds -A, -B, -C into NEG/NEG_HI and fabs(C) into
// NEG_HI[2]. D0 = (-A) * B - C, D1 = A * (-B) + |C| (f32 results, the mma16 layouts).
__kernel void wmma_neg(__global float *D, __global const half *A, __global const half *B, __global const float *C) {
  int l = __builtin_amdgcn_workitem_id_x();
#if defined(__gfx1200__)
  half8 a, b; float8 c;
  for (int e = 0; e < 8; e++) {
    int k = 4 * (l / 16) + 8 * (e / 4) + e % 4;
    a[e] = A[(l % 16) * 16 + k];
    b[e] = B[k * 16 + l % 16];
  }
  for (int v = 0; v < 8; v++) c[v] = C[(v + 8 * (l / 16)) * 16 + l % 16];
  float8 d0 = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(-a, b, -c);
  float8 d1 = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, -b, __builtin_elementwise_abs(c));
  for (int v = 0; v < 8; v++) {
    D[(v + 8 * (l / 16)) * 16 + l % 16] = d0[v];
    D[256 + (v + 8 * (l / 16)) * 16 + l % 16] = d1[v];
  }
#endif
}

// RDNA4 int4 16x16x32 (A signed, B unsigned) and int8 16x16x16 with CLMP (both signed). Integer sums do not depend
// on which k a register holds as long as A and B agree, so A and B are placed by one simple pairing here: lane l
// holds row/column l % 16, k = 16 * (l / 16) + e (int4, sixteen nibbles in two VGPRs) or 8 * (l / 16) + e (int8).
__kernel void wmma_i4_k32(__global int *D, __global const char *A, __global const char *B, __global const int *C) {
  int l = __builtin_amdgcn_workitem_id_x();
#if defined(__gfx1200__)
  int2 a = 0, b = 0; int8 c;
  for (int e = 0; e < 16; e++) {
    int k = 16 * (l / 16) + e;
    a[e / 8] |= (A[(l % 16) * 32 + k] & 15) << (4 * (e % 8));
    b[e / 8] |= (B[k * 16 + l % 16] & 15) << (4 * (e % 8));
  }
  for (int v = 0; v < 8; v++) c[v] = C[(v + 8 * (l / 16)) * 16 + l % 16];
  int8 d = __builtin_amdgcn_wmma_i32_16x16x32_iu4_w32_gfx12(true, a, false, b, c, false);
  for (int v = 0; v < 8; v++) D[(v + 8 * (l / 16)) * 16 + l % 16] = d[v];
#endif
}

__kernel void wmma_i8_clamp(__global int *D, __global const char *A, __global const char *B, __global const int *C) {
  int l = __builtin_amdgcn_workitem_id_x();
#if defined(__gfx1200__)
  int2 a = 0, b = 0; int8 c;
  for (int e = 0; e < 8; e++) {
    int k = 8 * (l / 16) + e;
    a[e / 4] |= (A[(l % 16) * 16 + k] & 255) << (8 * (e % 4));
    b[e / 4] |= (B[k * 16 + l % 16] & 255) << (8 * (e % 4));
  }
  for (int v = 0; v < 8; v++) c[v] = C[(v + 8 * (l / 16)) * 16 + l % 16];
  int8 d = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12(true, a, true, b, c, true);
  for (int v = 0; v < 8; v++) D[(v + 8 * (l / 16)) * 16 + l % 16] = d[v];
#endif
}
