#include <mma.h>
using namespace nvcuda;
// C[32 x 32] f32 = A[32 x 32] f16 (row-major) @ B[32 x 32] f16 (column-major) with wmma 16x16x16; warp w owns tile
// (w / 2, w % 2). A second product adds C0 (row-major f32) through a loaded accumulator: D = A @ B + C0, stored column-major.
extern "C" __global__ void wmma_gemm(float* C, float* D, const half* A, const half* B, const float* C0) {
  const int n = 32;
  int w = threadIdx.x >> 5, tm = (w >> 1) * 16, tn = (w & 1) * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, acc2;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(acc2, C0 + tm * n + tn, n, wmma::mem_row_major);
  for (int k = 0; k < n; k += 16) {
    wmma::load_matrix_sync(fa, A + tm * n + k, n);
    wmma::load_matrix_sync(fb, B + tn * n + k, n);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::mma_sync(acc2, fa, fb, acc2);
  }
  wmma::store_matrix_sync(C + tm * n + tn, acc, n, wmma::mem_row_major);
  wmma::store_matrix_sync(D + tm + tn * n, acc2, n, wmma::mem_col_major);
}
