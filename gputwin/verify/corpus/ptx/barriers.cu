// bar.sync / barrier variants: __syncthreads_count/and/or, named barriers with counts, bar.warp.sync, fences.
__global__ void barriers(int* out, const int* in) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  int cnt = __syncthreads_count(s[t] > 0);
  int all = __syncthreads_and(s[t] > -5);
  int any = __syncthreads_or(s[t] > 100);
  if (t < 64) asm volatile("bar.sync 1, 64;");
  else asm volatile("bar.arrive 1, 64;");
  asm volatile("barrier.sync.aligned 2;");
  __syncwarp();
  __syncwarp(0x0000ffffu);
  __threadfence(); __threadfence_block(); __threadfence_system();
  out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x] + cnt + all + any;
}
