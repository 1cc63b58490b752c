// Shared by the split-K families that make a tile's K slices one thread-block cluster (splitk_regs, splitk_dsmem;
// rendered verbatim above their body): the SM count, the calls they serve, the cluster launch, and the sum of the
// slices' fp32 tiles through distributed shared memory.
#include <cooperative_groups.h>

namespace cs {
constexpr int MAX_CLUSTER = 16;  // non-portable cluster size limit on sm_90

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

// What both slice sums share: the first barrier (every slice's tile written before any is read), then this CTA's rows
// [x, y) of the tile's TM rows: rank r of S takes rows [r x ceil(TM / S), ...).
template <int TM>
__device__ __forceinline__ int2 slice_sum_begin() {
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int splits = gridDim.z;
  if (splits > 1) cluster.sync();
  else __syncthreads();
  const int rank = splits > 1 ? (int)cluster.block_rank() : 0;
  const int rows = (TM + splits - 1) / splits;
  return make_int2(rank * rows, min(TM, rank * rows + rows));
}

// Called by every thread of every CTA of the grid (gridDim.z = S slices, the S CTAs of a tile one cluster) once its
// fp32 tile is in `part` (TM x TN, row stride LD, this CTA's shared memory): CTA r sums rows [r x ceil(TM / S), ...)
// over the S CTAs' tiles in rank order (the same sum on every call), two ranks' loads in flight at a time (four raised the
// kernels' register counts by 40-60, costing splitk_regs its second CTA a SM), and
// stores them as fp16 at (m0, n0) of C (row-major, N columns), within M x N. Between two cluster barriers: every
// tile is written before any is read, and none leaves shared memory while a peer reads it.
template <int TM, int TN, int LD, int NTH>
__device__ __forceinline__ void sum_slices_store(const float* part, half* __restrict__ C, int M, int N, int m0, int n0) {
  namespace cg = cooperative_groups;
  const int splits = gridDim.z;
  cg::cluster_group cluster = cg::this_cluster();
  const int2 rows = slice_sum_begin<TM>();
  const int r0 = rows.x, r1 = rows.y;
  constexpr int CPR = TN / 8;  // 8-column pieces a row
  static_assert(TN % 8 == 0, "tile columns a multiple of 8");
  const bool vec = (N % 8 == 0) && (reinterpret_cast<uintptr_t>(C) & 15u) == 0;
  for (int i = threadIdx.x; i < (r1 - r0) * CPR; i += NTH) {
    const int row = r0 + i / CPR, col = (i % CPR) * 8;
    const int gm = m0 + row, gn = n0 + col;
    if (gm >= M || gn >= N) continue;
    float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    const float* mine = part + row * LD + col;
    int z = 0;
    for (; z + 2 <= splits; z += 2) {
      float4 lo[2], hi[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const float* q = cluster.map_shared_rank(mine, z + u);
        lo[u] = *reinterpret_cast<const float4*>(q);
        hi[u] = *reinterpret_cast<const float4*>(q + 4);
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        v[0] += lo[u].x; v[1] += lo[u].y; v[2] += lo[u].z; v[3] += lo[u].w;
        v[4] += hi[u].x; v[5] += hi[u].y; v[6] += hi[u].z; v[7] += hi[u].w;
      }
    }
    for (; z < splits; ++z) {
      const float* q = splits > 1 ? cluster.map_shared_rank(mine, z) : mine;
      const float4 lo = *reinterpret_cast<const float4*>(q), hi = *reinterpret_cast<const float4*>(q + 4);
      v[0] += lo.x; v[1] += lo.y; v[2] += lo.z; v[3] += lo.w;
      v[4] += hi.x; v[5] += hi.y; v[6] += hi.z; v[7] += hi.w;
    }
    half* p = C + (size_t)gm * N + gn;
    if (vec && gn + 8 <= N) {
      __half2 h4[4] = {__floats2half2_rn(v[0], v[1]), __floats2half2_rn(v[2], v[3]), __floats2half2_rn(v[4], v[5]),
                       __floats2half2_rn(v[6], v[7])};
      *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(h4);
    } else {
      for (int e = 0; e < 8 && gn + e < N; ++e) p[e] = __float2half_rn(v[e]);
    }
  }
  if (splits > 1) cluster.sync();
}

// sum_slices_store with every rank's load in flight before any add: 4 columns a thread (one 16-byte DSMEM load a
// rank, up to 8 ranks issued together), so a 64 x 64 tile over 8 slices keeps all 128 threads busy with 8 loads each
// where sum_slices_store keeps 64 busy with two ranks at a time. Same rank order, so the same sums bit for bit. Why: on
// splitk_dsmem's 128_256_4096 (8 slices) the sum took 2,584 cycles a CTA, a quarter of the CTA's time
// (lab/fewtile/dsmem_timeline.py, H100), about four DSMEM round trips.
template <int TM, int TN, int LD, int NTH>
__device__ __forceinline__ void sum_slices_store_wide(const float* part, half* __restrict__ C, int M, int N, int m0,
                                                      int n0) {
  namespace cg = cooperative_groups;
  const int splits = gridDim.z;
  cg::cluster_group cluster = cg::this_cluster();
  const int2 rows = slice_sum_begin<TM>();
  const int r0 = rows.x, r1 = rows.y;
  constexpr int CPR = TN / 4;  // 4-column pieces a row
  static_assert(TN % 4 == 0 && LD % 4 == 0, "16-byte pieces");
  const bool vec = (N % 4 == 0) && (reinterpret_cast<uintptr_t>(C) & 7u) == 0;
  for (int i = threadIdx.x; i < (r1 - r0) * CPR; i += NTH) {
    const int row = r0 + i / CPR, col = (i % CPR) * 4;
    const int gm = m0 + row, gn = n0 + col;
    if (gm >= M || gn >= N) continue;
    const float* mine = part + row * LD + col;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int z0 = 0; z0 < splits; z0 += 8) {
      float4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (z0 + u < splits)
          v[u] = *reinterpret_cast<const float4*>(splits > 1 ? cluster.map_shared_rank(mine, z0 + u) : mine);
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (z0 + u < splits) {
          acc.x += v[u].x; acc.y += v[u].y; acc.z += v[u].z; acc.w += v[u].w;
        }
    }
    half* p = C + (size_t)gm * N + gn;
    if (vec && gn + 4 <= N) {
      __half2 h2[2] = {__floats2half2_rn(acc.x, acc.y), __floats2half2_rn(acc.z, acc.w)};
      *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(h2);
    } else {
      const float f[4] = {acc.x, acc.y, acc.z, acc.w};
      for (int e = 0; e < 4 && gn + e < N; ++e) p[e] = __float2half_rn(f[e]);
    }
  }
  if (splits > 1) cluster.sync();
}

