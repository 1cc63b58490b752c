// Example PyTorch-extension kernel written to CUDA-L2's public signature
//   void f(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c)
// a: A row-major (M, K); b: B row-major (K, N); b_col_major: B column-major, i.e. B^T's (N, K)
// row-major storage viewed as (K, N); c: C (M, N). All fp16. Like CUDA-L2's kernel files it has no
// PYBIND11_MODULE: kernels_search.extern generates the binding. It reads only b_col_major (so both
// of its B operands stream along K) and launches on torch's current stream.
//
// Deliberately simple: 32x32 output tile per 256-thread block, each thread 4 outputs, fp32
// accumulation, bounds-checked (any M, N, K). It exists to test the loader, not to be fast.
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_fp16.h>

namespace {

constexpr int TILE = 32;
constexpr int ROWS_PER_THREAD = 4;  // blockDim = (32, 8)

__global__ void example_ext_kernel(const __half* __restrict__ A, const __half* __restrict__ Bt, __half* __restrict__ C,
                                   int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];  // Bs[n][k]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
  float acc[ROWS_PER_THREAD] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += TILE) {
    for (int r = ty; r < TILE; r += blockDim.y) {
      const int m = m0 + r, n = n0 + r, k = k0 + tx;
      As[r][tx] = (m < M && k < K) ? __half2float(A[(size_t)m * K + k]) : 0.f;
      Bs[r][tx] = (n < N && k < K) ? __half2float(Bt[(size_t)n * K + k]) : 0.f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < TILE; ++kk) {
      const float bv = Bs[tx][kk];
#pragma unroll
      for (int i = 0; i < ROWS_PER_THREAD; ++i) acc[i] = fmaf(As[ty + i * 8][kk], bv, acc[i]);
    }
    __syncthreads();
  }
  const int n = n0 + tx;
#pragma unroll
  for (int i = 0; i < ROWS_PER_THREAD; ++i) {
    const int m = m0 + ty + i * 8;
    if (m < M && n < N) C[(size_t)m * N + n] = __float2half(acc[i]);
  }
}

}  // namespace

void example_ext_hgemm(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c) {
  TORCH_CHECK(a.is_cuda() && b_col_major.is_cuda() && c.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(a.scalar_type() == at::kHalf && b.scalar_type() == at::kHalf &&
                  b_col_major.scalar_type() == at::kHalf && c.scalar_type() == at::kHalf,
              "fp16 tensors expected");
  TORCH_CHECK(a.is_contiguous() && b_col_major.is_contiguous() && c.is_contiguous(), "contiguous tensors expected");
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  TORCH_CHECK(b.size(0) == K && b_col_major.numel() == (int64_t)K * N && c.size(0) == M && c.size(1) == N,
              "shape mismatch");
  dim3 block(TILE, TILE / ROWS_PER_THREAD), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  example_ext_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __half*>(a.data_ptr()), reinterpret_cast<const __half*>(b_col_major.data_ptr()),
      reinterpret_cast<__half*>(c.data_ptr()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
