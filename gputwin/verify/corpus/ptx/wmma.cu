#include <mma.h>
using namespace nvcuda;
// wmma load/mma/store for f16 (m16n16k16, m32n8k16, m8n32k16), bf16, tf32 and s8/u8, row and col layouts.
__global__ void wmma_f16(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.f);
  wmma::load_matrix_sync(fa, a, 16); wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
  wmma::fragment<wmma::matrix_a, 32, 8, 16, half, wmma::col_major> ga;
  wmma::fragment<wmma::matrix_b, 32, 8, 16, half, wmma::row_major> gb;
  wmma::fragment<wmma::accumulator, 32, 8, 16, half> gc;
  wmma::load_matrix_sync(ga, a, 32); wmma::load_matrix_sync(gb, b, 8); wmma::fill_fragment(gc, 0.f);
  wmma::mma_sync(gc, ga, gb, gc);
  wmma::store_matrix_sync((half*)c + 512, gc, 8, wmma::mem_col_major);
}
__global__ void wmma_other(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* x, const signed char* s, float* c, int* d) {
  wmma::fragment<wmma::matrix_a, 8, 32, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 8, 32, 16, __nv_bfloat16, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 8, 32, 16, float> fc;
  wmma::load_matrix_sync(fa, a, 16); wmma::load_matrix_sync(fb, b, 32); wmma::fill_fragment(fc, 0.f);
  wmma::mma_sync(fc, fa, fb, fc); wmma::store_matrix_sync(c, fc, 32, wmma::mem_row_major);
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ta;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> tb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> tc;
  wmma::load_matrix_sync(ta, x, 8); wmma::load_matrix_sync(tb, x, 8); wmma::fill_fragment(tc, 0.f);
  for (int i = 0; i < ta.num_elements; i++) ta.x[i] = wmma::__float_to_tf32(ta.x[i]);
  wmma::mma_sync(tc, ta, tb, tc); wmma::store_matrix_sync(c + 256, tc, 16, wmma::mem_row_major);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> ia;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> ib;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> ic;
  wmma::load_matrix_sync(ia, s, 16); wmma::load_matrix_sync(ib, s, 16); wmma::fill_fragment(ic, 0);
  wmma::mma_sync(ic, ia, ib, ic, true); wmma::store_matrix_sync(d, ic, 16, wmma::mem_row_major);
}