// The calls both families serve: layout `served` (tn: A and B K-contiguous; nn, splitk_dsmem only: B N-contiguous, N
// a multiple of 8), K a multiple of 8 and 16-byte aligned A and B (the 16-byte loads or TMA row strides); HGEMM_OK, or
// the ABI's error for the first check that fails.
static int call_status(const void* A, const void* B, const void* C, int M, int N, int K, int layout,
                       int served = HGEMM_LAYOUT_TN) {
  if (M < 1 || N < 1 || K < 1 || !A || !B || !C) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  if (layout != served || K % 8 != 0 || !hgemm_aligned16(A) || !hgemm_aligned16(B)) return HGEMM_ERR_UNSUPPORTED;
  if (layout == HGEMM_LAYOUT_NN && N % 8 != 0) return HGEMM_ERR_UNSUPPORTED;
  return HGEMM_OK;
}

// Sets `kernel`'s shared-memory size and non-portable cluster attributes, once per kernel; false if refused.
template <class Kernel>
static bool prepare(Kernel kernel, size_t smem) {
  static int state = 0;  // 0 not asked, 1 set, -1 refused
  if (state == 0) {
    const bool ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) == cudaSuccess &&
                    cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
    if (!ok) cudaGetLastError();
    state = ok ? 1 : -1;
  }
  return state > 0;
}

