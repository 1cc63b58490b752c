// Split-K GEMM for few-tile shapes on the Hopper path (TMA loads, WGMMA from shared memory), the K slices
// of a tile summed inside the same launch through distributed shared memory.
//
// Why: on few-tile deep-K shapes the library's best kernels are CUTLASS split-K GEMMs whose slices are
// summed by a second kernel (on 256_256_4096 the reduce kernel is 1.2 us of a 5.5 us call,
// lab/fewtile/slices-kernel-profile-h200.md). Summing inside the GEMM through global memory (a counter,
// the last slice sums) lost (lab/fewtile/fused-reduce-h200.md): it puts L2 round trips and one SM's
// bandwidth on the critical path. CUTLASS's sm90 schedulers cannot put the K slices of one tile in one
// cluster, so here the grid is (tiles along M, tiles along N, S slices) and the S CTAs of a tile are one
// thread-block cluster (S <= 16): after the main loop each CTA writes its fp32 tile into its own shared
// memory, and CTA r sums rows [r x BM / S, ...) of the tile over the cluster's CTAs, in rank order
// (deterministic), through DSMEM, and stores them as fp16. One launch, no workspace, no atomics.
//
// Main loop: one warpgroup a CTA; thread 0 keeps STAGES TMA loads of (BM + BN) x 64 fp16 in flight
// (128-byte swizzle, zero fill past M, N and K); the warpgroup waits each stage's transaction barrier,
// issues its WGMMAs (BM / 64 of m64nBNk16 per 16 k), waits for them (or, SD_MMA_PIPE, for the previous stage's),
// frees the stage. A slice is short (a few k-tiles), so the loads of a whole slice are mostly in flight at once.
//
// Swapped (SD_SWAP = 1), for decode shapes (M <= 32): the kernel computes C^T = B A^T, the WGMMA's 64-row side
// running along N and its N (8-32) along M, so a few rows of A ride along with each stage of the weights; the tile
// lands in shared memory transposed, as C lays it out, and is summed and stored like any other.
//
// Compile-time knobs (rendered above this file):
//   SD_BM      tile rows (along M; swapped: along N), 64, 128 or 256 (one warpgroup issues BM / 64 m64 WGMMAs a
//              k16 step). At 256 the fp32 tile of the slice sum reuses the stages' shared memory (free once the main
//              loop's loads and WGMMAs are done), so a swapped decode CTA can stream 256 weight rows with deep stages:
//              fewer, fatter CTAs, one wave (cuBLAS's decode kernels run 512 weight rows a CTA)
//   SD_BN      tile columns (along N; swapped: along M), the WGMMA's N: a multiple of 8 up to 256
//   SD_STAGES  shared-memory stages of the TMA pipeline
//   SD_SWAP    1: C^T = B A^T (above)
//   SD_MMA_PIPE 1: a stage's WGMMAs stay in flight while the previous stage is freed and refilled (0: each stage's
//              WGMMAs are waited for before it is freed)
//   SD_CHAINS  independent accumulator sets (1, 2 or 4): a stage's four k16 WGMMAs go to k-block % CHAINS, summed
//              after the main loop. One set makes every WGMMA wait for the one before it (the same accumulator
//              registers); on 256_256_16384 30 % of the warps' stall samples sat at the HGMMAs
//              (lab/fewtile/ncu-source-dsmem-h200.md), and a swapped decode CTA, whose WGMMAs are short (N 8-32),
//              streamed its weights at about 20 GB/s whatever its stage count
//   SD_SUM     1: with 4 or more slices, the slice sum with every rank's load in flight, 4 columns a thread
//              (cs::sum_slices_store_wide); side by side on an H100 (lab/fewtile/sum-h100.md) 7 % faster on the 15
//              deep-K study shapes, and 8-14 % slower where a tile had 1-2 slices, hence the slice threshold
//   SD_PREFETCH 1: thread 0 prefetches both TMA descriptors on entry, so the first loads need not fetch them
//   SD_NN      1: serves layout nn instead of tn: B stored K x N (N-contiguous), loaded by TMA into an MN-major
//              128-byte-swizzled stage and fed to the WGMMA as an MN-major operand (the WGMMA's A when swapped, its B
//              otherwise; 64-row atoms, so that side's tile is a multiple of 64). Why: on the M <= 128 streaming
//              shapes cuBLAS reads the weights 3-9 % faster from nn storage than from tn (H100, runs bcd2ec2dfbe7 and
//              26a40cf6e3cf, lab/fewtile/skinny-h100.md), where this kernel in tn is at 0.95-1.03x of cuBLAS's tn
// Runtime option: opts[0] splits: 0 = automatic (cs::auto_slices: tiles x slices about the SM count, at most 8, a
// slice at least 2 k-tiles, and only as many slices as let the GPU hold all the tiles' clusters at once), s >= 1 = s slices (at most 16, at most one a 64-k tile).
// Serves layout tn (A M x K and B N x K, both K-contiguous), or with SD_NN layout nn (B K x N); TMA needs K (and under
// nn N) a multiple of 8 and 16-byte aligned A and B (the family declines others).

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"

