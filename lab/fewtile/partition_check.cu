// Host-only check (no GPU): the WGMMA accumulator partition of splitk_dsmem's fp32 tile in shared memory (the
// template's PartStride, plain and swapped) covers the tile once and follows the m64nNk16 accumulator layout.
// nvcc -std=c++17 --expt-relaxed-constexpr -I<CUTLASS include> -x cu partition_check.cu -o /tmp/pc && /tmp/pc
// (the layout types are written out again here: keep them in step with templates/splitk_dsmem.cu)
#include <cstdio>
#include <vector>
#include "cute/tensor.hpp"
using namespace cute;
template <int BM, int BN, bool SWAP>
int run() {
  using TA = cute::half_t;
  using TiledMma = decltype(make_tiled_mma(GMMA::ss_op_selector<TA, TA, float, Shape<_64, Int<BN>, _64>, GMMA::Major::K, GMMA::Major::K>()));
  constexpr int ROWS = SWAP ? BN : BM, COLS = SWAP ? BM : BN, LD = COLS + 4;
  using PartStride = std::conditional_t<SWAP, Stride<_1, Int<LD>>, Stride<Int<LD>, _1>>;
  std::vector<int> hits(ROWS * LD, 0);
  std::vector<float> buf(ROWS * LD);
  Tensor sP = make_tensor(buf.data(), make_layout(make_shape(Int<BM>{}, Int<BN>{}), PartStride{}));
  Tensor cP = make_identity_tensor(make_shape(Int<BM>{}, Int<BN>{}));
  TiledMma mma;
  int bad = 0;
  for (int t = 0; t < 128; ++t) {
    auto thr = mma.get_thread_slice(t);
    Tensor tCsP = thr.partition_C(sP);
    Tensor tCcP = thr.partition_C(cP);
    for (int e = 0; e < size(tCsP); ++e) {
      int off = &tCsP(e) - buf.data();
      auto c = tCcP(e);
      int x = get<0>(c), y = get<1>(c);
      int expect = SWAP ? y * LD + x : x * LD + y;
      if (off != expect) ++bad;
      hits[off]++;
      // the wgmma accumulator layout: warp w's rows 16w + lane/4 (+8), columns 2 (lane % 4) (+1) + 8 j
      int w = t / 32, lane = t % 32;
      int row_ok = (x % 64 == 16 * w + lane / 4) || (x % 64 == 16 * w + lane / 4 + 8);
      int col_ok = (y % 8 == 2 * (lane % 4)) || (y % 8 == 2 * (lane % 4) + 1);
      if (!row_ok || !col_ok) ++bad;
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < LD; ++c) {
      int h = hits[r * LD + c];
      if ((c < COLS && h != 1) || (c >= COLS && h != 0)) ++bad;
    }
  printf("BM=%d BN=%d SWAP=%d: values a thread %d, bad %d\n", BM, BN, (int)SWAP, int(size(mma.get_thread_slice(0).partition_C(sP))), bad);
  return bad;
}
int main() {
  int bad = run<64, 64, false>() + run<128, 128, false>() + run<64, 32, false>() + run<64, 8, true>() +
            run<128, 16, true>() + run<64, 32, true>();
  return bad != 0;
}
