// mma.sync (m16n8k16, fp16 in, fp32 accumulate) tiled GEMM with optional split-K, for the
// `splitk` and `smalltile` families. Compile-time knobs (rendered above this file):
//   MS_BM, MS_BN, MS_BK      CTA tile
//   MS_WARPS_M, MS_WARPS_N   warp grid (warp tile = BM/WARPS_M x BN/WARPS_N)
//   MS_STAGES                shared-memory pipeline depth (cp.async)
//   MS_KSLICES               warp groups that split each k-tile's 16-deep steps between them
//                            (1 = none); group 0 owns the tile's accumulators after an smem sum,
//                            the others add warps to hide latency (block = KSLICES x warp grid)
//   MS_ALLOW_SPLIT           0: one launch, no split-K code at all
// Runtime options (opts):
//   opts[0] splits: 0 = automatic, 1 = no split, s > 1 = split K s ways
//   opts[1] reduce: 0 = each split stores its fp32 slice; the last CTA of each tile sums the
//                       slices in split order (one launch, deterministic),
//                   1 = each split stores its slice; a second small kernel on the same stream
//                       sums them (two launches, deterministic, no counters),
//                   2 = each split atomically adds into one fp32 tile; the last CTA casts it to
//                       fp16 and zeroes it again (one launch, least traffic, summation order
//                       varies run to run)
//                   3 = the splits of a tile form one thread-block cluster (at most 16, the
//                       split count is clamped to that); each CTA parks its fp32 tile in its own
//                       shared memory and reduces 1/splits of the tile by reading every peer's
//                       copy through distributed shared memory (one launch, no global traffic,
//                       no atomics or counters, deterministic)
//   opts[2] spread (reduce=3 only): 1 = ask for enough dynamic shared memory that one CTA fits
//                       per SM, so the cluster scheduler cannot pack several CTAs of a cluster
//                       onto one SM while other SMs idle; 0 = as many as fit
// Loads are 16-byte cp.async with zero fill at the edges when K (and N for "nn") are multiples
// of 8 and A/B are 16-byte aligned; otherwise a scalar, fully predicated load path is used.
// Split-K partials live in the workspace; per-tile arrival counters (also in the workspace)
// must be zero when the workspace is first handed over, and every call leaves them at zero.

#ifndef MS_ALLOW_SPLIT
#define MS_ALLOW_SPLIT 1
#endif
#ifndef MS_KSLICES
#define MS_KSLICES 1
#endif

#if MS_ALLOW_SPLIT
#include <cooperative_groups.h>
#endif

namespace ms {
constexpr int BM = MS_BM, BN = MS_BN, BK = MS_BK;
constexpr int WARPS_M = MS_WARPS_M, WARPS_N = MS_WARPS_N, STAGES = MS_STAGES;
constexpr int NT = WARPS_M * WARPS_N * 32;  // threads of one k-slice group: they own the fragments
constexpr int KSLICES = MS_KSLICES;
constexpr int NTT = NT * KSLICES;  // threads per CTA (every one loads; group 0 stores)
constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
constexpr int MI = WTM / 16, NI = WTN / 8;
constexpr int PAD = 8;  // halves of padding per smem row: ldmatrix rows land in distinct banks
constexpr int A_LD = BK + PAD;
constexpr int A_STAGE = BM * A_LD;
constexpr int BNN_LD = BN + PAD;  // "nn": smem B is [BK][BN]
constexpr int BTN_LD = BK + PAD;  // "tn": smem B is [BN][BK]
constexpr int B_STAGE = (BK * BNN_LD > BN * BTN_LD) ? BK * BNN_LD : BN * BTN_LD;
constexpr int PIPE_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
constexpr int SLICE_BYTES = (KSLICES - 1) * BM * BN * 4;  // k-slice groups 1.. park their fp32 tiles
constexpr int SMEM_BYTES = PIPE_BYTES > SLICE_BYTES ? PIPE_BYTES : SLICE_BYTES;
constexpr int MAX_SPLITS = 64;
constexpr int MAX_CLUSTER = 16;  // non-portable cluster size limit on sm_90
constexpr int RED_LD = BN + 4;   // fp32 row stride of the tile parked for the cluster reduction
constexpr int RED_BYTES = BM * RED_LD * 4;
constexpr int SMEM_CLUSTER = SMEM_BYTES > RED_BYTES ? SMEM_BYTES : RED_BYTES;
static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0, "warp tile must be 16x16 multiples");
static_assert(BK % 16 == 0, "BK must be a multiple of 16");
static_assert((BM * BK / 8) % NTT == 0 && (BN * BK / 8) % NTT == 0, "tile chunks must divide among threads");
static_assert((BK / 16) % KSLICES == 0, "each k-slice group takes an equal share of a k-tile's 16-deep steps");
static_assert(STAGES >= 2, "need at least two stages");

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Row/column inside the CTA tile of accumulator element (mi, ni, r) held by thread tid.
__device__ __forceinline__ void frag_coord(int tid, int mi, int ni, int r, int& row, int& col) {
  int warp = tid >> 5, lane = tid & 31;
  int wm = warp % WARPS_M, wn = warp / WARPS_M;
  row = wm * WTM + mi * 16 + (lane >> 2) + ((r & 2) ? 8 : 0);
  col = wn * WTN + ni * 8 + (lane & 3) * 2 + (r & 1);
}