namespace sd {
using namespace cute;

constexpr int BM = SD_BM, BN = SD_BN, BK = 64, STAGES = SD_STAGES;
constexpr bool SWAP = SD_SWAP;
constexpr bool MMA_PIPE = SD_MMA_PIPE;
constexpr int CHAINS = SD_CHAINS;
constexpr bool WIDE_SUM = SD_SUM, PREFETCH = SD_PREFETCH, NN = SD_NN;
static_assert(CHAINS == 1 || CHAINS == 2 || CHAINS == 4, "CHAINS: 1, 2 or 4");
constexpr int NTH = 128;
// the CTA's fp32 tile in shared memory as C lays it out (swapped: BN rows of C, BM columns), row stride PART_LD
constexpr int PART_ROWS = SWAP ? BN : BM, PART_COLS = SWAP ? BM : BN;
constexpr int PART_LD = PART_COLS + 4;
using PartStride = std::conditional_t<SWAP, Stride<_1, Int<PART_LD>>, Stride<Int<PART_LD>, _1>>;  // of (BM, BN)
static_assert(BM == 64 || BM == 128 || BM == 256, "BM: 64, 128 or 256 (a TMA box is at most 256 rows)");
// BM 256: the fp32 tile lives in the stages' memory after the main loop (128 and 64 keep their own, as measured)
constexpr bool PART_ALIAS = BM == 256;
constexpr int PART_FLOATS = PART_ROWS * PART_LD;
static_assert(BN % 8 == 0 && BN >= 8 && BN <= 256, "BN: a WGMMA N");

using TA = cute::half_t;
using CtaTiler = Shape<Int<BM>, Int<BN>, Int<BK>>;
// NN: matrix B's side of the WGMMA (A when swapped, B otherwise) is MN-major in shared memory, as B lies in memory
constexpr bool MN_A = NN && SWAP, MN_B = NN && !SWAP;
static_assert(!MN_A || BM % 64 == 0, "NN swapped: BM a multiple of the 64-row MN-major atom");
static_assert(!MN_B || BN % 64 == 0, "NN: BN a multiple of the 64-row MN-major atom");
using AtomA = std::conditional_t<MN_A, GMMA::Layout_MN_SW128_Atom<TA>, GMMA::Layout_K_SW128_Atom<TA>>;
using AtomB = std::conditional_t<MN_B, GMMA::Layout_MN_SW128_Atom<TA>, GMMA::Layout_K_SW128_Atom<TA>>;
// MN-major atoms (64 rows x 8 k) tiled k first, as CUTLASS's sm90 collectives do: a 64-row block's whole 64 k lie
// together, so TMA moves a stage in 64 x 64 boxes; tiled rows first (the default order) a 128-row tile became 64 x 8
// boxes, and those tiles ran at 0.42-0.92x of tn (H100, run d644b14d9e13)
template <bool MN>
using AtomOrder = std::conditional_t<MN, Step<_2, _1, _3>, Step<_1, _2, _3>>;
using SmemLayoutA = decltype(tile_to_shape(AtomA{}, make_shape(Int<BM>{}, Int<BK>{}, Int<STAGES>{}), AtomOrder<MN_A>{}));
using SmemLayoutB = decltype(tile_to_shape(AtomB{}, make_shape(Int<BN>{}, Int<BK>{}, Int<STAGES>{}), AtomOrder<MN_B>{}));
using TiledMma = decltype(make_tiled_mma(
    GMMA::ss_op_selector<TA, TA, float, Shape<_64, Int<BN>, Int<BK>>, MN_A ? GMMA::Major::MN : GMMA::Major::K,
                         MN_B ? GMMA::Major::MN : GMMA::Major::K>()));
static_assert(size(TiledMma{}) == NTH, "one warpgroup");

struct SharedStorage {
  alignas(1024) TA a[cosize_v<SmemLayoutA>];  // 128-byte swizzle: stages start on 1 KB
  alignas(1024) TA b[cosize_v<SmemLayoutB>];
  alignas(16) float part[PART_ALIAS ? 4 : PART_FLOATS];  // PART_ALIAS: the tile starts at `a` instead
  alignas(8) uint64_t full[STAGES];   // TMA bytes landed
  alignas(8) uint64_t empty[STAGES];  // the warpgroup is done with the stage
};
constexpr size_t SMEM = sizeof(SharedStorage);
static_assert(!PART_ALIAS || PART_FLOATS * sizeof(float) <= (cosize_v<SmemLayoutA> + cosize_v<SmemLayoutB>) * sizeof(TA),
              "the aliased fp32 tile fits in the stages");
constexpr int TX_BYTES = (BM + BN) * BK * (int)sizeof(TA);

template <class TmaA, class TmaB>
__global__ void __launch_bounds__(NTH, 1)
    splitk_dsmem_kernel(CUTE_GRID_CONSTANT TmaA const tma_a, CUTE_GRID_CONSTANT TmaB const tma_b, half* __restrict__ C,
                        int M, int N, int K, int per) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
  if constexpr (PREFETCH) {
    if (threadIdx.x == 0) {
      cute::prefetch_tma_descriptor(tma_a.get_tma_descriptor());
      cute::prefetch_tma_descriptor(tma_b.get_tma_descriptor());
    }
  }
  using FullBar = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBar = cutlass::arch::ClusterBarrier;

