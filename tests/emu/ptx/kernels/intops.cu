// Integer corner cases: C division/remainder toward zero with negative operands, bit ops, funnel shifts,
// high multiplies, dot products and 64-bit arithmetic. out[k * n + i] is result k of element i.
extern "C" __global__ void int_divrem(int* out, const int* a, const int* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i];
  unsigned ux = (unsigned)x, uy = (unsigned)y;
  out[0 * n + i] = x / y;
  out[1 * n + i] = x % y;
  out[2 * n + i] = (int)(ux / uy);
  out[3 * n + i] = (int)(ux % uy);
  out[4 * n + i] = x / 7;
  out[5 * n + i] = x % -5;
  out[6 * n + i] = (int)(ux / 10u);
}

extern "C" __global__ void int_bits(unsigned* out, const unsigned* a, const unsigned* b, const unsigned* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i], y = b[i], sh = s[i];
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(sh));
  out[0 * n + i] = __popc(x);
  out[1 * n + i] = __clz(x);
  out[2 * n + i] = __brev(x);
  out[3 * n + i] = __byte_perm(x, y, sh & 0x7777);
  out[4 * n + i] = r;                               // generic prmt: selector msb replicates the byte's sign
  out[5 * n + i] = __funnelshift_l(x, y, sh);       // shf.l.wrap: shift mod 32
  out[6 * n + i] = __funnelshift_r(x, y, sh);
  out[7 * n + i] = __funnelshift_lc(x, y, sh & 63); // shf.l.clamp: shift min(s, 32)
  out[8 * n + i] = __funnelshift_rc(x, y, sh & 63);
  out[9 * n + i] = __funnelshift_l(x, x, sh);       // rotate left
  out[10 * n + i] = x << (sh & 31);
  out[11 * n + i] = (unsigned)((int)x >> (sh & 31));
  out[12 * n + i] = x >> (sh & 31);
  out[13 * n + i] = __ffs((int)x);
  out[14 * n + i] = (x & ~y) ^ (x | (y >> 3));
  out[15 * n + i] = __popcll(((unsigned long long)x << 32) | y) + __clzll((unsigned long long)y);
}

extern "C" __global__ void int_mul(int* out, const int* a, const int* b, const int* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i], z = c[i];
  out[0 * n + i] = __mulhi(x, y);
  out[1 * n + i] = (int)__umulhi((unsigned)x, (unsigned)y);
  out[2 * n + i] = __dp4a(x, y, z);
  out[3 * n + i] = (int)__dp4a((unsigned)x, (unsigned)y, (unsigned)z);
  out[4 * n + i] = __dp2a_lo(x, y, z);
  out[5 * n + i] = (int)((unsigned)x * (unsigned)y + (unsigned)z);  // wraps
  out[6 * n + i] = __mul24(x >> 8, y >> 8);                 // operands within 24-bit signed range
  out[7 * n + i] = __hadd(x, y);                    // (x + y) >> 1 without overflow
  out[8 * n + i] = __rhadd(x, y);
  out[9 * n + i] = (int)__sad(x, y, (unsigned)z);
  out[10 * n + i] = min(x, y) ^ max(x, z);
  out[11 * n + i] = abs(y);
}

extern "C" __global__ void int64_ops(long long* out, const long long* a, const long long* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  long long x = a[i], y = b[i];
  unsigned long long ux = (unsigned long long)x, uy = (unsigned long long)y;
  out[0 * n + i] = x / y;
  out[1 * n + i] = x % y;
  out[2 * n + i] = (long long)(ux / uy);
  out[3 * n + i] = (long long)(ux % uy);
  out[4 * n + i] = (long long)(ux * uy + 12345);
  out[5 * n + i] = __mul64hi(x, y);
  out[6 * n + i] = (long long)__umul64hi(ux, uy);
  out[7 * n + i] = x >> (y & 63);
  out[8 * n + i] = (long long)(ux >> (y & 63)) ^ (long long)(ux << (x & 63));
  out[9 * n + i] = __brevll(ux) + (long long)(x < y);
}
