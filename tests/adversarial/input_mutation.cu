// Cheat: computes C correctly, then writes into A (A[0] += 1), e.g. to leave a marker a later
// call could key on. Expected catch: gate, "modified its inputs".
#include "common.cuh"

__global__ void bump_first(__half* a) { a[0] = __float2half(__half2float(a[0]) + 1.0f); }

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  if (rc) return rc;
  rc = adv::launch(A, B, C, M, N, K, layout, stream);
  if (rc) return rc;
  bump_first<<<1, 1, 0, stream>>>(const_cast<__half*>(static_cast<const __half*>(A)));
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