  // the WGMMA's A side (BM rows) and B side (BN rows): A and B, or B and A when swapped
  Tensor mA = tma_a.get_tma_tensor(make_shape(SWAP ? N : M, K));
  Tensor mB = tma_b.get_tma_tensor(make_shape(SWAP ? M : N, K));
  auto cta = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, CtaTiler{}, cta, Step<_1, X, _1>{});  // (BM, BK, k-tiles)
  Tensor gB = local_tile(mB, CtaTiler{}, cta, Step<X, _1, _1>{});  // (BN, BK, k-tiles)
  Tensor sA = make_tensor(make_smem_ptr(smem.a), SmemLayoutA{});  // (BM, BK, STAGES)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), SmemLayoutB{});
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));

  const int k_tiles = (K + BK - 1) / BK;
  const int kt0 = blockIdx.z * per;
  const int n_kt = min(kt0 + per, k_tiles) - kt0;  // >= 1: the plan never makes an empty slice
  const int warp = threadIdx.x / 32;
  const bool leader = warp == 0 && cute::elect_one_sync();

  if (warp == 0 && threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      FullBar::init(&smem.full[s], 1);
      EmptyBar::init(&smem.empty[s], NTH);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // k-tile kt of A and B into stage s; the stage's barrier expects both
  auto load_stage = [&](int s, int kt) {
    FullBar::arrive_and_expect_tx(&smem.full[s], TX_BYTES);
    copy(tma_a.with(smem.full[s]), tAgA(_, kt), tAsA(_, s));
    copy(tma_b.with(smem.full[s]), tBgB(_, kt), tBsB(_, s));
  };
  int issued = 0;
  if (leader) {
    for (; issued < STAGES && issued < n_kt; ++issued) load_stage(issued, kt0 + issued);
  }

  TiledMma mma;
  ThrMMA thr = mma.get_thread_slice(threadIdx.x);
  float* part = PART_ALIAS ? reinterpret_cast<float*>(smem.a) : smem.part;
  Tensor sP = make_tensor(make_smem_ptr(part), make_layout(make_shape(Int<BM>{}, Int<BN>{}), PartStride{}));
  Tensor tCsA = thr.partition_A(sA);  // (MMA, MMA_M, MMA_K, STAGES)
  Tensor tCsB = thr.partition_B(sB);
  Tensor tCsP = thr.partition_C(sP);  // (MMA, MMA_M, MMA_N)
  Tensor tCrA = thr.make_fragment_A(tCsA);
  Tensor tCrB = thr.make_fragment_B(tCsB);
  Tensor acc = thr.make_fragment_C(tCsP);
  Tensor acc1 = make_fragment_like(acc);  // the other chains' accumulators (unused ones compile away)
  Tensor acc2 = make_fragment_like(acc);
  Tensor acc3 = make_fragment_like(acc);
  clear(acc);
  if constexpr (CHAINS > 1) clear(acc1);
  if constexpr (CHAINS > 2) {
    clear(acc2);
    clear(acc3);
  }
  auto fence_acc = [&] {
    warpgroup_fence_operand(acc);
    if constexpr (CHAINS > 1) warpgroup_fence_operand(acc1);
    if constexpr (CHAINS > 2) {
      warpgroup_fence_operand(acc2);
      warpgroup_fence_operand(acc3);
    }
  };
  // stage s's k16 WGMMAs, k-block kb into chain kb % CHAINS
  auto mma_stage = [&](int s) {
    constexpr int KB = decltype(size<2>(tCrA))::value;
    cute::for_each(make_int_sequence<KB>{}, [&](auto kb) {
      constexpr int c = decltype(kb)::value % CHAINS;
      if constexpr (c == 0) cute::gemm(mma, tCrA(_, _, kb, s), tCrB(_, _, kb, s), acc);
      else if constexpr (c == 1) cute::gemm(mma, tCrA(_, _, kb, s), tCrB(_, _, kb, s), acc1);
      else if constexpr (c == 2) cute::gemm(mma, tCrA(_, _, kb, s), tCrB(_, _, kb, s), acc2);
      else cute::gemm(mma, tCrA(_, _, kb, s), tCrB(_, _, kb, s), acc3);
    });
  };

  // Stage j's MMAs done: free it, and the leader refills it with k-tile j + STAGES.
  auto release = [&](int j) {
    const int s = j % STAGES;
    EmptyBar::arrive(&smem.empty[s]);
    if (leader && issued < n_kt) {  // issued == j + STAGES: k-tiles are issued in order
      EmptyBar::wait(&smem.empty[s], (j / STAGES) & 1);
      load_stage(s, kt0 + issued);
      ++issued;
    }
  };
  for (int i = 0; i < n_kt; ++i) {
    const int s = i % STAGES;
    FullBar::wait(&smem.full[s], (i / STAGES) & 1);
    fence_acc();
    warpgroup_arrive();
    mma_stage(s);
    warpgroup_commit_batch();
    if constexpr (MMA_PIPE) {  // stage i's MMAs run while stage i - 1 is freed and refilled
      warpgroup_wait<1>();
      fence_acc();
      if (i > 0) release(i - 1);
    } else {
      warpgroup_wait<0>();
      fence_acc();
      release(i);
    }
  }
  if constexpr (MMA_PIPE) {
    warpgroup_wait<0>();
    fence_acc();
  }
  if constexpr (CHAINS > 1) {  // the chains' sum, in a fixed order
    CUTE_UNROLL
    for (int e = 0; e < size(acc); ++e) {
      if constexpr (CHAINS > 2) acc(e) = (acc(e) + acc1(e)) + (acc2(e) + acc3(e));
      else acc(e) += acc1(e);
    }
  }

  // this CTA's fp32 tile into its own shared memory; aliased, only once every warp's WGMMAs have read their stages
  if constexpr (PART_ALIAS) __syncthreads();
  CUTE_UNROLL
  for (int e = 0; e < size(acc); ++e) tCsP(e) = acc(e);

  const int m0 = SWAP ? blockIdx.y * BN : blockIdx.x * BM, n0 = SWAP ? blockIdx.x * BM : blockIdx.y * BN;
  if constexpr (WIDE_SUM) {
    if (gridDim.z >= 4) {  // with 1-2 slices the wide sum's extra items and 8-byte stores cost more than they save
      cs::sum_slices_store_wide<PART_ROWS, PART_COLS, PART_LD, NTH>(part, C, M, N, m0, n0);
      return;
    }
  }
  cs::sum_slices_store<PART_ROWS, PART_COLS, PART_LD, NTH>(part, C, M, N, m0, n0);
}

