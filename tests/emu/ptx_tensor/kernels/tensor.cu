// Warp-wide tensor instructions (mma.sync, ldmatrix, wmma) checked against numpy by test_tensor.py.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

// C[M,N] (f32) = A[M,K] (f16, row-major) * B[K,N] (f16, col-major: Bt[N,K]); one warp per 16x8 tile of C, k-steps
// of 16 staged in shared memory and fed to mma.sync.m16n8k16 through ldmatrix (A: .x4, B: .x2).
extern "C" __global__ void ldmatrix_mma_f16(float* C, const __half* A, const __half* Bt, int M, int N, int K) {
  __shared__ __align__(16) __half sa[4][16][16];
  __shared__ __align__(16) __half sb[4][8][16];
  int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  int tile = blockIdx.x * 4 + w, tm = tile / (N / 8), tn = tile % (N / 8);
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int i = lane; i < 256; i += 32) sa[w][i / 16][i % 16] = A[(tm * 16 + i / 16) * K + k0 + i % 16];
    for (int i = lane; i < 128; i += 32) sb[w][i / 16][i % 16] = Bt[(tn * 8 + i / 16) * K + k0 + i % 16];
    __syncwarp();
    uint32_t a[4], b[2];
    // x4: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
    unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[w][lane % 16][(lane / 16) * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
    unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[w][lane % 8][((lane / 8) % 2) * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    __syncwarp();
  }
  int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; i++) C[(tm * 16 + g + 8 * (i / 2)) * N + tn * 8 + 2 * t + (i % 2)] = d[i];
}

// ldmatrix .trans and stmatrix: one 8x8 b16 tile per matrix, copied through registers to out (x4, transposed).
extern "C" __global__ void ldmatrix_trans(uint16_t* out, const uint16_t* in) {
  __shared__ __align__(16) uint16_t s[4][8][8], o[4][8][8];
  int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) (&s[0][0][0])[i] = in[i];
  __syncwarp();
  uint32_t r[4];
  unsigned p = (unsigned)__cvta_generic_to_shared(&s[lane / 8][lane % 8][0]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(p));
  unsigned q = (unsigned)__cvta_generic_to_shared(&o[lane / 8][lane % 8][0]);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};"
               :: "r"(q), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
  __syncwarp();
  for (int i = lane; i < 256; i += 32) out[i] = (&o[0][0][0])[i];
  // each thread's own fragment too: row lane/4, columns 2*(lane%4) + {0,1} of the transposed matrix 0
  out[256 + lane] = (uint16_t)r[0];
  out[288 + lane] = (uint16_t)(r[0] >> 16);
}

// ldmatrix .x1 through a generic address, .x2 from .shared, and stmatrix .x2.trans writing those fragments back.
extern "C" __global__ void ldmatrix_x1_x2(uint32_t* frag, uint16_t* out, const uint16_t* in) {
  __shared__ __align__(16) uint16_t s[2][8][8], o[2][8][8];
  int lane = threadIdx.x;
  for (int i = lane; i < 128; i += 32) (&s[0][0][0])[i] = in[i];
  __syncwarp();
  uint32_t r1, r2[2];
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.b16 {%0}, [%1];" : "=r"(r1) : "l"(&s[1][lane % 8][0]));
  unsigned p = (unsigned)__cvta_generic_to_shared(&s[(lane / 8) % 2][lane % 8][0]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r2[0]), "=r"(r2[1]) : "r"(p));
  unsigned q = (unsigned)__cvta_generic_to_shared(&o[(lane / 8) % 2][lane % 8][0]);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1,%2};" :: "r"(q), "r"(r2[0]), "r"(r2[1])
               : "memory");
  __syncwarp();
  frag[lane] = r1;
  for (int i = lane; i < 128; i += 32) out[i] = (&o[0][0][0])[i];
}

