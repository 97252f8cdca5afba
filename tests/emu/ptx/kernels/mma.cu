#include <cuda_fp16.h>
// C[32 x 16] f32 = A[32 x 32] f16 (row-major) @ B[32 x 16] f16 (row-major) with ldmatrix + mma.sync m16n8k16.
// Four warps; warp w owns the 16x8 output tile (w / 2, w % 2) and walks K in steps of 16.
#define M 32
#define N 16
#define K 32
extern "C" __global__ void mma_gemm(float* C, const half* A, const half* B) {
  __shared__ __align__(16) half sa[M * K];
  __shared__ __align__(16) half sb[K * N];
  int t = threadIdx.x, lane = t & 31, w = t >> 5, tm = w >> 1, tn = w & 1;
  for (int i = t; i < M * K; i += blockDim.x) sa[i] = A[i];
  for (int i = t; i < K * N; i += blockDim.x) sb[i] = B[i];
  __syncthreads();
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < K; k0 += 16) {
    unsigned a[4], b[2];
    unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[(tm * 16 + lane % 16) * K + k0 + (lane / 16) * 8]);
    unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[(k0 + lane % 16) * N + tn * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  int row = tm * 16 + (lane >> 2), col = tn * 8 + (lane & 3) * 2;
  C[row * N + col] = c[0];
  C[row * N + col + 1] = c[1];
  C[(row + 8) * N + col] = c[2];
  C[(row + 8) * N + col + 1] = c[3];
}
