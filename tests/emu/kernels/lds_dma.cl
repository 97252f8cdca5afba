// Loads straight into LDS (CDNA: global_load_lds_*, buffer loads with the lds bit), as clang-22 selects them from
// __builtin_amdgcn_global_load_lds / __builtin_amdgcn_raw_buffer_load_lds: LLVM's contract is that the wave's lanes
// land contiguous from the (wave-uniform) LDS pointer, `size` bytes each, both addresses moved by the immediate
// offset. One wave per workgroup; each kernel reads the tile back with plain LDS loads.
#define LID __builtin_amdgcn_workitem_id_x()
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + LID)
#define SYNC __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup"); __builtin_amdgcn_s_barrier()

__kernel void global_dword(__global uint *out, __global uint *in) {
  __local uint tile[64 + 4];
  __builtin_amdgcn_global_load_lds(in + GID, tile, 4, 0, 0);
  __builtin_amdgcn_global_load_lds(in + GID, tile, 4, 16, 0);  // lane l: in[GID + 4] -> tile[l + 4]
  SYNC;
  out[2 * GID] = tile[LID];
  out[2 * GID + 1] = tile[LID + 4];
}

__kernel void buffer_dword(__global uint *out, __global uint *in) {
  __local uint tile[64];
  __amdgpu_buffer_rsrc_t r = __builtin_amdgcn_make_buffer_rsrc(in, 0, 64 * 4 * 4, 0x27000);
  __builtin_amdgcn_raw_ptr_buffer_load_lds(r, tile, 4, 4 * GID, 0, 0, 0);
  SYNC;
  out[2 * GID] = tile[LID];
  out[2 * GID + 1] = 0;
}

#ifdef __gfx950__
__kernel void global_dwordx4(__global uint *out, __global uint *in) {
  __local uint4 tile[64];
  __builtin_amdgcn_global_load_lds((__global uint4 *)in + GID, tile, 16, 0, 0);
  SYNC;
  ((__global uint4 *)out)[GID] = tile[LID];
}
#endif
