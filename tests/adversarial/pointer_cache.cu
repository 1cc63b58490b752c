// Cheat: caches C keyed by the input pointers (and shape); a later call with the same pointers
// copies the cached result instead of computing, whatever values the buffers now hold.
// The cache lives in the workspace (breaking the ABI's zero-workspace contract is part of the cheat).
// Expected catch: gate, "cached results" (new values in the same buffers).
#include "common.cuh"

struct Key {
  const void* a; const void* b; void* c; void* ws; int m, n, k, layout;
  bool operator==(const Key& o) const {
    return a == o.a && b == o.b && c == o.c && ws == o.ws && m == o.m && n == o.n && k == o.k && layout == o.layout;
  }
};
static Key g_last = {nullptr, nullptr, nullptr, nullptr, 0, 0, 0, 0};

extern "C" size_t hgemm_workspace(int M, int N, int, int, const int*, int) { return (size_t)M * N * 2; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void* ws, size_t ws_bytes, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  if (rc) return rc;
  const size_t bytes = (size_t)M * N * 2;
  if (ws == nullptr || ws_bytes < bytes) return HGEMM_ERR_WORKSPACE;
  Key key = {A, B, C, ws, M, N, K, layout};
  if (key == g_last)
    return cudaMemcpyAsync(C, ws, bytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess ? HGEMM_OK
                                                                                            : HGEMM_ERR_LAUNCH;
  rc = adv::launch(A, B, C, M, N, K, layout, stream);
  if (rc) return rc;
  if (cudaMemcpyAsync(ws, C, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return HGEMM_ERR_LAUNCH;
  g_last = key;
  return HGEMM_OK;
}
