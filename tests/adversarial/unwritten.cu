// Fault: the classic ragged-edge bug. Rows past the last full 16-row tile are never stored, so
// when M is not a multiple of 16 the bottom rows of C keep whatever they held.
// Expected catch: gate, NaN left in C, on a shape whose M is not a multiple of 16.
#include "common.cuh"

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  return rc ? rc : adv::launch(A, B, C, M, N, K, layout, stream, M - M % adv::T);
}
