"""External kernels for ``--kernels-dir DIR``: every ``.cu`` file in a directory, as Methods.

Two kinds of file are recognised, by their text:

* **C ABI** (``hgemm_run`` and ``hgemm_workspace`` defined, see
  ``kernels_search/templates/hgemm_abi.cuh``): built by the same content-addressed nvcc pipeline
  and ctypes loader as a family config (``raw_source.source_method``); method name ``cu:<stem>``.
* **PyTorch extension** exposing ``void f(torch::Tensor a, torch::Tensor b,
  torch::Tensor b_col_major, torch::Tensor c)``, the signature CUDA-L2's public kernels use:
  ``a`` is A row-major (M, K), ``b`` is B row-major (K, N), ``b_col_major`` is B in column-major
  order, i.e. the storage of B^T row-major (N, K) viewed as a (K, N) tensor (CUDA-L2's
  ``as_col_major``), and ``c`` the (M, N) output. Built with ``torch.utils.cpp_extension.load``
  under the build cache (module name and directory from a content hash); a file without a
  ``PYBIND11_MODULE`` gets a generated binding, as CUDA-L2's ``pybind/*.cc`` do. Method name
  ``ext:<stem>``. A compile error is recorded in the build's directory and reported again without
  compiling (``ExtBuild.failure``).

Either kind builds where a prepare finds it, so ``kernels_search.extern_build`` can compile a whole
directory in parallel before the first shape (``compare --kernels-dir`` and ``build --kernels-dir``
do) and each prepare only loads.

The problem contract hands a method A, B in its layout and C, nothing else (``harness.problem``).
So the transposed copy of B that an extension's signature asks for is made *inside* the timed call:
for ``nn`` the call makes ``b_col_major`` from B; for ``tn`` (B stored (N, K) row-major, which
already is ``b_col_major``) it makes the row-major ``b``. Both are passed and the kernel picks;
the copy is part of the time a user of that kernel would pay. Unless the kernel reads only the
operand the layout provides: then a user would store B that way, so the call passes a view in the
copy's place and makes no copy (``choose_call`` tries both once at prepare; ``info["ext_b_copy"]``
says which copy the timed call makes, ``none`` for none).

Quoted local includes (``#include "x.cuh"`` found next to the including file) are inlined before
building, so the cache key covers every line compiled and a kernel directory can share headers.
Any other ``.cu`` file is an error naming the file: a silently skipped kernel would look like a
kernel that lost.

A file may be written for one shape (CUDA-L2's kernels are, one per shape): every method from a
kernels dir says ``any_shape = False``, so each check runs on the shape under test only, never on
a probe shape it may not serve (``harness.anticheat``).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.method import Prepared, PrepareContext, Support, unsupported
from harness.problem import Problem
from kernels_search.cuda_source import launch_configs
# the extension loader's names, also reachable from here as before it moved to extern_build
from kernels_search.extern_build import (ExtBuild, ExtBuildError, load_extension, prebuild_specs,  # noqa: F401
                                         write_if_changed)

C_ABI = "c_abi"
TORCH_EXT = "torch_ext"

_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$', re.M)
_PRAGMA_ONCE_RE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[^\n]*$", re.M)
_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEFINES_RUN_RE = re.compile(r"\bhgemm_run\s*\([^;{]*\)\s*\{")
_DEFINES_WS_RE = re.compile(r"\bhgemm_workspace\s*\([^;{]*\)\s*\{")
_TENSOR = r"(?:const\s+)?(?:torch|at)::Tensor\s*&?\s*"
# void name(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c) {  or ;
_TORCH_FN_RE = re.compile(
    r"\bvoid\s+([A-Za-z_]\w*)\s*\(\s*("
    + r",\s*".join([_TENSOR + r"[A-Za-z_]\w*\s*"] * 4)
    + r")\)\s*\{"
)
_PYBIND_RE = re.compile(r"\bPYBIND11_MODULE\s*\(")
_MDEF_RE = re.compile(r"\.def\s*\(\s*\"([A-Za-z_]\w*)\"\s*,\s*&?\s*([A-Za-z_][\w:]*)")


class ExternError(ValueError):
    """A file in a kernels dir cannot be used; the message starts with the file's path."""


# ---- source handling ---------------------------------------------------------------------------


