#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;
// Cooperative groups: grid.sync, tiles, reductions, coalesced groups, elect / labeled partitions.
__global__ void coop(const int* in, int* out, int* scratch) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  int v = in[grid.thread_rank()];
  int s = cg::reduce(warp, v, cg::plus<int>());
  if (warp.thread_rank() == 0) atomicAdd(&scratch[0], s);
  grid.sync();
  auto act = cg::coalesced_threads();
  if (v & 1) { auto odd = cg::coalesced_threads(); s += odd.size() + odd.thread_rank(); }
  auto part = cg::labeled_partition(warp, v & 3);
  out[grid.thread_rank()] = s + scratch[0] + act.size() + part.size() + cg::inclusive_scan(warp, v);
}
