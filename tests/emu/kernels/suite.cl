#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())

__kernel void saxpy(__global float *out, __global const float *x, __global const float *y, float a, int n) {
  int i = GID;
  if (i < n) out[i] = a * x[i] + y[i];
}

__kernel void half_math(__global half *out, __global const half *a, __global const half *b, int n) {
  int i = GID;
  if (i < n) out[i] = a[i] * b[i] + (half)1.5f;
}

__kernel void int_ops(__global int *q, __global int *r, __global uint *bits, __global const int *a,
                      __global const int *b, int n) {
  int i = GID;
  if (i >= n) return;
  q[i] = a[i] / b[i];
  r[i] = a[i] % b[i];
  uint u = (uint)a[i];
  bits[i] = (__builtin_popcount(u) << 24) ^ (u >> 3) ^ (u << 7) ^ (uint)__builtin_clz(u | 1) ^ ((uint)b[i] & 0xff00u);
}

__kernel void udiv64(__global ulong *out, __global const ulong *a, __global const ulong *b, int n) {
  int i = GID;
  if (i < n) out[i] = a[i] / b[i] + a[i] % 7;
}

__kernel void fdiv(__global float *out, __global const float *a, __global const float *b, int n) {
  int i = GID;
  if (i < n) out[i] = a[i] / b[i];
}

__kernel void reduce(__global float *out, __global const float *in) {
  __local float tmp[256];
  uint l = __builtin_amdgcn_workitem_id_x();
  uint bs = __builtin_amdgcn_workgroup_size_x();
  tmp[l] = in[GID];
  __builtin_amdgcn_s_barrier();
  for (uint s = bs / 2; s > 0; s >>= 1) {
    if (l < s) tmp[l] += tmp[l + s];
    __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
    __builtin_amdgcn_s_barrier();
  }
  if (l == 0) out[__builtin_amdgcn_workgroup_id_x()] = tmp[0];
}

#define T 16
__kernel void matmul(__global float *C, __global const float *A, __global const float *B, int N) {
  __local float As[T][T], Bs[T][T];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int row = __builtin_amdgcn_workgroup_id_y() * T + ty, col = __builtin_amdgcn_workgroup_id_x() * T + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < N; k0 += T) {
    As[ty][tx] = A[row * N + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * N + col];
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    for (int k = 0; k < T; k++) acc = __builtin_fmaf(As[ty][k], Bs[k][tx], acc);
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  }
  C[row * N + col] = acc;
}

__kernel void histogram(__global int *hist, __global int *mx, __global const int *in, int n) {
  int i = GID;
  if (i < n) {
    __atomic_fetch_add(&hist[in[i] & 15], 1, __ATOMIC_RELAXED);
    __atomic_fetch_max(mx, in[i], __ATOMIC_RELAXED);
  }
}

__kernel void collatz(__global int *steps, int n) {
  int i = GID;
  if (i >= n) return;
  uint x = i + 1;
  int s = 0;
  while (x != 1) { x = (x & 1) ? 3 * x + 1 : x >> 1; s++; }
  steps[i] = s;
}

__kernel void math(__global float *out, __global const float *a, int n) {
  int i = GID;
  if (i >= n) return;
  float x = a[i];
  out[4 * i + 0] = __builtin_sqrtf(__builtin_fabsf(x));
  out[4 * i + 1] = __builtin_floorf(x) + __builtin_fminf(x, 0.25f) * __builtin_copysignf(2.0f, x);
  out[4 * i + 2] = __builtin_amdgcn_rcpf(x);
  out[4 * i + 3] = (float)(int)(x * 100.0f) + __builtin_amdgcn_fractf(x);
}

__kernel void dmath(__global double *out, __global const double *a, int n) {
  int i = GID;
  if (i < n) out[i] = a[i] * a[i] + 0.5 * a[i] - 3.0;
}

__kernel void private_array(__global int *out, __global const int *idx, int n) {
  int p[64];
  int i = GID;
  for (int k = 0; k < 64; k++) p[k] = k * i;
  if (i < n) out[i] = p[idx[i] & 63];
}

