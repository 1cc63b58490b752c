// Parallel split-K reduced inside the GEMM's own launch (the splitk_fused families): spliced into
// hopper_cutlass.cu after CUTLASS's headers, with the template's fp16 epilogue wrapped in
// FusedSplitKEpilogue. The K slices still run as the batches (L) of one persistent GEMM; at the
// end of a tile each slice writes its fp32 accumulators into its own part of the workspace, and
// the last slice to arrive at the tile (per-tile arrival counter) sums every slice in slice order
// (deterministic: the same sum whichever slice arrives last), then runs the ordinary TMA epilogue
// into C. The other slices skip the epilogue. Why: the second (reduce) kernel of the two-launch
// form cost about a fifth of the call on few-tile, deep-K shapes (H200, 256_256_4096: GEMM 4.41 us
// + reduce 1.23 us in a 5.52 us call). CUTLASS's stream-K split-K reduction is serial (each slice
// waits its turn to add into one tile); here no slice waits for another.
// Workspace: the slices' fp32 tiles, then one int counter per output tile. The counters must be
// zero when the workspace is first handed over (the hgemm ABI zero-fills it once); the last slice
// resets its tile's counter, so every call leaves them at zero.
namespace hg {

template <class Base>
class FusedSplitKEpilogue : public Base {
 public:
  using Arguments = typename Base::Arguments;
  struct Params : Base::Params {
    float* part;
    int* counters;
  };

  static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

  template <class ProblemShape>
  static void tiles(ProblemShape const& problem_shape, long& n_tiles, long& tile_elems, int& slices) {
    auto [M, N, K, L] = cute::append<4>(problem_shape, 1);
    n_tiles = (long)((M + HG_TILE_M - 1) / HG_TILE_M) * ((N + HG_TILE_N - 1) / HG_TILE_N);
    tile_elems = (long)HG_TILE_M * HG_TILE_N;
    slices = (int)L;
  }

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const& problem_shape, Arguments const&) {
    long n_tiles, tile_elems;
    int slices;
    tiles(problem_shape, n_tiles, tile_elems, slices);
    if (slices <= 1) return 0;
    return align256(sizeof(float) * (size_t)slices * n_tiles * tile_elems) + align256(sizeof(int) * (size_t)n_tiles);
  }

