// Decode GEMM (M <= 32, B stored N x K: a linear layer's weights) with the weights streamed by the
// TMA's 1-D bulk copy in long contiguous runs, every SM reading an equal share.
//
// Why: a decode GEMM's time is its weight bytes, and on the H200 how fast they stream depends on the
// access pattern (lab/gemv/read_floor.py): a plain read that walks memory in long contiguous runs
// reaches 4.4-4.6 TB/s on 100+ MB, the gemv family's pattern (16 rows x 64 B a warp instruction) over
// the same bytes 6-10 % less even with the work balanced, and uneven work per SM costs as much again.
// Here a producer warp per CTA copies each weight row's next KC elements (KC x 2 contiguous bytes, one
// row a lane) into shared memory, GB_STAGES stages ahead; GB_WARPS consumer warps run mma.sync
// m16n8k16 on them, each loading its activation fragments one stage ahead.
//
// Work division: rows form tiles of RT; a tile's K is cut into 64-element quanta, and the quanta of
// all tiles (k fastest) are dealt to the CTAs (one per SM) in equal contiguous ranges, so every SM
// streams the same bytes to within 64 elements a row tile. A CTA's range covers whole tiles plus, at
// its two ends, parts of tiles it shares with its neighbours: a shared tile's parts go to per-CTA fp32
// slots, and the last CTA to arrive sums them in CTA order and stores C (deterministic, no second
// kernel). Within a CTA the consumer warps take interleaved 32-k groups of each stage; their fp32
// parts are summed in warp order through shared memory at the end of each tile.
//
// The mma: weights are the B operand (8 rows a fragment), the activation the A operand (16 rows a
// fragment, GB_MT fragments: M <= 16 x GB_MT). The k order of a dot product is free, so lane (g, t)
// loads 16 contiguous bytes of weight row g and of activation rows g, g + 8 at k = 8t + 32i and feeds
// halves .xy to one m16n8k16 step and .zw to the next (the activation comes from L1/L2).
//
// Compile-time knobs (rendered above this file):
//   GB_MT      16-row activation fragments (M <= 16 x GB_MT)
//   GB_RT      weight rows a tile (8 per B fragment)
//   GB_KC      k elements a stage copies per row (a multiple of 64): the contiguous run is 2 x KC bytes
//   GB_STAGES  stages in flight (bytes in flight per SM: STAGES x RT x 2 KC)
//   GB_WARPS   consumer warps
// Runtime opts[0]: CTAs (0 = one per SM). Needs layout tn, K a multiple of 64, 16-byte aligned A and B.

namespace gb {
constexpr int MT = GB_MT, RT = GB_RT, NT = GB_RT / 8, KC = GB_KC, ST = GB_STAGES, W = GB_WARPS;
constexpr int Q = 64;                      // k elements a quantum
constexpr int ROW_BYTES = KC * 2 + 64;     // a row's slot in a stage, padded so ldmatrix-free 16-byte reads
                                           // of 8 rows fall in distinct banks
constexpr int STAGE_BYTES = RT * ROW_BYTES;
constexpr int RED_BYTES = (W > 1 ? W - 1 : 1) * MT * NT * 32 * 16;
constexpr int SMEM_BYTES = ST * STAGE_BYTES + RED_BYTES;
constexpr int NTH = (W + 1) * 32;          // warp W is the producer
constexpr int SLOT = MT * NT * 32;         // float4s a CTA's part of one tile
constexpr int GPW = (KC / 32 + W - 1) / W;  // 32-k groups a consumer warp takes from a full stage
static_assert(RT % 8 == 0 && KC % Q == 0 && ST >= 2 && W >= 1, "knobs");

struct Plan {
  int tiles;        // row tiles
  int qpt;          // quanta a tile (K / 64)
  long long total;  // tiles x qpt
  int ctas;
};

__device__ __forceinline__ uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  }
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

__device__ __forceinline__ long long range_start(long long total, int ctas, int c) {
  return total * c / ctas;
}

// the CTA whose range holds quantum q: the largest c with range_start(c) <= q
__device__ __forceinline__ int owner(long long total, int ctas, long long q) {
  return (int)(((q + 1) * ctas + total - 1) / total) - 1;
}

