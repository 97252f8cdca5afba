// IEEE 754-2019 maximum and minimum (a NaN operand wins, +0 is above -0), as clang-22 selects them from
// __builtin_elementwise_maximum/minimum (llvm.maximum/minimum): v_maximum3_f32 / v_pk_maximum3_f16 (and minimum)
// on gfx950, v_maximum_f32 / v_pk_maximum_f16 on gfx12.
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())
__kernel void extremes(__global float *o, __global const float *a, __global const float *b, __global half2 *r,
                       __global const half2 *p, __global const half2 *q) {
  int g = GID;
  o[2 * g] = __builtin_elementwise_maximum(a[g], b[g]);
  o[2 * g + 1] = __builtin_elementwise_minimum(a[g], b[g]);
  r[2 * g] = __builtin_elementwise_maximum(p[g], q[g]);
  r[2 * g + 1] = __builtin_elementwise_minimum(p[g], q[g]);
}
