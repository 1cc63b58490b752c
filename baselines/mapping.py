"""Row-major problem -> column-major cuBLAS arguments, as pure functions.

cuBLAS and cuBLASLt (in their default order) read matrices column-major. A row-major matrix X of
shape (r, c) is, byte for byte, the column-major matrix X^T of shape (c, r) with leading dimension
c. So instead of transposing anything we compute the transposed product, which needs no copy::

    C = A @ op(B)   (row-major)   <=>   C^T = op(B)^T @ A^T   (column-major)

cuBLAS's "A" argument is therefore *our B* and its "B" argument is *our A*; its output is our C,
read as the column-major N x M matrix C^T with ldc = N:

* ``nn``: B stored row-major (K, N) = column-major (N, K) with ld N: ``transa = N``, lda = N.
* ``tn``: B stored row-major (N, K) = column-major (K, N) with ld K: ``transa = T``, lda = K.
* A stored row-major (M, K) = column-major (K, M) with ld K: ``transb = N``, ldb = K.
* m = N, n = M, k = K.

Everything here is pure (no CUDA) so CPU tests can check it by emulating the column-major call in
numpy on raw buffers: if an argument is wrong, the emulated product differs from ``A @ B``.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.problem import Problem

OP_N = 0  # cublasOperation_t CUBLAS_OP_N
OP_T = 1  # cublasOperation_t CUBLAS_OP_T


@dataclass(frozen=True)
class StoredMatrix:
    """How cuBLAS sees one operand's memory: a column-major rows x cols matrix with leading dim ld."""

    rows: int
    cols: int
    ld: int


@dataclass(frozen=True)
class ColMajorGemm:
    """One column-major GEMM ``C(m x n) = op(A)(m x k) @ op(B)(k x n)`` in cuBLAS's own terms.

    ``a_operand``/``b_operand`` name which of *our* row-major tensors ("a" or "b") is passed as
    cuBLAS's A and B argument; ``a``, ``b``, ``c`` describe each argument's stored matrix (what a
    cuBLASLt matrix layout needs: rows, cols, ld of the memory, before op()).
    """

    transa: int
    transb: int
    m: int
    n: int
    k: int
    a_operand: str
    b_operand: str
    a: StoredMatrix
    b: StoredMatrix
    c: StoredMatrix

    @property
    def lda(self) -> int:
        return self.a.ld

    @property
    def ldb(self) -> int:
        return self.b.ld

    @property
    def ldc(self) -> int:
        return self.c.ld


def colmajor_gemm(problem: Problem) -> ColMajorGemm:
    """Map a row-major ``Problem`` to the column-major call that computes it without copies."""
    M, N, K = problem.m, problem.n, problem.k
    if problem.layout == "nn":
        transa, a_mat = OP_N, StoredMatrix(rows=N, cols=K, ld=N)
    elif problem.layout == "tn":
        transa, a_mat = OP_T, StoredMatrix(rows=K, cols=N, ld=K)
    else:  # Problem validates layouts; this guards a future layout nobody mapped yet
        raise ValueError(f"no cuBLAS mapping for layout {problem.layout!r}")
    return ColMajorGemm(
        transa=transa,
        transb=OP_N,
        m=N,
        n=M,
        k=K,
        a_operand="b",
        b_operand="a",
        a=a_mat,
        b=StoredMatrix(rows=K, cols=M, ld=K),
        c=StoredMatrix(rows=N, cols=M, ld=N),
    )


def gemm_ex_kwargs(
    g: ColMajorGemm,
    *,
    handle: int,
    a_ptr: int,
    b_ptr: int,
    c_ptr: int,
    alpha_ptr: int,
    beta_ptr: int,
    data_type: int,
    compute_type: int,
    algo: int,
) -> dict:
    """Keyword arguments for ``nvmath.bindings.cublas.gemm_ex`` (names are nvmath's parameters).

    ``a_ptr``/``b_ptr``/``c_ptr`` are *our* tensors' pointers; this function does the operand swap
    described in the module docstring, so the caller cannot get it wrong.
    """
    ptrs = {"a": a_ptr, "b": b_ptr}
    return dict(
        handle=handle,
        transa=g.transa,
        transb=g.transb,
        m=g.m,
        n=g.n,
        k=g.k,
        alpha=alpha_ptr,
        a=ptrs[g.a_operand],
        atype=data_type,
        lda=g.lda,
        b=ptrs[g.b_operand],
        btype=data_type,
        ldb=g.ldb,
        beta=beta_ptr,
        c=c_ptr,
        ctype=data_type,
        ldc=g.ldc,
        compute_type=compute_type,
        algo=algo,
    )


class _Ptr:
    """Placeholder for a per-call pointer in a prebuilt argument tuple."""

    def __init__(self, name: str) -> None:
        self.name = name


A_PTR, B_PTR, C_PTR = _Ptr("a"), _Ptr("b"), _Ptr("c")


def gemm_ex_template(g: ColMajorGemm, gemm_ex, **fixed) -> tuple[list, int, int, int]:
    """``gemm_ex``'s positional arguments in its own parameter order, built once per problem.

    Returns (args, ia, ib, ic): the per-call pointers of our A, B and C go at ``args[ia]``,
    ``args[ib]``, ``args[ic]``. Binding through ``inspect.signature`` keeps ``gemm_ex_kwargs`` (the
    tested mapping) the single source of truth while the timed call pays for no keyword handling.
    """
    import inspect

    kw = gemm_ex_kwargs(g, a_ptr=A_PTR, b_ptr=B_PTR, c_ptr=C_PTR, **fixed)
    args = list(inspect.signature(gemm_ex).bind(**kw).args)
    where = {id(v): i for i, v in enumerate(args) if isinstance(v, _Ptr)}
    return args, where[id(A_PTR)], where[id(B_PTR)], where[id(C_PTR)]


def lt_operand_ptrs(g: ColMajorGemm, a_ptr: int, b_ptr: int) -> tuple[int, int]:
    """(cuBLASLt A-argument pointer, B-argument pointer) from our A and B pointers."""
    ptrs = {"a": a_ptr, "b": b_ptr}
    return ptrs[g.a_operand], ptrs[g.b_operand]