__global__ void __launch_bounds__(NTH, 1) gemv_bulk_kernel(const half* __restrict__ A, const half* __restrict__ B,
                                                          half* __restrict__ C, int M, int N, int K, Plan p,
                                                          float4* __restrict__ slots, int* __restrict__ counters) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t full[ST], empty[ST];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long q0 = range_start(p.total, p.ctas, blockIdx.x), q1 = range_start(p.total, p.ctas, blockIdx.x + 1);
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(&empty[s])), "r"(W));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == W) {  // producer: lane 0 arms each stage's barrier, the warp's lanes issue one row's copy each
    int it = 0;
    for (long long q = q0; q < q1; ++it) {
      const int tile = (int)(q / p.qpt), kq = (int)(q % p.qpt);
      const int len = (int)min((long long)min(KC / Q, p.qpt - kq), q1 - q);
      const int s = it % ST;
      if (it >= ST) mbar_wait(saddr(&empty[s]), ((it / ST) + 1) & 1);
      const int row0 = tile * RT, rows = min(RT, N - row0);
      const uint32_t bytes = (uint32_t)len * Q * 2;
      const uint32_t bar = saddr(&full[s]);
      if (lane == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes * rows) : "memory");
      __syncwarp();
      const half* src = B + (size_t)row0 * K + (size_t)kq * Q;
      unsigned char* dst = smem + (size_t)s * STAGE_BYTES;
      for (int r = lane; r < rows; r += 32) {
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(saddr(dst + r * ROW_BYTES)), "l"(src + (size_t)r * K), "r"(bytes), "r"(bar) : "memory");
      }
      q += len;
    }
    return;
  }

  // consumers
  const int g = lane >> 2, t = lane & 3;
  float4* red = reinterpret_cast<float4*>(smem + ST * STAGE_BYTES);
  const half* arow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = min(mt * 16 + h * 8 + g, M - 1);
      arow[mt][h] = A + (size_t)m * K + 8 * t;
    }
  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.f;

  // the activation fragments of this warp's 32-k groups in the stage starting at quantum qs, loaded a
  // stage ahead (from L2 mostly: the latency then overlaps a whole stage's copy and compute)
  auto load_act = [&](uint4 (&dst)[GPW][MT][2], long long qs) {
    if (qs >= q1) return;
    const int kqs = (int)(qs % p.qpt);
    const int groups_s = 2 * (int)min((long long)min(KC / Q, p.qpt - kqs), q1 - qs);
#pragma unroll
    for (int i = 0; i < GPW; ++i) {
      if (warp + i * W < groups_s) {
        const int kg = kqs * Q + (warp + i * W) * 32;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          dst[i][mt][0] = ld_act(arow[mt][0] + kg);
          dst[i][mt][1] = ld_act(arow[mt][1] + kg);
        }
      }
    }
  };
  uint4 a[GPW][MT][2], an[GPW][MT][2];
  load_act(a, q0);

  int it = 0;
  for (long long q = q0; q < q1; ++it) {
    const int tile = (int)(q / p.qpt), kq = (int)(q % p.qpt);
    const int len = (int)min((long long)min(KC / Q, p.qpt - kq), q1 - q);
    const int s = it % ST;
    const int groups = len * 2;  // 32-k groups in this stage; warp w takes w, w + W, ...
    load_act(an, q + len);
    mbar_wait(saddr(&full[s]), (it / ST) & 1);
    const unsigned char* stage = smem + (size_t)s * STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < GPW; ++i) {
      const int kl = (warp + i * W) * 32;
      if (warp + i * W < groups) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const uint4 b = *reinterpret_cast<const uint4*>(stage + (j * 8 + g) * ROW_BYTES + (kl + 8 * t) * 2);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma16816(acc[mt][j], a[i][mt][0].x, a[i][mt][1].x, a[i][mt][0].y, a[i][mt][1].y, b.x, b.y);
            mma16816(acc[mt][j], a[i][mt][0].z, a[i][mt][1].z, a[i][mt][0].w, a[i][mt][1].w, b.z, b.w);
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < GPW; ++i)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[i][mt][0] = an[i][mt][0];
        a[i][mt][1] = an[i][mt][1];
      }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(&empty[s])) : "memory");
    q += len;
    if (kq + len < p.qpt && q < q1) continue;  // the tile goes on in this CTA's next stage

    // end of this CTA's part of the tile: warps 1.. hand their parts to warp 0, summed in warp order
    if (W > 1) {
      if (warp > 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int j = 0; j < NT; ++j)
            red[(((warp - 1) * MT + mt) * NT + j) * 32 + lane] =
                make_float4(acc[mt][j][0], acc[mt][j][1], acc[mt][j][2], acc[mt][j][3]);
      }
      asm volatile("bar.sync 1, %0;" ::"n"(W * 32) : "memory");
      if (warp == 0) {
        for (int w = 1; w < W; ++w)
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              const float4 v = red[(((w - 1) * MT + mt) * NT + j) * 32 + lane];
              acc[mt][j][0] += v.x;
              acc[mt][j][1] += v.y;
              acc[mt][j][2] += v.z;
              acc[mt][j][3] += v.w;
            }
      }
      asm volatile("bar.sync 1, %0;" ::"n"(W * 32) : "memory");  // red is free again
    }
    if (warp == 0) {
      const long long tq0 = (long long)tile * p.qpt;
      const int first = owner(p.total, p.ctas, tq0), last_cta = owner(p.total, p.ctas, tq0 + p.qpt - 1);
      bool store = first == last_cta;  // the whole tile was this CTA's
      if (!store) {
        // this part to the CTA's slot for the tile: 0 where the part starts the CTA's range (the range
        // began inside this tile), 1 where it ends it (the range began in an earlier tile)
        const int slot = q0 >= tq0 ? 0 : 1;
        float4* dst = slots + ((size_t)blockIdx.x * 2 + slot) * SLOT;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int j = 0; j < NT; ++j)
            dst[(mt * NT + j) * 32 + lane] = make_float4(acc[mt][j][0], acc[mt][j][1], acc[mt][j][2], acc[mt][j][3]);
        __threadfence();
        __syncwarp();
        int arrived = 0;
        if (lane == 0) arrived = atomicAdd(&counters[tile], 1);
        arrived = __shfl_sync(0xffffffffu, arrived, 0);
        store = arrived == last_cta - first;
        if (store) {
          __threadfence();
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.f;
          for (int c = first; c <= last_cta; ++c) {
            const int cslot = range_start(p.total, p.ctas, c) >= tq0 ? 0 : 1;
            const float4* src = slots + ((size_t)c * 2 + cslot) * SLOT;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int j = 0; j < NT; ++j) {
                const float4 v = __ldcg(src + (mt * NT + j) * 32 + lane);
                acc[mt][j][0] += v.x;
                acc[mt][j][1] += v.y;
                acc[mt][j][2] += v.z;
                acc[mt][j][3] += v.w;
              }
          }
          if (lane == 0) counters[tile] = 0;
        }
      }
      if (store) {
        // d0, d1: activation row g, weight rows 2t, 2t + 1; d2, d3: activation row g + 8
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int m = mt * 16 + g + (e >> 1) * 8, n = tile * RT + j * 8 + 2 * t + (e & 1);
              if (m < M && n < N) C[(size_t)m * N + n] = __float2half_rn(acc[mt][j][e]);
            }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.f;
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

