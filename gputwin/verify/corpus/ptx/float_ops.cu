// f32/f64 arithmetic with explicit rounding, approximate transcendental functions, min/max, copysign, testp.
__global__ void float_ops(const float* x, const double* y, float* o, double* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = x[(i + 1) % n];
  o[i] = __fadd_rz(a, b) + __fmul_ru(a, b) + __fmaf_rd(a, b, 1.f) + __fdiv_rn(a, b) + a / b + __fdividef(a, b)
       + __frcp_rn(a) + sqrtf(a) + __fsqrt_rz(a) + rsqrtf(a) + __expf(a) + __logf(a) + __sinf(a) + __cosf(a)
       + fminf(a, b) + fmaxf(a, b) + copysignf(a, b) + (isfinite(a) ? 1.f : 0.f) + (isnan(b) ? 2.f : 0.f)
       + fabsf(a) + __saturatef(a) + exp2f(a) + tanhf(a) + fmaf(a, b, 2.f);
  double c = y[i];
  p[i] = __dadd_rn(c, 1.0) + __dmul_rz(c, c) + __fma_rd(c, c, c) + c / 3.0 + sqrt(c) + __drcp_rn(c) + fmin(c, 2.0)
       + rsqrt(c) + fabs(c) + (double)a;
}
