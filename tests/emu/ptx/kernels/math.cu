#include <cuda_fp16.h>
// Math built-ins with exact IEEE answers. a, b: finite (b nonzero); s: specials (NaN, inf, ties, huge);
// c: finite nonzero or NaN; k: int32. f[j * n + i] / r[j * n + i] are result j of element i.
extern "C" __global__ void math_exact(float* f, int* r, const float* a, const float* b, const float* s,
                                      const float* c, const int* k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i], z = s[i], w = c[i];
  f[0 * n + i] = sqrtf(fabsf(x));
  f[1 * n + i] = __fdiv_rn(x, y);
  f[2 * n + i] = __fmul_rz(x, y);
  f[3 * n + i] = __fadd_rd(x, y);
  f[4 * n + i] = __fadd_ru(x, y);
  f[5 * n + i] = __fmaf_rz(x, y, x);
  f[6 * n + i] = rintf(z);
  f[7 * n + i] = truncf(z);
  f[8 * n + i] = floorf(z);
  f[9 * n + i] = ceilf(z);
  f[10 * n + i] = copysignf(z, w);
  f[11 * n + i] = fminf(z, w);
  f[12 * n + i] = fmaxf(z, w);
  f[13 * n + i] = __saturatef(z);
  f[14 * n + i] = __int2float_rz(k[i]);
  f[15 * n + i] = __int2float_rn(k[i]);
  f[16 * n + i] = __half2float(__float2half_rn(x));
  f[17 * n + i] = __fsqrt_rn(fabsf(y));
  r[0 * n + i] = __float2int_rz(z);
  r[1 * n + i] = __float2int_rn(z);
  r[2 * n + i] = __float2int_rd(z);
  r[3 * n + i] = __float2int_ru(z);
  r[4 * n + i] = (int)__float2uint_rz(z);
  r[5 * n + i] = __half_as_ushort(__float2half_rn(x));
  r[6 * n + i] = isnan(z) ? 1 : 0;
  r[7 * n + i] = isinf(z) ? 1 : 0;
  r[8 * n + i] = isfinite(w) ? 1 : 0;
  r[9 * n + i] = signbit(z) ? 1 : 0;
}

// Hardware approximations (MUFU): checked only within the CUDA Programming Guide's error bounds (see cases.py).
extern "C" __global__ void math_approx(float* f, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i];
  f[0 * n + i] = __expf(x);
  f[1 * n + i] = __logf(y);
  f[2 * n + i] = __sinf(x);
  f[3 * n + i] = __cosf(x);
  f[4 * n + i] = rsqrtf(y);
  f[5 * n + i] = __fdividef(x, y);
  f[6 * n + i] = exp2f(x);
  f[7 * n + i] = __log2f(y);
}