  // Nothing to do per call: the counters are zero from the ABI's one-time fill and every call
  // leaves them so (a memset here would add a device operation to every timed call).
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  // C is one M x N matrix whatever the slice count: the wrapped epilogue sees L = 1.
  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void* workspace) {
    auto [M, N, K, L] = cute::append<4>(problem_shape, 1);
    Params p{Base::to_underlying_arguments(cute::make_shape(M, N, K, 1), args, nullptr), nullptr, nullptr};
    long n_tiles, tile_elems;
    int slices;
    tiles(problem_shape, n_tiles, tile_elems, slices);
    if (slices > 1 && workspace != nullptr) {
      p.part = static_cast<float*>(workspace);
      p.counters = reinterpret_cast<int*>(static_cast<char*>(workspace) +
                                          align256(sizeof(float) * (size_t)slices * n_tiles * tile_elems));
    }
    return p;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    auto [M, N, K, L] = cute::append<4>(problem_shape, 1);
    return Base::can_implement(cute::make_shape(M, N, K, 1), args);
  }

  CUTLASS_HOST_DEVICE
  FusedSplitKEpilogue(Params const& params, typename Base::TensorStorage& shared_tensors)
      : Base(params, shared_tensors), part_(params.part), counters_(params.counters) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(typename Base::LoadPipeline load_pipeline,
                            typename Base::LoadPipelineState load_pipe_consumer_state,
                            typename Base::StorePipeline store_pipeline,
                            typename Base::StorePipelineState store_pipe_producer_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, typename Base::TensorStorage& shared_tensors,
                            int subtile_idx = -1) {
    auto [M, N, K, L] = problem_shape_mnkl;
    auto [m, n, k, l] = tile_coord_mnkl;
    if (L > 1 && !sum_slices(accumulators, (int)cute::size(tiled_mma), thread_idx, (int)M, (int)N, (int)L, (int)m,
                             (int)n, (int)l)) {
      return cute::make_tuple(load_pipe_consumer_state, store_pipe_producer_state);  // not the last slice
    }
    return Base::store(load_pipeline, load_pipe_consumer_state, store_pipeline, store_pipe_producer_state,
                       cute::make_shape(M, N, K, 1), tile_shape_MNK, cute::make_coord(m, n, k, 0), accumulators,
                       tiled_mma, thread_idx, shared_tensors, subtile_idx);
  }

 private:
  // Writes this slice's accumulators, counts it in, and, for the last slice of the tile, replaces
  // the accumulators with the sum of every slice in slice order. `threads` share the tile (one
  // warpgroup in ping-pong, two in cooperative); element j of thread t is at j * threads + t of its
  // slice's part (each 16 bytes: 4 consecutive elements of one thread), so every slice, written by
  // the same fragment layout, is read back by the same thread.
  template <class AccEngine, class AccLayout>
  CUTLASS_DEVICE bool sum_slices(cute::Tensor<AccEngine, AccLayout>& acc, int threads, int t, int M, int N, int L,
                                 int m, int n, int l) {
    constexpr int E = decltype(cute::size(acc))::value;
    static_assert(E % 4 == 0, "accumulator fragment not a multiple of 4 elements");
    const long tiles_n = (N + HG_TILE_N - 1) / HG_TILE_N;
    const long tile = (long)m * tiles_n + n;
    const long tile_f4 = (long)threads * (E / 4);  // float4 per slice of one tile
    float4* tile_part = reinterpret_cast<float4*>(part_) + tile * L * tile_f4;
    float4* mine = tile_part + (long)l * tile_f4;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < E / 4; ++j)
      __stcg(mine + (long)j * threads + t, make_float4(acc(4 * j), acc(4 * j + 1), acc(4 * j + 2), acc(4 * j + 3)));
    __threadfence();
    // ping-pong: each consumer warpgroup its own barrier (their epilogues are ordered, but they
    // must not share a barrier's count); cooperative: both warpgroups, one barrier
    const int wg = threads == cutlass::NumThreadsPerWarpGroup ? (cutlass::canonical_warp_group_idx() & 1) : 0;
    const int bar = static_cast<int>(cutlass::arch::ReservedNamedBarriers::StreamkBarrier0) + wg;
    cutlass::arch::NamedBarrier::sync(threads, bar);  // every thread's part is written and fenced
    int last = 0;
    if (t == 0) {
      last = atomicAdd(counters_ + tile, 1) == L - 1;
      if (last) atomicExch(counters_ + tile, 0);  // every slice has arrived: ready for the next call
    }
    // thread 0's verdict to the whole group through the barrier's OR reduction (no shared memory:
    // the mainloop's stage count fills it)
    asm volatile(
        "{\n\t.reg .pred p_in, p_out;\n\tsetp.ne.b32 p_in, %1, 0;\n\t"
        "bar.red.or.pred p_out, %2, %3, p_in;\n\tselp.b32 %0, 1, 0, p_out;\n\t}"
        : "=r"(last)
        : "r"(last), "r"(bar), "r"(threads)
        : "memory");
    if (!last) return false;
    __threadfence();
    float4 sum[E / 4];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < E / 4; ++j) sum[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < L; ++s) {
      const float4* part = tile_part + (long)s * tile_f4;
      float4 v[E / 4];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < E / 4; ++j)
        v[j] = s == l ? make_float4(acc(4 * j), acc(4 * j + 1), acc(4 * j + 2), acc(4 * j + 3))
                      : __ldcg(part + (long)j * threads + t);
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < E / 4; ++j) {
        sum[j].x += v[j].x; sum[j].y += v[j].y; sum[j].z += v[j].z; sum[j].w += v[j].w;
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < E / 4; ++j) {
      acc(4 * j) = sum[j].x; acc(4 * j + 1) = sum[j].y; acc(4 * j + 2) = sum[j].z; acc(4 * j + 3) = sum[j].w;
    }
    return true;
  }

  float* part_;
  int* counters_;
};

}  // namespace hg
