// A decoupled look-back scan in the CUB style: per-tile flags published with release/acquire, spin with nanosleep.
struct Desc { int flag; int value; };
__device__ int ld_acquire(const int* p) { int v; asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v; }
__device__ void st_release(int* p, int v) { asm volatile("st.release.gpu.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory"); }
__global__ void lookback(const int* in, int* out, Desc* desc, int* ticket) {
  __shared__ int tile, excl;
  if (threadIdx.x == 0) tile = atomicAdd(ticket, 1);
  __syncthreads();
  int t = threadIdx.x, v = in[tile * blockDim.x + t];
  for (int o = 1; o < 32; o <<= 1) { int u = __shfl_up_sync(~0u, v, o); if ((t & 31) >= o) v += u; }
  __shared__ int warps[32];
  if ((t & 31) == 31) warps[t / 32] = v;
  __syncthreads();
  if (t < 32) { int w = t < blockDim.x / 32 ? warps[t] : 0; for (int o = 1; o < 32; o <<= 1) { int u = __shfl_up_sync(~0u, w, o); if (t >= o) w += u; } warps[t] = w; }
  __syncthreads();
  if (t >= 32) v += warps[t / 32 - 1];
  if (t == blockDim.x - 1) {
    int agg = v, pre = 0;
    st_release(&desc[tile].value, agg); st_release(&desc[tile].flag, 1);
    for (int p = tile - 1; p >= 0; p--) {
      int f; while ((f = ld_acquire(&desc[p].flag)) == 0) __nanosleep(32);
      pre += ld_acquire(&desc[p].value); if (f == 2) break;
    }
    st_release(&desc[tile].value, pre + agg); st_release(&desc[tile].flag, 2);
    excl = pre;
  }
  __syncthreads();
  out[tile * blockDim.x + t] = v + excl;
}
