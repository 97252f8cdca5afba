// Small kernels for the runtime tests (compiled by clang-22 in conftest.py).
__kernel void add1(__global int *out, __global const int *in, int k) {
  uint i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  out[i] = in[i] + k;
}

__kernel void wild(__global int *out, ulong addr) {   // reads an address nothing maps: a GPU page fault
  out[__builtin_amdgcn_workitem_id_x()] = *(__global int *)addr;
}
