"""The kernel library: the best correct kernel per (GPU, shape, layout), as data, and its dispatcher.

``export_library(db, path)`` writes a JSON file (default ``kernels_search/library/library.json``)
with one entry per (gpu, shape, layout): the candidate with the best *paired* speedup (its
time against the fastest same-layout baseline measured in the same ``evaluate_shape`` call; a
config measured in several calls counts by its lower-median pair, so a lucky call does not make
it the winner, and ``min_pairs`` can ask for a second call before a config may be an entry), or,
where no candidate beats that baseline by ``min_speedup``, an entry of kind ``baseline`` naming
the baseline method to call instead: cuBLASLt autotune (the fastest baseline only where autotune
was not measured). The dispatcher calls it and labels the result ``fallback=<method>``; a
cuBLAS-family call is never passed off as a searched kernel. Why never another baseline, even
one measured faster: on the H200, fallbacks to another baseline picked in the search by a 2 %+
margin ran at 0.944x-1.023x of autotune in the next compare (4096_16384_16384, a power-throttled
3 ms shape, at 0.977x, 0.965x and 0.944x in three compares), while fallbacks to autotune, which
reuses the baseline's tuning and workspace in the same process, ran at 0.992x-1.003x.

The ``library`` Method (``--methods library`` or ``library:path=lib.json``) serves any shape, from
the user's library (``search.user_library``, what ``hgemm-bench tune`` writes) in front of the
packaged one where no path is given (``load_entries``):

1. exact: an entry for this GPU, shape and layout;
2. nearest: the entries of the nearest tuned shapes (log2 (M, N, K) distance, same GPU and layout,
   at most ``nearest`` of them, none farther than ``max_distance``), the first whose kernel
   supports the shape, prepares, and computes a correct product on the prepare inputs (checked
   against an fp32 reference; the harness gates it again anyway);
3. fallback: cuBLASLt autotune where the device has it, else ``torch.matmul`` (``fallback=`` in
   the row's info).

Entries of another GPU model serve after those of this one (``other-gpu``), kernels among them only where
their recorded call is under ``OTHER_GPU_MAX_US`` (1 ms). Why: calls that long run under the power cap,
where a kernel picked on one model does not carry to another. On an H100 serving the H200's library
(run 255dfa84ec17, 100 grid shapes), all 8 rows served by such kernels lost to the best baseline
(0.547x-0.998x; three under 0.76x); with the fallback's rows in their place, the same run gives 1.027x
over the best baseline, min 0.932x, against 1.024x, min 0.751x (``lab/library/other_gpu_replay.py``). Measured
with the rule on another H100 (run 6d7c63033b54): 1.026x, every row of a call over 1 ms served by the fallback.

Why ``max_distance`` (default 1.0: one dimension 2x, or two 1.41x): measured on an H200, on
shapes the library was never tuned for, every loss of the unlimited nearest rule came from a
kernel tuned at distance >= 1.41 (a split-K kernel tuned for 64_256_2048 ran 128_1024_2048 at
0.367x), while kernels from shapes within 1.0 ran at 1.019x-1.180x; on 40 fresh shapes the limit
measured 1.003x (min 0.899x) against 0.991x (min 0.590x) without it.

Every row says which rule served it (info ``library_match``, ``library_shape``, ``library_spec``).
From PyTorch: ``hgemm(a, b, layout="nn")`` or ``torch.ops.hgemm_bench.hgemm(a, b, "nn")`` (importing this
module registers the op).
"""

from __future__ import annotations

import json
import math
import os
import platform
import threading
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import torch

from harness.method import SUPPORTED, Prepared, PrepareContext, Support
from harness.problem import Problem, Shape
from kernels_search.search.db import finite_float
from kernels_search.search import user_library
from kernels_search.search.features import shape_distance