// Load one k-tile (global k in [kt0, kt0+BK), clipped to k_end) of A and B into a stage.
// VEC: 16-byte cp.async per 8-half chunk, zero-filled past the edges (needs K, and N for "nn",
// multiples of 8 and 16-byte aligned bases). Otherwise: element loads, fully predicated, in a
// rolled loop (a fallback path; keeping it rolled keeps its registers low).
template <int LAYOUT>
__device__ __forceinline__ void load_tile_vec(half* sA, half* sB, const half* __restrict__ A,
                                              const half* __restrict__ B, int M, int N, int K, int m0,
                                              int n0, int kt0, int k_end, int tid) {
  constexpr int ACH = BK / 8;  // 8-half chunks per A row (and per "tn" B row)
#pragma unroll
  for (int i = 0; i < (BM * BK / 8) / NTT; ++i) {
    int c = tid + i * NTT;
    int row = c / ACH, col = (c % ACH) * 8;
    int gm = m0 + row, gk = kt0 + col;
    int bytes = (gm < M) ? max(0, min(16, (k_end - gk) * 2)) : 0;
    cp_async16(smem_u32(sA + row * A_LD + col), bytes ? A + (size_t)gm * K + gk : A, bytes);
  }
  if (LAYOUT == HGEMM_LAYOUT_NN) {
    constexpr int BCH = BN / 8;
#pragma unroll
    for (int i = 0; i < (BN * BK / 8) / NTT; ++i) {
      int c = tid + i * NTT;
      int row = c / BCH, col = (c % BCH) * 8;  // row: k, col: n
      int gk = kt0 + row, gn = n0 + col;
      int bytes = (gk < k_end) ? max(0, min(16, (N - gn) * 2)) : 0;
      cp_async16(smem_u32(sB + row * BNN_LD + col), bytes ? B + (size_t)gk * N + gn : B, bytes);
    }
  } else {
#pragma unroll
    for (int i = 0; i < (BN * BK / 8) / NTT; ++i) {
      int c = tid + i * NTT;
      int row = c / ACH, col = (c % ACH) * 8;  // row: n, col: k
      int gn = n0 + row, gk = kt0 + col;
      int bytes = (gn < N) ? max(0, min(16, (k_end - gk) * 2)) : 0;
      cp_async16(smem_u32(sB + row * BTN_LD + col), bytes ? B + (size_t)gn * K + gk : B, bytes);
    }
  }
}

template <int LAYOUT>
__device__ __noinline__ void load_tile_scalar(half* sA, half* sB, const half* __restrict__ A,
                                              const half* __restrict__ B, int M, int N, int K, int m0,
                                              int n0, int kt0, int k_end, int tid) {
  const half zero = __float2half(0.f);
#pragma unroll 1
  for (int e = tid; e < BM * BK; e += NTT) {
    int row = e / BK, col = e % BK;
    int gm = m0 + row, gk = kt0 + col;
    sA[row * A_LD + col] = (gm < M && gk < k_end) ? A[(size_t)gm * K + gk] : zero;
  }
#pragma unroll 1
  for (int e = tid; e < BN * BK; e += NTT) {
    if (LAYOUT == HGEMM_LAYOUT_NN) {
      int row = e / BN, col = e % BN;  // row: k, col: n (consecutive threads: consecutive n)
      int gk = kt0 + row, gn = n0 + col;
      sB[row * BNN_LD + col] = (gk < k_end && gn < N) ? B[(size_t)gk * N + gn] : zero;
    } else {
      int row = e / BK, col = e % BK;  // row: n, col: k
      int gn = n0 + row, gk = kt0 + col;
      sB[row * BTN_LD + col] = (gn < N && gk < k_end) ? B[(size_t)gn * K + gk] : zero;
    }
  }
}