__kernel void ids3d(__global uint *out) {
  uint x = __builtin_amdgcn_workitem_id_x(), y = __builtin_amdgcn_workitem_id_y(), z = __builtin_amdgcn_workitem_id_z();
  uint gx = __builtin_amdgcn_workgroup_id_x(), gy = __builtin_amdgcn_workgroup_id_y(), gz = __builtin_amdgcn_workgroup_id_z();
  uint bx = __builtin_amdgcn_workgroup_size_x(), by = __builtin_amdgcn_workgroup_size_y(), bz = __builtin_amdgcn_workgroup_size_z();
  __constant ushort *p16 = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();
  __constant uint *p32 = (__constant uint *)__builtin_amdgcn_dispatch_ptr();
  uint X = gx * bx + x, Y = gy * by + y, Z = gz * bz + z;
  uint W = p32[3], H = p32[4];  // grid_size_x/y in work-items from the hsa_kernel_dispatch_packet
  out[(Z * H + Y) * W + X] = (x | y << 4 | z << 8 | gx << 12 | gy << 16 | gz << 20) ^ ((uint)p16[2] << 24);
}

__kernel void narrow(__global char *c8, __global short *s16, __global const char *a8, __global const short *b16, int n) {
  int i = GID;
  if (i >= n) return;
  c8[i] = (char)(a8[i] * 3 - 7);
  s16[i] = (short)(b16[i] >> 2) + (short)a8[i];
}

__kernel void convert(__global float *f, __global int *k, __global double *d, __global const int *a, __global const double *b, int n) {
  int i = GID;
  if (i >= n) return;
  f[i] = (float)a[i] * 0.5f;
  k[i] = (int)(b[i] * 3.0);
  d[i] = b[i] / (double)(a[i] | 1) + (double)(long)a[i];
}

__kernel void local_atomics(__global int *out, __global const int *in) {
  __local int bins[8];
  uint l = __builtin_amdgcn_workitem_id_x();
  if (l < 8) bins[l] = 0;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  __atomic_fetch_add(&bins[in[GID] & 7], 1, __ATOMIC_RELAXED);
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  if (l < 8) out[__builtin_amdgcn_workgroup_id_x() * 8 + l] = bins[l];
}

__kernel void cross_lane(__global int *out, __global const int *in) {
  int i = GID;
  uint l = __builtin_amdgcn_workitem_id_x();
  int v = in[i];
  int first = __builtin_amdgcn_readfirstlane(v);
  int perm = __builtin_amdgcn_ds_bpermute((int)((l ^ 1) * 4), v);
  out[i] = first * 1000 + perm;
}

__kernel void nested(__global int *out, __global const int *in, int n) {
  int i = GID;
  if (i >= n) return;
  int acc = 0;
  for (int k = 0; k < (in[i] & 15); k++) {
    if (k & 1) acc += k * in[i];
    else if (k % 3 == 0) { acc ^= k; if (acc > 100) break; }
    else acc -= 1;
  }
  out[i] = acc;
}

__attribute__((noinline)) int helper(int x, __global const int *tbl) {  // a real call: s_swappc, stack in scratch
  int p[16];
  for (int k = 0; k < 16; k++) p[k] = tbl[k] * x;
  return p[x & 15] + 1;
}

__kernel void calls(__global int *out, __global const int *tbl, int n) {
  int i = GID;
  if (i < n) out[i] = helper(i, tbl);
}

__attribute__((noinline)) void bump(int *p, int v) { *p += v; }  // a generic pointer: flat instructions

__kernel void generic_ptr(__global int *out) {  // flat accesses through the LDS and private apertures
  __local int l[64];
  int t = __builtin_amdgcn_workitem_id_x();
  l[t] = t;
  bump(&l[t], 5);
  int priv[2] = {t, 0};
  bump(&priv[t & 1], 7);
  out[GID] = 0;
  bump(&out[GID], l[t] * 100 + priv[0]);
}

