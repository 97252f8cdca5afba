// Single-pass inclusive scan across CTAs with decoupled look-back (CUB-style). Tiles are taken in launch order from
// an atomic counter, so a tile only ever waits on tiles that have started. Per tile: status (0 none, 1 aggregate,
// 2 inclusive prefix) and the two values; a value is written, fenced, then its status is raised.
#define TILE 128
__device__ int block_inclusive_scan(int v, int* buf) {
  int t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (int off = 1; off < TILE; off <<= 1) {
    int add = t >= off ? buf[t - off] : 0;
    __syncthreads();
    buf[t] += add;
    __syncthreads();
  }
  return buf[t];
}

extern "C" __global__ void lookback_scan(int* out, const int* x, int* status, int* aggregate, int* prefix, int* counter) {
  __shared__ int buf[TILE];
  __shared__ int tile_s, exclusive_s;
  if (threadIdx.x == 0) tile_s = atomicAdd(counter, 1);
  __syncthreads();
  int tile = tile_s, i = tile * TILE + threadIdx.x;
  int inc = block_inclusive_scan(x[i], buf);
  if (threadIdx.x == TILE - 1) {
    volatile int* vstatus = status;
    volatile int* vagg = aggregate;
    volatile int* vpre = prefix;
    int exclusive = 0;
    if (tile == 0) {
      vpre[0] = inc;
      __threadfence();
      vstatus[0] = 2;
    } else {
      vagg[tile] = inc;
      __threadfence();
      vstatus[tile] = 1;
      for (int j = tile - 1; j >= 0; j--) {
        int s;
        while ((s = vstatus[j]) == 0) { }
        __threadfence();
        if (s == 2) { exclusive += vpre[j]; break; }
        exclusive += vagg[j];
      }
      vpre[tile] = exclusive + inc;
      __threadfence();
      vstatus[tile] = 2;
    }
    exclusive_s = exclusive;
  }
  __syncthreads();
  out[i] = inc + exclusive_s;
}