template <int LAYOUT, bool VEC>
__device__ __forceinline__ void load_tile(half* sA, half* sB, const half* __restrict__ A,
                                          const half* __restrict__ B, int M, int N, int K, int m0,
                                          int n0, int kt0, int k_end, int tid) {
  if constexpr (VEC)
    load_tile_vec<LAYOUT>(sA, sB, A, B, M, N, K, m0, n0, kt0, k_end, tid);
  else
    load_tile_scalar<LAYOUT>(sA, sB, A, B, M, N, K, m0, n0, kt0, k_end, tid);
}

__device__ __forceinline__ void store_c(half* __restrict__ C, int M, int N, int m0, int n0, int tid,
                                        float (&acc)[MI][NI][4]) {
  const bool pair_ok = (N % 2 == 0) && ((reinterpret_cast<uintptr_t>(C) & 3u) == 0);
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int row, col;
        frag_coord(tid, mi, ni, 2 * h, row, col);
        int gm = m0 + row, gn = n0 + col;
        if (gm >= M) continue;
        half* p = C + (size_t)gm * N + gn;
        if (pair_ok && gn + 1 < N) {
          *reinterpret_cast<half2*>(p) = __floats2half2_rn(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
        } else {
          if (gn < N) p[0] = __float2half_rn(acc[mi][ni][2 * h]);
          if (gn + 1 < N) p[1] = __float2half_rn(acc[mi][ni][2 * h + 1]);
        }
      }
}

#if MS_ALLOW_SPLIT
// MODE 4 epilogue. The CTAs of one cluster are the K splits of one output tile. Each parks its
// fp32 accumulators row-major in its own shared memory (the pipeline buffers, drained), then
// CTA r sums rows [r*rows, (r+1)*rows) of the tile over every peer in rank order (deterministic)
// through distributed shared memory and stores them as fp16: 16-byte loads and stores when the
// row allows. The second cluster barrier keeps every CTA's shared memory alive until all peers
// have read it.
__device__ __forceinline__ void cluster_reduce_store(half* __restrict__ C, int M, int N, int m0, int n0,
                                                     int tid, float (&acc)[MI][NI][4],
                                                     unsigned char* smem_raw) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  float* red = reinterpret_cast<float*>(smem_raw);
  __syncthreads();  // every warp is done with the pipeline buffers (and the k-slice sums)
  if (KSLICES == 1 || tid < NT) {  // k-slice group 0 owns the accumulators
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int row, col;
          frag_coord(tid, mi, ni, 2 * h, row, col);
          *reinterpret_cast<float2*>(red + row * RED_LD + col) = make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
        }
  }
  cluster.sync();
  const int nsplit = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int rows = (BM + nsplit - 1) / nsplit;
  const int r0 = rank * rows, r1 = min(BM, r0 + rows);
  constexpr int CPR = BN / 8;  // 8-column chunks per row
  const bool vec_ok = (N % 8 == 0) && (reinterpret_cast<uintptr_t>(C) & 15u) == 0;
  for (int c = tid; c < (r1 - r0) * CPR; c += NTT) {  // every thread of the CTA helps
    const int row = r0 + c / CPR, col = (c % CPR) * 8;
    const int gm = m0 + row, gn = n0 + col;
    if (gm >= M || gn >= N) continue;
    float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
    // Peers' loads are issued in batches of 8 before any is summed: one remote round trip per
    // batch instead of one per peer (a load-add loop waits out each DSMEM latency in turn).
    for (int z0 = 0; z0 < nsplit; z0 += 8) {
      float4 a[8], b[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (z0 + j < nsplit) {
          const float4* q =
              reinterpret_cast<const float4*>(cluster.map_shared_rank(red + row * RED_LD + col, z0 + j));
          a[j] = q[0];
          b[j] = q[1];
        }
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (z0 + j < nsplit) {  // rank order: the sum is the same on every call
          lo.x += a[j].x; lo.y += a[j].y; lo.z += a[j].z; lo.w += a[j].w;
          hi.x += b[j].x; hi.y += b[j].y; hi.z += b[j].z; hi.w += b[j].w;
        }
    }
    half* p = C + (size_t)gm * N + gn;
    if (vec_ok && gn + 8 <= N) {
      __half2 h4[4] = {__floats2half2_rn(lo.x, lo.y), __floats2half2_rn(lo.z, lo.w),
                       __floats2half2_rn(hi.x, hi.y), __floats2half2_rn(hi.z, hi.w)};
      *reinterpret_cast<uint4*>(p) = *reinterpret_cast<uint4*>(h4);
    } else {
      const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      for (int j = 0; j < 8 && gn + j < N; ++j) p[j] = __float2half_rn(v[j]);
    }
  }
  cluster.sync();
}
#endif