static cudaLaunchConfig_t cluster_config(dim3 grid, int threads, size_t smem, cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads, 1, 1);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = grid.z;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Clusters of `s` CTAs of `kernel` (at `threads`, `smem`) the GPU holds at once (cudaOccupancyMaxActiveClusters),
// asked once per size: 0 when none fits. A cluster's CTAs sit in one GPC, so this is below SMs / s: on the H200,
// 15 clusters of 8 one-CTA-a-SM CTAs, not 16.
template <class Kernel>
static int max_clusters(Kernel kernel, int threads, size_t smem, int s) {
  static int held[MAX_CLUSTER + 1];
  static bool asked[MAX_CLUSTER + 1] = {};
  if (s < 1 || s > MAX_CLUSTER) return 0;
  if (!asked[s]) {
    int n = 0;
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = cluster_config(dim3(1, 1, s), threads, smem, 0, attr);
    if (!prepare(kernel, smem) || cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    held[s] = n;
    asked[s] = true;
  }
  return held[s];
}

// Automatic slice count for `tiles` tiles of `units` K steps, a slice at least `least` steps, on `sms` SMs where
// held(s) clusters of s CTAs fit at once: the fewest slices that bring tiles x slices to the SM count (at most 8, the
// portable cluster size), then fewer while the tiles' clusters do not all fit at once. A cluster's CTAs share one
// GPC, so the GPU holds fewer clusters than SMs / s: on the H200, 15 clusters of 8 one-CTA-a-SM CTAs, and 16 tiles
// in 8 slices ran the 16th cluster as a second wave (splitk_dsmem stages=8 on 256_256_4096: 11.4 us; 6 slices:
// 8.4 us). Where more CTAs than SMs fit at once (small shared memory), they share SMs as before.
template <class Held>
static int pick_slices(int tiles, int units, int least, int sms, Held held) {
  int s = (sms + tiles - 1) / tiles;
  s = min(s, max(1, units / max(1, least)));
  s = min(s, 8);
  while (s > 1 && held(s) < tiles) --s;
  return max(1, s);
}

// pick_slices for `kernel` at (threads, smem) on this GPU.
template <class Kernel>
static int auto_slices(Kernel kernel, int threads, size_t smem, int tiles, int units, int least) {
  return pick_slices(tiles, units, least, device_sms(), [&](int s) { return max_clusters(kernel, threads, smem, s); });
}

// Launches `kernel` on `grid` (grid.z = the slices, one cluster along z) with `smem` bytes of dynamic shared memory.
// A cluster size the GPU cannot co-schedule is refused as unsupported rather than failing at launch; a failed
// launch's error is consumed here so it cannot surface at a later launch.
template <class Kernel, class... Args>
static int launch_cluster(Kernel kernel, dim3 grid, int threads, size_t smem, cudaStream_t stream, Args... args) {
  if ((int)grid.z < 1 || (int)grid.z > MAX_CLUSTER) return HGEMM_ERR_UNSUPPORTED;
  if (!prepare(kernel, smem)) return HGEMM_ERR_LAUNCH;
  if (max_clusters(kernel, threads, smem, (int)grid.z) < 1) return HGEMM_ERR_UNSUPPORTED;
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = cluster_config(grid, threads, smem, stream, attr);
  if (cudaLaunchKernelEx(&cfg, kernel, args...) != cudaSuccess) {
    cudaGetLastError();
    return HGEMM_ERR_LAUNCH;
  }
  return HGEMM_OK;
}
}  // namespace cs
