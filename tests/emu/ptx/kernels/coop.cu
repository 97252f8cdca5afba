#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
// Cooperative groups: 16-thread tiles with their own shuffles and a tile reduction.
extern "C" __global__ void tile16(int* out, const int* x) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[g];
  int s = cg::reduce(tile, v, cg::plus<int>());
  int m = cg::reduce(tile, v, cg::greater<int>());
  int d = tile.shfl_down(v, 3);                       // past the tile's end: own value
  int r = tile.shfl(v, (tile.thread_rank() + 5) % tile.size());
  int up = tile.shfl_up(v, 1);
  int* o = out + g * 6;
  o[0] = s; o[1] = m; o[2] = d; o[3] = r; o[4] = up;
  o[5] = (int)(tile.meta_group_rank() * 100 + tile.thread_rank());
}