// Partials are stored per tile in fragment order: float2 index ((mi*NI+ni)*2+h)*NT + ltid (the
// thread of k-slice group 0 that owns the fragment).
constexpr int TILE_F2 = MI * NI * 2 * NT;  // float2 per tile per split

// MODE 0: no split; 1: slices + last CTA reduces; 2: slices only (reduce_kernel follows);
// 3: atomic accumulation + last CTA casts; 4: cluster of splits, reduction through DSMEM.
template <int LAYOUT, bool VEC, int MODE>
__global__ void __launch_bounds__(NTT, 1) gemm_kernel(const half* __restrict__ A, const half* __restrict__ B,
                                                  half* __restrict__ C, int M, int N, int K, int k_chunk,
                                                  int splits, float2* __restrict__ partial,
                                                  int* __restrict__ counters) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* sA = reinterpret_cast<half*>(smem_raw);
  half* sB = sA + STAGES * A_STAGE;
  // tid: 0..NTT-1 (loads); ks: this thread's k-slice group; ltid: its index within the group
  // (fragment ownership, identical in every group); group 0 keeps the tile's accumulators
  const int tid = threadIdx.x, lane = tid & 31;
  const int ks = KSLICES > 1 ? tid / NT : 0, ltid = KSLICES > 1 ? tid % NT : tid, warp = ltid >> 5;
  const bool owner = ks == 0;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_begin = blockIdx.z * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  const int ntiles = (k_end - k_begin + BK - 1) / BK;

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ntiles)
      load_tile<LAYOUT, VEC>(sA + s * A_STAGE, sB + s * B_STAGE, A, B, M, N, K, m0, n0, k_begin + s * BK, k_end, tid);
    cp_commit();
  }

  for (int kt = 0; kt < ntiles; ++kt) {
    cp_wait<STAGES - 2>();
    __syncthreads();
    {
      int nk = kt + STAGES - 1;
      if (nk < ntiles) {
        int st = nk % STAGES;
        load_tile<LAYOUT, VEC>(sA + st * A_STAGE, sB + st * B_STAGE, A, B, M, N, K, m0, n0, k_begin + nk * BK, k_end, tid);
      }
      cp_commit();
    }
    const half* a_s = sA + (kt % STAGES) * A_STAGE;
    const half* b_s = sB + (kt % STAGES) * B_STAGE;
#pragma unroll
    for (int kq = 0; kq < BK / (16 * KSLICES); ++kq) {
      const int kk = (kq * KSLICES + ks) * 16;  // group ks takes every KSLICES-th 16-deep step
      uint32_t af[MI][4];
      uint32_t bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        int r = wm * WTM + mi * 16 + (lane & 15);
        int c = kk + (lane >> 4) * 8;
        ldsm_x4(smem_u32(a_s + r * A_LD + c), af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
      }
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        int nb = wn * WTN + nj * 16;
        if (LAYOUT == HGEMM_LAYOUT_NN) {
          int k = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
          int n = nb + (lane >> 4) * 8;
          ldsm_x4_t(smem_u32(b_s + k * BNN_LD + n), bf[2 * nj][0], bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
        } else {
          int n = nb + (lane & 7) + (lane >> 4) * 8;
          int k = kk + ((lane >> 3) & 1) * 8;
          ldsm_x4(smem_u32(b_s + n * BTN_LD + k), bf[2 * nj][0], bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
        }
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
  }
  cp_wait<0>();

  if (KSLICES > 1) {
    // groups 1.. park their partial sums in the drained pipeline buffers; group 0 adds them in
    // group order (deterministic) and carries on alone with the tile's accumulators
    float* park = reinterpret_cast<float*>(smem_raw);
    __syncthreads();
    if (!owner) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int r = 0; r < 4; ++r)
            park[(((ks - 1) * MI * NI + mi * NI + ni) * 4 + r) * NT + ltid] = acc[mi][ni][r];
    }
    __syncthreads();
    if (owner) {
#pragma unroll 1
      for (int g = 1; g < KSLICES; ++g)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mi][ni][r] += park[(((g - 1) * MI * NI + mi * NI + ni) * 4 + r) * NT + ltid];
    }
  }

  if (MODE == 0) {
    if (owner) store_c(C, M, N, m0, n0, ltid, acc);
    return;
  }
