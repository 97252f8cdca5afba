// Warp collectives: shfl.sync (all modes, clamps, widths), vote.sync, match.sync, redux.sync, activemask, lanemask.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void warp(const int* in, int* out, float* f) {
  int t = threadIdx.x, v = in[blockIdx.x * blockDim.x + t];
  unsigned m = __activemask();
  int s = v;
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  s += __shfl_up_sync(m, v, 1) + __shfl_down_sync(m, v, 2, 16) + __shfl_sync(m, v, 3, 8);
  float g = __shfl_sync(m, f[t], 0);
  unsigned b = __ballot_sync(m, v > 0);
  s += __all_sync(m, v > -1) + __any_sync(m, v == 7) + __uni_sync(m, v & 1);
  int pred; s += __match_any_sync(m, v & 3) + __match_all_sync(m, v, &pred) + pred;
  s += __reduce_add_sync(m, v) + __reduce_min_sync(m, v) + __reduce_max_sync(m, (unsigned)v) + __reduce_or_sync(m, (unsigned)v);
  unsigned lt; asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  auto tile = cg::tiled_partition<8>(cg::this_thread_block());
  s += tile.shfl(v, 2) + tile.any(v > 3) + tile.thread_rank();
  out[blockIdx.x * blockDim.x + t] = s + b + __popc(lt);
  f[t] = g;
}
