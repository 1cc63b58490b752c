// Split-K GEMM for few-tile shapes (few output tiles, deep K), operands streamed straight into mma.sync
// registers, the K slices of a tile reduced inside one launch through distributed shared memory.
//
// Why: on few-tile shapes cuBLAS and the CUTLASS split-K kernels spend 4-6 us where the floor is about
// 1 us, with every unit nearly idle (lab/fewtile/ncu-before-h200.md); the mma.sync split-K family issues
// on a quarter of its active cycles with one or two warps a scheduler, each warp a long chain of
// dependent loads, ldmatrix and MMAs (lab/fewtile/ncu-cluster-h200.md). Here every warp does little:
// it loads its share of the slice's 32-k chunks for the whole tile with 16-byte loads straight into
// fragment registers (the k order inside a dot product is free, so lane (g, t) holds k = 8t..8t+7 of
// A rows g, g+8 and of B rows g, as the gemv family does), all of a run's loads in flight before its
// MMAs, FM x FN independent accumulators. No shared-memory staging, no pipeline barriers.
//
// Work division: grid (tiles along N, tiles along M, S slices of K); a CTA owns one TM x TN tile and one
// slice, its warps take the slice's 32-k chunks in runs of U, round robin. The warps' parts are summed
// through shared memory in a fixed order (halving); with S > 1 the S CTAs of a tile are one thread-block cluster
// (S <= 16) and CTA r sums rows [r x TM / S, ...) of the tile over every CTA's part, in rank order,
// through distributed shared memory, then stores them. Deterministic, no workspace, one launch.
//
// Compile-time knobs (rendered above this file):
//   SR_FM     16-row A fragments a tile (TM = 16 x FM)
//   SR_FN     8-column B fragments a tile (TN = 8 x FN)
//   SR_WARPS  warps per CTA (they split the slice's chunks)
//   SR_U      32-k chunks a warp loads before its MMAs
// Runtime option: opts[0] splits: 0 = automatic (cs::auto_slices: tiles x slices about the SM count, at most 8, and
// only as many slices as let the GPU hold all the tiles' clusters at once), s >= 1 = s slices (at most 16, at most one per 32-k chunk). Needs layout tn (A and B both K-contiguous), K a multiple of 8 and
// 16-byte aligned A and B (the family declines others); rows past M or N are clamped to valid memory
// and never stored, chunks past K load zeros.

namespace sr {
constexpr int FM = SR_FM, FN = SR_FN, WARPS = SR_WARPS, U = SR_U;
constexpr int NTH = WARPS * 32;
constexpr int TM = 16 * FM, TN = 8 * FN;
constexpr int PART_LD = TN + 4;  // fp32 row stride of the CTA's summed tile
// the upper half of the warps hands its parts to the lower half, halving until warp 0 holds the sum
constexpr size_t RED_BYTES = (size_t)(WARPS > 1 ? WARPS / 2 : 1) * FM * FN * 32 * sizeof(float4);
constexpr size_t PART_BYTES = (size_t)TM * PART_LD * sizeof(float);
constexpr size_t SMEM = RED_BYTES > PART_BYTES ? RED_BYTES : PART_BYTES;  // the summed tile reuses the buffer
static_assert(FM >= 1 && FN >= 1 && U >= 1 && (WARPS & (WARPS - 1)) == 0, "knobs (warps a power of two)");

__device__ __forceinline__ uint4 ld16(const half* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One 32-k chunk: halves 0-3 of each lane's 16 bytes feed one m16n8k16 step, halves 4-7 the next.
__device__ __forceinline__ void chunk_mma(float (&acc)[FM][FN][4], const uint4 (&a)[FM][2], const uint4 (&b)[FN]) {
#pragma unroll
  for (int f = 0; f < FM; ++f)
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      mma16816(acc[f][j], a[f][0].x, a[f][1].x, a[f][0].y, a[f][1].y, b[j].x, b[j].y);
      mma16816(acc[f][j], a[f][0].z, a[f][1].z, a[f][0].w, a[f][1].w, b[j].z, b[j].w);
    }
}

__global__ void __launch_bounds__(NTH, 1) splitk_regs_kernel(const half* __restrict__ A, const half* __restrict__ B,
                                                            half* __restrict__ C, int M, int N, int K, int per) {
  extern __shared__ __align__(16) unsigned char smem[];
  float4* red = reinterpret_cast<float4*>(smem);  // [WARPS / 2][FM][FN][32]
  float* part = reinterpret_cast<float*>(smem);   // [TM][PART_LD], once the warps' parts are summed
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;

  const half* arow[FM][2];
#pragma unroll
  for (int f = 0; f < FM; ++f)
#pragma unroll
    for (int h = 0; h < 2; ++h) arow[f][h] = A + (size_t)min(m0 + f * 16 + h * 8 + g, M - 1) * K + 8 * t;
  const half* brow[FN];
#pragma unroll
  for (int j = 0; j < FN; ++j) brow[j] = B + (size_t)min(n0 + j * 8 + g, N - 1) * K + 8 * t;

  float acc[FM][FN][4];
#pragma unroll
  for (int f = 0; f < FM; ++f)
#pragma unroll
    for (int j = 0; j < FN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[f][j][e] = 0.f;

  const int nch = (K + 31) / 32;
  const int c0 = blockIdx.z * per, c1 = min(c0 + per, nch);
  for (int c = c0 + warp * U; c < c1; c += WARPS * U) {
    uint4 a[U][FM][2], b[U][FN];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int k = (c + u) * 32;
      const bool in = c + u < c1 && k + 8 * t < K;
#pragma unroll
      for (int f = 0; f < FM; ++f)
#pragma unroll
        for (int h = 0; h < 2; ++h) a[u][f][h] = in ? ld16(arow[f][h] + k) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < FN; ++j) b[u][j] = in ? ld16(brow[j] + k) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) chunk_mma(acc, a[u], b[u]);
  }

