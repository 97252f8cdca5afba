// Warp votes, matches and redux (sm_80+): results per lane into out[k * n + g].
extern "C" __global__ void warp_vote(unsigned* out, const int* x, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[g];
  out[0 * n + g] = __ballot_sync(0xffffffffu, v > 0);
  out[1 * n + g] = __any_sync(0xffffffffu, v > 90);
  out[2 * n + g] = __all_sync(0xffffffffu, v > -90);
  out[3 * n + g] = __all_sync(0xffffffffu, v != 0);
  out[4 * n + g] = __ballot_sync(0xffffffffu, v & 1);
  unsigned half = 0;
  if (threadIdx.x & 16) half = __ballot_sync(0xffff0000u, v & 2);   // only the upper half-warp votes
  else half = __ballot_sync(0x0000ffffu, v & 4);
  out[5 * n + g] = half;
}

extern "C" __global__ void warp_match(unsigned* out, const int* key, const long long* key64, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int pred = 0;
  out[0 * n + g] = __match_any_sync(0xffffffffu, key[g]);
  out[1 * n + g] = __match_any_sync(0xffffffffu, key64[g]);
  out[2 * n + g] = __match_all_sync(0xffffffffu, key[g] & 0x100, &pred);
  out[3 * n + g] = pred;
}

extern "C" __global__ void warp_redux(unsigned* out, const unsigned* x, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v = x[g];
  out[0 * n + g] = __reduce_add_sync(0xffffffffu, v);
  out[1 * n + g] = __reduce_min_sync(0xffffffffu, v);
  out[2 * n + g] = __reduce_max_sync(0xffffffffu, v);
  out[3 * n + g] = (unsigned)__reduce_min_sync(0xffffffffu, (int)v);
  out[4 * n + g] = (unsigned)__reduce_max_sync(0xffffffffu, (int)v);
  out[5 * n + g] = __reduce_and_sync(0xffffffffu, v) ^ __reduce_or_sync(0xffffffffu, v);
  out[6 * n + g] = __reduce_xor_sync(0xffffffffu, v);
  out[7 * n + g] = (threadIdx.x & 1) ? __reduce_add_sync(0xaaaaaaaau, v) : __reduce_add_sync(0x55555555u, v >> 4);
}

// Block-wide votes (bar.red): count, and, or of a predicate over all threads of the block.
extern "C" __global__ void block_votes(int* out, const int* x) {
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  int c = __syncthreads_count(v > 0);
  int a = __syncthreads_and(v > -100);
  int o = __syncthreads_or(v > 95);
  if (threadIdx.x == 0) { out[3 * blockIdx.x] = c; out[3 * blockIdx.x + 1] = a; out[3 * blockIdx.x + 2] = o; }
}