#if MS_ALLOW_SPLIT
  if (MODE == 4) {
    cluster_reduce_store(C, M, N, m0, n0, tid, acc, smem_raw);
    return;
  }
  const int tile = blockIdx.y * gridDim.x + blockIdx.x;
  const int ntile = gridDim.x * gridDim.y;
  if (!owner) {
    // k-slice groups 1.. hold nothing now; they only take part in the barriers below
  } else if (MODE == 3) {
    float2* acc_tile = partial + (size_t)tile * TILE_F2;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          atomicAdd(acc_tile + ((mi * NI + ni) * 2 + h) * NT + ltid, make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
  } else {
    float2* mine = partial + ((size_t)blockIdx.z * ntile + tile) * TILE_F2;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          __stcg(mine + ((mi * NI + ni) * 2 + h) * NT + ltid, make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
  }
  if (MODE == 2) return;

  // MODE 1: the last CTA to arrive at this tile sums every split in split order (deterministic).
  // MODE 3: the last CTA reads the atomically accumulated tile, then zeroes it for the next call.
  __shared__ int s_last;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    int prev = atomicAdd(counters + tile, 1);
    s_last = (prev == splits - 1);
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  if (!owner) return;  // no barrier follows
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;
  const int nsum = MODE == 3 ? 1 : splits;
  for (int z = 0; z < nsum; ++z) {
    float2* p = partial + ((size_t)z * ntile + tile) * TILE_F2;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float2* q = p + ((mi * NI + ni) * 2 + h) * NT + ltid;
          float2 v = __ldcg(q);
          if (MODE == 3) __stcg(q, make_float2(0.f, 0.f));
          acc[mi][ni][2 * h] += v.x;
          acc[mi][ni][2 * h + 1] += v.y;
        }
  }
  store_c(C, M, N, m0, n0, ltid, acc);
  if (tid == 0) counters[tile] = 0;  // leave the workspace as we found it
#endif
}

#if MS_ALLOW_SPLIT
// Second-kernel reduction: one thread per float2 of every tile; sums splits in order, casts, stores.
__global__ void reduce_kernel(const float2* __restrict__ partial, half* __restrict__ C, int M, int N,
                              int tiles_n, int ntile, int splits) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)ntile * TILE_F2) return;
  int tile = (int)(idx / TILE_F2);
  int off = (int)(idx % TILE_F2);
  int tid = off % NT, f = off / NT;  // f = (mi*NI+ni)*2 + h
  int h = f & 1, mn = f >> 1, mi = mn / NI, ni = mn % NI;
  int row, col;
  frag_coord(tid, mi, ni, 2 * h, row, col);
  int gm = (tile / tiles_n) * BM + row, gn = (tile % tiles_n) * BN + col;
  if (gm >= M || gn >= N) return;
  float x = 0.f, y = 0.f;
  for (int z = 0; z < splits; ++z) {
    float2 v = __ldcg(partial + ((size_t)z * ntile + tile) * TILE_F2 + off);
    x += v.x;
    y += v.y;
  }
  half* p = C + (size_t)gm * N + gn;
  p[0] = __float2half_rn(x);
  if (gn + 1 < N) p[1] = __float2half_rn(y);
}
#endif

struct Plan {
  int tiles_m, tiles_n, splits, k_chunk, mode;  // mode as gemm_kernel MODE
  int spread;                                   // MODE 4: one CTA per SM
};
constexpr int SMEM_ONE_PER_SM = 120 * 1024;  // more than half of an SM's 228 KB

