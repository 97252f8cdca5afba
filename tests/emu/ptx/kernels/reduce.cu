// Reductions and scans: a shared-memory tree with __syncthreads, warp shuffles of every kind, a block scan.
extern "C" __global__ void block_reduce(float* out, const float* x) {
  extern __shared__ float s[];   // blockDim.x floats (a power of two)
  unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] = s[t] + s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// Every lane writes its value after each butterfly/tree; one warp per 32 inputs.
extern "C" __global__ void warp_shfl_down(float* out, const float* x) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[g];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  out[g] = v;
}

extern "C" __global__ void warp_shfl_xor(float* out, int* outi, const float* x) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[g];
  for (int m = 1; m < 32; m <<= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  out[g] = v;
  int w = g;                                          // xor within 8-lane segments (width 8)
  for (int m = 1; m < 8; m <<= 1) w = max(w, __shfl_xor_sync(0xffffffffu, w * 3 % 17, m, 8));
  outi[g] = w;
}

// Inclusive warp scan with __shfl_up_sync (integers), and a width-16 segment scan.
extern "C" __global__ void warp_scan_up(int* out, const int* x) {
  int g = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  int v = x[g], w = x[g];
  for (int off = 1; off < 32; off <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += t;
  }
  for (int off = 1; off < 16; off <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, w, off, 16);
    if ((lane & 15) >= off) w += t;
  }
  out[2 * g] = v;
  out[2 * g + 1] = w;
}

// __shfl_sync from a data-dependent source lane, full width and width 8; 64-bit values too.
extern "C" __global__ void warp_shfl_idx(int* out, long long* out64, const int* x, const int* src) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[g], s = src[g];
  out[2 * g] = __shfl_sync(0xffffffffu, v, s);
  out[2 * g + 1] = __shfl_sync(0xffffffffu, v, s, 8);
  long long w = ((long long)v << 32) ^ (long long)g;
  out64[g] = __shfl_sync(0xffffffffu, w, 31 - (s & 31));
}

// Block-wide inclusive scan (Hillis-Steele in shared memory, double-buffered), one block per row.
extern "C" __global__ void block_scan(int* out, const int* x) {
  __shared__ int buf[2][256];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x, p = 0;
  buf[0][t] = x[base + t];
  __syncthreads();
  for (int off = 1; off < blockDim.x; off <<= 1) {
    buf[p ^ 1][t] = buf[p][t] + (t >= off ? buf[p][t - off] : 0);
    p ^= 1;
    __syncthreads();
  }
  out[base + t] = buf[p][t];
}
