// Dynamic shared memory (.extern .shared), tiled matmul with static shared tiles, block reduction.
extern __shared__ float dyn[];
__global__ void __launch_bounds__(256, 2) matmul(const float* A, const float* B, float* C, int N) {
  __shared__ float ta[16][16], tb[16][16];
  int tx = threadIdx.x, ty = threadIdx.y, r = blockIdx.y * 16 + ty, c = blockIdx.x * 16 + tx;
  float acc = 0;
  for (int k = 0; k < N; k += 16) {
    ta[ty][tx] = A[r * N + k + tx]; tb[ty][tx] = B[(k + ty) * N + c];
    __syncthreads();
#pragma unroll 4
    for (int j = 0; j < 16; j++) acc += ta[ty][j] * tb[j][tx];
    __syncthreads();
  }
  C[r * N + c] = acc;
}
__global__ void reduce(const float* x, float* out, int n) {
  int t = threadIdx.x;
  dyn[t] = t < n ? x[blockIdx.x * blockDim.x + t] : 0.f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (t < s) dyn[t] += dyn[t + s]; __syncthreads(); }
  if (t == 0) out[blockIdx.x] = dyn[0];
}
