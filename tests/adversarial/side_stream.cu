// Cheat: launches the real work on a stream of its own and returns at once (CUDA-L1's fake 18x).
// Events on the caller's stream see nothing; a device-wide synchronize still finds C correct.
// Expected catch: anticheat side_stream.
#include "common.cuh"

static cudaStream_t g_side = nullptr;

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void*, size_t, cudaStream_t /*stream: ignored*/) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  if (rc) return rc;
  if (g_side == nullptr && cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking) != cudaSuccess)
    return HGEMM_ERR_LAUNCH;
  return adv::launch(A, B, C, M, N, K, layout, g_side);
}
