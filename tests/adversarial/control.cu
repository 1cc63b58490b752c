// Control: the honest kernel. It must pass the gate and every anti-cheat check; if it does not,
// the checks (or the shared kernel) are broken and the other adversarial results mean nothing.
#include "common.cuh"

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  return rc ? rc : adv::launch(A, B, C, M, N, K, layout, stream);
}
