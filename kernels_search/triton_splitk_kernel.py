"""The Triton kernel of the ``triton_splitk`` family (imported only where triton is installed)."""

import triton
import triton.language as tl


@triton.jit
def splitk_fixup_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, count_ptr, M, N, K, split_k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    TMA: tl.constexpr = False, B_KN: tl.constexpr = False,
):
    # Program (tile, s) multiplies the tile's k-tiles [s*per, (s+1)*per) and adds its fp32 partial
    # into the tile's one fp32 accumulator in the workspace (atomic adds: the slices' order varies,
    # the sum stays fp32). The tile's counter says which program arrives last; that one reads the
    # accumulator, writes C, and leaves the accumulator and the counter at zero for the next call.
    # One launch: no zero-fill, no cast kernel, no program waits for another, and the last program
    # reads one tile whatever the number of slices. ``split_k`` is a run-time argument: a shape's slice
    # count does not compile another kernel.
    # The k loop repeats triton_kernels.gemm_kernel's rather than sharing it: the library's `triton`
    # entries were measured on that file's exact text (library_build skips a spec whose source changed).
    # TMA: a_ptr and b_ptr are TMA descriptors (A's block BLOCK_M x BLOCK_K; B's BLOCK_K x BLOCK_N where
    # B_KN, "nn", else BLOCK_N x BLOCK_K), and the A and B strides are unused. Slices start on k-tile
    # boundaries, so the descriptor's zero fill past K is the only edge: no masks, no addresses held.
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = tile // num_pid_n
    pid_n = tile % num_pid_n

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_tiles_per = tl.cdiv(tl.cdiv(K, BLOCK_K), split_k)
    k_lo = pid_k * k_tiles_per * BLOCK_K
    k_hi = tl.minimum(K, k_lo + k_tiles_per * BLOCK_K)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA:
        for k0 in range(k_lo, k_hi, BLOCK_K):
            a = a_ptr.load([pid_m * BLOCK_M, k0])
            if B_KN:
                b = b_ptr.load([k0, pid_n * BLOCK_N])
            else:
                b = b_ptr.load([pid_n * BLOCK_N, k0]).T
            acc = tl.dot(a, b, acc)
    else:
        for kt in range(0, k_tiles_per):
            rk = k_lo + kt * BLOCK_K + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                        mask=(rm[:, None] < M) & (rk[None, :] < k_hi), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                        mask=(rk[:, None] < k_hi) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)

    if split_k == 1:
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))
    else:
        within = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        acc_ptr = ws_ptr + tile * (BLOCK_M * BLOCK_N) + within
        tl.atomic_add(acc_ptr, acc, sem="relaxed", scope="gpu")
        # every thread's adds are issued before the counter moves (the barrier), and the counter's
        # acquire-release orders them before the last program's read (L2, not L1: .cg)
        tl.debug_barrier()
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == split_k - 1:
            total = tl.load(acc_ptr, cache_modifier=".cg")
            tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, total.to(tl.float16),
                     mask=(rm[:, None] < M) & (rn[None, :] < N))
            # the sum is read in one thread layout and zeroed in another (the adds'): without this
            # barrier a warp can zero rows another warp has not read yet (wrong sums now and then)
            tl.debug_barrier()
            tl.store(acc_ptr, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), cache_modifier=".cg")
            tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")