LIBRARY_VERSION = 1
DEFAULT_PATH = Path(__file__).resolve().parent.parent / "library" / "library.json"
REFERENCE = "cublaslt-autotune"  # the baseline a fallback calls (module docstring)
MAX_DISTANCE = 1.0  # how far (log2 M, N, K) a tuned shape's kernel may serve another (module docstring)
OTHER_GPU_MAX_US = 1000.0  # another GPU model's kernel entries serve only calls recorded shorter (module docstring)
VERIFY_TOL = 1e-2  # relative Frobenius error vs an fp32 reference (fp16 output rounding is ~5e-4)


def default_path() -> Path:
    env = os.environ.get("HGEMM_LIBRARY")
    return Path(env) if env else DEFAULT_PATH


# ---------------------------------------------------------------------------------- export
def _measured(db, gpu: str | None, shapes: Sequence[Shape] | None):
    """(clean rows, baseline rows, candidate rows, fastest baseline per (call, layout)) of ``db``."""
    df = db.df
    if gpu is not None:  # the GPU model (gpu_name)
        df = df[df["gpu_name"] == gpu]
    if shapes is not None:
        df = df[df["shape"].isin({s.name for s in shapes})]
    ok = df[(df["status"] == "ok") & df["device_us_median"].notna()]
    base = ok[ok["is_baseline"].astype(bool)]
    cand = ok[~ok["is_baseline"].astype(bool)]
    # fastest baseline per (call, layout): what a candidate of that call is paired with
    call_base = base.groupby(["call_id", "layout"])["device_us_median"].min()
    return ok, base, cand, call_base


def _paired(call_base, r) -> float | None:
    """Candidate row ``r``'s speedup over the fastest baseline of its own call and layout (None: no
    such baseline, or no positive time)."""
    pb = call_base.get((r.call_id, r.layout))
    return float(pb) / float(r.device_us_median) if pb is not None and r.device_us_median > 0 else None


