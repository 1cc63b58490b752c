// Fault: dereferences a wild pointer after the GEMM (an illegal-address error, which is sticky:
// the process's CUDA context is dead afterwards). Must only ever run inside the evaluator
// sandbox. Expected: an "error" row (worker died / CUDA error), and the run goes on.
#include "common.cuh"

__global__ void write_wild(int* p) { *reinterpret_cast<volatile int*>(p) = 1; }

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  if (rc) return rc;
  rc = adv::launch(A, B, C, M, N, K, layout, stream);
  if (rc) return rc;
  write_wild<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(static_cast<uintptr_t>(0x10)));
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