  // the warps' parts summed by halving (warp w + h's part added to warp w's, h = WARPS / 2, ..., 1: the
  // same order on every call), then warp 0's sum laid out row-major as the CTA's fp32 tile
#pragma unroll 1
  for (int h = WARPS / 2; h >= 1; h /= 2) {
    if (warp >= h && warp < 2 * h) {
#pragma unroll
      for (int f = 0; f < FM; ++f)
#pragma unroll
        for (int j = 0; j < FN; ++j)
          red[(((warp - h) * FM + f) * FN + j) * 32 + lane] =
              make_float4(acc[f][j][0], acc[f][j][1], acc[f][j][2], acc[f][j][3]);
    }
    __syncthreads();
    if (warp < h) {
#pragma unroll
      for (int f = 0; f < FM; ++f)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          const float4 v = red[((warp * FM + f) * FN + j) * 32 + lane];
          acc[f][j][0] += v.x;
          acc[f][j][1] += v.y;
          acc[f][j][2] += v.z;
          acc[f][j][3] += v.w;
        }
    }
    __syncthreads();
  }
  if (warp == 0) {
#pragma unroll
    for (int f = 0; f < FM; ++f)
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        const int row = f * 16 + g, col = j * 8 + 2 * t;
        *reinterpret_cast<float2*>(part + row * PART_LD + col) = make_float2(acc[f][j][0], acc[f][j][1]);
        *reinterpret_cast<float2*>(part + (row + 8) * PART_LD + col) = make_float2(acc[f][j][2], acc[f][j][3]);
      }
  }

  cs::sum_slices_store<TM, TN, PART_LD, NTH>(part, C, M, N, m0, n0);
}

struct Plan {
  int tiles_m, tiles_n, nch, want;  // nch: 32-wide K chunks; want: opts[0]
};

static bool make_plan(int M, int N, int K, const int* opts, int n_opts, Plan& p) {
  p.want = hgemm_opt(opts, n_opts, 0, 0);
  if (p.want < 0 || p.want > cs::MAX_CLUSTER) return false;
  p.tiles_m = (M + TM - 1) / TM;
  p.tiles_n = (N + TN - 1) / TN;
  p.nch = (K + 31) / 32;
  return true;
}

// Automatic slices (want 0): cs::auto_slices, a slice at least one run of chunks a warp. Slices never outnumber
// chunks, and none is left empty.
static int launch(const half* A, const half* B, half* C, int M, int N, int K, const Plan& p, cudaStream_t stream) {
  int s = p.want != 0 ? p.want : cs::auto_slices(splitk_regs_kernel, NTH, SMEM, p.tiles_m * p.tiles_n, p.nch, WARPS * U);
  s = s < p.nch ? s : p.nch;
  const int per = (p.nch + s - 1) / s;
  return cs::launch_cluster(splitk_regs_kernel, dim3(p.tiles_n, p.tiles_m, (p.nch + per - 1) / per), NTH, SMEM, stream,
                            A, B, C, M, N, K, per);
}
}  // namespace sr

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) { return 0; }

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (int rc = cs::call_status(A_, B_, C_, M, N, K, layout)) return rc;
  sr::Plan p;
  if (!sr::make_plan(M, N, K, opts, n_opts, p)) return HGEMM_ERR_OPTS;
  if (p.tiles_m > 65535) return HGEMM_ERR_UNSUPPORTED;  // the grid's y limit
  return sr::launch(static_cast<const half*>(A_), static_cast<const half*>(B_), static_cast<half*>(C_), M, N, K, p,
                    stream);
}
