"""Turn an LLM completion into kernel source, or into a clean "invalid completion" with a reason.

``parse_completion(text)`` never raises: whatever comes back from a model (``None``, bytes, binary
noise, a 10 MB ramble, a reply cut off by ``max_tokens``, prose with no code) becomes a
``ParsedCompletion`` with ``ok=False`` and a one-line ``reason``.

A valid completion holds a fenced code block that defines ``hgemm_run`` and ``hgemm_workspace``
with C linkage and whose braces balance. ``static_check(source)`` then rejects the obvious cheats
and contract breaks we have seen in LLM kernel search (REFERENCES.md, "Reward hacking"): own
streams, allocation, events or host synchronisation, default-stream launches, static state that
can cache across calls, fp16 accumulation, library GEMM calls. These checks are cheap and
deliberately strict for generated code; they are a filter, not the defence: the sandbox, the
correctness gate and the anti-cheat checks judge every candidate that passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernels_search.cuda_source import launch_configs

MAX_COMPLETION_CHARS = 400_000  # larger replies are refused before any regex runs
MAX_SOURCE_CHARS = 200_000

_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+.\-]*)[^\n]*\n", re.M)
_COMMENT_OR_LITERAL_RE = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S
)
_DEF_RUN_RE = re.compile(r"\bint\s+hgemm_run\s*\(([^;{}]*)\)\s*\{")
_DEF_WS_RE = re.compile(r"\bsize_t\s+hgemm_workspace\s*\(([^;{}]*)\)\s*\{")
_CODE_LANGS = {"", "cuda", "cu", "c++", "cpp", "c", "cxx", "cuh", "h", "hpp"}


@dataclass(frozen=True)
class ParsedCompletion:
    ok: bool
    source: str = ""
    reason: str = ""  # why not ok (first problem found), "" when ok
    problems: tuple[str, ...] = field(default=())  # every static-check finding


def _invalid(reason: str, source: str = "", problems: tuple[str, ...] = ()) -> ParsedCompletion:
    return ParsedCompletion(False, source, f"invalid completion: {reason}", problems)


def strip_comments_and_literals(src: str, keep_literals: bool = False) -> str:
    """Comments removed, string and char literals emptied unless ``keep_literals`` (inline PTX
    lives in literals); ``"C"`` (extern "C") is always kept; line structure is kept."""

    def repl(mt: re.Match) -> str:
        s = mt.group(0)
        if s.startswith("//"):
            return ""
        if s.startswith("/*"):
            return "\n" * s.count("\n") or " "
        if s == '"C"' or keep_literals:
            return s
        return s[0] + s[0]

    return _COMMENT_OR_LITERAL_RE.sub(repl, src)


def _balanced(code: str) -> str:
    """'' if (), [] and {} balance in comment/literal-free ``code``, else what is wrong."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for ch in code:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack[-1] != pairs[ch]:
                return f"unbalanced {ch!r}"
            stack.pop()
    return f"{len(stack)} unclosed {stack[-1]!r}" if stack else ""


