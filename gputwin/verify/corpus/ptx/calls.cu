#include <cstdio>
// .func with params/returns, recursion through a .local stack, function pointers (prototypes), printf, struct params.
struct Pair { int a; float b; double c[2]; };
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ float twice(float x) { return 2 * x; }
__device__ __noinline__ float thrice(float x) { return 3 * x; }
__device__ __noinline__ Pair mk(Pair p, int k) { p.a += k; p.b *= k; p.c[1] = p.c[0] + k; return p; }
typedef float (*fn)(float);
__global__ void calls(int* o, float* f, Pair p, int sel) {
  int t = threadIdx.x;
  fn g = (sel + t) & 1 ? twice : thrice;
  o[t] = fib(t % 12);
  f[t] = g((float)t);
  Pair q = mk(p, t);
  f[t] += q.b + (float)q.c[1] + q.a;
  if (t == 0) printf("fib %d %f\n", o[t], f[t]);
}