def lower_median(xs: Sequence, key=None):
    """The lower of the two middle values (the middle one of an odd count), ordered by ``key``: of two
    pairs, the worse."""
    ys = sorted(xs, key=key)
    return ys[(len(ys) - 1) // 2]


def spec_pairs(db, gpu: str | None = None, shapes: Sequence[Shape] | None = None) -> dict[tuple, list[float]]:
    """{(GPU model, shape, layout, spec): its paired speedup in each call of ``db`` that measured it}
    (the fastest baseline of the same call and layout over its device time)."""
    if db.df.empty:
        return {}
    _, _, cand, call_base = _measured(db, gpu, shapes)
    out: dict[tuple, list[float]] = {}
    for r in cand.itertuples(index=False):
        sp = _paired(call_base, r)
        if sp is not None:
            out.setdefault((r.gpu_name, r.shape, r.layout, r.method), []).append(sp)
    return out


def paired_speedups(db, gpu: str | None = None, shapes: Sequence[Shape] | None = None) -> dict[tuple, float]:
    """{(GPU model, shape, layout, spec): its lower-median paired speedup} over every call of ``db``
    that measured it (``spec_pairs``)."""
    return {k: lower_median(v) for k, v in spec_pairs(db, gpu, shapes).items()}


def library_entries(db, gpu: str | None = None, min_speedup: float = 1.0,
                    shapes: Sequence[Shape] | None = None, reference: str = REFERENCE,
                    min_pairs: int = 1) -> list[dict]:
    """The entries ``export_library`` writes (see the module docstring for the rule). A config is a
    candidate for an entry only where ``min_pairs`` calls measured it paired with a baseline; it
    counts by its lower-median pair (``paired_runs`` in the entry says how many)."""
    if db.df.empty:
        return []
    ok, base, cand, call_base = _measured(db, gpu, shapes)
    entries = []
    for (g, shape, layout), grp in ok.groupby(["gpu_name", "shape", "layout"]):
        cg = cand[(cand["gpu_name"] == g) & (cand["shape"] == shape) & (cand["layout"] == layout)]
        bg = base[(base["gpu_name"] == g) & (base["shape"] == shape) & (base["layout"] == layout)]
        best_base = None
        if not bg.empty:
            med = bg.groupby("method")["device_us_median"].median()
            # the reference where it was measured, whatever ran faster in the search (docstring)
            best_base = ((reference, float(med[reference])) if reference in med.index
                         else (str(med.idxmin()), float(med.min())))
        by_spec: dict[str, list] = {}
        for r in cg.itertuples(index=False):
            sp = _paired(call_base, r)
            by_spec.setdefault(r.method, []).append((sp if sp is not None else -1.0, -float(r.device_us_median), r))
        best = None
        for pairs in by_spec.values():
            if len(pairs) < min_pairs:
                continue
            sp, neg_us, r = lower_median(pairs, key=lambda p: p[:2])
            if best is None or (sp, neg_us) > best[0]:
                best = ((sp, neg_us), r, sp if sp >= 0 else None, len(pairs))
        row0 = grp.iloc[0]
        common = dict(gpu_uuid=row0["gpu_uuid"], gpu_name=g, shape=shape, m=int(row0["m"]), n=int(row0["n"]),
                      k=int(row0["k"]), layout=layout,
                      baseline_method=best_base[0] if best_base else None,
                      baseline_us=best_base[1] if best_base else None)
        if best is not None and (best_base is None or (best[2] is not None and best[2] >= min_speedup)):
            r = best[1]
            entries.append(dict(common, gpu_uuid=r.gpu_uuid, kind="kernel", spec=r.method, family=r.family,
                                knobs=json.loads(r.config or "{}"), source_hash=r.source_hash or "",
                                device_us=float(r.device_us_median), paired_speedup=best[2], paired_runs=best[3],
                                registers=finite_float(r.registers), spill_bytes=finite_float(r.spill_bytes),
                                measured_at=r.measured_at, search_id=r.search_id))
        elif best_base is not None:
            entries.append(dict(common, kind="baseline", spec=best_base[0], family="baseline", knobs={},
                                source_hash="", device_us=best_base[1], paired_speedup=1.0,
                                best_candidate=best[1].method if best else None,
                                best_candidate_speedup=best[2] if best else None))
    return sorted(entries, key=lambda e: (e["gpu_name"] or "", e["m"], e["n"], e["k"], e["layout"]))


def export_library(db, path: str | Path | None = None, *, gpu: str | None = None, min_speedup: float = 1.0,
                   shapes: Sequence[Shape] | None = None) -> Path:
    """Write the library JSON atomically; returns its path."""
    path = Path(path) if path is not None else default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": LIBRARY_VERSION, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "min_speedup": min_speedup, "entries": library_entries(db, gpu, min_speedup, shapes)}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    return path


def load_library(path: str | Path | None = None) -> list[dict]:
    path = Path(path) if path is not None else default_path()
    if not path.exists():
        return []
    doc = json.loads(path.read_text())
    if doc.get("version") != LIBRARY_VERSION:
        raise ValueError(f"{path}: library version {doc.get('version')!r}, expected {LIBRARY_VERSION}")
    return list(doc.get("entries", []))


def load_entries(path: str | Path | None = None) -> list[dict]:
    """What the dispatcher serves from: ``path``'s entries; without a path (and no
    ``$HGEMM_LIBRARY``), the user's library (``user_library.default_path``, what ``tune`` writes) in
    front of the packaged one: a (GPU, shape, layout) the user tuned is served from the user's entry.
    Each entry carries ``library_file``, the file it came from."""
    if path is not None or os.environ.get("HGEMM_LIBRARY"):
        files = [Path(path) if path is not None else default_path()]
    else:
        files = [user_library.default_path(), DEFAULT_PATH]
    out: list[dict] = []
    seen: set[tuple] = set()
    for f in files:
        for e in load_library(f):
            if user_library.key(e) not in seen:
                seen.add(user_library.key(e))
                out.append(dict(e, library_file=str(f)))
    return out


# ---------------------------------------------------------------------------------- dispatch
def current_gpu_name(device: str) -> str:
    """The name rows record as gpu_name (harness.env.collect's rule)."""
    if str(device).startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.cuda.current_device()).name
    return f"CPU: {platform.processor() or platform.machine()}"


