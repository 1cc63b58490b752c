"""Completion parsing and the static cheat filter of the LLM proposer (CPU only).

Each test feeds a completion a model could plausibly return and asserts the verdict *and* the
reason, so a parser that accepts everything (or rejects everything) fails: the honest kernel
must pass, each cheat must be rejected for its own reason, and garbage must come back as a clean
"invalid completion" result rather than an exception.
"""

from __future__ import annotations

import random

import pytest

from kernels_search.llm.parse import extract_code_blocks, parse_completion, static_check

# A small honest kernel exposing the C ABI: fp32 accumulation, launched on `stream`, both layouts.
HONEST = r'''
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>
#define HGEMM_OK 0
#define HGEMM_ERR_ARGS 1
#define HGEMM_ERR_LAYOUT 2
#define HGEMM_ERR_LAUNCH 5

namespace {
constexpr int T = 16;
__global__ void gemm16(const __half* __restrict__ A, const __half* __restrict__ B, __half* C,
                       int M, int N, int K, int layout) {
  __shared__ __half As[T][T];
  __shared__ __half Bs[T][T];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.0f;  // fp32 accumulation
  for (int k0 = 0; k0 < K; k0 += T) {
    const int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : __float2half(0.0f);
    __half bv = __float2half(0.0f);
    if (kb < K && col < N) bv = layout == 0 ? B[(size_t)kb * N + col] : B[(size_t)col * K + kb];
    Bs[ty][tx] = bv;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < T; ++kk) acc = fmaf(__half2float(As[ty][kk]), __half2float(Bs[kk][tx]), acc);
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = __float2half(acc);
}
}  // namespace

extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) {
  return 0;
}

extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* workspace, size_t ws_bytes,
                         cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1 || !A || !B || !C) return HGEMM_ERR_ARGS;
  if (layout != 0 && layout != 1) return HGEMM_ERR_LAYOUT;
  dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
  gemm16<<<grid, block, 0, stream>>>(static_cast<const __half*>(A), static_cast<const __half*>(B),
                                     static_cast<__half*>(C), M, N, K, layout);
  return cudaGetLastError() == cudaSuccess ? HGEMM_OK : HGEMM_ERR_LAUNCH;
}
'''


def fenced(src: str, lang: str = "cuda", before: str = "Here is a faster kernel.\n\n") -> str:
    return f"{before}```{lang}\n{src}\n```\n"


def cheat(old: str, new: str) -> str:
    assert old in HONEST, old
    return HONEST.replace(old, new, 1)


RUN_OPEN = "  if (M < 1 || N < 1 || K < 1 || !A || !B || !C) return HGEMM_ERR_ARGS;"

CHEATS = {
    "own stream": (cheat(RUN_OPEN, RUN_OPEN + "\n  static cudaStream_t s2; cudaStreamCreate(&s2); stream = s2;"),
                   "creates its own CUDA stream"),
    "cudaMalloc in run": (cheat(RUN_OPEN, RUN_OPEN + "\n  void* tmp; cudaMalloc(&tmp, 1 << 20);"), "allocates"),
    "malloc in run": (cheat(RUN_OPEN, RUN_OPEN + "\n  float* h = (float*)malloc(64); free(h);"),
                      "allocates host memory inside hgemm_run"),
    "pointer cache": (cheat(RUN_OPEN, RUN_OPEN + "\n  static const void* last_a = nullptr;\n"
                                                 "  if (A == last_a) return HGEMM_OK;\n  last_a = A;"),
                      "static pointer state"),
    "struct cache": (cheat("namespace {", "struct Seen { const void* a; void* c; int m; };\nnamespace {")
                     .replace(RUN_OPEN, RUN_OPEN + "\n  static Seen seen{};\n  if (seen.a == A) return HGEMM_OK;"),
                     "static pointer state"),
    "std::map cache": (cheat("namespace {", "#include <map>\nstatic std::map<const void*, int> g_done;\nnamespace {"),
                       "host-side map"),
    "half accumulator": (cheat("float acc = 0.0f;", "__half acc = __float2half(0.0f);")
                         .replace("acc = fmaf(__half2float(As[ty][kk]), __half2float(Bs[kk][tx]), acc);",
                                  "acc = __hfma(As[ty][kk], Bs[kk][tx], acc);")
                         .replace("__float2half(acc)", "acc"), "accumulate in fp32"),
    "f16 mma accumulator": (cheat("float acc = 0.0f;", 'float acc = 0.0f;\n  asm volatile("// mma.sync.aligned.'
                                  'm16n8k16.row.col.f16.f16.f16.f16 {%0}, {%0}, {%0}, {%0};" :: "r"(0));'),
                            "mma with an fp16 accumulator"),
    "default stream launch": (cheat("<<<grid, block, 0, stream>>>", "<<<grid, block>>>"), "not on `stream`"),
    "device sync": (cheat("  return cudaGetLastError()", "  cudaDeviceSynchronize();\n  return cudaGetLastError()"),
                    "synchronises the host"),
    "events": (cheat(RUN_OPEN, RUN_OPEN + "\n  cudaEvent_t e; cudaEventCreate(&e);"), "CUDA events"),
    "cublas": (cheat("#include <stdint.h>", "#include <stdint.h>\n#include <cublas_v2.h>"), "library GEMM"),
    "local include": (cheat("#include <stdint.h>", '#include <stdint.h>\n#include "hgemm_abi.cuh"'), "local file"),
    "no workspace fn": (HONEST.replace("extern \"C\" size_t hgemm_workspace(int M, int N, int K, int layout, "
                                       "const int* opts, int n_opts) {\n  return 0;\n}", ""),
                        "hgemm_workspace"),
    "no C linkage": (HONEST.replace('extern "C" ', ""), "C linkage"),
}