def inline_local_includes(path: str | Path) -> str:
    """The text of ``path`` with every quoted include that exists relative to the including file
    replaced by that file's (recursively inlined) text, each file at most once (``#pragma once``
    semantics, which every local header is assumed to want). ``#line`` markers keep compiler
    messages pointing at the real file names (base names only, so the text, and with it the build
    cache key, does not depend on where the checkout lives). Includes not found locally
    (``<...>`` or missing) are left as they are."""
    seen: set[Path] = set()

    def expand(p: Path) -> str:
        p = p.resolve()
        seen.add(p)
        text = p.read_text()
        out: list[str] = []
        pos = 0
        line_no = 1
        for m in _INCLUDE_RE.finditer(text):
            target = (p.parent / m.group(1)).resolve()
            if not target.is_file():
                continue
            chunk = text[pos : m.start()]
            out.append(chunk)
            line_no += chunk.count("\n")
            if target in seen:
                out.append(f"// (already included: {m.group(1)})")
            else:
                out.append(f'#line 1 "{target.name}"\n{expand(target)}\n#line {line_no + 1} "{p.name}"')
            pos = m.end()
        out.append(text[pos:])
        return _PRAGMA_ONCE_RE.sub("// #pragma once (inlined)", "".join(out))

    return expand(Path(path))


def _code(text: str) -> str:
    """Text without comments (a comment mentioning hgemm_run is not an ABI)."""
    return _COMMENT_RE.sub(" ", text)


@dataclass(frozen=True)
class TorchFn:
    name: str  # the C++ function
    params: str  # its parameter list as written (the generated binding must declare it alike)
    export: str  # the Python attribute of the built module
    has_pybind: bool


def classify(path: str | Path) -> tuple[str, str, TorchFn | None]:
    """``(kind, inlined_text, torch_fn)`` for one ``.cu`` file; ExternError (naming the file) when
    it is neither a C-ABI kernel nor a PyTorch extension with the ``f(a, b, b_col_major, c)``
    signature, or is ambiguous."""
    p = Path(path)
    try:
        text = inline_local_includes(p)
    except OSError as e:
        raise ExternError(f"{p}: cannot read: {e}") from e
    code = _code(text)
    has_run = bool(_DEFINES_RUN_RE.search(code))
    has_ws = bool(_DEFINES_WS_RE.search(code))
    fns = _TORCH_FN_RE.findall(code)
    if has_run or has_ws:
        if not (has_run and has_ws):
            missing = "hgemm_workspace" if has_run else "hgemm_run"
            raise ExternError(f"{p}: defines one half of the hgemm C ABI but not {missing} "
                              "(see kernels_search/templates/hgemm_abi.cuh)")
        return C_ABI, text, None
    if fns:
        has_pybind = bool(_PYBIND_RE.search(code))
        exports = {cpp.split("::")[-1]: py for py, cpp in _MDEF_RE.findall(code)} if has_pybind else {}
        if has_pybind:
            fns = [f for f in fns if f[0] in exports]
        if len(fns) != 1:
            names = ", ".join(f[0] for f in fns) or "none bound in PYBIND11_MODULE"
            raise ExternError(f"{p}: expected exactly one function f(a, b, b_col_major, c) to benchmark, "
                              f"found: {names}")
        name, params = fns[0]
        return TORCH_EXT, text, TorchFn(name, " ".join(params.split()), exports.get(name, name), has_pybind)
    raise ExternError(
        f"{p}: not a kernel this loader knows: no hgemm_run/hgemm_workspace (our C ABI) and no "
        "PyTorch-extension function void f(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, "
        "torch::Tensor c)"
    )


def launches_on_default_stream(text: str) -> bool:
    """True when some ``<<<...>>>`` launch names no stream (it runs on the legacy default stream,
    which CUDA graph capture on another stream refuses). A heuristic on the source text."""
    return any(len(args) < 4 for _, args in launch_configs(_code(text)))  # no 4th (stream) argument


