#include <cuda_fp16.h>
// ldmatrix (x1/x2/x4, .trans), stmatrix and mma.sync m16n8k16 f16->f32, m16n8k8 tf32, m16n8k32 s8, m8n8k4 f64.
__global__ void mma_f16(const half* A, const half* B, float* C) {
  __shared__ half sa[16 * 16], sb[16 * 8];
  int t = threadIdx.x;
  for (int i = t; i < 256; i += 32) sa[i] = A[i];
  for (int i = t; i < 128; i += 32) sb[i] = B[i];
  __syncwarp();
  unsigned a[4], b[2], b1;
  unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[(t % 16) * 16 + (t / 16) * 8]);
  unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[(t % 16) * 8]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared::cta.b16 {%0}, [%1];" : "=r"(b1) : "r"(pb));
  float c[4] = {0, 0, 0, 0};
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b1));
  int ic[4] = {0, 0, 0, 0};
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+r"(ic[0]), "+r"(ic[1]), "+r"(ic[2]), "+r"(ic[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  double d[2] = {0, 0}, da = c[0], db = c[1];
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};" : "+d"(d[0]), "+d"(d[1]) : "d"(da), "d"(db));
  for (int i = 0; i < 4; i++) C[t * 4 + i] = c[i] + ic[i] + (float)d[i & 1];
}