struct Plan {
  int tiles_x, tiles_y, k_tiles, want;  // tiles along the BM side and the BN side; want: opts[0]
};

static bool make_plan(int M, int N, int K, const int* opts, int n_opts, Plan& p) {
  p.want = hgemm_opt(opts, n_opts, 0, 0);
  if (p.want < 0 || p.want > cs::MAX_CLUSTER) return false;
  p.tiles_x = ((SWAP ? N : M) + BM - 1) / BM;
  p.tiles_y = ((SWAP ? M : N) + BN - 1) / BN;
  p.k_tiles = (K + BK - 1) / BK;
  return true;
}

// The TMA load of one operand's (box_rows, BK) stage from its (rows, K) view: K-contiguous, or (MN, matrix B stored
// K x N under NN) rows-contiguous.
template <bool MN, class Smem, class Rows>
static auto tma_load(const half* p, int rows, int K, Smem smem, Rows box_rows) {
  auto ptr = make_gmem_ptr(reinterpret_cast<const TA*>(p));
  auto box = make_shape(box_rows, Int<BK>{});
  if constexpr (MN)
    return make_tma_atom(SM90_TMA_LOAD{}, make_tensor(ptr, make_shape(rows, K), make_stride(Int<1>{}, rows)), smem(_, _, 0),
                         box);
  else
    return make_tma_atom(SM90_TMA_LOAD{}, make_tensor(ptr, make_shape(rows, K), make_stride(K, Int<1>{})), smem(_, _, 0),
                         box);
}

