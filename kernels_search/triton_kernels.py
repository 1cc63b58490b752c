"""The Triton GEMM kernel of the ``triton`` family (imported only where triton is installed)."""

import triton
import triton.language as tl


@triton.jit
def gemm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
):
    # Grouped raster: GROUP_M row-tiles share each column sweep, so B tiles stay in L2.
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Split s covers k-tiles [s*per, (s+1)*per); the trip count is the same for every program
    # (the last split's missing tiles are fully masked), which keeps the loop easy to pipeline.
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

    mask = (rm[:, None] < M) & (rn[None, :] < N)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(tl.float16), mask=mask)
    else:
        tl.atomic_add(c_ptrs, acc, mask=mask)  # c_ptr is the fp32 workspace


@triton.jit
def _one_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
              stride_cn, tile, num_pid_m, in_group,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    first_m = (tile // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % in_group) % group_m
    pid_n = (tile % in_group) // group_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        rk = kt * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16), mask=mask)


@triton.jit
def gemm_persistent_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
):
    # One program per SM takes tiles pid, pid + NUM_PROGRAMS, ... (grouped raster order).
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    in_group = GROUP_M * num_pid_n
    for i in range(0, tl.cdiv(num_tiles, NUM_PROGRAMS)):
        tile = tl.program_id(0) + i * NUM_PROGRAMS
        if tile < num_tiles:
            _one_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_cm, stride_cn, tile, num_pid_m, in_group, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)


@triton.jit
def gemm_tma_kernel(
    a_desc, b_desc, c_desc, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, B_KN: tl.constexpr, EPI_SPLIT: tl.constexpr,
):
    # Persistent, TMA in and out: NUM_PROGRAMS programs (per_sm of them an SM) walk tiles pid,
    # pid + NUM_PROGRAMS, ...
    # The tile and k loops are flattened into one pipelined loop, so the next tile's TMA loads
    # are in flight while this tile's accumulator is stored: what matters where K is small and
    # the kernel is bound by writing C. The descriptors clip edges (zero-filled loads, clipped
    # stores), so no masks. EPI_SPLIT stores the tile as that many column slices: half the
    # epilogue's staging buffer (more programs fit an SM), and the first slice's store can start
    # before the second is cast.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    in_group = GROUP_M * num_pid_n
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=True):
        first_m = (tile // in_group) * GROUP_M
        group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
        off_m = (first_m + (tile % in_group) % group_m) * BLOCK_M
        off_n = ((tile % in_group) // group_m) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            a = a_desc.load([off_m, kt * BLOCK_K])
            if B_KN:
                b = b_desc.load([kt * BLOCK_K, off_n])
            else:
                b = b_desc.load([off_n, kt * BLOCK_K]).T
            acc = tl.dot(a, b, acc)
        if EPI_SPLIT == 2:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            c0, c1 = tl.split(halves)
            c_desc.store([off_m, off_n], c0.to(tl.float16))
            c_desc.store([off_m, off_n + BLOCK_N // 2], c1.to(tl.float16))
        else:
            c_desc.store([off_m, off_n], acc.to(tl.float16))
