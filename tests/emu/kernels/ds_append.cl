// DS_APPEND / DS_CONSUME as clang-22 selects them from __builtin_amdgcn_ds_append / ds_consume (M0 = the counter's
// LDS address): one counter update per wave by its active lanes, the value before returned to all of them. Used the
// usual way: a wave's lanes take consecutive slots from the returned value by their rank among the active lanes
// (mbcnt). Which wave goes first is the hardware's choice: the results are checked as sets.
#define LID __builtin_amdgcn_workitem_id_x()
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + LID)
#define SYNC __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup"); __builtin_amdgcn_s_barrier(); \
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup")

static uint rank(void) {  // the lane's rank among the wave's active lanes
  ulong e = __builtin_amdgcn_read_exec();
  return __builtin_amdgcn_mbcnt_hi((uint)(e >> 32), __builtin_amdgcn_mbcnt_lo((uint)e, 0));
}

// workgroups of 256: kept[g * 256 + slot] the odd inputs (appended); tickets[i] the ticket an even input's lane took
// (consumed from 1000, counting down), ~0 for the others; counts[2g], counts[2g + 1]: the two counters at the end
__kernel void compact(__global uint *kept, __global uint *tickets, __global uint *counts, __global const uint *in) {
  __local uint n[2];
  uint g = __builtin_amdgcn_workgroup_id_x(), x = in[GID];
  if (LID == 0) { n[0] = 0; n[1] = 1000; }
  SYNC;
  tickets[GID] = ~0u;
  if (x & 1) {
    uint at = __builtin_amdgcn_ds_append(&n[0]);
    kept[g * 256 + at + rank()] = x;
  } else {
    uint left = __builtin_amdgcn_ds_consume(&n[1]);
    tickets[GID] = left - 1 - rank();
  }
  SYNC;
  if (LID == 0) { counts[2 * g] = n[0]; counts[2 * g + 1] = n[1]; }
}