static bool make_plan(int M, int N, int K, const int* opts, int n_opts, Plan& p) {
  const int want = hgemm_opt(opts, n_opts, 0, 0);
  if (want < 0 || M > 16 * MT || K % Q != 0) return false;
  p.tiles = (N + RT - 1) / RT;
  p.qpt = K / Q;
  p.total = (long long)p.tiles * p.qpt;
  const long long ctas = want > 0 ? want : device_sms();
  p.ctas = (int)(ctas < p.total ? ctas : p.total);
  return true;
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static size_t slot_bytes(const Plan& p) { return align256((size_t)p.ctas * 2 * SLOT * sizeof(float4)); }

static size_t workspace_bytes(const Plan& p) { return slot_bytes(p) + align256((size_t)p.tiles * sizeof(int)); }
}  // namespace gb

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) {
  gb::Plan p;
  if (M < 1 || N < 1 || K < 1 || layout != HGEMM_LAYOUT_TN || !gb::make_plan(M, N, K, opts, n_opts, p)) return 0;
  return gb::workspace_bytes(p);
}

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1 || !A_ || !B_ || !C_) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  if (layout != HGEMM_LAYOUT_TN || M > 16 * gb::MT || K % gb::Q != 0 || !hgemm_aligned16(A_) || !hgemm_aligned16(B_))
    return HGEMM_ERR_UNSUPPORTED;
  if (hgemm_opt(opts, n_opts, 0, 0) < 0) return HGEMM_ERR_OPTS;
  gb::Plan p;
  if (!gb::make_plan(M, N, K, opts, n_opts, p)) return HGEMM_ERR_OPTS;
  const size_t need = gb::workspace_bytes(p);
  if (workspace == nullptr || ws_bytes < need) return HGEMM_ERR_WORKSPACE;
  static bool smem_set = false;
  if (!smem_set) {
    if (cudaFuncSetAttribute(gb::gemv_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, gb::SMEM_BYTES) != cudaSuccess)
      return HGEMM_ERR_LAUNCH;
    smem_set = true;
  }
  float4* slots = static_cast<float4*>(workspace);
  int* counters = reinterpret_cast<int*>(static_cast<char*>(workspace) + gb::slot_bytes(p));
  gb::gemv_bulk_kernel<<<p.ctas, gb::NTH, gb::SMEM_BYTES, stream>>>(
      static_cast<const half*>(A_), static_cast<const half*>(B_), static_cast<half*>(C_), M, N, K, p, slots, counters);
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
