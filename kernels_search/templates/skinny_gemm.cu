// Skinny GEMM: a wide operand streamed through a deep cp.async pipeline against a narrow one,
// mma.sync m16n8k16 (fp16 in, fp32 accumulate), K split across CTAs with the reduction inside
// the same launch. For the shapes where cuBLAS sits furthest from the memory floor: decode GEMMs
// (M <= 32: the weights streamed once by every SM), few-tile deep-K GEMMs and tiny ones.
//
// The two output dimensions are mapped onto a "wide" one W (16-row mma fragments, WT per CTA)
// and a "narrow" one (8-column fragments, NT per CTA). With M <= N the kernel computes
// C^T = B^T A^T (wide = N, narrow = M: a decode GEMM's weights fill the tensor cores' 16-row side
// and a 1..32-row activation wastes at most 7 of 8 columns, not 15 of 16 rows); otherwise C = A B.
// Every SM streams its share of the wide operand; the narrow operand's stage is read from L2 by
// every CTA of that narrow tile.
//
// Compile-time knobs (rendered above this file):
//   SK_WT, SK_NT, SK_BK       CTA tile: wide rows, narrow columns, k-tile depth
//   SK_WARPS_W, SK_WARPS_N    warp grid (warp tile = WT/WARPS_W x NT/WARPS_N)
//   SK_STAGES                 cp.async pipeline depth (bytes in flight per CTA =
//                             (STAGES-1) x (WT + NT) x BK x 2)
//   SK_MINB                   CTAs per SM the register allocation must allow (launch bounds)
//   SK_TMA                    1: the wide operand's stages are filled by the TMA engine (2D boxes of
//                             64 x rows through a tensor map, 128-byte swizzle, one mbarrier per
//                             stage; out-of-range rows and k are zero-filled by the engine): the
//                             bytes in flight are not bounded by the per-SM limit on outstanding
//                             cp.async requests; 0: 16-byte cp.async per thread. The narrow
//                             operand always takes cp.async.
// Runtime options (opts):
//   opts[0] splits: 0 = chosen from the shape and the device (SM count, CTAs per SM), s >= 1 =
//           K split s ways (clamped to the k-tile count)
//   opts[1] orientation: 0 = by shape (C^T = B^T A^T when M <= N), 1 = C = A B, 2 = C^T = B^T A^T
//   opts[2] schedule: 0 = split-K: CTA (tile, split) takes one k range of one tile;
//           1 = stream-K: one wave of CTAs, each an equal contiguous run of the (tile, k-tile)
//           units in tile-major order, so every SM streams the same number of bytes whatever
//           the tile count (a run may end one tile part-way and start the next)
//   opts[3] stream-K CTAs per SM: 0 = as many as fit, c >= 1 = at most c
// Both schedules are one launch over a unit range per CTA. A CTA that holds all of a tile's k-tiles
// stores it; otherwise it stores its fp32 part of the tile in fragment order to a slot of its own
// in the workspace and adds its k-tile count to the tile's arrival counter, and the CTA that
// completes the count sums every contributor's slot in CTA order (deterministic), casts to fp16
// and stores C through shared memory in 16-byte rows. Counters must be zero when the workspace is
// handed over; every call leaves them at zero.
// Needs K a multiple of 8, N a multiple of 8 for layout nn, and 16-byte aligned A and B (the family
// declines other problems); C may have any alignment (scalar stores at ragged edges).

#include <cuda.h>
#include <cudaTypedefs.h>
#include <string.h>

