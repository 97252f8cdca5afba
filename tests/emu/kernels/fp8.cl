// FP8 (E4M3: OCP on gfx950/gfx12, FNUZ on gfx942) through the hardware conversions, as clang-22 selects them from
// the target builtins: each pair of floats packed to two 8-bit values (round to nearest even), then widened back.
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())
__kernel void roundtrip(__global float *y, __global const float *x) {
  int g = GID;
  int packed = __builtin_amdgcn_cvt_pk_fp8_f32(x[2 * g], x[2 * g + 1], 0, false);
  y[2 * g] = __builtin_amdgcn_cvt_f32_fp8(packed, 0);
  y[2 * g + 1] = __builtin_amdgcn_cvt_f32_fp8(packed, 1);
}
