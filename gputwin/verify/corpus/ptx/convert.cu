#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
// cvt in the combinations nvcc uses: int<->float with every rounding, saturation, f16/bf16/fp8 packing, tf32.
__global__ void convert(const float* x, const double* y, int* o, float* f, unsigned* u, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i]; double b = y[i];
  o[i] = __float2int_rn(a) + __float2int_rz(a) + __float2int_rd(a) + __float2int_ru(a) + (int)b + __double2int_rd(b)
       + (int)(signed char)a + (int)(unsigned short)b + (int)__float2ll_rn(a) + (int)__float2uint_rz(a);
  f[i] = __int2float_rn(o[i]) + __uint2float_rz(u[i]) + __ll2float_rd((long long)b) + rintf(a) + truncf(a) + floorf(a)
       + ceilf(a) + roundf(a) + (float)b + __double2float_rz(b) + __half2float(__float2half_rz(a))
       + __bfloat162float(__float2bfloat16_rn(a)) + __int2float_ru(i);
  __half2 h = __floats2half2_rn(a, f[i]);
  __nv_bfloat162 g = __floats2bfloat162_rn(a, f[i]);
  __nv_fp8x2_e4m3 e(make_float2(a, f[i]));
  __nv_fp8x2_e5m2 e5(h);
  unsigned t; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(a));
  u[i] = *(unsigned*)&h ^ *(unsigned*)&g ^ *(unsigned short*)&e ^ ((unsigned)*(unsigned short*)&e5 << 16) ^ t;
}
