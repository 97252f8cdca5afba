#include <cuda_fp16.h>
// Templated elementwise kernels over every type (u8..u64, s8..s64, f16, f32, f64) and a grid-stride saxpy.
template <typename T> __global__ void axpb(const T* x, T* y, T a, T b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = a * x[i] + b;
}
template __global__ void axpb<unsigned char>(const unsigned char*, unsigned char*, unsigned char, unsigned char, size_t);
template __global__ void axpb<short>(const short*, short*, short, short, size_t);
template __global__ void axpb<unsigned>(const unsigned*, unsigned*, unsigned, unsigned, size_t);
template __global__ void axpb<long long>(const long long*, long long*, long long, long long, size_t);
template __global__ void axpb<__half>(const __half*, __half*, __half, __half, size_t);
template __global__ void axpb<float>(const float*, float*, float, float, size_t);
template __global__ void axpb<double>(const double*, double*, double, double, size_t);
