// Control flow: data-dependent loops with break/continue, divergence then reconvergence, recursion, 3D ids,
// and a spin-wait between two warps of one block.
extern "C" __global__ void divergent_loops(int* out, const unsigned* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  int steps = 0, odd = 0;
  while (v != 1u) {               // Collatz trip count, capped
    if (++steps > 500) break;
    if (v & 1u) { v = 3u * v + 1u; odd++; continue; }
    v >>= 1;
  }
  int acc = 0;
  for (int k = 0; k < (int)(x[i] & 63u); k++) {
    if (k % 3 == 1) continue;
    if (acc > 200) break;
    acc += k ^ (int)(x[i] >> 8 & 7u);
  }
  out[3 * i] = steps;
  out[3 * i + 1] = odd;
  out[3 * i + 2] = acc;
}

// Lanes take different paths (nested), then exchange values with shuffles once the warp is converged again.
extern "C" __global__ void diverge_shuffle(int* out, const int* x) {
  int g = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  int v = x[g];
  if (lane & 1) {
    v = v * 3 + 1;
    if (v & 4) v -= lane; else v ^= 0x55;
  } else if (lane < 20) {
    for (int k = 0; k < (v & 7); k++) v += k;
  } else {
    v = -v;
  }
  __syncwarp();
  int a = __shfl_xor_sync(0xffffffffu, v, 1);
  int b = __shfl_sync(0xffffffffu, v, (lane + 5) & 31);
  unsigned m = __ballot_sync(0xffffffffu, v > a);
  out[g] = v + 7 * a - b + (int)__popc(m);
}

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ int ackermann(int m, int n) {
  if (m == 0) return n + 1;
  if (n == 0) return ackermann(m - 1, 1);
  return ackermann(m - 1, ackermann(m, n - 1));
}

extern "C" __global__ void recursion(int* out, const int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[2 * i] = fib(x[i] % 12);
  out[2 * i + 1] = ackermann(x[i] % 3, x[i] % 4);
}

// Every thread writes its ids and the launch shape: out[linear id * 8 + field].
extern "C" __global__ void ids3d(int* out) {
  int bid = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  int tid = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  int g = bid * blockDim.x * blockDim.y * blockDim.z + tid;
  int* o = out + g * 8;
  o[0] = blockIdx.x; o[1] = blockIdx.y; o[2] = blockIdx.z;
  o[3] = threadIdx.x; o[4] = threadIdx.y; o[5] = threadIdx.z;
  o[6] = gridDim.x * 10000 + gridDim.y * 100 + gridDim.z;
  o[7] = blockDim.x * 10000 + blockDim.y * 100 + blockDim.z;
}

// Block of 64: warp 1 computes a table and then raises a flag; warp 0 spins on the flag, then reads the table.
extern "C" __global__ void spin_flag(int* out, const int* x) {
  __shared__ int table[32];
  __shared__ volatile int flag;
  int t = threadIdx.x, lane = t & 31;
  if (t == 0) flag = 0;
  __syncthreads();
  if (t >= 32) {
    unsigned v = (unsigned)x[blockIdx.x * 32 + lane];
    for (int k = 0; k < 50; k++) v = v * 1103515245u + 12345u;   // delay the producer
    table[lane] = (int)v;
    __threadfence_block();
    __syncwarp();
    if (lane == 0) flag = 1;
  } else {
    while (flag == 0) { }
    __threadfence_block();
    out[blockIdx.x * 32 + lane] = ((volatile int*)table)[31 - lane];
  }
}

// A per-thread array indexed by data lives in local memory (ld.local / st.local).
extern "C" __global__ void local_array(int* out, const int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int buf[24];
  unsigned v = (unsigned)x[i];
  for (int k = 0; k < 24; k++) buf[k] = (int)(v * (k + 1)) ^ k;
  for (int k = 0; k < 8; k++) buf[(v >> (3 * k)) % 24] += k;
  out[2 * i] = buf[v % 24];
  out[2 * i + 1] = buf[(v >> 5) % 24] - buf[(v >> 9) % 24];
}
