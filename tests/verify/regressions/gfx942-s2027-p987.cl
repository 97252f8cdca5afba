// gputwin fuzz: seed 2027 program 987 on gfx942: f1 of work-item 94: host 0x4302c000, emulator 0x4301c000 (reduced to 4 of 20 statements)

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

__kernel void fz987(__global uint *out, __global const uint *in, __global uint *acc) {
  uint lid = __builtin_amdgcn_workitem_id_x(), gid = __builtin_amdgcn_workgroup_id_x(), tid = gid * 64u + lid;
  __local uint lds[64], lacc[4];
  if (lid < 4u) lacc[lid] = lid == 2u ? 0xffffffffu : 0u;
  BARRIER();
  uint u0 = in[(tid * 3u + 17u) % 128u];
  uint u1 = in[(tid * 1u + 117u) % 128u];
  uint u2 = in[(tid * 1u + 35u) % 128u];
  uint u3 = in[(tid * 7u + 101u) % 128u];
  uint u4 = in[(tid * 1u + 11u) % 128u];
  float f0 = (float)(in[(tid + 117u) % 128u] & 0xfffu) * 0.25f - 49.0f;
  float f1 = (float)(in[(tid + 63u) % 128u] & 0xfffu) * 0.25f - 264.0f;
  float f2 = (float)(in[(tid + 27u) % 128u] & 0xfffu) * 0.25f - 489.0f;
  if (lid >= 50u) {
    u2 = (sar(fb(f1), (u3 * 3081102242u)) * ((~u4) - 4294967294u));
  } else {
    f2 = fmn(fdv((f0 - (float)(int)(u1)), f2), ((0.5f + f1) + (0.5f + (float)(u3))));
  }
  f1 = __builtin_fabsf(f2);
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
