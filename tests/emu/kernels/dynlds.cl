// Dynamic LDS (a __local pointer argument) and the cycle counter. Kept apart from suite.cl: variants of this kernel
// crash clang-22 (exit 139) when built in one module with the suite.
__kernel void dynlds(__global float *out, __global const float *in, __local float *tmp) {
  uint l = __builtin_amdgcn_workitem_id_x();
  uint g = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + l;
  tmp[l] = in[g];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  out[g] = tmp[__builtin_amdgcn_workgroup_size_x() - 1 - l] + (float)__builtin_readcyclecounter() * 0.0f;
}
