// Integer arithmetic: mul.hi/wide, mad, div/rem, popc/clz/brev/bfe/bfi/prmt/shf, dp4a, carry chains.
__global__ void int_ops(const int* a, const unsigned* b, long long* o, unsigned long long* w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i]; unsigned y = b[i];
  o[i] = (long long)x * y + __mulhi(x, 7) + __umulhi(y, 9u) + x / 3 + x % 5 + (y >> (x & 31)) + (x << 3);
  o[i] += __popc(y) + __clz(x) + __brev(y) + __byte_perm(x, y, 0x5410) + __funnelshift_l(x, y, 5) + __ffs(x);
  o[i] += __dp4a(x, (int)y, 3) + __dp2a_lo(x, (int)y, 1) + abs(x) + min(x, 4) + max(y, 8u) + __sad(x, 5, 1u);
  unsigned long long s = (unsigned long long)y * 0x100000001ull + w[i];
  w[i] = s + __umul64hi(s, s) + (unsigned long long)(__int128)s;
  o[i] += __mul24(x, 3) + __umul24(y, 5) + (x ^ (int)y) + (~x & (int)y) + ((x | 1) ? 1 : 0);
}
