// cp.async and mbarrier kernels checked against numpy by test_async.py.
#include <stdint.h>

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// Double-buffered cp.async: tile k+1 (16-byte .cg copies, the last `tail` bytes of each tile's source missing:
// src-size zero-fills them) is in flight while tile k is read; out[tile][i] = tile values summed with a neighbour.
extern "C" __global__ void cp_async_double(int* out, const int* g, int ntiles, int tail) {
  __shared__ __align__(16) int buf[2][128];
  int t = threadIdx.x;  // 32 threads, 4 ints (16 bytes) each per tile
  unsigned srcsize = (t == 31) ? 16 - tail : 16;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem(&buf[0][4 * t])), "l"(g + 4 * t),
               "r"(srcsize) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  for (int k = 0; k < ntiles; k++) {
    if (k + 1 < ntiles)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem(&buf[(k + 1) & 1][4 * t])),
                   "l"(g + (k + 1) * 128 + 4 * t), "r"(srcsize) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");  // tile k is complete, tile k+1 may still be in flight
    __syncwarp();
    for (int i = 0; i < 4; i++) {
      int j = 4 * t + i;
      out[k * 128 + j] = buf[k & 1][j] + 1000 * buf[k & 1][(j + 5) & 127];
    }
    __syncwarp();
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// 4- and 8-byte .ca copies with ignore-src (a predicate) and a register src-size.
extern "C" __global__ void cp_async_small(int* out, const int* g) {
  __shared__ __align__(16) int s[128];
  int t = threadIdx.x;
  s[t] = -1; s[t + 64] = -1;
  __syncthreads();
  asm volatile("{ .reg .pred p; setp.eq.u32 p, %2, 1;\n"
               "cp.async.ca.shared.global [%0], [%1], 4, p; }" :: "r"(smem(&s[t])), "l"(g + t), "r"(t % 4)
               : "memory");
  if (t < 32)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" :: "r"(smem(&s[64 + 2 * t])), "l"(g + 64 + 2 * t),
                 "r"(t % 9) : "memory");
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  out[t] = s[t]; out[t + 64] = s[t + 64];
}

__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
  asm volatile("{ .reg .pred done;\n"
               "WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=; }" :: "r"(bar), "r"(parity) : "memory");
}

// Producer/consumer through two mbarriers (full: warp 1 filled the buffer, empty: warp 0 read it), `rounds` times.
extern "C" __global__ void mbarrier_pc(int* out, const int* in, int rounds) {
  __shared__ __align__(8) uint64_t full, empty;
  __shared__ int buf[32];
  int t = threadIdx.x, w = t / 32, lane = t % 32;
  if (t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" :: "r"(smem(&full)) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" :: "r"(smem(&empty)) : "memory");
  }
  __syncthreads();
  for (int r = 0; r < rounds; r++) {
    if (w == 1) {
      if (r > 0) wait_parity(smem(&empty), (r - 1) & 1);
      buf[lane] = in[r * 32 + lane] * 3 + r;
      asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(smem(&full)) : "memory");
    } else {
      wait_parity(smem(&full), r & 1);
      out[r * 32 + lane] = buf[(lane + r) % 32];
      asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(smem(&empty)) : "memory");
    }
  }
}

// Transaction counts and the state-based waits: one arrival expected; thread 0 arrives with expect_tx(64) and the
// phase stays open until complete_tx brings the tx-count back to zero (4 x 16 bytes by threads 1-4).
extern "C" __global__ void mbarrier_tx(unsigned* out) {
  __shared__ __align__(8) uint64_t bar;
  int t = threadIdx.x;
  unsigned b = smem(&bar);
  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
  __syncthreads();
  uint64_t state = 0;
  if (t == 0)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], 64;" : "=l"(state) : "r"(b) : "memory");
  __syncthreads();
  unsigned done0, pend;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
               : "=r"(done0) : "r"(b) : "memory");
  asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(pend) : "l"(state));
  __syncthreads();
  if (t >= 1 && t <= 4) asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], 16;" :: "r"(b) : "memory");
  __syncthreads();
  unsigned done1;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
               : "=r"(done1) : "r"(b) : "memory");
  unsigned done2 = 0;
  if (t == 0)
    asm volatile("{ .reg .pred p; mbarrier.test_wait.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done2) : "r"(b), "l"(state) : "memory");
  out[t] = done0 | (done1 << 1) | (done2 << 2) | (pend << 8);
}
