// Benchmark kernels for bench/run.py, compiled with clang-22 for each AMD target (no device libraries).
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define GID_X (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())

__kernel void saxpy(float a, __global const float* x, __global float* y) {
  int i = GID_X;
  y[i] = a * x[i] + y[i];
}

// C = A @ B, all n x n row-major, 16x16 tiles staged through LDS; block (16, 16), grid (n/16, n/16).
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int n) {
  __local float As[16][16], Bs[16][16];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int row = __builtin_amdgcn_workgroup_id_y() * 16 + ty, col = __builtin_amdgcn_workgroup_id_x() * 16 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 16) {
    As[ty][tx] = A[row * n + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * n + col];
    __builtin_amdgcn_s_barrier();
    for (int k = 0; k < 16; k++) acc += As[ty][k] * Bs[k][tx];
    __builtin_amdgcn_s_barrier();
  }
  C[row * n + col] = acc;
}

// out[group] = sum of the group's 256 inputs, tree reduction in LDS; block 256.
__kernel void reduce(__global const float* x, __global float* out) {
  __local float s[256];
  int t = __builtin_amdgcn_workitem_id_x();
  s[t] = x[GID_X];
  __builtin_amdgcn_s_barrier();
  for (int w = 128; w > 0; w >>= 1) {
    if (t < w) s[t] += s[t + w];
    __builtin_amdgcn_s_barrier();
  }
  if (t == 0) out[__builtin_amdgcn_workgroup_id_x()] = s[0];
}

typedef half half16 __attribute__((ext_vector_type(16)));
typedef half half8 __attribute__((ext_vector_type(8)));
typedef half half4 __attribute__((ext_vector_type(4)));
typedef float float8 __attribute__((ext_vector_type(8)));
typedef float float4 __attribute__((ext_vector_type(4)));

// One wave computes a 16x16 tile of C = A @ B^T; A is M x K, B is N x K (both row-major f16), C is f32.
// grid (M/16, N/16), block = one wave. Operand layouts follow each ISA guide's matrix-core lane mapping.
#if defined(__gfx1100__)
__kernel void gemm(__global const half* A, __global const half* B, __global float* C, int K, int N) {
  int l = __builtin_amdgcn_workitem_id_x();
  int tm = __builtin_amdgcn_workgroup_id_x() * 16, tn = __builtin_amdgcn_workgroup_id_y() * 16;
  float8 c = 0;
  for (int k = 0; k < K; k += 16) {
    half16 a, b;
    for (int i = 0; i < 16; i++) { a[i] = A[(tm + l % 16) * K + k + i]; b[i] = B[(tn + l % 16) * K + k + i]; }
    c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
  }
  for (int i = 0; i < 8; i++) C[(tm + i * 2 + l / 16) * N + tn + l % 16] = c[i];
}
#elif defined(__gfx1200__) || defined(__gfx1201__)
__kernel void gemm(__global const half* A, __global const half* B, __global float* C, int K, int N) {
  int l = __builtin_amdgcn_workitem_id_x();
  int tm = __builtin_amdgcn_workgroup_id_x() * 16, tn = __builtin_amdgcn_workgroup_id_y() * 16;
  float8 c = 0;
  for (int k = 0; k < K; k += 16) {
    half8 a, b;
    for (int i = 0; i < 8; i++) {
      a[i] = A[(tm + l % 16) * K + k + (l / 16) * 8 + i];
      b[i] = B[(tn + l % 16) * K + k + (l / 16) * 8 + i];
    }
    c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
  }
  for (int i = 0; i < 8; i++) C[(tm + (l / 16) * 8 + i) * N + tn + l % 16] = c[i];
}
#else
__kernel void gemm(__global const half* A, __global const half* B, __global float* C, int K, int N) {
  int l = __builtin_amdgcn_workitem_id_x();
  int tm = __builtin_amdgcn_workgroup_id_x() * 16, tn = __builtin_amdgcn_workgroup_id_y() * 16;
  float4 c = 0;
  for (int k = 0; k < K; k += 16) {
    half4 a, b;
    for (int i = 0; i < 4; i++) {
      a[i] = A[(tm + l % 16) * K + k + (l / 16) * 4 + i];
      b[i] = B[(tn + l % 16) * K + k + (l / 16) * 4 + i];
    }
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
  }
  for (int i = 0; i < 4; i++) C[(tm + (l / 16) * 4 + i) * N + tn + l % 16] = c[i];
}
#endif
