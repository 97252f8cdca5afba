#include <cuda_pipeline.h>
#include <cuda/barrier>
// cp.async double buffering (.ca/.cg, zero-fill), commit/wait groups, and an mbarrier (cuda::barrier) in shared memory.
__global__ void cp_async(const float4* g, float* out, int n) {
  __shared__ float4 buf[2][128];
  __shared__ float s4[2][128];
  int t = threadIdx.x; float acc = 0;
  __pipeline_memcpy_async(&buf[0][t], &g[t], sizeof(float4));
  __pipeline_memcpy_async(&s4[0][t], (const float*)&g[t], sizeof(float), sizeof(float) * (t & 1));
  __pipeline_commit();
  for (int k = 1; k < n; k++) {
    __pipeline_memcpy_async(&buf[k & 1][t], &g[k * 128 + t], sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    acc += buf[(k - 1) & 1][(t + 1) & 127].x + s4[0][t];
    __syncthreads();
  }
  __pipeline_wait_prior(0);
  out[t] = acc;
}
__global__ void mbar(float* out) {
  #pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  __shared__ float s[128];
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  s[threadIdx.x] = threadIdx.x;
  auto tok = bar.arrive();
  bar.wait(std::move(tok));
  out[threadIdx.x] = s[127 - threadIdx.x];
}
