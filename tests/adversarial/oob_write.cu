// Cheat/fault: computes C correctly, then writes a few elements past the end of C.
// Expected catch: gate, "wrote outside C" (guard bands).
#include "common.cuh"

__global__ void scribble_past_end(__half* end, int n) {
  if ((int)threadIdx.x < n) end[threadIdx.x] = __float2half(0.0f);
}

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  if (rc) return rc;
  rc = adv::launch(A, B, C, M, N, K, layout, stream);
  if (rc) return rc;
  scribble_past_end<<<1, 32, 0, stream>>>(static_cast<__half*>(C) + (size_t)M * N, 4);
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
