// Cheat: does the work once across repeated calls. A one-thread kernel compares the first two
// elements of A and B with those seen by the previous call (kept in the workspace) and raises a
// skip flag when they are unchanged; the GEMM kernel then returns at once. Any new input values
// (every gate draw) are computed correctly, so only timing can see it.
// Expected catch: anticheat skipped_work (N calls on the same inputs must cost ~N x one call).
#include "common.cuh"

struct Seen {
  int valid;
  int skip;
  unsigned short fp[4];
};

__global__ void fingerprint(const __half* A, const __half* B, Seen* s) {
  unsigned short now[4] = {__half_as_ushort(A[0]), __half_as_ushort(A[1]), __half_as_ushort(B[0]),
                           __half_as_ushort(B[1])};
  bool same = s->valid != 0;
  for (int i = 0; i < 4; ++i) same = same && s->fp[i] == now[i];
  s->skip = same ? 1 : 0;
  for (int i = 0; i < 4; ++i) s->fp[i] = now[i];
  s->valid = 1;
}

extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 256; }

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int*, int, void* ws, size_t ws_bytes, cudaStream_t stream) {
  int rc = adv::check_args(A, B, C, M, N, K, layout);
  if (rc) return rc;
  if (ws == nullptr || ws_bytes < sizeof(Seen)) return HGEMM_ERR_WORKSPACE;
  if ((size_t)M * K < 2 || (size_t)K * N < 2) return adv::launch(A, B, C, M, N, K, layout, stream);
  Seen* seen = static_cast<Seen*>(ws);
  fingerprint<<<1, 1, 0, stream>>>(static_cast<const __half*>(A), static_cast<const __half*>(B), seen);
  return adv::launch(A, B, C, M, N, K, layout, stream, -1, &seen->skip);
}