def serves_other_gpu(entry: dict, max_us: float = OTHER_GPU_MAX_US) -> bool:
    """May ``entry`` serve a GPU model other than the one it was recorded on? Baseline entries always;
    kernel entries only where their recorded call is under ``max_us`` (module docstring)."""
    return entry["kind"] != "kernel" or (finite_float(entry.get("device_us")) or 0.0) < max_us


def plan(entries: list[dict], problem: Problem, gpu_name: str, nearest: int = 4,
         max_distance: float = math.inf) -> list[tuple[str, dict]]:
    """Entries to try for ``problem``, in order: [("exact"|"nearest"|"other-gpu", entry)]; the
    last two only from tuned shapes within ``max_distance`` (``shape_distance``) of the problem's, and
    another GPU model's kernels only where their recorded call is under ``OTHER_GPU_MAX_US``."""
    same = [e for e in entries if e["layout"] == problem.layout and e.get("gpu_name") == gpu_name]
    other = [e for e in entries if e["layout"] == problem.layout and e.get("gpu_name") != gpu_name
             and serves_other_gpu(e)]
    out: list[tuple[str, dict]] = []
    shape = problem.shape
    for e in same:
        if (e["m"], e["n"], e["k"]) == (shape.m, shape.n, shape.k):
            out.append(("exact", e))

    def within(es):
        by = sorted((shape_distance(shape, Shape(e["m"], e["n"], e["k"])), e["shape"], e) for e in es)
        return [e for d, _, e in by if d <= max_distance][:nearest]

    out += [("nearest", e) for e in within(e for e in same if (e["m"], e["n"], e["k"]) != (shape.m, shape.n, shape.k))]
    out += [("other-gpu", e) for e in within(other)]
    return out


def _correct(fn, problem: Problem, inputs) -> tuple[bool, float]:
    """Does ``fn`` compute A @ B on the prepare inputs? (relative Frobenius error vs fp32)."""
    import torch

    a, b, c = inputs
    fn(a, b, c)
    if c.is_cuda:
        torch.cuda.synchronize(c.device)
    ref = a.float() @ (b if problem.layout == "nn" else b.t()).float()
    err = float(torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref).clamp_min(1e-30))
    return bool(err <= VERIFY_TOL), err


