// Decode GEMM for up to 16 activation rows (M <= GT_M, B stored N x K: a linear layer's weights) on the
// tensor cores, each CTA owning an equal run of whole weight rows that it streams through shared memory.
//
// Why: a decode GEMM's time is its weight bytes. On the H200 (lab/gemv/read_floor.py, cold) the gemv
// family's loads (straight into mma registers: 16 rows x 64 B a warp instruction, K slices per CTA)
// take 1.12x a plain read, and reading whole rows in 512-byte warp runs with equal shares per CTA
// 1.04x; gemv_rows does the latter on the CUDA cores and beats gemv at M = 1, but at M 8-16 the
// fp32 FMAs and conversions would exceed the issue rate. Here the same reads (cp.async, each warp
// instruction 512 contiguous bytes of one row) land in shared memory and mma.sync reads them back
// with ldmatrix, so the access pattern and the tensor cores are both kept.
//
// Work division: the grid is GT_CPS CTAs per SM (at most one a row); CTA b owns rows [r0, r1) of an
// equal split (counts differ by at most one). It walks them GT_R rows at a time (a row group) over
// the whole of K in chunks of GT_KC elements; the tiles (group, chunk) run through a GT_STAGES-deep
// cp.async ring, the activation's chunk (M x GT_KC, from L2) copied beside the weights' (shared by
// the group's GT_R rows). Warp w multiplies 16-row fragment (w % G) of a tile over its share of the
// chunk's k16 steps (weights the A operand, activation rows the n8 B operand); at the end of a group
// the warps' fp32 parts of each output are summed in warp order (deterministic) and stored.
// Rows past r1 and K past K are zero-filled by the copies (src-size 0: no memory read).
//
// Compile-time knobs (rendered above this file):
//   GT_M        activation rows served (8 or 16: one or two n8 mma a fragment)
//   GT_R        weight rows a group (a multiple of 16)
//   GT_KC       K elements a tile (a multiple of 64; 256 and more for 512-byte warp runs)
//   GT_STAGES   tiles in the ring (GT_STAGES - 1 in flight while one is multiplied)
//   GT_THREADS  threads per CTA
//   GT_CPS      CTAs per SM (the grid; also the launch bound)
// Needs layout tn, K a multiple of 8 and 16-byte aligned A and B (the family declines others).

namespace gt {
constexpr int MM = GT_M, R = GT_R, KC = GT_KC, S = GT_STAGES, NTH = GT_THREADS, CPS = GT_CPS;
constexpr int WARPS = NTH / 32;
constexpr int G = R / 16;          // 16-row weight fragments a tile
constexpr int WPG = WARPS / G;     // warps sharing a fragment (they split its k16 steps)
constexpr int KS = KC / 16;        // k16 steps a tile
constexpr int KSW = KS / WPG;      // k16 steps a warp
constexpr int NB = MM / 8;         // n8 mma a fragment
constexpr int CH = KC / 8;         // 16-byte chunks a row of a tile
constexpr int TILE = (R + MM) * KC;  // halves a stage: weights, then activation
static_assert(NTH % 32 == 0 && R % 16 == 0 && WARPS % G == 0 && KS % WPG == 0, "knobs");
static_assert(MM == 8 || MM == 16, "GT_M");
static_assert(KC % 64 == 0 && S >= 2, "GT_KC, GT_STAGES");

// a row's 16-byte chunk c sits at chunk c ^ (row & 7): ldmatrix's 8 rows of one chunk hit 8 bank groups
__device__ __forceinline__ int swz(int row, int c) { return row * KC + ((c ^ (row & 7)) << 3); }

__device__ __forceinline__ void cp16(half* dst, const half* src, bool ok) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
}

__device__ __forceinline__ void ldsm_x4(const half* p, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}