// s8 x s8 -> s32, m16n8k32 (.satfinite on the second launch argument): fragments loaded straight from global memory
// per the manual's layout (A: row g + 8*(r%2), columns 4t + j + 16*(r/2); B: rows 4t + j + 16*r, column g).
extern "C" __global__ void mma_s8(int* D, const int8_t* A, const int8_t* B, const int* Cin, int sat) {
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  uint32_t a[4], b[2];
  int c[4], d[4];
  for (int r = 0; r < 4; r++) {
    uint32_t v = 0;
    for (int j = 0; j < 4; j++) v |= (uint32_t)(uint8_t)A[(g + 8 * (r % 2)) * 32 + 4 * t + j + 16 * (r / 2)] << (8 * j);
    a[r] = v;
  }
  for (int r = 0; r < 2; r++) {
    uint32_t v = 0;
    for (int j = 0; j < 4; j++) v |= (uint32_t)(uint8_t)B[(4 * t + j + 16 * r) * 8 + g] << (8 * j);
    b[r] = v;
  }
  for (int i = 0; i < 4; i++) c[i] = Cin[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  if (sat)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  for (int i = 0; i < 4; i++) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}

// tf32 m16n8k8 (A: row g + 8*(i%2), column t + 4*(i/2); B: row t + 4*i, column g), raw f32 bits as operands.
extern "C" __global__ void mma_tf32(float* D, const float* A, const float* B) {
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  uint32_t a[4], b[2];
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int i = 0; i < 4; i++) a[i] = __float_as_uint(A[(g + 8 * (i % 2)) * 8 + t + 4 * (i / 2)]);
  for (int i = 0; i < 2; i++) b[i] = __float_as_uint(B[(t + 4 * i) * 8 + g]);
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  for (int i = 0; i < 4; i++) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}

// f64 m8n8k4: A element (g, t), B element (t, g), C/D elements (g, 2t + i).
extern "C" __global__ void mma_f64(double* D, const double* A, const double* B, const double* Cin) {
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  double a = A[g * 4 + t], b = B[t * 8 + g], c0 = Cin[g * 8 + 2 * t], c1 = Cin[g * 8 + 2 * t + 1], d0, d1;
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%4,%5};"
               : "=d"(d0), "=d"(d1) : "d"(a), "d"(b), "d"(c0), "d"(c1));
  D[g * 8 + 2 * t] = d0;
  D[g * 8 + 2 * t + 1] = d1;
}

// e4m3 x e4m3 -> f32, m16n8k32 (sm_89+): fragments as for s8.
extern "C" __global__ void mma_e4m3(float* D, const uint8_t* A, const uint8_t* B) {
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  uint32_t a[4], b[2];
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int r = 0; r < 4; r++) {
    uint32_t v = 0;
    for (int j = 0; j < 4; j++) v |= (uint32_t)A[(g + 8 * (r % 2)) * 32 + 4 * t + j + 16 * (r / 2)] << (8 * j);
    a[r] = v;
  }
  for (int r = 0; r < 2; r++) {
    uint32_t v = 0;
    for (int j = 0; j < 4; j++) v |= (uint32_t)B[(4 * t + j + 16 * r) * 8 + g] << (8 * j);
    b[r] = v;
  }
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  for (int i = 0; i < 4; i++) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}

// wmma 16x16x16 f16 -> f32 GEMM (mma.h): one warp per 16x16 tile of C = A (row-major) * B (col-major) + C.
extern "C" __global__ void wmma_f16(float* C, const __half* A, const __half* B, int M, int N, int K) {
  using namespace nvcuda;
  int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, tm = w / (N / 16), tn = w % (N / 16);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(c, C + tm * 16 * N + tn * 16, N, wmma::mem_row_major);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + tm * 16 * K + k, K);
    wmma::load_matrix_sync(b, B + tn * 16 * K + k, K);
    wmma::mma_sync(c, a, b, c);
  }
  for (int i = 0; i < c.num_elements; i++) c.x[i] *= 0.5f;  // fragments are elementwise: any layout scales alike
  wmma::store_matrix_sync(C + tm * 16 * N + tn * 16, c, N, wmma::mem_row_major);
}

// wmma bf16 -> f32 (mma.h) with the tiles staged in shared memory: C (16x16) = A (16xK, row-major) * B (Kx16,
// row-major), the B tile loaded column-major from its transpose in shared memory.
extern "C" __global__ void wmma_bf16_shared(float* C, const __nv_bfloat16* A, const __nv_bfloat16* B, int K) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 sa[16 * 16], sbt[16 * 24];
  int lane = threadIdx.x;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  for (int k = 0; k < K; k += 16) {
    for (int i = lane; i < 256; i += 32) {
      sa[i] = A[(i / 16) * K + k + i % 16];
      sbt[(i % 16) * 24 + i / 16] = B[(k + i / 16) * 16 + i % 16];  // column n of the tile at sbt[n * 24]
    }
    __syncwarp();
    wmma::load_matrix_sync(a, sa, 16);
    wmma::load_matrix_sync(b, sbt, 24);
    wmma::mma_sync(c, a, b, c);
    __syncwarp();
  }
  wmma::store_matrix_sync(C, c, 16, wmma::mem_col_major);
}
