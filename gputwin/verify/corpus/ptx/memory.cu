// ld/st in every state space, vectors, volatile, __ldg, __ldcg/__stcs cache hints, constant and local arrays.
__constant__ float4 coef[4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 16}};
__device__ int table[5] = {3, 1, 4, 1, 5};
__global__ void memory(const float4* __restrict__ x, float4* y, volatile int* flag, const double2* z, double2* q, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float loc[8];
  for (int j = 0; j < 8; j++) loc[j] = __ldg(&x[i]).x * j;
  float4 a = __ldcg(&x[i]); float4 c = coef[i & 3];
  a.x += loc[k & 7] + table[k % 5]; a.y += c.y; a.z += c.z; a.w += c.w;
  __stcs(&y[i], a);
  q[i] = __ldcs(&z[i]);
  if (flag[0] == 1) flag[1] = i;
}
