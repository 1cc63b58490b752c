// Decode GEMM (M <= 32, B stored N x K: a linear layer's weights) as a register-streamed GEMV on
// the tensor cores. C^T = B A^T: each 16-row mma fragment is 16 weight rows, each 8-column fragment
// 8 activation rows. The weights go from global memory straight into mma.sync registers with
// 16-byte non-coherent loads (no shared memory, no pipeline barriers): the dot product over k
// does not depend on the order of k, so a lane's 16 contiguous bytes of a row serve as its
// fragment registers of two m16n8k16 steps, and the activation row is loaded under the same
// permutation of k. Bytes in flight per warp: GV_U x GV_RW x 1 KB, every SM's warps streaming
// disjoint rows; the activation (a few KB to 0.9 MB) stays in L1/L2.
//
// Work division: a CTA owns RWS = 16 x GV_RW x (GV_WARPS / GV_KW) weight rows and one K slice;
// its warps form GV_WARPS / GV_KW row groups x GV_KW k groups (the k groups interleave 32-k chunks
// in runs of GV_U, so the warps of a CTA read neighbouring bytes at the same time). The k groups'
// fp32 parts are summed through shared memory in k-group order. With opts[0] splits > 1 (0 = the
// count that balances the SMs' streams best, auto_splits) each row block's K is cut into that many
// slices, one CTA each;
// a CTA stores its fp32 part in a workspace slot of its own, counts itself in the row block's
// arrival counter, and the last CTA to arrive sums the slots in slice order (deterministic),
// stores C and resets the counter. No second kernel, no atomics on data.
//
// Compile-time knobs (rendered above this file):
//   GV_MT     8-column activation fragments: serves M <= 8 x GV_MT
//   GV_RW     16-row weight fragments per warp
//   GV_WARPS  warps per CTA
//   GV_KW     warps along K within a CTA (divides GV_WARPS)
//   GV_U      32-k chunks a lane loads before its MMAs (bytes in flight); runs are not unrolled
//             into each other, so the registers hold one run and 4 CTAs of 4 warps fit an SM
//   GV_PF     L2 prefetch hint of the weight loads: 0 none, 1 128 B, 2 256 B
//   GV_PDL    1: launched as a programmatic dependent launch (griddepcontrol): the launch and CTA
//             set-up overlap the previous grid's tail, all memory access waits for its completion
//   GV_MINB   CTAs per SM the register allocation must allow (launch bounds; without it ptxas
//             caps registers low and interleaves each load with the MMA that consumes it)
// Needs layout tn, K a multiple of 8 and 16-byte aligned A and B (the family declines others);
// rows past N and activation rows past M are clamped to valid memory and never stored.

namespace gv {
constexpr int MT = GV_MT, RW = GV_RW, WARPS = GV_WARPS, KW = GV_KW, U = GV_U;
constexpr int NTH = WARPS * 32;
constexpr int WR = WARPS / KW;           // row groups per CTA
constexpr int RWS = 16 * RW * WR;        // weight rows per CTA
constexpr int ACC = RW * MT * 4;         // fp32 accumulators per lane
constexpr int MAX_SPLITS = 64;
static_assert(WARPS % KW == 0, "k groups divide the warps");
static_assert(MT >= 1 && RW >= 1 && U >= 1, "knobs");

__device__ __forceinline__ uint4 ld_weights(const half* p) {
  uint4 v;
#if GV_PF == 2
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#elif GV_PF == 1
  asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#else
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#endif
  return v;
}

__device__ __forceinline__ uint4 ld_act(const half* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ void mma16816(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One 32-k chunk of U: lane (g, t) holds k = 8t..8t+7 of weight rows g and g+8 of each fragment
// and of activation rows g + 8j. Halves 0-3 feed one m16n8k16 step, halves 4-7 the next.
__device__ __forceinline__ void chunk_mma(float (&acc)[RW][MT][4], const uint4 (&w)[RW][2], const uint4 (&a)[MT]) {
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      mma16816(acc[r][j], w[r][0].x, w[r][1].x, w[r][0].y, w[r][1].y, a[j].x, a[j].y);
      mma16816(acc[r][j], w[r][0].z, w[r][1].z, w[r][0].w, w[r][1].w, a[j].z, a[j].w);
    }
}

struct Plan {
  int blocks;  // row blocks of RWS rows
  int splits;  // K slices per row block
  int per;     // 32-k chunks per slice
};

__global__ void __launch_bounds__(NTH, GV_MINB) gemv_kernel(const half* __restrict__ A, const half* __restrict__ B,
                                                   half* __restrict__ C, int M, int N, int K, Plan p,
                                                   float4* __restrict__ slots, int* __restrict__ counters) {
  __shared__ float4 red[(KW > 1 ? KW - 1 : 1) * WR * RW * MT * 32];
  __shared__ int last;
#if GV_PDL
  // launched as a programmatic dependent: wait for the previous grid on the stream to complete (its
  // writes visible) before touching memory, then let the next grid launch once every CTA of this
  // one is running (it waits in turn), so launches overlap the tails of the grids before them
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int kg = warp % KW, rg = warp / KW;
  const int block = blockIdx.x / p.splits, split = blockIdx.x % p.splits;
  const int row0 = block * RWS + rg * 16 * RW;

  // row pointers (clamped: rows past N / M compute into columns that are never stored)
  const half* wrow[RW][2];
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int n = row0 + r * 16 + h * 8 + g;
      n = n < N ? n : N - 1;
      wrow[r][h] = B + (size_t)n * K + 8 * t;
    }
  const half* arow[MT];
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    int m = j * 8 + g;
    m = m < M ? m : M - 1;
    arow[j] = A + (size_t)m * K + 8 * t;
  }

