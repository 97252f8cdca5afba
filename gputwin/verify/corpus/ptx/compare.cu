// setp/selp/set with ordered and unordered comparisons, predicate logic.
__global__ void compare(const float* x, const int* y, int* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = x[(i + 3) % n]; int c = y[i]; unsigned d = y[(i + 1) % n];
  int r = (a < b) + 2 * !(a >= b) + 4 * (a == b) + 8 * !(a != b) + 16 * (c < (int)d) + 32 * (d > 7u) + 64 * (a != a || b != b);
  r += (a <= b && c > 0) ? 128 : 0;
  r += (c ^ 5) > 2 || d < 9 ? 256 : 512;
  o[i] = r + (a > b ? c : (int)d);
}
