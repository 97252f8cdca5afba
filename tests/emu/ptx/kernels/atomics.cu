// Atomics: histograms in global and shared memory, a CAS loop, and every read-modify-write flavour.
extern "C" __global__ void hist_global(int* hist, const int* x, int n, int bins) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&hist[x[i] % bins], 1);
}

extern "C" __global__ void hist_shared(unsigned* hist, const int* x, int n) {
  __shared__ unsigned local[64];
  for (int b = threadIdx.x; b < 64; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[x[i] & 63], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 64; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], local[b]);
}

__device__ float atomic_max_float(float* addr, float v) {
  int* p = (int*)addr;
  int old = *p, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= v) break;
    old = atomicCAS(p, assumed, __float_as_int(v));
  } while (old != assumed);
  return __int_as_float(old);
}

// out[0] = max over x via CAS; sums[0..2]: f32/f64/u64 atomicAdd of integer values (exact in any order).
extern "C" __global__ void cas_fmax(float* mx, float* fsum, double* dsum, unsigned long long* usum, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomic_max_float(mx, x[i]);
  atomicAdd(fsum, rintf(x[i]));
  atomicAdd(dsum, (double)rintf(x[i]) * 0.25);
  atomicAdd(usum, (unsigned long long)(i + 1) << 33);
}

// ctr[0]: atomicInc wrapping at lim; ctr[1]: atomicDec from its start; ctr[2]: atomicExch of thread ids.
// olds[k * n + i]: the value thread i saw (their multiset is schedule-independent).
extern "C" __global__ void atomic_incdec(unsigned* ctr, unsigned* olds, int n, unsigned lim) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  olds[0 * n + i] = atomicInc(&ctr[0], lim);
  olds[1 * n + i] = atomicDec(&ctr[1], lim);
  olds[2 * n + i] = atomicExch(&ctr[2], (unsigned)i + 1000u);
}

extern "C" __global__ void atomic_minmax(int* r, unsigned* u, long long* r64, const int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i];
  atomicMin(&r[0], v);
  atomicMax(&r[1], v);
  atomicAnd(&r[2], ~(1 << (i & 31)) | v);
  atomicOr(&r[3], v & (1 << (i & 31)));
  atomicXor(&r[4], v);
  atomicSub(&r[5], v);
  atomicMin(&u[0], (unsigned)v);
  atomicMax(&u[1], (unsigned)v);
  atomicMin(&r64[0], (long long)v * 1000003);
  atomicMax(&r64[1], (long long)v * 1000003);
}