  float acc[RW][MT][4];
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[r][j][e] = 0.f;

  const int nch = (K + 31) / 32;
  const int c0 = split * p.per;
  const int c1 = min(c0 + p.per, nch);
  const int full_end = min(c1, K / 32);  // chunks wholly inside K
  const int groups = c0 < full_end ? (full_end - c0) / U : 0;
#pragma unroll 1
  for (int gi = kg; gi < groups; gi += KW) {
    const int kc = (c0 + gi * U) * 32;
    uint4 w[U][RW][2];
    uint4 a[U][MT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        w[u][r][0] = ld_weights(wrow[r][0] + kc + u * 32);
        w[u][r][1] = ld_weights(wrow[r][1] + kc + u * 32);
      }
#pragma unroll
      for (int j = 0; j < MT; ++j) a[u][j] = ld_act(arow[j] + kc + u * 32);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) chunk_mma(acc, w[u], a[u]);
  }
  // the slice's remaining chunks, one at a time, k groups in turn; zeros past K
  for (int c = c0 + groups * U + kg; c < c1; c += KW) {
    const int kc = c * 32;
    const bool in = kc + 8 * t < K;
    uint4 w[RW][2], a[MT];
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      w[r][0] = in ? ld_weights(wrow[r][0] + kc) : make_uint4(0, 0, 0, 0);
      w[r][1] = in ? ld_weights(wrow[r][1] + kc) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < MT; ++j) a[j] = in ? ld_act(arow[j] + kc) : make_uint4(0, 0, 0, 0);
    chunk_mma(acc, w, a);
  }

  // k groups 1.. hand their parts to k group 0 of the same row group, summed in k-group order
  if (KW > 1) {
    if (kg > 0) {
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int j = 0; j < MT; ++j)
          red[((((kg - 1) * WR + rg) * RW + r) * MT + j) * 32 + lane] =
              make_float4(acc[r][j][0], acc[r][j][1], acc[r][j][2], acc[r][j][3]);
    }
    __syncthreads();
    if (kg == 0) {
      for (int q = 1; q < KW; ++q)
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            const float4 v = red[((((q - 1) * WR + rg) * RW + r) * MT + j) * 32 + lane];
            acc[r][j][0] += v.x;
            acc[r][j][1] += v.y;
            acc[r][j][2] += v.z;
            acc[r][j][3] += v.w;
          }
    }
  }

  if (p.splits > 1) {
    // this slice's part to its slot (fragment order, one float4 per lane and fragment)
    constexpr int SLOT = WR * RW * MT * 32;
    float4* mine = slots + (size_t)blockIdx.x * SLOT;
    if (kg == 0) {
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int j = 0; j < MT; ++j)
          mine[((rg * RW + r) * MT + j) * 32 + lane] = make_float4(acc[r][j][0], acc[r][j][1], acc[r][j][2], acc[r][j][3]);
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&counters[block], 1) == p.splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (kg != 0) return;
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[r][j][e] = 0.f;
    const float4* first = slots + (size_t)block * p.splits * SLOT;
    for (int s = 0; s < p.splits; ++s)
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int j = 0; j < MT; ++j) {
          const float4 v = __ldcg(first + (size_t)s * SLOT + ((rg * RW + r) * MT + j) * 32 + lane);
          acc[r][j][0] += v.x;
          acc[r][j][1] += v.y;
          acc[r][j][2] += v.z;
          acc[r][j][3] += v.w;
        }
    if (threadIdx.x == 0) counters[block] = 0;
  } else if (kg != 0) {
    return;
  }

  // c0, c1: weight row g, activation rows 2t, 2t+1; c2, c3: weight row g + 8
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = row0 + r * 16 + h * 8 + g;
      if (n >= N) continue;
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int m = j * 8 + 2 * t + e;
          if (m < M) C[(size_t)m * N + n] = __float2half_rn(acc[r][j][h * 2 + e]);
        }
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

