// libcu++'s cuda::barrier and cuda::memcpy_async (mbarrier and cp.async underneath), checked by test_async.py.
#include <cooperative_groups.h>
#include <cuda/barrier>
#pragma nv_diag_suppress 20054  // the __shared__ barrier is initialised by init(), not by a constructor
namespace cg = cooperative_groups;
using block_barrier = cuda::barrier<cuda::thread_scope_block>;

// Three phases of one barrier: each thread reads what the others wrote before it.
extern "C" __global__ void cuda_barrier(int* out, const int* in) {
  __shared__ block_barrier bar;
  __shared__ int s[128];
  auto block = cg::this_thread_block();
  int t = threadIdx.x;
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  s[t] = in[blockIdx.x * 128 + t] * 2;
  bar.arrive_and_wait();
  int v = s[127 - t];
  bar.arrive_and_wait();
  s[t] = v + t;
  bar.arrive_and_wait();
  out[blockIdx.x * 128 + t] = s[(t + 1) % 128];
}

// A block-wide memcpy_async completing on the barrier (cp.async + cp.async.mbarrier.arrive).
extern "C" __global__ void cuda_memcpy_async(int* out, const int* in) {
  __shared__ block_barrier bar;
  __shared__ alignas(16) int s[128];
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  cuda::memcpy_async(block, s, in + blockIdx.x * 128, sizeof(int) * 128, bar);
  bar.arrive_and_wait();
  out[blockIdx.x * 128 + threadIdx.x] = s[127 - threadIdx.x];
}
