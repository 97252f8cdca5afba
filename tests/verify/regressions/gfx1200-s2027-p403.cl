// gputwin fuzz: seed 2027 program 403 on gfx1200: f2 of work-item 0: host 0x7149f2ca, emulator 0x80000000 (reduced to 2 of 10 statements)

#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); \
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)

static inline uint fb(float x) { return x != x ? 0x7fc00000u : as_uint(x); }
static inline uint udv(uint a, uint b) { return b ? a / b : a; }
static inline uint urm(uint a, uint b) { return b ? a % b : a; }
static inline uint sdv(uint a, uint b) {
  return (b == 0u || (a == 0x80000000u && b == ~0u)) ? a : (uint)((int)a / (int)b); }
static inline uint shl(uint a, uint b) { return a << (b & 31u); }
static inline uint shr(uint a, uint b) { return a >> (b & 31u); }
static inline uint sar(uint a, uint b) { return (uint)((int)a >> (b & 31u)); }
static inline uint mhi(uint a, uint b) { return (uint)(((ulong)a * (ulong)b) >> 32); }
static inline uint clz(uint a) { return a ? (uint)__builtin_clz(a) : 32u; }
static inline uint f2u(float f) { return (f > -1.0f && f < 4294967040.0f) ? (uint)f : 0u; }
static inline float fdv(float a, float b) { float x = __builtin_fabsf(a), y = __builtin_fabsf(b);
  return (x < 1e-14f || x > 1e14f || y < 1e-14f || y > 1e14f) ? 0.5f : a / b; }  /* FINDINGS.md #2 */
static inline float fmn(float a, float b) { return a < b ? a : b; }

__kernel void fz403(__global uint *out, __global const uint *in, __global uint *acc) {
  uint lid = __builtin_amdgcn_workitem_id_x(), gid = __builtin_amdgcn_workgroup_id_x(), tid = gid * 64u + lid;
  __local uint lds[64], lacc[4];
  if (lid < 4u) lacc[lid] = lid == 2u ? 0xffffffffu : 0u;
  BARRIER();
  uint u0 = in[(tid * 7u + 117u) % 128u];
  uint u1 = in[(tid * 3u + 92u) % 128u];
  uint u2 = in[(tid * 7u + 73u) % 128u];
  uint u3 = in[(tid * 7u + 70u) % 128u];
  uint u4 = in[(tid * 5u + 89u) % 128u];
  float f0 = (float)(in[(tid + 6u) % 128u] & 0xfffu) * 0.25f - 391.0f;
  float f1 = (float)(in[(tid + 19u) % 128u] & 0xfffu) * 0.25f - 57.0f;
  float f2 = (float)(in[(tid + 87u) % 128u] & 0xfffu) * 0.25f - 114.0f;
  for (uint k0 = 0u; k0 < 2u; k0++) {
    f2 = fmn(1e30f, __builtin_fabsf((1e30f - (float)(int)(gid))));
  }
  BARRIER();
  out[tid * 8u + 0u] = u0;
  out[tid * 8u + 1u] = u1;
  out[tid * 8u + 2u] = u2;
  out[tid * 8u + 3u] = u3;
  out[tid * 8u + 4u] = u4;
  out[tid * 8u + 5u] = fb(f0);
  out[tid * 8u + 6u] = fb(f1);
  out[tid * 8u + 7u] = fb(f2);
  if (lid < 4u) acc[8u + gid * 4u + lid] = lacc[lid];
}
