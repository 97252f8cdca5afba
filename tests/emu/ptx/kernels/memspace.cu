// Module-scope variables: initialised __constant__ tables (ld.const), an initialised __device__ array read from
// global memory, and a __device__ counter.
__constant__ int ctable[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
__constant__ float cscale[2] = {0.5f, -2.25f};
__device__ int gtable[8] = {100, 200, 300, 400, 500, 600, 700, 800};
__device__ unsigned gcount;

extern "C" __global__ void const_table(float* out, int* iout, const int* idx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int k = idx[i];
  out[i] = (float)ctable[k & 15] * cscale[k >> 4 & 1];
  iout[i] = gtable[k & 7] + ctable[(k >> 2) & 15];
}

// Every thread takes a ticket from the module's counter: the tickets are n consecutive numbers.
extern "C" __global__ void global_counter(unsigned* tickets, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tickets[i] = atomicAdd(&gcount, 1u);
}
