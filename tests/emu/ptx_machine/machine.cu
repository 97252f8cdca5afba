// Kernels that exercise the machine under the PTX frontend: per-thread PCs, rendezvous, barriers, fairness, calls.
extern "C" __global__ void diverge(int *out) {
  int t = threadIdx.x, acc = 0;
  for (int i = 0; i < t; i++) { if (i & 1) acc += i; else acc ^= i * 3; }
  out[t] = acc;
}

// a shuffle among the lower half-warp only, inside divergent code (member mask 0xffff)
extern "C" __global__ void half_shfl(int *out) {
  int t = threadIdx.x, v = t * 10;
  if ((t & 31) < 16) v = __shfl_xor_sync(0x0000ffffu, v, 1);
  else v = -v;
  out[t] = v;
}

// warp 0 spins on a flag warp 1 sets after work of its own: needs a fair scheduler
extern "C" __global__ void spin_warps(int *out, volatile int *flag) {
  int t = threadIdx.x;
  if (t < 32) {
    while (*flag == 0) { }
    out[t] = *flag + t;
  } else {
    int s = 0;
    for (int i = 0; i < 200; i++) s += i;
    if (t == 32) *flag = s;
    out[t] = s;
  }
}

// lane 0 waits for lane 31 of its own warp (independent thread scheduling, sm_70+)
extern "C" __global__ void spin_lanes(int *out) {
  __shared__ volatile int flag;
  int t = threadIdx.x;
  if (t == 0) flag = 0;
  __syncthreads();
  if (t == 0) { while (flag == 0) { } out[0] = flag; }
  else if (t == 31) { flag = 7; out[31] = 1; }
}

// threads past the data exit before the barrier: exit releases the barrier's count
extern "C" __global__ void early_exit(int *out, int n) {
  __shared__ int s[128];
  int t = threadIdx.x;
  if (t >= n) return;
  s[t] = t;
  __syncthreads();
  out[t] = s[n - 1 - t];
}

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
extern "C" __global__ void fibk(int *out) { out[threadIdx.x] = fib(threadIdx.x % 12); }

// seeded bugs: the checkers and faults must name them
extern "C" __global__ void race(int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = t;
  out[t] = s[63 - t];  // no __syncthreads between another warp's write and this read
}
// warp 0 reads in a block ending at a barrier while warp 1, elsewhere, then writes what it read: a race (the
// reads are not dead: not every thread runs the block)
extern "C" __global__ void late_write(int *out) {
  __shared__ int s[64];
  int t = threadIdx.x, v;
  s[t] = t;
  __syncthreads();
  if (t < 32) { v = s[t ^ 32] + s[t]; __syncthreads(); }
  else { s[t ^ 32] = -t; __syncthreads(); v = s[t]; }
  out[t] = v;
}
extern "C" __global__ void bad_mask(int *out) {
  int t = threadIdx.x;
  out[t] = __shfl_sync(0xfffffffeu, t, 0);  // lane 0 is not in its own member mask
}
extern "C" __global__ void divergent_barrier(int *out, int k) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = t;
  if (t < k) { __syncthreads(); out[t] = s[t ^ 1]; }  // two aligned barriers, half a warp at each
  else { out[t] = -t; __syncthreads(); }
  out[t] += 1;
}
extern "C" __global__ void oob(float *out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t + n] = 1.0f;
}
extern "C" __global__ void runaway(int *out, int n) {
  int i = 0;
  while (out[0] != n) i++;
  out[1] = i;
}

// __syncthreads_count/and/or: bar.red over the CTA
extern "C" __global__ void bar_red(int *out, const int *x) {
  int t = threadIdx.x, v = x[t];
  int c = __syncthreads_count(v > 10);
  int a = __syncthreads_and(v >= 0);
  int o = __syncthreads_or(v == 77);
  out[t] = c * 4 + (a ? 2 : 0) + (o ? 1 : 0);
}

// cp.async without waiting for its group before reading the destination
extern "C" __global__ void no_wait(float *out, const float *in) {
  __shared__ __align__(16) float s[32];
  int t = threadIdx.x;
  unsigned dst = (unsigned)__cvta_generic_to_shared(&s[t]);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(dst), "l"(in + t));
  asm volatile("cp.async.commit_group;");
  out[t] = s[t];  // the copy may not have landed
  asm volatile("cp.async.wait_all;");
}

// atomicAdd_block (atom.cta) on one counter from several CTAs: a race; on a per-CTA slot: fine
extern "C" __global__ void block_scoped(int *c, int shared_counter) {
  atomicAdd_block(shared_counter ? c : c + 1 + blockIdx.x, 1);
}

// tree reduction of 64 values: from w = 16 on, the threads of a warp that skip the add wait at the barrier that
// ends the add's block (they join the others there)
extern "C" __global__ void tree_sum(int *out, const int *x) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  for (int w = 32; w > 0; w >>= 1) {
    if (t < w) s[t] += s[t + w];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