__kernel void subgroup(__global int *out, __global const int *in, __global long *a64, __global float *af) {
  int i = GID;
  int v = in[i];
  out[3 * i + 0] = __builtin_amdgcn_update_dpp(-1, v, 0x111, 0xf, 0xf, false);  // row_shr:1, old value -1 at row starts
  out[3 * i + 1] = __builtin_amdgcn_mov_dpp(v, 0x1b, 0xf, 0xf, true);  // quad_perm:[3,2,1,0]
  out[3 * i + 2] = (int)__builtin_amdgcn_mbcnt_lo(~0u, 0);  // active lanes below me among lanes 0..31
  __atomic_fetch_add(a64, (long)v << 20, __ATOMIC_RELAXED);  // 64-bit atomics
  __atomic_fetch_add(af, (float)(v & 7), __ATOMIC_RELAXED);  // float atomics (exact: small integers)
}

typedef struct { float x; int k; short s; char c; } rec;

__kernel void mixed(__global float4 *o4, __global const float4 *a4, __global half2 *h2, __global const rec *r,
                    __global ulong *u, __global const uchar *bytes, int n) {  // vectors, structs, switch, 128-bit
  int i = GID;
  if (i >= n) return;
  float4 a = a4[i];
  o4[i] = a * (float4)(2.0f, -1.0f, 0.5f, 3.0f) + a.wzyx;  // CDNA: v_pk_fma_f32 with op_sel
  half2 h = h2[i];
  h2[i] = h * h + (half2)(1.0h, -2.0h);
  rec q = r[i];
  ulong v = ((ulong)q.k << 33) ^ (ulong)(long)q.s ^ ((ulong)q.c << 8) ^ (ulong)(q.x * 4.0f);
  v += (ulong)__builtin_clzll(v | 1) + (ulong)bytes[i * 3 + 1] * 65536u;  // OpenCL long long is 128-bit
  switch (i & 3) { case 0: v ^= 0x1234; break; case 1: v *= 3; break; case 2: v >>= 5; break; default: v = ~v; }
  u[i] = v + (ulong)(((unsigned __int128)((ulong)i * 0x9e3779b97f4a7c15ul) * 0x100000001ul) >> 64);
}
__kernel void math2(__global float *f, __global double *d, __global uint *u, __global const float *a, __global const uint *b) {
  int i = GID;
  float x = a[i]; uint y = b[i];
  f[6 * i + 0] = __builtin_amdgcn_exp2f(x * 0.25f);
  f[6 * i + 1] = __builtin_amdgcn_logf(__builtin_fabsf(x) + 1.0f);
  f[6 * i + 2] = __builtin_amdgcn_rsqf(__builtin_fabsf(x) + 0.5f);
  f[6 * i + 3] = __builtin_amdgcn_sinf(x * 0.01f);
  f[6 * i + 4] = __builtin_amdgcn_ldexpf(x, (int)(y & 7) - 3);
  f[6 * i + 5] = (float)(half)x;
  double dx = (double)x;
  d[2 * i + 0] = __builtin_sqrt(__builtin_fabs(dx) + 2.0);
  d[2 * i + 1] = (double)(long)(dx * 1e6) / 3.0 + __builtin_fma(dx, dx, -1.0);
  u[4 * i + 0] = __builtin_bitreverse32(y);
  u[4 * i + 1] = __builtin_amdgcn_ubfe(y, 3, 9) ^ (uint)__builtin_amdgcn_sbfe((int)y, 5, 7);
  u[4 * i + 2] = __builtin_amdgcn_alignbit(y, y * 7u, 11) + __builtin_amdgcn_perm(y, ~y, 0x05040100u);
  u[4 * i + 3] = __builtin_popcountl((ulong)y * 0x100000001ul) + __builtin_amdgcn_sad_u8(y, ~y, 3u);
}
__kernel void lds_vec(__global float4 *out, __global const float4 *in) {
  __local float4 t[64];
  __local float acc;
  uint l = __builtin_amdgcn_workitem_id_x();
  if (l == 0) acc = 0.0f;
  t[l] = in[GID];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  float4 v = t[63 - l];
  __atomic_fetch_add(&acc, v.x, __ATOMIC_RELAXED);
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  out[GID] = v + (float4)(acc);
}

