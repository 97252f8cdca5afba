#include <cuda_pipeline.h>
// cp.async double buffering: tile k+1 is in flight while tile k is consumed (commit / wait_prior groups).
extern "C" __global__ void cp_async_pipeline(float* out, const float4* g, int ntiles) {
  __shared__ __align__(16) float4 buf[2][128];
  int t = threadIdx.x;
  const float4* src = g + blockIdx.x * ntiles * 128;
  float acc = 0.0f;
  __pipeline_memcpy_async(&buf[0][t], &src[t], sizeof(float4));
  __pipeline_commit();
  for (int k = 0; k < ntiles; k++) {
    if (k + 1 < ntiles) __pipeline_memcpy_async(&buf[(k + 1) & 1][t], &src[(k + 1) * 128 + t], sizeof(float4));
    __pipeline_commit();                              // an empty group on the last tile keeps wait_prior(1) exact
    __pipeline_wait_prior(1);
    __syncthreads();
    float4 v = buf[k & 1][(t + k) & 127];            // another thread's copy: needs the barrier
    acc += (v.x - v.y) * (float)(k + 1) + v.z * v.w;
    __syncthreads();
  }
  out[blockIdx.x * 128 + t] = acc;
}

// 4-byte cp.async.ca with a source size: src-size 0 zero-fills the destination.
extern "C" __global__ void cp_async_zfill(int* out, const int* g) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = -1; s[t + 128] = -1;
  __syncthreads();
  unsigned dst = (unsigned)__cvta_generic_to_shared(&s[t]);
  unsigned dst2 = (unsigned)__cvta_generic_to_shared(&s[t + 128]);
  int srcsize = (t % 3 == 0) ? 0 : 4;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(g + t), "r"(srcsize) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(dst2), "l"(g + 128 + t) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  out[t] = s[255 - t] + 3 * s[t];
  out[t + 128] = s[t + 128];
}
