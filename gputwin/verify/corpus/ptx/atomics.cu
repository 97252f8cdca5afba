#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda/atomic>
// atom/red in every op and type, shared and global, with scopes and memory orders.
__global__ void atomics(int* hist, unsigned long long* w, float* f, double* d, __half2* h, __nv_bfloat162* b, const int* in, int n) {
  __shared__ int sh[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x < 64) sh[threadIdx.x] = 0;
  __syncthreads();
  if (i < n) {
    int v = in[i];
    atomicAdd(&sh[v & 63], 1); atomicMax(&sh[(v >> 6) & 63], v); atomicMin(&hist[1], v);
    atomicAnd(&hist[2], v); atomicOr(&hist[3], v); atomicXor(&hist[4], v);
    atomicInc((unsigned*)&hist[5], 100u); atomicDec((unsigned*)&hist[6], 100u);
    int old = atomicCAS(&hist[7], v, v + 1); atomicExch(&hist[8], old);
    atomicAdd(w, (unsigned long long)v); atomicMax(w + 1, (unsigned long long)v); atomicCAS(w + 2, 0ull, (unsigned long long)v);
    atomicAdd(f, 1.5f); atomicAdd(d, 2.5); atomicAdd(h, __floats2half2_rn(1.f, 2.f)); atomicAdd(b, __floats2bfloat162_rn(1.f, 2.f));
    atomicAdd_block(&hist[9], 1); atomicAdd_system(&hist[10], 1);
    cuda::atomic_ref<int, cuda::thread_scope_device> r(hist[11]);
    r.fetch_add(v, cuda::memory_order_acq_rel); r.store(v, cuda::memory_order_release);
    hist[12] += r.load(cuda::memory_order_acquire);
    cuda::atomic_ref<int, cuda::thread_scope_block> s(sh[0]); s.fetch_or(v, cuda::memory_order_relaxed);
  }
  __syncthreads();
  if (threadIdx.x < 64) atomicAdd(&hist[16 + threadIdx.x], sh[threadIdx.x]);
}