static int ctas_per_sm() {
  static int occ = -1;
  if (occ < 0) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemv_kernel, NTH, 0) != cudaSuccess) {
      cudaGetLastError();
      n = 1;
    }
    occ = n > 0 ? n : 1;
  }
  return occ;
}

// Splits minimizing the busiest SM's time, in units of one CTA's 32-k chunk: an SM streams its CTAs'
// chunks at one rate once it holds enough bytes in flight (~48 KB; less in flight, proportionally
// slower), so the cost is its CTA count times the chunks per CTA over that rate, plus a ramp per wave
// of resident CTAs and one fix-up round trip when K is split (each about a microsecond: ~33 KB of an
// SM's stream at 4.4 TB/s over 132 SMs). Ties go to fewer splits.
static int auto_splits(int blocks, int nch, int sms, int occ) {
  const double us = 33000.0 / (RWS * 64.0);  // chunk-units per microsecond of one SM
  const int cap = nch < MAX_SPLITS ? nch : MAX_SPLITS;
  int best = 1;
  double best_cost = 1e300;
  for (int s = 1; s <= cap; ++s) {
    const long long ctas = (long long)blocks * s;
    const double per_sm = (double)((ctas + sms - 1) / sms);
    const double waves = (double)((ctas + (long long)sms * occ - 1) / ((long long)sms * occ));
    const double resident = per_sm < occ ? per_sm : occ;
    const double rate = fmin(1.0, resident * WARPS * U * RW / 48.0);  // KB in flight per warp: U x RW
    const double cost = per_sm * ((nch + s - 1) / s) / rate + waves * 1.5 * us + (s > 1 ? 1.0 * us : 0.0);
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

// opts[0] splits: 0 = auto_splits, s >= 1 = K cut into s slices (at most one per 32-k chunk)
static bool make_plan(int M, int N, int K, const int* opts, int n_opts, Plan& p) {
  const int want = hgemm_opt(opts, n_opts, 0, 0);
  if (want < 0 || want > MAX_SPLITS || M > 8 * MT) return false;
  p.blocks = (N + RWS - 1) / RWS;
  const int nch = (K + 31) / 32;
  int s = want == 0 ? auto_splits(p.blocks, nch, device_sms(), ctas_per_sm()) : want;
  s = s < nch ? s : nch;
  p.per = (nch + s - 1) / s;
  p.splits = (nch + p.per - 1) / p.per;
  return true;
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static size_t slot_bytes(const Plan& p) {
  return align256((size_t)p.blocks * p.splits * WR * RW * MT * 32 * sizeof(float4));
}

static size_t workspace_bytes(const Plan& p) {
  return p.splits > 1 ? slot_bytes(p) + align256((size_t)p.blocks * sizeof(int)) : 0;
}
}  // namespace gv

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) {
  gv::Plan p;
  if (M < 1 || N < 1 || K < 1 || layout != HGEMM_LAYOUT_TN || !gv::make_plan(M, N, K, opts, n_opts, p)) return 0;
  return gv::workspace_bytes(p);
}

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1 || !A_ || !B_ || !C_) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  if (layout != HGEMM_LAYOUT_TN || M > 8 * gv::MT || K % 8 != 0 || !hgemm_aligned16(A_) || !hgemm_aligned16(B_))
    return HGEMM_ERR_UNSUPPORTED;
  const int want = hgemm_opt(opts, n_opts, 0, 0);
  if (want < 0 || want > gv::MAX_SPLITS) return HGEMM_ERR_OPTS;
  gv::Plan p;
  if (!gv::make_plan(M, N, K, opts, n_opts, p)) return HGEMM_ERR_OPTS;
  const size_t need = gv::workspace_bytes(p);
  if (need > 0 && (workspace == nullptr || ws_bytes < need)) return HGEMM_ERR_WORKSPACE;
  float4* slots = nullptr;
  int* counters = nullptr;
  if (need > 0) {
    slots = static_cast<float4*>(workspace);
    counters = reinterpret_cast<int*>(static_cast<char*>(workspace) + gv::slot_bytes(p));
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(p.blocks * p.splits);
  cfg.blockDim = dim3(gv::NTH);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = GV_PDL;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, gv::gemv_kernel, static_cast<const half*>(A_), static_cast<const half*>(B_),
                                           static_cast<half*>(C_), M, N, K, p, slots, counters);
  return e == cudaSuccess && cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
