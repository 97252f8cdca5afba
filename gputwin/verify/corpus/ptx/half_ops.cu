#include <cuda_fp16.h>
#include <cuda_bf16.h>
// f16/f16x2/bf16/bf16x2 arithmetic, fma, min/max (incl. NaN), neg/abs, comparisons.
__global__ void half_ops(const __half2* h, const __nv_bfloat162* g, __half2* o, __nv_bfloat162* q, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half2 a = h[i], b = h[(i + 1) % n];
  __half2 r = __hfma2(a, b, __hadd2(a, b)) * __hsub2(a, b);
  r = __hmax2(r, __hneg2(a)); r = __hmin2_nan(r, __habs2(b)); r = __hmul2_sat(r, a);
  __half s = __hadd(__low2half(a), __high2half(b));
  if (__hlt(s, __float2half(1.5f))) r = __halves2half2(s, __hfma(s, s, s));
  o[i] = r;
  __nv_bfloat162 c = g[i], d = g[(i + 1) % n];
  __nv_bfloat162 t = __hfma2(c, d, c) + __hmul2(c, d);
  t = __hmax2(t, __hneg2(d)); t = __habs2(t);
  q[i] = __hgt2(t, c) == __float2bfloat162_rn(1.f) ? t : d;
}
