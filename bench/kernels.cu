// The CUDA side of bench/run.py's sm_90 rows (nvcc 13): the same algorithms as kernels.cl.
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// C = A @ B, all n x n row-major, 16x16 tiles staged through shared memory; block (16, 16), grid (n/16, n/16).
#define T 16
extern "C" __global__ void matmul(const float *A, const float *B, float *C, int n) {
  __shared__ float As[T][T], Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += T) {
    As[ty][tx] = A[row * n + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < T; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

// out[block] = sum of the block's 256 inputs, tree reduction in shared memory; block 256.
extern "C" __global__ void reduce(const float *x, float *out) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (t < w) s[t] += s[t + w];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// One warp computes a 16x16 tile of C = A @ B^T with wmma (mma.sync on the tensor cores); A is M x K, B is N x K
// (both row-major f16, so B^T is K x N column-major), C is f32. grid (M/16, N/16), block = one warp.
extern "C" __global__ void gemm(const half *A, const half *B, float *C, int K, int N) {
  int tm = blockIdx.x * 16, tn = blockIdx.y * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + tm * K + k, K);
    wmma::load_matrix_sync(b, B + tn * K + k, K);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + tm * N + tn, c, N, wmma::mem_row_major);
}
