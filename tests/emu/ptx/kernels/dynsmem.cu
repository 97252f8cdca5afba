// Dynamic shared memory (extern __shared__), sized by the launch.
extern "C" __global__ void dyn_reverse(float* out, const float* x) {
  extern __shared__ float s[];                       // blockDim.x floats
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  s[t] = x[base + t];
  __syncthreads();
  out[base + t] = s[blockDim.x - 1 - t];
}

// One dynamic buffer carved into a double array (first) and an int array after it.
extern "C" __global__ void dyn_carve(double* out, const double* x, const int* y) {
  extern __shared__ __align__(16) unsigned char raw[];
  double* d = (double*)raw;
  int* k = (int*)(raw + blockDim.x * sizeof(double));
  int t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  d[t] = x[base + t];
  k[t] = y[base + t];
  __syncthreads();
  out[base + t] = d[(t + 1) % n] * 2.0 + (double)k[(t + n - 1) % n];
}
