// Shared by the adversarial test kernels: one simple, correct GEMM that each kernel varies to
// cheat in exactly one way. Not fast on purpose (16x16 shared-memory tiles, one output per
// thread): the timing-based checks need calls that keep the GPU busy for tens of microseconds.
//
// Loaded through kernels_search.extern, which inlines quoted local includes (this file and the
// ABI header below) so the build cache key covers every line that is compiled.
#pragma once
#include "../../kernels_search/templates/hgemm_abi.cuh"

namespace adv {

constexpr int T = 16;  // tile edge and block edge (T x T threads, one C element each)

__device__ __forceinline__ float fma_acc(__half a, __half b, float acc) {
  return fmaf(__half2float(a), __half2float(b), acc);
}
__device__ __forceinline__ __half fma_acc(__half a, __half b, __half acc) { return __hfma(a, b, acc); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// C[row, col] for row < rows (rows == M when honest). Acc = float is honest; kReadC adds the old
// C (honest code never reads C). A non-null `skip` whose value is nonzero makes every block return.
template <typename Acc, bool kReadC>
__global__ void gemm_kernel(const __half* __restrict__ A, const __half* __restrict__ B, __half* C, int M,
                            int N, int K, int layout, int rows, const int* skip) {
  if (skip != nullptr && *reinterpret_cast<const volatile int*>(skip) != 0) return;
  __shared__ __half As[T][T];
  __shared__ __half Bs[T][T];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  Acc acc = Acc(0.0f);
  for (int k0 = 0; k0 < K; k0 += T) {
    const int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : __float2half(0.0f);
    __half bv = __float2half(0.0f);
    if (kb < K && col < N) bv = layout == HGEMM_LAYOUT_NN ? B[(size_t)kb * N + col] : B[(size_t)col * K + kb];
    Bs[ty][tx] = bv;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < T; ++kk) acc = fma_acc(As[ty][kk], Bs[kk][tx], acc);
    __syncthreads();
  }
  if (row < rows && row < M && col < N) {
    const size_t i = (size_t)row * N + col;
    float out = to_float(acc);
    if (kReadC) out += __half2float(C[i]);
    C[i] = __float2half(out);
  }
}

// Argument checks every kernel shares (the ABI's error codes).
static inline int check_args(const void* A, const void* B, void* C, int M, int N, int K, int layout) {
  if (M < 1 || N < 1 || K < 1 || A == nullptr || B == nullptr || C == nullptr) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  return HGEMM_OK;
}

template <typename Acc = float, bool kReadC = false>
static inline int launch(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         cudaStream_t stream, int rows = -1, const int* skip = nullptr) {
  dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
  gemm_kernel<Acc, kReadC><<<grid, block, 0, stream>>>(
      static_cast<const __half*>(A), static_cast<const __half*>(B), static_cast<__half*>(C), M, N, K, layout,
      rows < 0 ? M : rows, skip);
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}

}  // namespace adv