class LibraryMethod:
    """The ``library`` dispatcher Method (see the module docstring)."""

    family = "library"
    is_baseline = False
    devices = ("cuda", "cpu")
    source_hash = ""

    def __init__(self, path: str | Path | None = None, nearest: int = 4, verify: bool = True,
                 max_distance: float | None = None):
        self._path_arg = path  # None: the user's library in front of the default one (load_entries)
        self.path = Path(path) if path is not None else default_path()
        self.nearest = nearest
        self.verify = verify
        self.max_distance = MAX_DISTANCE if max_distance is None else max_distance
        self.name = "library" if path is None else f"library:path={self.path}"
        if max_distance is not None:
            self.name += f"{':' if path is None else ','}max_distance={max_distance:g}"
        self.config = {"library": str(self.path), "nearest": nearest, "verify": verify,
                       "max_distance": self.max_distance}
        if path is None and not os.environ.get("HGEMM_LIBRARY"):
            self.config["user_library"] = str(user_library.default_path())  # read in front (load_entries)
        self._entries: list[dict] | None = None

    @property
    def entries(self) -> list[dict]:
        if self._entries is None:
            self._entries = load_entries(self._path_arg)
        return self._entries

    def supports(self, problem: Problem, device: str) -> Support:
        return SUPPORTED  # the fallback (cuBLASLt autotune, else torch.matmul) serves whatever no tuned kernel does

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        from harness.registry import resolve
        from kernels_search.toolchain import ToolchainError

        t0 = time.perf_counter()
        tried: list[str] = []
        missing: set[str] = set()  # what this host lacks to build a tuned kernel: said loudly, not only in info
        for match, e in plan(self.entries, problem, current_gpu_name(ctx.device), self.nearest, self.max_distance):
            try:
                (m,) = resolve([e["spec"]])
            except Exception as ex:
                tried.append(f"{e['spec']}@{e['shape']}: {type(ex).__name__}: {ex}")
                continue
            if ctx.device.split(":")[0] not in m.devices or not m.supports(problem, ctx.device):
                tried.append(f"{e['spec']}@{e['shape']}: unsupported")
                continue
            try:
                prep = m.prepare(problem, ctx)
                if self.verify and match != "exact":
                    ok, err = _correct(prep.fn, problem, ctx.inputs)
                    if not ok:
                        if prep.close:
                            prep.close()
                        tried.append(f"{e['spec']}@{e['shape']}: wrong result (rel err {err:.2e})")
                        continue
            except Exception as ex:
                tried.append(f"{e['spec']}@{e['shape']}: {type(ex).__name__}: {ex}")
                if isinstance(ex, ToolchainError):
                    missing.add(str(ex))
                continue
            labels = dict(library_match=match, library_shape=e["shape"], library_spec=e["spec"],
                          library_kind=e["kind"], library_family=e.get("family"),
                          library_distance=round(shape_distance(problem.shape, Shape(e["m"], e["n"], e["k"])), 3),
                          library_file=e.get("library_file"))
            if e["kind"] == "baseline":
                labels["fallback"] = e["spec"]
            return _served(prep, t0, tried, labels, missing)
        # no tuned shape near enough, or none served: the reference where this device has it
        # (and it prepares: a CUDA host without the cuBLASLt bindings still gets torch.matmul)
        prep = None
        try:
            (m,) = resolve([REFERENCE])
            if ctx.device.split(":")[0] in m.devices and m.supports(problem, ctx.device):
                prep = m.prepare(problem, ctx)
        except Exception as ex:
            tried.append(f"{REFERENCE}: {type(ex).__name__}: {ex}")
        if prep is None:
            (m,) = resolve(["torch"])
            prep = m.prepare(problem, ctx)
        return _served(prep, t0, tried, dict(library_match="fallback", fallback=m.name, library_spec=m.name), missing)


def _served(prep: Prepared, t0: float, tried: list[str], labels: dict, missing: set[str] = frozenset()) -> Prepared:
    """``prep`` as the library's row: its own info under ``inner_``, then which rule served it
    (``labels``) and what was tried and skipped before it; setup time counted from ``t0``. A tuned
    kernel this host cannot build (``missing``: a compiler or headers absent) is also a row warning,
    which compare prints: the row then measures the library without that kernel."""
    info = {f"inner_{k}": v for k, v in prep.info.items()} | labels
    if tried:
        info["library_skipped"] = tried
    if missing:
        info["warnings"] = [f"a tuned kernel was not served ({m}); this row is the entry or fallback after it"
                            for m in sorted(missing)]
    return Prepared(prep.fn, setup_s=time.perf_counter() - t0, info=info, capturable=prep.capturable,
                    close=prep.close)


