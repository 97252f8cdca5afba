// Kernels that must stop with an error: a store far outside any buffer (EmuFault), and __trap() (EmuTrap).
extern "C" __global__ void oob_store(int* p, long long i) { p[i] = 1; }

extern "C" __global__ void trap_on_negative(int* out, const int* x) {
  int v = x[threadIdx.x];
  if (v < 0) __trap();
  out[threadIdx.x] = v;
}
