// Cheat: accumulates in __half (reduced precision). Fine at small K, wrong at large K.
// Expected catch: anticheat precision (the large-K probe against torch.matmul).
#include "common.cuh"

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  return rc ? rc : adv::launch<__half>(A, B, C, M, N, K, layout, stream);
}
