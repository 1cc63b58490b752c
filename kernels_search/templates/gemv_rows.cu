// Decode GEMM for a few activation rows (M <= GR_M, B stored N x K: a linear layer's weights) on the
// CUDA cores, the weights read in long contiguous runs with an equal share for every CTA.
//
// Why: a decode GEMM's time is its weight bytes. On the H200 (lab/gemv/read_floor.py, cold) a read
// that walks each weight row in long runs takes 1.04x the time of a plain 32 KB-run read, the gemv
// family's mma pattern (16 rows x 64 B a warp instruction) 1.12x, and gemv itself 1.18x; at M = 1 the
// tensor cores buy nothing (one activation row), so plain fp32 FMAs serve.
//
// Work division: the grid is GR_CPS CTAs per SM (at most one CTA a row); CTA b owns rows
// [r0, r1) of an equal split (counts differ by at most one), so no row is shared and no fix-up
// runs. A CTA walks its rows GR_R at a time: thread i reads the 16-byte vectors i, i + NTH, ... of
// each of the GR_R rows (GR_R x 16 bytes in flight per thread and vector step, each row's vectors
// contiguous across the CTA), multiplies them by the activation's same 8 elements (from L1) in fp32,
// and the CTA sums each row's parts (warp shuffles, then the warps' parts in warp order through
// shared memory: deterministic).
//
// Compile-time knobs (rendered above this file):
//   GR_M        activation rows served (1, 2, 4)
//   GR_R        weight rows a CTA reads at once
//   GR_THREADS  threads per CTA
//   GR_CPS      CTAs per SM (the grid; also the launch bound)
//   GR_U        vector steps unrolled (GR_R x GR_U loads of 16 bytes in flight per thread)
// Needs layout tn, K a multiple of 8 and 16-byte aligned A and B (the family declines others).

namespace gr {
constexpr int MM = GR_M, R = GR_R, NTH = GR_THREADS, CPS = GR_CPS, U = GR_U;
constexpr int WARPS = NTH / 32;
static_assert(NTH % 32 == 0 && R >= 1 && MM >= 1 && U >= 1, "knobs");

__device__ __forceinline__ uint4 ld_weights(const half* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 ld_act(const half* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// fp32 dot product of 8 halves of a weight row and of an activation row
__device__ __forceinline__ float dot8(const uint4& w, const uint4& x, float acc) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 wf = __half22float2(*reinterpret_cast<const __half2*>(&wv[i]));
    const float2 xf = __half22float2(*reinterpret_cast<const __half2*>(&xv[i]));
    acc = fmaf(wf.x, xf.x, acc);
    acc = fmaf(wf.y, xf.y, acc);
  }
  return acc;
}

__global__ void __launch_bounds__(NTH, CPS) gemv_rows_kernel(const half* __restrict__ A, const half* __restrict__ B,
                                                            half* __restrict__ C, int M, int N, int K) {
  __shared__ float part[WARPS][R * MM];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int base = N / gridDim.x, extra = N % gridDim.x;
  const int r0 = blockIdx.x * base + min((int)blockIdx.x, extra);
  const int r1 = r0 + base + ((int)blockIdx.x < extra ? 1 : 0);
  const int vrow = K / 8;  // 16-byte vectors a row
  for (int r = r0; r < r1; r += R) {
    float acc[R][MM];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int m = 0; m < MM; ++m) acc[i][m] = 0.f;
    // rows past r1 re-read the CTA's last row (in range, never stored)
    const half* w[R];
#pragma unroll
    for (int i = 0; i < R; ++i) w[i] = B + (size_t)min(r + i, r1 - 1) * K;
    int v = tid;
    for (; v + (U - 1) * NTH < vrow; v += U * NTH) {
      uint4 wv[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int i = 0; i < R; ++i) wv[u][i] = ld_weights(w[i] + 8 * (v + u * NTH));
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int m = 0; m < MM; ++m) {
          const uint4 x = ld_act(A + (size_t)min(m, M - 1) * K + 8 * (v + u * NTH));
#pragma unroll
          for (int i = 0; i < R; ++i) acc[i][m] = dot8(wv[u][i], x, acc[i][m]);
        }
    }
    for (; v < vrow; v += NTH) {  // the last vectors, one step at a time
      uint4 wv[R];
#pragma unroll
      for (int i = 0; i < R; ++i) wv[i] = ld_weights(w[i] + 8 * v);
#pragma unroll
      for (int m = 0; m < MM; ++m) {
        const uint4 x = ld_act(A + (size_t)min(m, M - 1) * K + 8 * v);
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i][m] = dot8(wv[i], x, acc[i][m]);
      }
    }
    // each row's parts: within the warp by shuffles, then the warps' in warp order
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int m = 0; m < MM; ++m) {
        float s = acc[i][m];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) part[warp][i * MM + m] = s;
      }
    __syncthreads();
    if (tid < R * MM) {
      const int i = tid / MM, m = tid % MM;
      float s = 0.f;
      for (int q = 0; q < WARPS; ++q) s += part[q][tid];
      if (r + i < r1 && m < M) C[(size_t)m * N + r + i] = __float2half_rn(s);
    }
    __syncthreads();  // part is free again
  }
}

static int device_sms() {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();
      n = 132;
    }
    sms = n;
  }
  return sms;
}
}  // namespace gr

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) { return 0; }

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1 || !A_ || !B_ || !C_) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  if (layout != HGEMM_LAYOUT_TN || M > gr::MM || K % 8 != 0 || !hgemm_aligned16(A_) || !hgemm_aligned16(B_))
    return HGEMM_ERR_UNSUPPORTED;
  const int cap = gr::CPS * gr::device_sms(), ctas = N < cap ? N : cap;
  gr::gemv_rows_kernel<<<ctas, gr::NTH, 0, stream>>>(static_cast<const half*>(A_), static_cast<const half*>(B_),
                                                     static_cast<half*>(C_), M, N, K);
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