__device__ __forceinline__ void ldsm_x2(const half* p, uint32_t& r0, uint32_t& r1) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(a));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(NTH, CPS) gemv_rows_tc_kernel(const half* __restrict__ A, const half* __restrict__ B,
                                                               half* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(128) unsigned char smem[];
  half* ring = reinterpret_cast<half*>(smem);
  float* part = reinterpret_cast<float*>(smem + sizeof(half) * S * TILE);  // [WARPS][MM][16]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int base = N / gridDim.x, extra = N % gridDim.x;
  const int r0 = blockIdx.x * base + min((int)blockIdx.x, extra);
  const int r1 = r0 + base + ((int)blockIdx.x < extra ? 1 : 0);
  const int nk = (K + KC - 1) / KC, groups = (r1 - r0 + R - 1) / R, tiles = groups * nk;

  auto load = [&](int t) {
    half* st = ring + (t % S) * TILE;
    const int row0 = r0 + (t / nk) * R, k0 = (t % nk) * KC;
    for (int c = tid; c < (R + MM) * CH; c += NTH) {
      const int row = c / CH, ch = c % CH, gk = k0 + ch * 8;
      if (row < R) {  // weight row row0 + row
        const bool ok = row0 + row < r1 && gk < K;
        cp16(st + swz(row, ch), B + (size_t)(ok ? row0 + row : r0) * K + (ok ? gk : 0), ok);
      } else {  // activation row row - R
        const int m = row - R;
        const bool ok = m < M && gk < K;
        cp16(st + swz(row, ch), A + (size_t)(ok ? m : 0) * K + (ok ? gk : 0), ok);
      }
    }
  };

  const int frag = warp % G, ks0 = (warp / G) * KSW;
  float acc[NB][4];
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nb][i] = 0.f;

#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < tiles) load(s);
    asm volatile("cp.async.commit_group;");
  }
  for (int t = 0; t < tiles; ++t) {
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 2));
    __syncthreads();  // tile t landed for every thread; tile t - 1's stage is free again
    if (t + S - 1 < tiles) load(t + S - 1);
    asm volatile("cp.async.commit_group;");

    const half* st = ring + (t % S) * TILE;
#pragma unroll
    for (int j = 0; j < KSW; ++j) {
      const int c0 = 2 * (ks0 + j);  // the k16 step's two 16-byte chunks
      uint32_t a[4];
      const int arow = frag * 16 + (lane & 15);
      ldsm_x4(st + swz(arow, c0 + (lane >> 4)), a[0], a[1], a[2], a[3]);
      if constexpr (NB == 2) {
        uint32_t b[4];
        const int xrow = R + ((lane >> 4) << 3) + (lane & 7);
        ldsm_x4(st + swz(xrow, c0 + ((lane >> 3) & 1)), b[0], b[1], b[2], b[3]);
        mma16816(acc[0], a, b[0], b[1]);
        mma16816(acc[1], a, b[2], b[3]);
      } else {
        uint32_t b[2];
        const int xrow = R + (lane & 7);
        ldsm_x2(st + swz(xrow, c0 + ((lane >> 3) & 1)), b[0], b[1]);
        mma16816(acc[0], a, b[0], b[1]);
      }
    }

    if (t % nk == nk - 1) {  // the group is done: sum the warps' parts in warp order, store
      const int g = lane >> 2, q = lane & 3;
      float* mine = part + warp * MM * 16;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        const int m = nb * 8 + 2 * q;
        mine[m * 16 + g] = acc[nb][0];
        mine[(m + 1) * 16 + g] = acc[nb][1];
        mine[m * 16 + g + 8] = acc[nb][2];
        mine[(m + 1) * 16 + g + 8] = acc[nb][3];
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nb][i] = 0.f;
      }
      __syncthreads();
      const int row0 = r0 + (t / nk) * R;
      for (int o = tid; o < R * MM; o += NTH) {
        const int f = o / (16 * MM), m = (o / 16) % MM, rr = o % 16;
        float s = 0.f;
        for (int w = f; w < WARPS; w += G) s += part[(w * MM + m) * 16 + rr];
        const int n = row0 + f * 16 + rr;
        if (n < r1 && m < M) C[(size_t)m * N + n] = __float2half_rn(s);
      }
      // part is written again only after the next tile's __syncthreads, which every reader has passed
    }
  }
  asm volatile("cp.async.wait_group 0;");
}

constexpr size_t SMEM = sizeof(half) * S * TILE + sizeof(float) * WARPS * MM * 16;

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
}  // namespace gt

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) { return 0; }

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1 || !A_ || !B_ || !C_) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  if (layout != HGEMM_LAYOUT_TN || M > gt::MM || K % 8 != 0 || !hgemm_aligned16(A_) || !hgemm_aligned16(B_))
    return HGEMM_ERR_UNSUPPORTED;
  static bool attr = false;
  if (!attr) {
    if (cudaFuncSetAttribute(gt::gemv_rows_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gt::SMEM) !=
        cudaSuccess)
      return HGEMM_ERR_LAUNCH;
    attr = true;
  }
  const int cap = gt::CPS * gt::device_sms(), ctas = N < cap ? N : cap;
  gt::gemv_rows_tc_kernel<<<ctas, gt::NTH, gt::SMEM, stream>>>(static_cast<const half*>(A_), static_cast<const half*>(B_),
                                                               static_cast<half*>(C_), M, N, K);
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
