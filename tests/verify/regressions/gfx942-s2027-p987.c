#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned int uint;
typedef unsigned long ulong;
static inline uint as_uint(float f) { uint u; memcpy(&u, &f, 4); return u; }
static inline void a_min(uint *p, uint v) { if (v < *p) *p = v; }
static inline void a_max(uint *p, uint v) { if (v > *p) *p = v; }

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

static void fz987(uint *out, const uint *in, uint *acc) {
  for (uint gid = 0; gid < 2u; gid++) {
    uint lds[64], lacc[4] = {0u, 0u, 0xffffffffu, 0u}; (void)lds; (void)lacc;
    uint u0[64], u1[64], u2[64], u3[64], u4[64]; float f0[64], f1[64], f2[64];
    for (uint lid = 0; lid < 64u; lid++) { uint tid = gid * 64u + lid; (void)tid;
      u0[lid] = in[(tid * 3u + 17u) % 128u];
      u1[lid] = in[(tid * 1u + 117u) % 128u];
      u2[lid] = in[(tid * 1u + 35u) % 128u];
      u3[lid] = in[(tid * 7u + 101u) % 128u];
      u4[lid] = in[(tid * 1u + 11u) % 128u];
      f0[lid] = (float)(in[(tid + 117u) % 128u] & 0xfffu) * 0.25f - 49.0f;
      f1[lid] = (float)(in[(tid + 63u) % 128u] & 0xfffu) * 0.25f - 264.0f;
      f2[lid] = (float)(in[(tid + 27u) % 128u] & 0xfffu) * 0.25f - 489.0f;
    }
    for (uint lid = 0; lid < 64u; lid++) { uint tid = gid * 64u + lid; (void)tid;
      if (lid >= 50u) {
        u2[lid] = (sar(fb(f1[lid]), (u3[lid] * 3081102242u)) * ((~u4[lid]) - 4294967294u));
      } else {
        f2[lid] = fmn(fdv((f0[lid] - (float)(int)(u1[lid])), f2[lid]), ((0.5f + f1[lid]) + (0.5f + (float)(u3[lid]))));
      }
      f1[lid] = __builtin_fabsf(f2[lid]);
    }
    for (uint lid = 0; lid < 64u; lid++) { uint tid = gid * 64u + lid; (void)tid;
      out[tid * 8u + 0u] = u0[lid];
      out[tid * 8u + 1u] = u1[lid];
      out[tid * 8u + 2u] = u2[lid];
      out[tid * 8u + 3u] = u3[lid];
      out[tid * 8u + 4u] = u4[lid];
      out[tid * 8u + 5u] = fb(f0[lid]);
      out[tid * 8u + 6u] = fb(f1[lid]);
      out[tid * 8u + 7u] = fb(f2[lid]);
    }
    for (uint j = 0; j < 4u; j++) acc[8u + gid * 4u + j] = lacc[j];
  }
}
int main(void) {
  static uint in[128], out[1024], acc[16], acc0[16];
  for (int g = 0; g < 4; g++) for (int j = 0; j < 4; j++) acc0[g * 4 + j] = j == 2 ? 0xffffffffu : 0u;
  if (fread(in, 4, 128, stdin) != 128) return 2;
  memcpy(acc, acc0, sizeof acc); memset(out, 0, sizeof out); fz987(out, in, acc);
  fwrite(out, 4, 1024, stdout); fwrite(acc, 4, 16, stdout);
  return 0;
}
