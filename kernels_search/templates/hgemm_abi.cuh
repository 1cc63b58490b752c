// hgemm C ABI shared by every CUDA family (rendered verbatim into each source).
//
//   int    hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
//                    const int* opts, int n_opts, void* workspace, size_t ws_bytes,
//                    cudaStream_t stream);
//   size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts);
//
// C[M,N] = A[M,K] @ B, fp16 in, fp32 accumulate, fp16 out. A and C row-major. layout 0 ("nn"):
// B row-major K x N; layout 1 ("tn"): B stored N x K row-major. Everything a call needs runs on
// `stream`; nothing is written outside C and the workspace.
// Workspace contract: at least hgemm_workspace(...) bytes, 256-byte aligned, zero-filled once when
// allocated. Whatever a call needs to find at zero (split-K arrival counters, atomic fp32
// accumulators) it leaves at zero again, so one workspace serves any number of calls, graph
// replays included, as long as calls using it do not overlap.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#define HGEMM_OK 0
#define HGEMM_ERR_ARGS 1         // M, N or K < 1, null pointer
#define HGEMM_ERR_LAYOUT 2       // layout not 0 or 1
#define HGEMM_ERR_UNSUPPORTED 3  // this kernel cannot serve the shape / alignment
#define HGEMM_ERR_WORKSPACE 4    // workspace smaller than hgemm_workspace() asked for
#define HGEMM_ERR_LAUNCH 5       // a CUDA launch or attribute call failed
#define HGEMM_ERR_OPTS 6         // runtime option out of range

#define HGEMM_LAYOUT_NN 0
#define HGEMM_LAYOUT_TN 1

static inline int hgemm_opt(const int* opts, int n_opts, int i, int dflt) {
  return (opts != nullptr && i < n_opts) ? opts[i] : dflt;
}

static inline bool hgemm_aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}