namespace sk {
constexpr int WT = SK_WT, NT = SK_NT, BK = SK_BK;
constexpr int WARPS_W = SK_WARPS_W, WARPS_N = SK_WARPS_N, STAGES = SK_STAGES;
constexpr int NTH = WARPS_W * WARPS_N * 32;
constexpr int WTW = WT / WARPS_W, WTN = NT / WARPS_N;
constexpr int MI = WTW / 16, NI = WTN / 8;
constexpr int MAX_SPLITS = 64;
static_assert(WTW % 16 == 0, "warp tile: a multiple of 16 wide rows");
static_assert(WTN % 8 == 0, "warp tile: a multiple of 8 narrow columns");
static_assert(NI == 1 || NI % 2 == 0, "narrow fragments come in pairs (ldmatrix.x4) or alone (x2)");
static_assert(BK % 16 == 0 && STAGES >= 2, "k-tile a multiple of 16, at least two stages");
static_assert(!SK_TMA || (BK % 64 == 0 && WT % 64 == 0 && WT <= 256 && BK <= 256), "TMA boxes are 64 wide, <= 256 rows");

// Byte offset of element (row, col) of a TMA stage stored as 64-column boxes of ``rows`` rows,
// 128 bytes a row, 16-byte chunks XOR-swizzled by the row (CU_TENSOR_MAP_SWIZZLE_128B).
template <int ROWS>
__device__ __forceinline__ int swz(int row, int col) {
  return (col >> 6) * ROWS * 128 + row * 128 + ((((col & 63) >> 3) ^ (row & 7)) << 4) + (col & 7) * 2;
}

// Row padding (halves) so the 8 rows one ldmatrix reads fall in distinct banks: a row of an odd
// number of 16-byte units needs none, an even number gets one unit more.
constexpr int pad_for(int halves) { return ((halves / 8) % 2 == 0) ? 8 : 0; }
constexpr int LD_KC = BK + pad_for(BK);   // a tile stored row per wide/narrow index, k contiguous
constexpr int LD_WI = WT + pad_for(WT);   // the wide tile stored row per k, wide index contiguous
constexpr int LD_NJ = NT + pad_for(NT);   // the narrow tile stored row per k, narrow index contiguous

// What differs between the four kernels (orientation x B layout): how each operand sits in memory.
template <bool SWAP, int LAYOUT>
struct Cfg {
  // wide = B^T (SWAP) or A; narrow = A (SWAP) or B. Only B in layout nn is stored k-major.
  static constexpr bool WIDE_KC = !SWAP || LAYOUT == HGEMM_LAYOUT_TN;
  static constexpr bool NARROW_KC = SWAP || LAYOUT == HGEMM_LAYOUT_TN;
  // halves per wide stage: dense 1024-byte-aligned 64-wide boxes with TMA, padded rows otherwise
  static constexpr int W_STAGE = SK_TMA ? WT * BK : (WIDE_KC ? WT * LD_KC : BK * LD_WI);
  static constexpr int N_STAGE = NARROW_KC ? NT * LD_KC : BK * LD_NJ;
  static constexpr int PIPE_BYTES = STAGES * (W_STAGE + N_STAGE) * 2;
  // the fp16 output tile staged in C's own orientation before 16-byte stores
  static constexpr int OUT_LD = SWAP ? LD_WI : LD_NJ;
  static constexpr int OUT_BYTES = (SWAP ? NT : WT) * OUT_LD * 2;
  // the output staging area is apart from the pipeline: loads of the next tile are in flight
  static constexpr int SMEM_BYTES = PIPE_BYTES + OUT_BYTES + (SK_TMA ? 1024 : 0);  // + alignment slack
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}\n" ::"r"(
          smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// One 2D box of a tensor map -> shared memory by the TMA engine, completing on ``bar``.
__device__ __forceinline__ void tma_2d(void* dst, const void* tmap, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t addr, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2_t(uint32_t addr, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copy ROWS x CHUNKS 16-byte chunks, chunk q of row r from src(r, q) when ok(r, q), else zeros
// (a zero-byte copy still names a valid address: ``base``).
template <int ROWS, int CHUNKS, int LD, typename Src, typename Ok>
__device__ __forceinline__ void load_rows(half* dst, int tid, const half* base, Src src, Ok ok) {
  constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
  for (int i = 0; i < (TOTAL + NTH - 1) / NTH; ++i) {
    const int c = tid + i * NTH;
    if (TOTAL % NTH == 0 || c < TOTAL) {
      const int r = c / CHUNKS, q = c % CHUNKS;
      const bool in = ok(r, q);
      cp_async16(smem_u32(dst + r * LD + q * 8), in ? src(r, q) : base, in ? 16 : 0);
    }
  }
}

// One k-tile [kt0, kt0 + BK) of both operands into a stage; rows past W / Nn and k past k_end are
// zero-filled (K is a multiple of 8, so a 16-byte chunk is wholly inside or outside).
template <bool SWAP, int LAYOUT, bool WIDE>
__device__ __forceinline__ void load_stage(half* sW, half* sN, const half* __restrict__ Wp,
                                           const half* __restrict__ Np, int W, int Nn, int K, int ldb,
                                           int w0, int j0, int kt0, int k_end, int tid) {
  using C = Cfg<SWAP, LAYOUT>;
  if constexpr (!WIDE) {
  } else if constexpr (C::WIDE_KC) {
    load_rows<WT, BK / 8, LD_KC>(
        sW, tid, Wp, [&](int r, int q) { return Wp + (size_t)(w0 + r) * K + kt0 + q * 8; },
        [&](int r, int q) { return w0 + r < W && kt0 + q * 8 < k_end; });
  } else {  // B (K x N, row-major) as the wide operand: rows are k
    load_rows<BK, WT / 8, LD_WI>(
        sW, tid, Wp, [&](int r, int q) { return Wp + (size_t)(kt0 + r) * ldb + w0 + q * 8; },
        [&](int r, int q) { return kt0 + r < k_end && w0 + q * 8 < W; });
  }
  if constexpr (C::NARROW_KC) {
    load_rows<NT, BK / 8, LD_KC>(
        sN, tid, Np, [&](int r, int q) { return Np + (size_t)(j0 + r) * K + kt0 + q * 8; },
        [&](int r, int q) { return j0 + r < Nn && kt0 + q * 8 < k_end; });
  } else {  // B (K x N) as the narrow operand
    load_rows<BK, NT / 8, LD_NJ>(
        sN, tid, Np, [&](int r, int q) { return Np + (size_t)(kt0 + r) * ldb + j0 + q * 8; },
        [&](int r, int q) { return kt0 + r < k_end && j0 + q * 8 < Nn; });
  }
}


// Stage the fp32 accumulators as fp16 in C's orientation, then store 16-byte row chunks.
template <bool SWAP>
__device__ __forceinline__ void store_tile(half* __restrict__ Cp, int M, int N, int w0, int j0, int tid,
                                           const float (&acc)[MI][NI][4], half* so) {
  constexpr int LD = SWAP ? LD_WI : LD_NJ;
  const int warp = tid >> 5, lane = tid & 31;
  const int ww = warp % WARPS_W, wn = warp / WARPS_W;
  __syncthreads();  // the last tile's stores have read the staging area
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int w = ww * WTW + mi * 16 + (lane >> 2) + ((r & 2) ? 8 : 0);
        const int j = wn * WTN + ni * 8 + (lane & 3) * 2 + (r & 1);
        so[SWAP ? j * LD + w : w * LD + j] = __float2half_rn(acc[mi][ni][r]);
      }
  __syncthreads();
  constexpr int ROWS = SWAP ? NT : WT, COLS = SWAP ? WT : NT, CPR = COLS / 8;
  const int row0 = SWAP ? j0 : w0, col0 = SWAP ? w0 : j0;
  const bool vec = (N % 8 == 0) && (reinterpret_cast<uintptr_t>(Cp) & 15u) == 0;
  for (int c = tid; c < ROWS * CPR; c += NTH) {
    const int r = c / CPR, q = (c % CPR) * 8;
    const int gm = row0 + r, gn = col0 + q;
    if (gm >= M || gn >= N) continue;
    const half* s = so + r * LD + q;
    half* d = Cp + (size_t)gm * N + gn;
    if (vec && gn + 8 <= N) {
      *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
    } else {
      for (int e = 0; e < 8 && gn + e < N; ++e) d[e] = s[e];
    }
  }
}


constexpr int TILE_F2 = MI * NI * 2 * NTH;  // float2 per CTA tile (fragment order)

__device__ __forceinline__ void zero_acc(float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;
}

// Which (tile, k-tile) units each CTA takes. Units are numbered tile-major: u = tile * kt + k-tile,
// tile = tile_n * tiles_w + tile_w.
struct Sched {
  int tiles_w, kt;     // wide tiles; k-tiles per tile
  int stream;          // 0: split-K, 1: stream-K
  int per;             // split-K: k-tiles per split (splits per tile = ceil(kt / per))
  int splits;          // split-K: splits per tile
  long long units;     // stream-K: tiles * kt
  int ctas;            // stream-K: CTAs (one wave)
};

__device__ __forceinline__ long long run_start(const Sched& s, int c) {
  if (s.stream) return (long long)c * s.units / s.ctas;
  const int t = c / s.splits, z = c % s.splits;
  return (long long)t * s.kt + min(z * s.per, s.kt);
}
__device__ __forceinline__ long long run_end(const Sched& s, int c) {
  if (s.stream) return (long long)(c + 1) * s.units / s.ctas;
  const int t = c / s.splits, z = c % s.splits;
  return (long long)t * s.kt + min((z + 1) * s.per, s.kt);
}
// The CTA whose run holds unit u (stream-K: the largest c with run_start(c) <= u).
__device__ __forceinline__ int cta_of(const Sched& s, long long u) {
  if (s.stream) return (int)(((u + 1) * s.ctas + s.units - 1) / s.units - 1);
  return (int)(u / s.kt) * s.splits + (int)(u % s.kt) / s.per;
}

template <bool SWAP, int LAYOUT>
__global__ void __launch_bounds__(NTH, SK_MINB)
    skinny_kernel(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ Cp, int M, int N,
                  int K, const Sched sch, float2* __restrict__ partial, int* __restrict__ counters,
                  const __grid_constant__ CUtensorMap wmap) {
  using C = Cfg<SWAP, LAYOUT>;
  extern __shared__ __align__(128) unsigned char smem_dyn[];
  unsigned char* smem_raw = smem_dyn + (SK_TMA ? (1024 - (smem_u32(smem_dyn) & 1023)) & 1023 : 0);
  half* sW = reinterpret_cast<half*>(smem_raw);
  half* sN = sW + STAGES * C::W_STAGE;
  half* so = reinterpret_cast<half*>(smem_raw + C::PIPE_BYTES);
  __shared__ int s_last;
  __shared__ __align__(8) uint64_t full[SK_TMA ? STAGES : 1];  // a wide stage's bytes have landed
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ww = warp % WARPS_W, wn = warp / WARPS_W;
  const half* Wp = SWAP ? B : A;
  const half* Np = SWAP ? A : B;
  const int W = SWAP ? N : M, Nn = SWAP ? M : N;
  const int cta = blockIdx.x;
  const long long u0 = run_start(sch, cta), u1 = run_end(sch, cta);
  const int n = (int)(u1 - u0);
  if (n <= 0) return;
  const int kt = sch.kt;
  if constexpr (SK_TMA) {
    if (tid == 0) {
      for (int st = 0; st < STAGES; ++st) mbar_init(&full[st], 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
  }

  // load unit u (its tile's wide / narrow origin and k-tile) into pipeline stage st
  auto load_unit = [&](long long u, int st) {
    const int t = (int)(u / kt), k = (int)(u % kt);
    const int k_end = min(K, (k + 1) * BK);
    const int w0 = (t % sch.tiles_w) * WT, j0 = (t / sch.tiles_w) * NT;
    if constexpr (SK_TMA) {
      load_stage<SWAP, LAYOUT, false>(sW + st * C::W_STAGE, sN + st * C::N_STAGE, Wp, Np, W, Nn, K, N, w0, j0,
                                      k * BK, k_end, tid);
      if (tid == 0) {
        half* dst = sW + st * C::W_STAGE;
        mbar_expect_tx(&full[st], WT * BK * 2);
        if constexpr (C::WIDE_KC) {  // rows: wide index, boxes along k
#pragma unroll
          for (int b = 0; b < BK / 64; ++b) tma_2d(dst + b * WT * 64, &wmap, k * BK + b * 64, w0, &full[st]);
        } else {  // rows: k, boxes along the wide index
#pragma unroll
          for (int b = 0; b < WT / 64; ++b) tma_2d(dst + b * BK * 64, &wmap, w0 + b * 64, k * BK, &full[st]);
        }
      }
    } else {
      load_stage<SWAP, LAYOUT, true>(sW + st * C::W_STAGE, sN + st * C::N_STAGE, Wp, Np, W, Nn, K, N, w0, j0,
                                     k * BK, k_end, tid);
    }
  };

  float acc[MI][NI][4];
  zero_acc(acc);

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n) load_unit(u0 + s, s);
    cp_commit();
  }

  int seg_k0 = (int)(u0 % kt);  // first k-tile of the current segment (this CTA's part of one tile)
  for (int i = 0; i < n; ++i) {
    cp_wait<STAGES - 2>();
    if constexpr (SK_TMA) mbar_wait(&full[i % STAGES], (uint32_t)(i / STAGES) & 1u);
    __syncthreads();  // the stage read last iteration is free for the load issued next
    if (i + STAGES - 1 < n) load_unit(u0 + i + STAGES - 1, (i + STAGES - 1) % STAGES);
    cp_commit();
    const half* ws = sW + (i % STAGES) * C::W_STAGE;
    const half* ns = sN + (i % STAGES) * C::N_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int wb = ww * WTW + mi * 16;
        const int r_kc = wb + (lane & 15), c_kc = kk + (lane >> 4) * 8;                    // (wide, k)
        const int r_ic = kk + (lane & 7) + ((lane >> 4) & 1) * 8, c_ic = wb + ((lane >> 3) & 1) * 8;  // (k, wide)
        if constexpr (SK_TMA && C::WIDE_KC)
          ldsm_x4(smem_u32(ws) + swz<WT>(r_kc, c_kc), af[mi]);
        else if constexpr (SK_TMA)
          ldsm_x4_t(smem_u32(ws) + swz<BK>(r_ic, c_ic), af[mi]);
        else if constexpr (C::WIDE_KC)
          ldsm_x4(smem_u32(ws + r_kc * LD_KC + c_kc), af[mi]);
        else
          ldsm_x4_t(smem_u32(ws + r_ic * LD_WI + c_ic), af[mi]);
      }
      const int nb0 = wn * WTN;
      if constexpr (NI == 1) {
        if constexpr (C::NARROW_KC)
          ldsm_x2(smem_u32(ns + (nb0 + (lane & 7)) * LD_KC + kk + ((lane >> 3) & 1) * 8), bf[0]);
        else
          ldsm_x2_t(smem_u32(ns + (kk + (lane & 15)) * LD_NJ + nb0), bf[0]);
      } else {
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
          const int nb = nb0 + nj * 16;
          uint32_t r4[4];
          if constexpr (C::NARROW_KC)
            ldsm_x4(smem_u32(ns + (nb + (lane & 7) + (lane >> 4) * 8) * LD_KC + kk + ((lane >> 3) & 1) * 8), r4);
          else
            ldsm_x4_t(smem_u32(ns + (kk + (lane & 7) + ((lane >> 3) & 1) * 8) * LD_NJ + nb + (lane >> 4) * 8), r4);
          bf[2 * nj][0] = r4[0];
          bf[2 * nj][1] = r4[1];
          bf[2 * nj + 1][0] = r4[2];
          bf[2 * nj + 1][1] = r4[3];
        }
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma16816(acc[mi][ni], af[mi], bf[ni]);
    }

    const long long u = u0 + i;
    const int k = (int)(u % kt);
    if (i != n - 1 && k != kt - 1) continue;  // the segment goes on
    // ---- end of a segment: k-tiles [seg_k0, k] of tile t ----
    const int t = (int)(u / kt);
    const int w0 = (t % sch.tiles_w) * WT, j0 = (t / sch.tiles_w) * NT;
    if (seg_k0 != 0 || k != kt - 1) {  // a part of the tile: hand it to the tile's last arrival
      const int slot = (t == (int)(u0 / kt)) ? 0 : 1;  // the run's first tile, or its last
      float2* mine = partial + ((size_t)cta * 2 + slot) * TILE_F2;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            __stcg(mine + ((mi * NI + ni) * 2 + h) * NTH + tid, make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
      __threadfence();
      __syncthreads();
      if (tid == 0) s_last = atomicAdd(counters + t, k - seg_k0 + 1) + (k - seg_k0 + 1) == kt;
      __syncthreads();
      if (s_last) {
        __threadfence();
        zero_acc(acc);
        const long long tu0 = (long long)t * kt;
        const int c_first = cta_of(sch, tu0), c_last = cta_of(sch, tu0 + kt - 1);
        // contributors in CTA order (the same sum whichever arrives last), RB of them per batch of
        // loads so the L2 round trips overlap
        constexpr int F2 = MI * NI * 2, RB = F2 <= 4 ? 4 : (F2 <= 8 ? 2 : 1);
        for (int c0 = c_first; c0 <= c_last; c0 += RB) {
          float2 v[RB][F2];
#pragma unroll
          for (int b = 0; b < RB; ++b) {
            const int c = c0 + b;
            if (c <= c_last) {
              const int cs = (t == (int)(run_start(sch, c) / kt)) ? 0 : 1;
              const float2* p = partial + ((size_t)c * 2 + cs) * TILE_F2;
#pragma unroll
              for (int f = 0; f < F2; ++f) v[b][f] = __ldcg(p + f * NTH + tid);
            }
          }
#pragma unroll
          for (int b = 0; b < RB; ++b)
            if (c0 + b <= c_last) {
#pragma unroll
              for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
#pragma unroll
                  for (int h = 0; h < 2; ++h) {
                    acc[mi][ni][2 * h] += v[b][(mi * NI + ni) * 2 + h].x;
                    acc[mi][ni][2 * h + 1] += v[b][(mi * NI + ni) * 2 + h].y;
                  }
            }
        }
        if (tid == 0) counters[t] = 0;  // every contributor has arrived: leave the counter at zero
        store_tile<SWAP>(Cp, M, N, w0, j0, tid, acc, so);
      }
    } else {
      store_tile<SWAP>(Cp, M, N, w0, j0, tid, acc, so);
    }
    zero_acc(acc);
    seg_k0 = 0;
  }
  cp_wait<0>();
}

struct Plan {
  bool swap;
  int tiles_w, tiles_n, ctas;
  Sched s;
};

// Kernel attributes and the CTAs per SM they allow, once per kernel instantiation and process.
template <bool SWAP, int LAYOUT>
static int ctas_per_sm() {
  static int occ = -1;
  if (occ < 0) {
    auto kern = skinny_kernel<SWAP, LAYOUT>;
    constexpr int smem = Cfg<SWAP, LAYOUT>::SMEM_BYTES;
    int n = 0;
    if ((smem > 48 * 1024 &&
         cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, NTH, smem) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    occ = n;
  }
  return occ;
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

// Split count minimizing the busiest SM's work, in k-tiles: its CTAs' k-tiles, plus per split
// CTA the partial tile it writes and the reducer reads (4 * NT / BK k-tiles of bytes), plus a
// pipeline fill per wave of CTAs. Ties go to fewer splits (less reduction traffic).
static int auto_splits(int tiles, int ktiles, int sms, int occ) {
  const int cap = ktiles < MAX_SPLITS ? ktiles : MAX_SPLITS;
  const double red = 4.0 * NT / BK, fill = 2.0;
  int best = 1;
  double best_cost = 1e300;
  for (int s = 1; s <= cap; ++s) {
    const double per_sm = (double)((tiles * s + sms - 1) / sms);
    const double waves = (double)((tiles * s + sms * occ - 1) / (sms * occ));
    const double cost = per_sm * ((ktiles + s - 1) / s + (s > 1 ? red : 0.0)) + waves * fill;
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

template <bool SWAP, int LAYOUT>
static bool make_plan_for(int M, int N, int K, int want, int stream, int per_sm, Plan& p) {
  const int W = SWAP ? N : M, Nn = SWAP ? M : N;
  p.swap = SWAP;
  p.tiles_w = (W + WT - 1) / WT;
  p.tiles_n = (Nn + NT - 1) / NT;
  const int tiles = p.tiles_w * p.tiles_n;
  const int kt = (K + BK - 1) / BK;
  const int occ = ctas_per_sm<SWAP, LAYOUT>();
  if (occ < 1) return false;
  Sched& s = p.s;
  s.tiles_w = p.tiles_w;
  s.kt = kt;
  s.stream = stream;
  if (stream) {
    s.units = (long long)tiles * kt;
    const int fit = device_sms() * (per_sm == 0 || per_sm > occ ? occ : per_sm);
    s.ctas = (int)(s.units < fit ? s.units : fit);
    s.per = kt;
    s.splits = 1;
    p.ctas = s.ctas;
    return true;
  }
  int sp = want == 0 ? auto_splits(tiles, kt, device_sms(), occ) : want;
  sp = sp < kt ? sp : kt;
  s.per = (kt + sp - 1) / sp;  // k-tiles per split; every split gets at least one
  s.splits = (kt + s.per - 1) / s.per;
  s.units = (long long)tiles * kt;
  s.ctas = tiles * s.splits;
  p.ctas = s.ctas;
  return true;
}

static bool make_plan(int M, int N, int K, int layout, const int* opts, int n_opts, Plan& p) {
  const int want = hgemm_opt(opts, n_opts, 0, 0);
  const int o = hgemm_opt(opts, n_opts, 1, 0);
  const int stream = hgemm_opt(opts, n_opts, 2, 0);
  const int per_sm = hgemm_opt(opts, n_opts, 3, 0);
  if (want < 0 || want > MAX_SPLITS || o < 0 || o > 2 || stream < 0 || stream > 1 || per_sm < 0 || per_sm > 8)
    return false;
  const bool swap = o == 0 ? (M <= N) : (o == 2);
  if (layout == HGEMM_LAYOUT_NN)
    return swap ? make_plan_for<true, HGEMM_LAYOUT_NN>(M, N, K, want, stream, per_sm, p)
                : make_plan_for<false, HGEMM_LAYOUT_NN>(M, N, K, want, stream, per_sm, p);
  return swap ? make_plan_for<true, HGEMM_LAYOUT_TN>(M, N, K, want, stream, per_sm, p)
              : make_plan_for<false, HGEMM_LAYOUT_TN>(M, N, K, want, stream, per_sm, p);
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

// Two fp32 tile slots per CTA (the first and the last tile of its run) and a counter per tile;
// nothing when every CTA holds whole tiles.
static bool needs_workspace(const Plan& p) { return p.s.stream ? (p.s.units % p.s.ctas != 0 || p.s.units / p.s.ctas % p.s.kt != 0) : p.s.splits > 1; }

static size_t partial_bytes(const Plan& p) { return align256((size_t)p.ctas * 2 * TILE_F2 * sizeof(float2)); }

static size_t workspace_bytes(const Plan& p) {
  if (!needs_workspace(p)) return 0;
  return partial_bytes(p) + align256((size_t)p.tiles_w * p.tiles_n * sizeof(int));
}

// The wide operand's tensor map: 2D, fp16, 64-element boxes along the contiguous dimension,
// 128-byte swizzle, zero fill outside the tensor. The driver's encoder is found once through the
// runtime (no link against libcuda).
static bool wide_map(CUtensorMap* map, const half* base, bool kc, int W, int K, int ldb) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || encode == nullptr) {
      cudaGetLastError();
      encode = nullptr;
      return false;
    }
  }
  // kc: rows = wide index (W of them), K contiguous; else rows = k (K of them), W contiguous (stride ldb)
  const cuuint64_t dims[2] = {(cuuint64_t)(kc ? K : W), (cuuint64_t)(kc ? W : K)};
  const cuuint64_t strides[1] = {(cuuint64_t)(kc ? K : ldb) * 2};
  const cuuint32_t box[2] = {64, (cuuint32_t)(kc ? WT : BK)};
  const cuuint32_t estr[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<half*>(base), dims, strides, box, estr,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <bool SWAP, int LAYOUT>
static int launch(const half* A, const half* B, half* Cp, int M, int N, int K, const Plan& p, void* ws,
                  cudaStream_t stream) {
  if (ctas_per_sm<SWAP, LAYOUT>() < 1) return HGEMM_ERR_LAUNCH;  // also sets the shared-memory attribute
  CUtensorMap wmap;
  memset(&wmap, 0, sizeof(wmap));
  if (SK_TMA && !wide_map(&wmap, SWAP ? B : A, Cfg<SWAP, LAYOUT>::WIDE_KC, SWAP ? N : M, K, N))
    return HGEMM_ERR_LAUNCH;
  float2* partial = nullptr;
  int* counters = nullptr;
  if (needs_workspace(p)) {
    partial = static_cast<float2*>(ws);
    counters = reinterpret_cast<int*>(static_cast<char*>(ws) + partial_bytes(p));
  }
  skinny_kernel<SWAP, LAYOUT><<<p.ctas, NTH, Cfg<SWAP, LAYOUT>::SMEM_BYTES, stream>>>(A, B, Cp, M, N, K, p.s,
                                                                                       partial, counters, wmap);
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
}  // namespace sk

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) {
  sk::Plan p;
  if (M < 1 || N < 1 || K < 1 || (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) ||
      !sk::make_plan(M, N, K, layout, opts, n_opts, p))
    return 0;
  return sk::workspace_bytes(p);
}

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1 || !A_ || !B_ || !C_) return HGEMM_ERR_ARGS;
  if (layout != HGEMM_LAYOUT_NN && layout != HGEMM_LAYOUT_TN) return HGEMM_ERR_LAYOUT;
  if (K % 8 != 0 || (layout == HGEMM_LAYOUT_NN && N % 8 != 0) || !hgemm_aligned16(A_) || !hgemm_aligned16(B_))
    return HGEMM_ERR_UNSUPPORTED;
  sk::Plan p;
  if (!sk::make_plan(M, N, K, layout, opts, n_opts, p)) return HGEMM_ERR_OPTS;
  if (p.ctas < 1) return HGEMM_ERR_UNSUPPORTED;
  const size_t need = sk::workspace_bytes(p);
  if (need > 0 && (workspace == nullptr || ws_bytes < need)) return HGEMM_ERR_WORKSPACE;
  const half* A = static_cast<const half*>(A_);
  const half* B = static_cast<const half*>(B_);
  half* Cp = static_cast<half*>(C_);
  if (layout == HGEMM_LAYOUT_NN)
    return p.swap ? sk::launch<true, HGEMM_LAYOUT_NN>(A, B, Cp, M, N, K, p, workspace, stream)
                  : sk::launch<false, HGEMM_LAYOUT_NN>(A, B, Cp, M, N, K, p, workspace, stream);
  return p.swap ? sk::launch<true, HGEMM_LAYOUT_TN>(A, B, Cp, M, N, K, p, workspace, stream)
                : sk::launch<false, HGEMM_LAYOUT_TN>(A, B, Cp, M, N, K, p, workspace, stream);
}