static int auto_splits(int tiles, int ktiles) {
  // About two CTAs per SM of a 132-SM H200 (two fit at the default tile), more loads in flight
  // per SM; every split keeps at least 4 k-tiles so the pipeline fills.
  int s = (2 * 132 + tiles - 1) / tiles;
  s = min(s, max(1, ktiles / 4));
  return max(1, min(s, MAX_SPLITS));
}

static bool make_plan(int M, int N, int K, const int* opts, int n_opts, Plan& p) {
  p.tiles_m = (M + BM - 1) / BM;
  p.tiles_n = (N + BN - 1) / BN;
  int ktiles = (K + BK - 1) / BK;
  int want = hgemm_opt(opts, n_opts, 0, 0);
  int reduce = hgemm_opt(opts, n_opts, 1, 0);
  p.spread = hgemm_opt(opts, n_opts, 2, 0);
  if (want < 0 || want > MAX_SPLITS || reduce < 0 || reduce > 3 || p.spread < 0 || p.spread > 1) return false;
#if !MS_ALLOW_SPLIT
  if (want > 1) return false;
  want = 1;
#endif
  int s = want == 0 ? auto_splits(p.tiles_m * p.tiles_n, ktiles) : want;
  if (reduce == 3) s = min(s, MAX_CLUSTER);  // the splits of a tile are one cluster
  s = min(s, ktiles);
  int per = (ktiles + s - 1) / s;  // k-tiles per split; every split gets at least one
  p.k_chunk = per * BK;
  p.splits = (ktiles + per - 1) / per;
  p.mode = p.splits == 1 ? 0 : (reduce == 0 ? 1 : reduce == 1 ? 2 : reduce == 2 ? 3 : 4);
  return true;
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static size_t partial_bytes(const Plan& p) {
  size_t slices = p.mode == 3 ? 1 : (size_t)p.splits;  // atomic mode keeps one fp32 tile
  return align256(slices * p.tiles_m * p.tiles_n * TILE_F2 * sizeof(float2));
}

static size_t workspace_bytes(const Plan& p) {
  if (p.mode == 0 || p.mode == 4) return 0;
  return partial_bytes(p) + align256((size_t)p.tiles_m * p.tiles_n * sizeof(int));
}

#if MS_ALLOW_SPLIT
// MODE 4: grid (tiles_n, tiles_m, splits) in clusters of (1, 1, splits). A split count whose
// cluster cannot be co-scheduled (cudaOccupancyMaxActiveClusters == 0) is refused as
// HGEMM_ERR_UNSUPPORTED rather than failing at launch. The attributes and the answer are cached
// per kernel instantiation (a template, so each layout / load path has its own statics) and
// split count. A failed launch's error is consumed here so it cannot surface at a later launch.
template <int LAYOUT, bool VEC>
static int launch_cluster(const half* A, const half* B, half* C, int M, int N, int K, const Plan& p,
                          cudaStream_t stream) {
  auto kern = gemm_kernel<LAYOUT, VEC, 4>;
  constexpr int SMEM_MAX = SMEM_CLUSTER > SMEM_ONE_PER_SM ? SMEM_CLUSTER : SMEM_ONE_PER_SM;
  static bool attr_done = false;
  static signed char fits[2][MAX_CLUSTER + 1] = {};  // [spread][splits]: 0 unknown, 1 fits, -1 not
  if (!attr_done) {
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_MAX) != cudaSuccess ||
        cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
      cudaGetLastError();
      return HGEMM_ERR_LAUNCH;
    }
    attr_done = true;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(p.tiles_n, p.tiles_m, p.splits);
  cfg.blockDim = dim3(NTT, 1, 1);
  cfg.dynamicSmemBytes = p.spread ? SMEM_MAX : SMEM_CLUSTER;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = p.splits;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  signed char& fit = fits[p.spread][p.splits];
  if (fit == 0) {
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    fit = n > 0 ? 1 : -1;
  }
  if (fit < 0) return HGEMM_ERR_UNSUPPORTED;
  if (cudaLaunchKernelEx(&cfg, kern, A, B, C, M, N, K, p.k_chunk, p.splits, (float2*)nullptr, (int*)nullptr) !=
      cudaSuccess) {
    cudaGetLastError();
    return HGEMM_ERR_LAUNCH;
  }
  return HGEMM_OK;
}
#endif