def method_stem(path: str | Path) -> str:
    """A file's method-name stem: its base name without ``.cu``, with anything outside
    ``[A-Za-z0-9_.-]`` replaced by ``_`` (names are result columns and CLI specs)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", Path(path).name.removesuffix(".cu"))


# ---- the PyTorch-extension Method ------------------------------------------------------------


def transposing_call(kernel: Callable, layout: str) -> Callable:
    """``fn(a, b, c)`` for the problem contract around ``kernel(a, b, b_col_major, c)``.

    The copy that the contract does not hand over is made here, inside the call that is timed:
    ``nn`` gets B row-major (K, N) and makes ``b_col_major`` (B^T's storage, viewed (K, N) as
    CUDA-L2's ``as_col_major`` returns it); ``tn`` gets B stored (N, K), which *is* that storage,
    and makes the row-major ``b``."""
    if layout == "nn":

        def fn(a, b, c):
            k, n = b.shape
            kernel(a, b, b.t().contiguous().view(k, n), c)

    elif layout == "tn":

        def fn(a, b, c):
            n, k = b.shape
            kernel(a, b.t().contiguous(), b.view(k, n), c)

    else:
        raise ValueError(f"unknown layout {layout!r}")
    return fn


def copy_free_call(kernel: Callable, layout: str) -> Callable:
    """``fn(a, b, c)`` that makes no copy: the operand the layout lacks is replaced by a contiguous
    (K, N) view of the one it has (``nn``: ``b`` itself as ``b_col_major``; ``tn``: B's storage as
    both). Right only for a kernel that reads just the operand the layout provides (and the other's
    sizes); ``choose_call`` finds out which."""
    if layout == "nn":

        def fn(a, b, c):
            kernel(a, b, b, c)

    elif layout == "tn":

        def fn(a, b, c):
            n, k = b.shape
            bv = b.view(k, n)
            kernel(a, bv, bv, c)

    else:
        raise ValueError(f"unknown layout {layout!r}")
    return fn


def choose_call(kernel: Callable, problem: Problem, device: str, seed: int = 0) -> tuple[Callable, str]:
    """The call to time and the copy it makes (``"none"``, ``"b"`` or ``"b_col_major"``).

    A kernel that reads only the operand the layout provides would be charged for a copy it never
    reads, and a user would store its weights the way it reads them: so the copy-free call is run
    once beside the copying one on fresh random inputs of the problem, and taken when it raises
    nothing and its output matches (relative Frobenius difference under 1e-3; a kernel that read
    the stand-in would be off by ~1). The gate then judges whichever call was taken."""
    import torch

    copying = transposing_call(kernel, problem.layout)
    copy = "b_col_major" if problem.layout == "nn" else "b"
    free = copy_free_call(kernel, problem.layout)
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.rand(problem.m, problem.k, generator=gen, device=device).sub_(0.5).half()
    b = torch.rand(*problem.b_shape, generator=gen, device=device).sub_(0.5).half()
    want, got = (torch.zeros(problem.m, problem.n, dtype=torch.half, device=device) for _ in range(2))
    try:
        copying(a, b, want)
        free(a, b, got)
        diff = float(torch.linalg.vector_norm((got.float() - want.float())))
        ref = float(torch.linalg.vector_norm(want.float()))
    except Exception:
        return copying, copy
    if ref > 0 and diff <= 1e-3 * ref:
        return free, "none"
    return copying, copy


_CUTLASS_INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"](?:cute|cutlass)/", re.M)


def cutlass_flags(text: str) -> tuple[str, ...]:
    """``-I`` flags for the CUTLASS/CuTe headers when ``text`` includes them (CUDA-L2's kernels do);
    a missing CUTLASS is then left to the compiler's error, which the build result carries."""
    from kernels_search import toolchain

    if not _CUTLASS_INCLUDE_RE.search(_code(text)):
        return ()
    try:
        return (*(f"-I{d}" for d in toolchain.cutlass_include_dirs()), "--expt-relaxed-constexpr")
    except toolchain.ToolchainError:
        return ()


def _torch_ext_flags() -> list[str]:
    from kernels_search import toolchain

    # No -std: torch.utils.cpp_extension picks the C++ standard its headers need.
    # The half-precision operator flags CUDA-L2 builds its kernels with (torch's defaults hide them).
    flags = [*toolchain.ARCH_FLAGS, "-O3", "--expt-relaxed-constexpr", "--expt-extended-lambda",
             "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
             "-U__CUDA_NO_BFLOAT16_CONVERSIONS__"]
    try:  # CUDA-L2's kernels use CuTe: the nvidia-cutlass wheel's headers when installed
        flags += [f"-I{d}" for d in toolchain.cutlass_include_dirs()]
    except toolchain.ToolchainError:
        pass
    return flags


DEFAULT_ARCH_LIST = "9.0a"  # cpp_extension would add the visible GPU's arch (sm_90, no WGMMA) as well


def _arch_list() -> str:
    """The ``TORCH_CUDA_ARCH_LIST`` an extension builds for (cpp_extension reads it from the
    environment and writes its -gencode flags into the build file)."""
    return os.environ.get("TORCH_CUDA_ARCH_LIST") or DEFAULT_ARCH_LIST


def binding_source(fn: TorchFn) -> str:
    """A PYBIND11 module exposing ``fn`` (for files that define it without a module, like CUDA-L2's)."""
    return (
        "#include <torch/extension.h>\n"
        f"void {fn.name}({fn.params});\n"
        f'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("{fn.name}", &{fn.name}, "{fn.name}"); }}\n'
    )


def ext_module_name(stem: str, key: str) -> str:
    """Python module name for a build: a valid identifier carrying the stem and the content key
    (two versions of one file never share a module name, so both can load in one process)."""
    return f"hgemm_ext_{re.sub(r'[^A-Za-z0-9_]', '_', stem)}_{key[:16]}"


class TorchExtMethod:
    """A PyTorch-extension ``.cu`` file as a Method (see module docstring)."""

    family = "ext"
    is_baseline = False
    devices = ("cuda",)
    any_shape = False  # nothing says such a file serves more than the shapes it was written for

    def __init__(self, path: str | Path, text: str, fn: TorchFn,
                 kernel_loader: Callable[["TorchExtMethod"], Callable] | None = None):
        self.path = Path(path)
        self.text = text
        self.fn = fn
        self.name = f"ext:{method_stem(self.path)}"
        self.source_hash = hashlib.sha256(text.encode()).hexdigest()
        self.default_stream = launches_on_default_stream(text)
        self.config = {"file": self.path.name, "function": fn.name}
        self._kernel_loader = kernel_loader or TorchExtMethod.build_kernel

    def supports(self, problem: Problem, device: str) -> Support:
        if not str(device).startswith("cuda"):
            return unsupported("PyTorch-extension kernels run on CUDA devices only")
        if problem.dtype != "float16":
            return unsupported("fp16 only")
        return Support(True)

    def build_key(self) -> str:
        import torch

        from kernels_search import toolchain

        h = hashlib.sha256()
        parts = [self.text, binding_source(self.fn) if not self.fn.has_pybind else "",
                 "\0".join(_torch_ext_flags()), torch.__version__, str(torch.version.cuda),
                 toolchain.nvcc_version(), _arch_list()]
        for part in parts:
            h.update(part.encode())
            h.update(b"\x01")
        return h.hexdigest()

    def ext_build(self) -> ExtBuild:
        """This file's build: module name and directory from the content key (``build_key``)."""
        from kernels_search import build as build_mod

        key = self.build_key()
        stem = method_stem(self.path)
        files = {f"{stem}.cu": self.text}
        if not self.fn.has_pybind:
            files["binding.cpp"] = binding_source(self.fn)
        return ExtBuild(ext_module_name(stem, key), build_mod.cache_dir() / "ext" / key[:2] / key, files,
                        tuple(_torch_ext_flags()), _arch_list())

    def build_kernel(self) -> Callable:
        """Build (or load from the cache) the module; return its kernel function."""
        try:
            mod = self.ext_build().load()
        except ExtBuildError as e:  # a compile error is the kernel's fault: say which file
            raise ExtBuildError(f"{self.path}: extension build failed: {e}") from e
        return getattr(mod, self.fn.export)

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        t0 = time.perf_counter()
        kernel = self._kernel_loader(self)
        fn, copy = choose_call(kernel, problem, ctx.device)
        info = {"ext_function": self.fn.name, "ext_source": self.path.name, "ext_b_copy": copy}
        if self.default_stream:
            info["ext_note"] = "launches on the default stream: timed with direct launches, no graph capture"
        return Prepared(fn=fn, setup_s=time.perf_counter() - t0, info=info, capturable=not self.default_stream)


# ---- directories ---------------------------------------------------------------------------------


def kernel_files(path: str | Path) -> list[Path]:
    """The ``.cu`` files directly in ``path``, sorted (headers and sub-folders are not kernels)."""
    d = Path(path)
    if not d.is_dir():
        raise ExternError(f"{d}: not a directory")
    return sorted(p for p in d.iterdir() if p.is_file() and p.suffix == ".cu")


def load_file(path: str | Path, c_abi_prefix: str = "cu", any_shape: bool = False) -> Any:
    """One ``.cu`` file as a Method (ExternError naming the file when it is neither kind).
    ``any_shape``: the file is known to serve every shape it accepts (module docstring)."""
    from kernels_search.raw_source import source_method

    kind, text, fn = classify(path)
    if kind == C_ABI:
        method = source_method(text, f"{c_abi_prefix}:{method_stem(path)}", cutlass_flags(text))
        method.any_shape = any_shape  # harness.evaluate.serves_any_shape
        return method
    assert fn is not None
    method = TorchExtMethod(path, text, fn)
    method.any_shape = any_shape
    return method


def load_kernels_dir(path: str | Path) -> list:
    """Every ``.cu`` file in ``path`` as a Method, in file-name order. Raises ExternError listing
    every file that is neither kind (nothing is skipped silently) or an empty directory."""
    files = kernel_files(path)
    if not files:
        raise ExternError(f"{path}: no .cu files")
    methods, errors = [], []
    for f in files:
        try:
            methods.append(load_file(f))
        except ExternError as e:
            errors.append(str(e))
    if errors:
        raise ExternError("\n".join(errors))
    return methods


_DIR_METHODS: dict[str, dict[str, Any]] = {"cu": {}, "ext": {}}


def register_kernels_dir(path: str | Path) -> list[str]:
    """Load ``path`` and make its kernels resolvable as ``--methods cu:<stem>`` / ``ext:<stem>``
    (a bare ``cu`` or ``ext`` means all of that kind registered so far). Returns the method names.

    The names go through ``harness.registry`` like any plug-in's, so a sandbox worker that calls
    this (for example from a plug-in module) resolves the same specs."""
    from harness.registry import register

    methods = load_kernels_dir(path)
    for m in methods:
        prefix, _, stem = m.name.partition(":")
        _DIR_METHODS[prefix][stem] = m
    for prefix, what in (("cu", "C-ABI"), ("ext", "PyTorch-extension")):
        if _DIR_METHODS[prefix]:
            register(prefix, lambda args, _p=prefix: _resolve(_p, args), default=False,
                     help=f"{what} kernels from --kernels-dir: {', '.join(sorted(_DIR_METHODS[prefix]))}")
    return [m.name for m in methods]


def _resolve(prefix: str, args: str | None):
    table = _DIR_METHODS[prefix]
    if not args:
        return [table[k] for k in sorted(table)]
    if args not in table:
        raise ValueError(f"no {prefix} kernel {args!r} in the registered kernels dirs; "
                         f"known: {', '.join(sorted(table))}")
    return table[args]


# ---- sandbox workers ---------------------------------------------------------------------------

ENV_DIRS = "HGEMM_KERNELS_DIRS"
PLUGIN = __name__  # the plug-in module a sandbox worker imports to see the same kernels


def export_kernels_dirs(dirs) -> list[str]:
    """What ``--kernels-dir`` does: register every dir here and record them in ``$HGEMM_KERNELS_DIRS``
    so an evaluator worker spawned afterwards, importing this module as a plug-in (``PLUGIN``),
    registers the same ``cu:``/``ext:`` names. Returns the method names."""
    dirs = [str(Path(d).resolve()) for d in dirs]
    names: list[str] = []
    for d in dirs:
        names += register_kernels_dir(d)
    if dirs:
        os.environ[ENV_DIRS] = os.pathsep.join(dirs)
    return names


def _register_env_dirs() -> None:
    for d in filter(None, os.environ.get(ENV_DIRS, "").split(os.pathsep)):
        register_kernels_dir(d)


def _register_source() -> None:
    """``compare --kernels-dir`` reaches this module through the harness's method-source
    registry (the harness imports no kernel package); this module is one of its built-in plug-ins."""
    from harness.registry import register_source

    register_source("kernels-dir", export_kernels_dirs,
                    help="external .cu kernels: our C ABI (cu:<stem>) or PyTorch extensions (ext:<stem>)",
                    prebuild=prebuild_specs)


_register_source()
_register_env_dirs()