def _text_problem(text: str) -> str:
    bad = sum(1 for ch in text if (ord(ch) < 32 and ch not in "\t\n\r\f") or ch == "\ufffd")
    if "\x00" in text:
        return "binary content (NUL bytes)"
    if bad > max(8, len(text) // 200):
        return f"binary noise ({bad} control/undecodable characters)"
    return ""


def extract_code_blocks(text: str) -> list[tuple[str, str, bool]]:
    """[(language, body, closed)] for every fenced block, in order. An unclosed last fence yields
    its remainder with ``closed=False`` (a reply cut off by max_tokens)."""
    blocks: list[tuple[str, str, bool]] = []
    pos = 0
    while True:
        mt = _FENCE_RE.search(text, pos)
        if not mt:
            return blocks
        fence, lang = mt.group(1), mt.group(2).lower()
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", re.M)
        end = close.search(text, mt.end())
        if end is None:
            blocks.append((lang, text[mt.end():], False))
            return blocks
        blocks.append((lang, text[mt.end(): end.start()], True))
        pos = end.end()


def find_body(code: str, def_re: re.Pattern) -> str:
    """The brace-matched body of the first function ``def_re`` matches in ``code`` ('' if none)."""
    mt = def_re.search(code)
    if not mt:
        return ""
    depth, i = 0, mt.end() - 1
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return code[i + 1: j]
    return code[i + 1:]


# (pattern on comment/literal-free code, reason). Each one is a contract break or a known hack.
_ANYWHERE = [
    (re.compile(r"\bcudaStreamCreate\w*\s*\("), "creates its own CUDA stream (work must go on `stream`)"),
    (re.compile(r"\bcudaStream(?:Legacy|PerThread)\b"), "uses the legacy/per-thread default stream"),
    (re.compile(r"\bcudaEvent\w*\s*\("), "uses CUDA events (timing is the harness's job)"),
    (re.compile(r"\bcuda(?:Malloc\w*|HostAlloc|MallocAsync|MemPool\w*)\s*\("),
     "allocates device/host memory (use the workspace)"),
    (re.compile(r"\b(?:cudaDeviceSynchronize|cudaStreamSynchronize|cudaThreadSynchronize)\s*\("),
     "synchronises the host (breaks graph capture and hides work from the timer)"),
    (re.compile(r"\bcuda(?:Memcpy|Memset)(?:2D|3D)?\s*\("),
     "synchronous cudaMemcpy/cudaMemset on the default stream (use the *Async form on `stream`)"),
    (re.compile(r"\b(?:cublas|cublasLt|cutlass)\w*", re.I), "calls a library GEMM (cuBLAS/CUTLASS)"),
    (re.compile(r"#\s*include\s*[<\"](?:cublas|cutlass|cute)", re.I), "includes a GEMM library"),
    (re.compile(r"\bstd::(?:unordered_)?(?:map|set|multimap)\b"),
     "keeps a host-side map/set (a cache across calls)"),
    (re.compile(r"\bstatic\s+(?:(?:const|volatile|thread_local|inline|constexpr)\s+)*"
                r"[A-Za-z_][\w:<>, ]*?\*+\s*(?:const\s+)?[A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*[=;,]"),
     "static pointer state (a cache keyed by pointers across calls)"),
    (re.compile(r"\b__device__\s+(?:__managed__\s+)?(?:const\s+)?[A-Za-z_][\w:]*\s*\*+\s*[A-Za-z_]\w*\s*[=;\[]"),
     "device-global pointer state (a cache across calls)"),
    (re.compile(r"\bstatic\s+(?!inline\b|constexpr\b|__)[^;(){}=]*\b\w*(?:cache|cached|memo|"
                r"last_?(?:a|b|c|ptr|out|result)|"
                r"prev_?(?:a|b|c|ptr|out|result)|done_once|computed)\w*\s*(?:\[[^\]]*\]\s*)*[=;]", re.I),
     "static state named like a cache of earlier calls"),
    # fp16 accumulation
    (re.compile(r"\b__hfma2?(?:_relu|_sat)?\s*\("), "fp16 multiply-accumulate (__hfma): accumulate in fp32"),
    (re.compile(r"\b(?:__)?half2?\s+(?:\w*(?:acc|sum|accum)\w*)\s*(?:\[[^\]]*\]\s*)*[=;,\[]", re.I),
     "half-precision accumulator variable: accumulate in fp32"),
]
# patterns that must see inline PTX (string literals kept, comments removed)
_IN_PTX = [
    (re.compile(r"\b(?:w?mma)[\w.]*\.f16\.f16\.f16\.f16\b"), "mma with an fp16 accumulator: accumulate in fp32"),
    (re.compile(r"\bwgmma\.mma_async[\w.]*?\.m64n\d+k16\.f16\.f16\.f16\b"),
     "wgmma with an fp16 accumulator: accumulate in fp32"),
    (re.compile(r"\bfragment\s*<\s*(?:nvcuda::)?(?:wmma::)?accumulator\s*,[^>]*\b(?:__)?half\s*>"),
     "WMMA accumulator fragment in half: accumulate in fp32"),
]
def _launch_problem(code: str) -> str:
    for raw, args in launch_configs(code):
        if len(args) < 4 or args[3] in ("0", "nullptr", "NULL", "0L", "cudaStreamDefault"):
            return f"kernel launch <<<{raw}>>> is not on `stream` (pass it as the 4th argument)"
    return ""


_STRUCT_RE = re.compile(r"\b(?:struct|class)\s+([A-Za-z_]\w*)\s*(?::[^{;]*)?\{")
_PTR_MEMBER_RE = re.compile(r"[A-Za-z_][\w:<>]*\s*\*+\s*(?:const\s+)?[A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*[,;=]")


def _pointer_holding_types(code: str) -> set[str]:
    """Names of structs/classes that hold a raw pointer member (declared in ``code``)."""
    out = set()
    for mt in _STRUCT_RE.finditer(code):
        depth, body = 0, ""
        for j in range(mt.end() - 1, min(len(code), mt.end() + 20_000)):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    body = code[mt.end(): j]
                    break
        if _PTR_MEMBER_RE.search(body):
            out.add(mt.group(1))
    return out


def static_check(source: str) -> list[str]:
    """Every problem found in ``source`` (empty list: nothing obvious)."""
    code = strip_comments_and_literals(source)
    problems: list[str] = []
    if not _DEF_RUN_RE.search(code):
        problems.append("does not define `int hgemm_run(...)`")
    if not _DEF_WS_RE.search(code):
        problems.append("does not define `size_t hgemm_workspace(...)`")
    if not re.search(r'\bextern\s+"C"', code):
        problems.append('hgemm_run/hgemm_workspace lack C linkage (extern "C")')
    bal = _balanced(code)
    if bal:
        problems.append(f"braces/parentheses do not balance ({bal}): truncated or malformed")
    for pat, why in _ANYWHERE:
        if pat.search(code) and why not in problems:
            problems.append(why)
    with_ptx = strip_comments_and_literals(source, keep_literals=True)
    for pat, why in _IN_PTX:
        if pat.search(with_ptx) and why not in problems:
            problems.append(why)
    if re.search(r'^[ \t]*#[ \t]*include[ \t]*"', with_ptx, re.M):
        problems.append("includes a local file (the source is compiled alone: paste what it needs)")
    holders = _pointer_holding_types(code)
    if holders and "static pointer state (a cache keyed by pointers across calls)" not in problems:
        alt = "|".join(sorted(re.escape(h) for h in holders))
        if re.search(r"\bstatic\s+(?:(?:const|volatile|thread_local)\s+)*(?:struct\s+)?(?:%s)\b\s*[&*]?\s*[A-Za-z_]\w*"
                     % alt, code):
            problems.append("static pointer state (a cache keyed by pointers across calls)")
    run_body = find_body(code, _DEF_RUN_RE)
    if re.search(r"\b(?:malloc|calloc|realloc)\s*\(|\bnew\s+[A-Za-z_]", run_body):
        problems.append("allocates host memory inside hgemm_run")
    lp = _launch_problem(code)
    if lp:
        problems.append(lp)
    return problems


def parse_completion(text, *, max_chars: int = MAX_COMPLETION_CHARS) -> ParsedCompletion:
    """The kernel source in an LLM reply, or why there is none. Never raises."""
    try:
        return _parse(text, max_chars)
    except Exception as e:  # a bug here must not kill a search; the reason names it
        return _invalid(f"parser error {type(e).__name__}: {e}")


def _parse(text, max_chars: int) -> ParsedCompletion:
    if text is None:
        return _invalid("empty (None)")
    if isinstance(text, (bytes, bytearray, memoryview)):
        raw = bytes(text)
        if len(raw) > max_chars:
            return _invalid(f"too large ({len(raw)} bytes > {max_chars})")
        text = raw.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return _invalid(f"not text ({type(text).__name__})")
    if len(text) > max_chars:
        return _invalid(f"too large ({len(text)} characters > {max_chars})")
    if not text.strip():
        return _invalid("empty")
    tp = _text_problem(text)
    if tp:
        return _invalid(tp)
    blocks = extract_code_blocks(text)
    if not blocks:
        return _invalid("no fenced code block")
    code_blocks = [b for b in blocks if b[0] in _CODE_LANGS or "hgemm_run" in b[1]]
    with_run = [b for b in code_blocks if _DEF_RUN_RE.search(strip_comments_and_literals(b[1]))]
    if not with_run:
        if any(not closed for _, _, closed in code_blocks):
            return _invalid("truncated: the code block never closes and defines no hgemm_run")
        return _invalid("no code block defines hgemm_run")
    # the last complete block that defines hgemm_run (models revise); an unclosed one only if no
    # closed block qualifies
    closed = [b for b in with_run if b[2]]
    lang, body, was_closed = (closed or with_run)[-1]
    source = body.strip("\n") + "\n"
    if len(source) > MAX_SOURCE_CHARS:
        return _invalid(f"source too large ({len(source)} characters)")
    problems = static_check(source)
    if not was_closed and any("balance" in p for p in problems):
        return _invalid("truncated: the code block never closes and its braces do not balance",
                        source, tuple(problems))
    if problems:
        return _invalid(problems[0], source, tuple(problems))
    return ParsedCompletion(True, source, "", ())
