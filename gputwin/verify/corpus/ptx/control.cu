// Divergent loops, switch tables (brx.idx), early exit, trap, nanosleep spin-wait, clock/globaltimer, special registers.
__global__ void control(int* o, volatile int* flag, int n) {
  int t = threadIdx.x, acc = 0;
  for (int i = 0; i < (t & 7) * n; i++) { if (i % 3 == 0) continue; acc += i; if (acc > 1000) break; }
  switch (t % 9) {
    case 0: acc += 11; break; case 1: acc *= 3; break; case 2: acc -= 7; break; case 3: acc ^= 5; break;
    case 4: acc <<= 2; break; case 5: acc = -acc; break; case 6: acc += t; break; case 7: acc /= 3; break;
    default: acc = 0;
  }
  if (t == 40) { while (flag[0] == 0) __nanosleep(100); }
  if (t == 41) flag[0] = 1;
  if (n < 0) __trap();
  if (n == 12345) asm volatile("exit;");
  unsigned sm, warpid, nw, lane; long long c0 = clock64(); unsigned long long gt;
  asm("mov.u32 %0, %%smid;" : "=r"(sm)); asm("mov.u32 %0, %%warpid;" : "=r"(warpid)); asm("mov.u32 %0, %%nwarpid;" : "=r"(nw));
  asm("mov.u32 %0, %%laneid;" : "=r"(lane)); asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
  unsigned dsm; asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dsm));
  o[t] = acc + (int)(clock64() - c0 > 0) + sm + warpid + nw + lane + (int)(gt & 1) + dsm + (int)clock() + gridDim.z + blockDim.y;
}
