// Fault: never finishes. A one-thread kernel spins on a device flag nobody sets, ahead of the
// GEMM on the same stream. Must only ever run inside the evaluator sandbox, whose run timeout
// has to kill the worker and go on. Expected: an "error" row whose reason names the timeout.
#include "common.cuh"

__device__ int g_never_set = 0;

__global__ void spin_forever() {
  while (*reinterpret_cast<volatile int*>(&g_never_set) == 0) __nanosleep(1000);
}

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  if (rc) return rc;
  spin_forever<<<1, 1, 0, stream>>>();
  return adv::launch(A, B, C, M, N, K, layout, stream);
}