def test_honest_kernel_passes():
    assert static_check(HONEST) == []
    p = parse_completion(fenced(HONEST))
    assert p.ok, p.reason
    assert "hgemm_run" in p.source and p.source.endswith("}\n")


@pytest.mark.parametrize("lang", ["cuda", "cpp", "c++", "", "cu"])
def test_fence_languages(lang):
    assert parse_completion(fenced(HONEST, lang)).ok


def test_family_sources_pass_the_filter():
    """The filter must not reject the project's own honest kernels (mma.sync families; the
    hopper family is CUTLASS-based, which LLM candidates may not use)."""
    from kernels_search.families import ALL

    for name in ("smalltile", "splitk"):
        fam = ALL[name]
        assert static_check(fam.render(fam.defaults())) == [], name


@pytest.mark.parametrize("what", sorted(CHEATS))
def test_cheats_rejected_with_reason(what):
    src, needle = CHEATS[what]
    p = parse_completion(fenced(src))
    assert not p.ok
    assert p.reason.startswith("invalid completion")
    assert any(needle in q for q in p.problems) or needle in p.reason, (p.reason, p.problems)


def test_comments_and_strings_do_not_trigger():
    """Words in comments or printf strings are not code: no false rejection."""
    src = HONEST.replace("float acc = 0.0f;", "float acc = 0.0f;  // never cudaStreamCreate or __hfma here\n"
                         '  /* cudaMalloc( */ const char* msg = "cudaDeviceSynchronize()"; (void)msg;')
    assert static_check(src) == []


def test_adversarial_suite_cheats_caught_statically():
    """The repo's adversarial kernels that cheat visibly in source are caught for the right reason."""
    import tests.adversarial as adv
    from kernels_search.extern import inline_local_includes

    paths = adv.kernel_paths()
    assert any("creates its own CUDA stream" in q for q in static_check(inline_local_includes(paths["side_stream"])))
    assert any("static pointer state" in q for q in static_check(inline_local_includes(paths["pointer_cache"])))
    assert any("fp32" in q for q in static_check(inline_local_includes(paths["fp16_accum"])))


def test_picks_last_complete_block_with_run():
    text = ("Plan:\n```\nstep 1\n```\nFirst try:\n" + fenced(HONEST.replace("T = 16", "T = 8"), before="")
            + "\nBetter:\n" + fenced(HONEST, before=""))
    blocks = extract_code_blocks(text)
    assert len(blocks) == 3
    p = parse_completion(text)
    assert p.ok and "T = 16" in p.source


GARBAGE = {
    "none": (None, "empty"),
    "empty": ("", "empty"),
    "whitespace": ("   \n\t ", "empty"),
    "prose only": ("I think you should use tensor cores and TMA.", "no fenced code block"),
    "code without run": (fenced("__global__ void k() {}"), "no code block defines hgemm_run"),
    "truncated": (fenced(HONEST)[: len(fenced(HONEST)) // 2], "truncated"),
    "truncated after run def": ("```cuda\n" + HONEST[: HONEST.index("gemm16<<<")], "truncated"),
    "binary noise": (bytes(random.Random(0).randrange(256) for _ in range(5000)), "binary"),
    "nul bytes": ("```cuda\n\x00\x00int hgemm_run() {}\n```", "binary"),
    "huge": ("```cuda\n" + "x" * 500_000 + "\n```", "too large"),
    "not text": (12345, "not text"),
}


@pytest.mark.parametrize("what", sorted(GARBAGE))
def test_garbage_is_clean_invalid(what):
    text, needle = GARBAGE[what]
    p = parse_completion(text)
    assert not p.ok
    assert p.reason.startswith("invalid completion: ")
    assert needle in p.reason, p.reason


def test_unclosed_but_complete_block_accepted():
    """A reply cut right after the code (no closing fence) is still a whole file: accepted."""
    assert parse_completion("```cuda\n" + HONEST).ok


def test_random_text_never_raises():
    rng = random.Random(1234)
    alphabet = "`{}()<>;#\n abcxyz_*\"'/\\hgemm_run" + "\x01\x7f\u00e9"
    for _ in range(300):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))
        if rng.random() < 0.3:
            s = "```cuda\n" + s
        p = parse_completion(s)
        assert isinstance(p.ok, bool) and (p.ok or p.reason.startswith("invalid completion"))