// Automatic slices (want 0): cs::auto_slices, a slice at least 2 k-tiles. Slices never outnumber k-tiles, and none
// is left empty.
static int launch(const half* A, const half* B, half* C, int M, int N, int K, const Plan& p, cudaStream_t stream) {
  const half* x = SWAP ? B : A;  // the WGMMA's A side
  const half* y = SWAP ? A : B;
  auto tma_a = tma_load<MN_A>(x, SWAP ? N : M, K, SmemLayoutA{}, Int<BM>{});
  auto tma_b = tma_load<MN_B>(y, SWAP ? M : N, K, SmemLayoutB{}, Int<BN>{});
  auto kernel = &splitk_dsmem_kernel<decltype(tma_a), decltype(tma_b)>;
  int s = p.want != 0 ? p.want : cs::auto_slices(kernel, NTH, SMEM, p.tiles_x * p.tiles_y, p.k_tiles, 2);
  s = max(1, min(s, p.k_tiles));
  const int per = (p.k_tiles + s - 1) / s;
  return cs::launch_cluster(kernel, dim3(p.tiles_x, p.tiles_y, (p.k_tiles + per - 1) / per), NTH, SMEM, stream, tma_a,
                            tma_b, C, M, N, K, per);
}
}  // namespace sd

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) { return 0; }

extern "C" int hgemm_run(const void* A_, const void* B_, void* C_, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (int rc = cs::call_status(A_, B_, C_, M, N, K, layout, sd::NN ? HGEMM_LAYOUT_NN : HGEMM_LAYOUT_TN)) return rc;
  sd::Plan p;
  if (!sd::make_plan(M, N, K, opts, n_opts, p)) return HGEMM_ERR_OPTS;
  if (p.tiles_y > 65535) return HGEMM_ERR_UNSUPPORTED;  // the grid's y limit
  return sd::launch(static_cast<const half*>(A_), static_cast<const half*>(B_), static_cast<half*>(C_), M, N, K, p,
                    stream);
}
