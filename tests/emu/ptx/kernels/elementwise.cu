#include <cuda_fp16.h>
#include <cuda_bf16.h>
// Elementwise IEEE arithmetic in every float type: out[k * n + i] is op k on element i (see cases.py for the ops).
extern "C" __global__ void ew_f32(float* out, const float* a, const float* b, const float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i], z = c[i];
  out[0 * n + i] = x + y;
  out[1 * n + i] = x - y;
  out[2 * n + i] = x * y;
  out[3 * n + i] = x / y;
  out[4 * n + i] = fmaf(x, y, z);
  out[5 * n + i] = sqrtf(fabsf(x));
  out[6 * n + i] = __fmul_rn(-x, 0.5f) + fabsf(y);   // __fmul_rn: never contracted into an fma
}

extern "C" __global__ void ew_f64(double* out, const double* a, const double* b, const double* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = a[i], y = b[i], z = c[i];
  out[0 * n + i] = x + y;
  out[1 * n + i] = x - y;
  out[2 * n + i] = x * y;
  out[3 * n + i] = x / y;
  out[4 * n + i] = fma(x, y, z);
  out[5 * n + i] = sqrt(fabs(x));
  out[6 * n + i] = (double)(float)x + (double)i;
}

// f16 scalar ops; inputs and outputs are raw 16-bit patterns.
extern "C" __global__ void ew_f16(unsigned short* out, const unsigned short* a, const unsigned short* b,
                                  const unsigned short* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half x = __ushort_as_half(a[i]), y = __ushort_as_half(b[i]), z = __ushort_as_half(c[i]);
  out[0 * n + i] = __half_as_ushort(__hadd(x, y));
  out[1 * n + i] = __half_as_ushort(__hsub(x, y));
  out[2 * n + i] = __half_as_ushort(__hmul(x, y));
  out[3 * n + i] = __half_as_ushort(__hfma(x, y, z));
  out[4 * n + i] = __half_as_ushort(__hneg(x));
  out[5 * n + i] = __half_as_ushort(__hmax(x, y));
  out[6 * n + i] = __half_as_ushort(__hmin(x, y));
  out[7 * n + i] = (unsigned short)__hlt(x, y);
}

// Packed f16x2 ops on pairs (a[2i], a[2i+1]); outputs are 32-bit packed patterns.
extern "C" __global__ void ew_f16x2(unsigned* out, const unsigned* a, const unsigned* b, const unsigned* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned ua = a[i], ub = b[i], uc = c[i];
  __half2 x = *reinterpret_cast<__half2*>(&ua), y = *reinterpret_cast<__half2*>(&ub), z = *reinterpret_cast<__half2*>(&uc);
  __half2 r[4] = {__hadd2(x, y), __hmul2(x, y), __hfma2(x, y, z), __hsub2(x, y)};
  for (int k = 0; k < 4; k++) out[k * n + i] = *reinterpret_cast<unsigned*>(&r[k]);
}

// bf16 ops (on sm_80 nvcc lowers add/sub/mul to fma.rn.bf16); plus f32 -> bf16 RNE conversion.
extern "C" __global__ void ew_bf16(unsigned short* out, const unsigned short* a, const unsigned short* b,
                                   const unsigned short* c, const float* f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 x = __ushort_as_bfloat16(a[i]), y = __ushort_as_bfloat16(b[i]), z = __ushort_as_bfloat16(c[i]);
  out[0 * n + i] = __bfloat16_as_ushort(__hadd(x, y));
  out[1 * n + i] = __bfloat16_as_ushort(__hsub(x, y));
  out[2 * n + i] = __bfloat16_as_ushort(__hmul(x, y));
  out[3 * n + i] = __bfloat16_as_ushort(__hfma(x, y, z));
  out[4 * n + i] = __bfloat16_as_ushort(__float2bfloat16_rn(f[i]));
  out[5 * n + i] = __bfloat16_as_ushort(__float2bfloat16_rn(__bfloat162float(x) * 3.0f));
}
