"""The Triton kernel of the ``triton_splitk`` family (imported only where triton is installed)."""

import triton
import triton.language as tl


@triton.jit
def splitk_fixup_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, count_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    CHUNK: tl.constexpr,
):
    # Program (tile, s) multiplies the tile's k-tiles [s*per, (s+1)*per) and stores its fp32 partial
    # in its own slot of the workspace. The tile's counter says which program arrives last; that one
    # sums the SPLIT_K slots in slice order (the result does not depend on arrival order), writes C
    # and resets the counter for the next call. One launch: no zero-fill, no cast kernel, no
    # program waits for another.
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = tile // num_pid_n
    pid_n = tile % num_pid_n

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_tiles_per = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
    k_lo = pid_k * k_tiles_per * BLOCK_K
    k_hi = tl.minimum(K, k_lo + k_tiles_per * BLOCK_K)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, k_tiles_per):
        rk = k_lo + kt * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < k_hi), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < k_hi) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)

    if SPLIT_K == 1:
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))
    else:
        within = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        slots = ws_ptr + tile * (SPLIT_K * BLOCK_M * BLOCK_N)
        tl.store(slots + pid_k * (BLOCK_M * BLOCK_N) + within, acc, cache_modifier=".cg")
        # every thread's partial is written before the counter moves (the barrier), and the counter's
        # acquire-release makes the other programs' partials visible to the last one (L2, not L1: .cg)
        tl.debug_barrier()
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            # CHUNK outputs at a time, all SPLIT_K slots' loads of them in flight together (one L2
            # round trip a chunk, not one a slot), summed over the slots in a fixed order
            slot = tl.arange(0, SPLIT_K)[:, None] * (BLOCK_M * BLOCK_N)
            for c0 in range(0, BLOCK_M * BLOCK_N, CHUNK):
                flat = c0 + tl.arange(0, CHUNK)
                total = tl.sum(tl.load(slots + slot + flat[None, :], cache_modifier=".cg"), axis=0)
                row = pid_m * BLOCK_M + flat // BLOCK_N
                col = pid_n * BLOCK_N + flat % BLOCK_N
                tl.store(c_ptr + row * stride_cm + col * stride_cn, total.to(tl.float16), mask=(row < M) & (col < N))
            tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")