def _parse_args(args: str | None) -> dict:
    out: dict[str, Any] = {}
    for part in (args or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep or key not in ("path", "nearest", "verify", "max_distance"):
            raise ValueError(f"library: bad argument {part!r}; expected path=, nearest=, verify=, max_distance=")
        if key == "max_distance":
            try:
                out[key] = float(val)
            except ValueError:
                raise ValueError(f"library: max_distance={val!r} is not a number (inf: no limit)") from None
            if not out[key] >= 0:
                raise ValueError(f"library: max_distance={val!r} must be >= 0")
            continue
        out[key] = int(val) if key == "nearest" else (val not in ("0", "false", "no") if key == "verify" else val)
    return out


def make_method(args: str | None) -> "LibraryMethod":
    """The ``library`` Method for ``library[:args]`` (registered by the ``kernels_search`` package).

    A ``path=`` that names no file is refused: an empty library would still serve every shape, by the
    fallback, and the rows would look like a measured library."""
    kw = _parse_args(args)
    if "path" in kw and not Path(kw["path"]).is_file():
        raise ValueError(f"library: path={kw['path']} is not a file (a library JSON written by the search or "
                         "`python -m kernels_search.search.library_build`)")
    return LibraryMethod(**kw)


# ---------------------------------------------------------------------------------- PyTorch API
_PREPARED: dict[tuple, Prepared] = {}
_LOCK = threading.Lock()


def hgemm(a, b, layout: str = "nn", library: str | Path | None = None):
    """C = A @ B in fp16 through the library (``layout="tn"``: b is stored (N, K), C = A @ b.T).

    The first call per (device, shape, layout) prepares the chosen kernel (build/load, workspace);
    later calls only launch it on the current stream.
    """
    import torch

    from harness.timing import time_candidates

    if a.dtype != torch.float16 or b.dtype != torch.float16:
        raise TypeError("hgemm takes float16 tensors")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError("hgemm takes 2-D tensors")
    a, b = a.contiguous(), b.contiguous()
    m, k = a.shape
    kb, n = (b.shape if layout == "nn" else (b.shape[1], b.shape[0]))
    if kb != k:
        raise ValueError(f"inner dimensions differ: A is {tuple(a.shape)}, B ({layout}) is {tuple(b.shape)}")
    problem = Problem(Shape(int(m), int(n), int(k)), layout)
    device = "cuda" if a.is_cuda else "cpu"
    c = torch.empty((m, n), dtype=torch.float16, device=a.device)
    key = (str(a.device), m, n, k, layout, str(library or default_path()))
    with _LOCK:
        prep = _PREPARED.get(key)
        if prep is None:
            ins = (a, b, c)
            ctx = PrepareContext(device, ins, partial(time_candidates, inputs=ins, device=device))
            prep = LibraryMethod(library).prepare(problem, ctx)
            _PREPARED[key] = prep
    prep.fn(a, b, c)
    return c


def served_by(m: int, n: int, k: int, layout: str = "nn", device: str = "cpu",
              library: str | Path | None = None) -> dict:
    """Which rule serves the problem: the ``info`` of a prepared hgemm call (prepares if needed)."""
    for key, prep in _PREPARED.items():
        if key[1:5] == (m, n, k, layout) and key[0].startswith(device) and key[5] == str(library or default_path()):
            return dict(prep.info)
    import torch

    a = torch.zeros((m, k), dtype=torch.float16, device=device)
    b = torch.zeros((k, n) if layout == "nn" else (n, k), dtype=torch.float16, device=device)
    hgemm(a, b, layout, library)
    return served_by(m, n, k, layout, device, library)


def clear_cache() -> None:
    with _LOCK:
        for prep in _PREPARED.values():
            if prep.close:
                try:
                    prep.close()
                except Exception:
                    pass
        _PREPARED.clear()


def _register_op() -> None:
    if hasattr(torch.ops, "hgemm_bench") and hasattr(torch.ops.hgemm_bench, "hgemm"):
        return

    @torch.library.custom_op("hgemm_bench::hgemm", mutates_args=())
    def _hgemm_op(a: torch.Tensor, b: torch.Tensor, layout: str = "nn") -> torch.Tensor:
        return hgemm(a, b, layout)

    @_hgemm_op.register_fake
    def _(a, b, layout="nn"):
        n = b.shape[1] if layout == "nn" else b.shape[0]
        return a.new_empty((a.shape[0], n))


_register_op()