template <int LAYOUT, bool VEC, int MODE>
static int launch(const half* A, const half* B, half* C, int M, int N, int K, const Plan& p,
                  float2* partial, int* counters, cudaStream_t stream) {
#if MS_ALLOW_SPLIT
  if (MODE == 4) return launch_cluster<LAYOUT, VEC>(A, B, C, M, N, K, p, stream);
#endif
  auto kern = gemm_kernel<LAYOUT, VEC, MODE>;
  if (SMEM_BYTES > 48 * 1024) {
    static bool attr_done = false;  // one attribute call per instantiation and process
    if (!attr_done) {
      if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) != cudaSuccess) {
        cudaGetLastError();
        return HGEMM_ERR_LAUNCH;
      }
      attr_done = true;
    }
  }
  dim3 grid(p.tiles_n, p.tiles_m, p.splits);
  kern<<<grid, NTT, SMEM_BYTES, stream>>>(A, B, C, M, N, K, p.k_chunk, p.splits, partial, counters);
  if (cudaGetLastError() != cudaSuccess) return HGEMM_ERR_LAUNCH;
#if MS_ALLOW_SPLIT
  if (MODE == 2) {
    size_t total = (size_t)p.tiles_m * p.tiles_n * TILE_F2;
    int threads = 256;
    reduce_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(
        partial, C, M, N, p.tiles_n, p.tiles_m * p.tiles_n, p.splits);
    if (cudaGetLastError() != cudaSuccess) return HGEMM_ERR_LAUNCH;
  }
#endif
  return HGEMM_OK;
}

template <int LAYOUT, bool VEC>
static int dispatch_mode(const half* A, const half* B, half* C, int M, int N, int K, const Plan& p,
                         float2* partial, int* counters, cudaStream_t stream) {
#if MS_ALLOW_SPLIT
  if (p.mode == 1) return launch<LAYOUT, VEC, 1>(A, B, C, M, N, K, p, partial, counters, stream);
  if (p.mode == 2) return launch<LAYOUT, VEC, 2>(A, B, C, M, N, K, p, partial, counters, stream);
  if (p.mode == 3) return launch<LAYOUT, VEC, 3>(A, B, C, M, N, K, p, partial, counters, stream);
  if (p.mode == 4) return launch<LAYOUT, VEC, 4>(A, B, C, M, N, K, p, partial, counters, stream);
#endif
  return launch<LAYOUT, VEC, 0>(A, B, C, M, N, K, p, partial, counters, stream);
}
}  // namespace ms

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) {
  (void)layout;
  ms::Plan p;
  if (M < 1 || N < 1 || K < 1 || !ms::make_plan(M, N, K, opts, n_opts, p)) return 0;
  return ms::workspace_bytes(p);
}

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes,
                         cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1 || !A_ || !B_ || !C_) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  ms::Plan p;
  if (!ms::make_plan(M, N, K, opts, n_opts, p)) return HGEMM_ERR_OPTS;
  if (p.tiles_m > 65535 || p.splits > 65535) return HGEMM_ERR_UNSUPPORTED;
  size_t need = ms::workspace_bytes(p);
  if (need > 0 && (workspace == nullptr || ws_bytes < need)) return HGEMM_ERR_WORKSPACE;
  const half* A = static_cast<const half*>(A_);
  const half* B = static_cast<const half*>(B_);
  half* C = static_cast<half*>(C_);
  float2* partial = static_cast<float2*>(workspace);
  int* counters = nullptr;
  if (need > 0) {
    counters = reinterpret_cast<int*>(static_cast<char*>(workspace) + ms::partial_bytes(p));
  }
  bool vec = (K % 8 == 0) && (layout == HGEMM_LAYOUT_TN || N % 8 == 0) && hgemm_aligned16(A) && hgemm_aligned16(B);
  if (layout == HGEMM_LAYOUT_NN)
    return vec ? ms::dispatch_mode<HGEMM_LAYOUT_NN, true>(A, B, C, M, N, K, p, partial, counters, stream)
               : ms::dispatch_mode<HGEMM_LAYOUT_NN, false>(A, B, C, M, N, K, p, partial, counters, stream);
  return vec ? ms::dispatch_mode<HGEMM_LAYOUT_TN, true>(A, B, C, M, N, K, p, partial, counters, stream)
             : ms::dispatch_mode<HGEMM_LAYOUT_TN, false>(A, B, C, M, N, K, p, partial, counters, stream);
}
