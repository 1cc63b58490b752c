"""The Triton kernel of the ``triton_streamk`` family (imported only where triton is installed)."""

import triton
import triton.language as tl


@triton.jit
def _tile_sum(a_ptr, b_ptr, rm, rn, k_lo, k_hi, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The fp32 sum over k-tiles [k_lo, k_hi) of the tile with rows ``rm`` and columns ``rn``."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(k_lo, k_hi):
        rk = kt * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def streamk_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, count_ptr, M, N, K, iters_per, dp_tiles,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # The first ``dp_tiles`` tiles (whole waves, where there are at least as many tiles as programs) go
    # whole, tile t to program t mod the programs: a wave's programs start at k 0 together and share A's
    # and B's k-panels in L2. The k-tiles of the tiles left, laid end to end (tile after tile), are cut
    # into equal runs of ``iters_per``; program p takes run p. A run covers the end of one tile, whole
    # tiles, the start of another: a tile whose k-tiles one run holds entirely is written straight to C;
    # a tile cut between runs is summed as triton_splitk sums its slices (fp32 atomic adds into the
    # tile's accumulator, a counter, the last contributor writes C and leaves accumulator and counter at
    # zero). Unlike a split of every tile into equal slices, the runs load every program alike whatever
    # the tile count (72 tiles on 132 SMs: no SM idle, none with two tiles where another has one).
    # The k loop (``_tile_sum``, for whole tiles and runs alike) and the cut tile's sum repeat
    # triton_splitk_kernel's rather than importing them: a family's source hash (what its measured
    # evidence is keyed by) is its one kernel file's text.
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in range(pid, dp_tiles, programs):
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = _tile_sum(a_ptr, b_ptr, rm, rn, 0, k_tiles, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                        BLOCK_M, BLOCK_N, BLOCK_K)
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))
    # the runs, over the k-tiles of the tiles after dp_tiles (indices below are relative to dp_tiles)
    iters = (tl.cdiv(M, BLOCK_M) * num_pid_n - dp_tiles) * k_tiles
    it = pid * iters_per
    end = tl.minimum(it + iters_per, iters)
    while it < end:
        run_tile = it // k_tiles
        tile = dp_tiles + run_tile
        k_lo = it - run_tile * k_tiles
        k_hi = tl.minimum(k_tiles, k_lo + end - it)
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = _tile_sum(a_ptr, b_ptr, rm, rn, k_lo, k_hi, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                        BLOCK_M, BLOCK_N, BLOCK_K)
        c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        c_mask = (rm[:, None] < M) & (rn[None, :] < N)
        if (k_lo == 0) & (k_hi == k_tiles):
            tl.store(c_ptrs, acc.to(tl.float16), mask=c_mask)
        else:
            # the runs that hold part of this tile: the first and the last run touching its k-tiles
            first = (run_tile * k_tiles) // iters_per
            last = ((run_tile + 1) * k_tiles - 1) // iters_per
            within = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            acc_ptr = ws_ptr + tile * (BLOCK_M * BLOCK_N) + within
            tl.atomic_add(acc_ptr, acc, sem="relaxed", scope="gpu")
            # every thread's adds are issued before the counter moves (the barrier), and the counter's
            # acquire-release orders them before the last contributor's read (L2, not L1: .cg)
            tl.debug_barrier()
            arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if arrived == last - first:
                total = tl.load(acc_ptr, cache_modifier=".cg")
                tl.store(c_ptrs, total.to(tl.float16), mask=c_mask)
                # the sum is read in one thread layout and zeroed in another (the adds'): without this
                # barrier a warp can zero rows another warp has not read yet (wrong sums now and then)
                tl.debug_barrier()
                tl.store(acc_ptr, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), cache_modifier=".cg")
                tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")
        it = run_tile * k_tiles + k_hi
