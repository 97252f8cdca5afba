// C[M x N] = A[M x K] @ B[K x N], row-major f32, 16x16 shared-memory tiles; grid (N/16, M/16), block (16, 16).
#define T 16
extern "C" __global__ void matmul_tiled(float* C, const float* A, const float* B, int M, int N, int K) {
  __shared__ float sa[T][T], sb[T][T];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    sa[ty][tx] = A[row * K + k0 + tx];
    sb[ty][tx] = B[(k0 + ty) * N + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < T; k++) acc += sa[ty][k] * sb[k][tx];
    __syncthreads();
  }
  C[row * N + col] = acc;
}
