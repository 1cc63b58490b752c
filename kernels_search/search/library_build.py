"""The packaged library, rebuilt from measured evidence: every shape where a kernel won, paired.

``build`` reads measured rows (``compare`` Parquets and search kernel DBs) and writes a library
(``search.library``'s format, one GPU model) with one entry per (shape, layout) that was measured
with candidates:

* ``kind: kernel`` where a verified kernel (status ok, gate passed) beat the strongest
  cuBLAS-family baseline by ``min_speedup`` in a paired measurement. Paired: the same ``compare``
  run (``run_id``) or the same search call (``call_id``) of that shape. The strongest baseline is
  ``reward.strongest_baseline``'s: the fastest correct row of any baseline method (torch,
  cuBLAS, cuBLASLt, cuBLASLt autotune) over both layouts. A kernel measured in several pairs is
  represented by its lower-median pair (so one lucky pair does not make it a winner), and of the
  kernels the one whose representative ratio is highest is taken. Only kernels whose recorded
  ``source_hash`` is the source this code builds for the spec compete: a template changed since the
  measurement is a different kernel. A kernel that failed the gate on the shape and layout anywhere
  in the evidence is left out.
* ``kind: baseline`` (the labelled ``cublaslt-autotune`` fallback) where candidates were measured
  and none qualified.

Shapes measured without candidates get no entry: the dispatcher's nearest-shape rule (or its
fallback) serves them, as it serves any shape off the library. The output is deterministic: the
same sources give a byte-identical file (no clock, no absolute paths, ties broken by name).

Rebuild the packaged H200 library (from the repository root; its source list is
``lab/library/h200-sources.txt``)::

    python -m kernels_search.search.library_build --gpu "NVIDIA H200" \\
        --out kernels_search/library/library.json lab/library/h200-sources.txt

Sources: compare Parquets, search DB folders (those holding ``parts/``), or ``.txt`` lists of
either (one path a line, relative to the current directory, ``#`` comments).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from kernels_search.search.db import finite_float
from kernels_search.search.library import LIBRARY_VERSION, REFERENCE
from kernels_search.search.prior import prior_paths
from kernels_search.search.settings import SearchSettings

DEFAULT_SHAPES = "cuda-l2"
NEEDED = ("shape", "m", "n", "k", "layout", "method", "family", "is_baseline", "status", "gate_passed",
          "device_us_median", "gpu_name", "gpu_uuid", "config", "source_hash", "measured_at")
OPTIONAL = ("run_id", "call_id", "search_id", "mode", "cache", "registers", "spill_bytes")
# families of rows that are no family config: the library method, external kernels (``--kernels-dir``), peers
# such as ``inductor``, the baselines. A shape measured only with these got no candidates of ours: no entry.
NOT_KERNELS = ("library", "ext", "peer", "baseline")


class LibraryBuildError(ValueError):
    """A source that is missing or not measured rows (names it and the problem)."""


def source_paths(specs: Iterable[str | Path]) -> list[Path]:
    """Sources from ``specs``: Parquet files, DB folders, or ``.txt`` lists of them (paths relative
    to the current directory), in order; a missing one is an error that names it."""
    return prior_paths(specs, missing=lambda p: LibraryBuildError(f"library source {p}: no such file or folder"))


def read_source(path: Path):
    """The rows of one source with the columns ``build`` reads, ``pair`` (what pairs a candidate
    with its baselines) and ``source`` (the path as given) added."""
    import pandas as pd

    if path.is_dir():
        from kernels_search.search.db import KernelDB

        if not (path / "parts").is_dir():
            raise LibraryBuildError(f"library source {path}: a folder that is no search DB (no parts/)")
        df = KernelDB(path).df
    else:
        try:
            df = pd.read_parquet(path)
        except Exception as e:  # pyarrow raises several kinds for a truncated or foreign file
            raise LibraryBuildError(f"library source {path}: not a readable Parquet ({type(e).__name__}: {e})") from e
    missing = [c for c in NEEDED if c not in df.columns]
    if missing:
        raise LibraryBuildError(f"library source {path}: not measured rows (missing columns {', '.join(missing)})")
    df = df[[c for c in (*NEEDED, *OPTIONAL) if c in df.columns]].copy()
    # compare's Parquets store measured_at as a UTC timestamp (older ones, and search DBs, as ISO text): the library
    # records ISO text either way, so a run of either kind can join its sources
    df["measured_at"] = df["measured_at"].map(_iso_time)
    for col in OPTIONAL:
        if col not in df.columns:
            df[col] = None
    pair = df["call_id"].where(df["call_id"].notna(), df["run_id"])
    if pair.isna().any():
        raise LibraryBuildError(f"library source {path}: rows with neither run_id nor call_id cannot be paired")
    df["pair"] = str(path) + "|" + pair.astype(str) + "|" + df["shape"].astype(str)
    df["source"] = str(path)
    return df


def _iso_time(v):
    """``2026-12-05T15:30:00+00:00`` for a timestamp, the text as stored for text, None when missing."""
    import pandas as pd

    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT:
        return None
    if isinstance(v, str):
        return v
    t = pd.Timestamp(v)
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return t.floor("s").isoformat()


def _verified(df):
    """Rows measured as the library is served (offline, warm; the search measures only so), correct
    and timed."""
    for col, want in (("mode", "offline"), ("cache", "warm")):
        df = df[df[col].isna() | (df[col] == want)]
    ok = (df["status"] == "ok") & (df["gate_passed"].fillna(True).astype(bool)) & (df["device_us_median"] > 0)
    return df[ok]


class _SourceCheck:
    """Whether a spec still builds the source it was measured with (cached per spec and hash)."""

    def __init__(self):
        self._seen: dict[tuple[str, str], bool] = {}

    def __call__(self, spec: str, recorded: str | None) -> bool:
        key = (spec, recorded or "")
        if key not in self._seen:
            self._seen[key] = bool(recorded) and _current_hash(spec) == recorded
        return self._seen[key]


def _current_hash(spec: str) -> str | None:
    from harness.registry import resolve

    try:
        (m,) = resolve([spec])
        return str(m.source_hash)
    except Exception:  # a family or knob that no longer exists: no current source
        return None


@dataclass(frozen=True)
class BuildSummary:
    shapes: int  # shapes with an entry
    kernel_entries: int
    fallback_entries: int
    kernel_shapes: int
    geomean: float | None  # of the kernel entries' paired ratios
    stale: int  # candidate specs skipped because their source changed since the measurement

    def line(self) -> str:
        gm = f"{self.geomean:.3f}x" if self.geomean else "-"
        return (f"{self.kernel_entries} kernel entries on {self.kernel_shapes} shapes (geomean paired ratio {gm}), "
                f"{self.fallback_entries} labelled fallbacks, {self.shapes} shapes in all"
                f" ({self.stale} measured specs skipped: source changed since)")


def library_entries(frames: Sequence, gpu: str, shapes: Iterable[str] | None = None,
                    min_speedup: float = SearchSettings.min_speedup) -> tuple[list[dict], int]:
    """(entries, stale specs skipped) from measured rows ``frames`` (``read_source``'s), for GPU
    model ``gpu``, on the shapes named by ``shapes`` (all when None): the module docstring's rule."""
    import pandas as pd

    df = pd.concat(list(frames), ignore_index=True)
    df = df[df["gpu_name"] == gpu]
    if shapes is not None:
        df = df[df["shape"].isin(set(shapes))]
    is_base = df["is_baseline"].astype(bool)
    is_cand = ~is_base & ~df["family"].isin(NOT_KERNELS)
    wrong = set(map(tuple, df.loc[is_cand & (df["status"] == "gate_failed"), ["shape", "layout", "method"]].values))
    tried = set(map(tuple, df.loc[is_cand, ["shape", "layout"]].values))
    ok = _verified(df)
    base = ok[ok["is_baseline"].astype(bool)]
    strongest = base.sort_values(["device_us_median", "method", "layout"]).groupby("pair").head(1).set_index("pair")
    cand = ok[~ok["is_baseline"].astype(bool) & ~ok["family"].isin(NOT_KERNELS)]
    cand = cand[cand["pair"].isin(strongest.index)].copy()
    cand["baseline_us"] = cand["pair"].map(strongest["device_us_median"])
    cand["baseline_method"] = cand["pair"].map(strongest["method"])
    cand["baseline_layout"] = cand["pair"].map(strongest["layout"])
    cand["ratio"] = cand["baseline_us"] / cand["device_us_median"]
    autotune = base[base["method"] == REFERENCE].groupby(["shape", "layout"])["device_us_median"].median()
    fresh = _SourceCheck()
    stale: set[str] = set()
    keys = ["shape", "layout", "method"]
    cand = cand.sort_values([*keys, "ratio", "pair"])
    cand["pairs"] = cand.groupby(keys)["ratio"].transform("size")
    reps_all = cand[cand.groupby(keys).cumcount() == (cand["pairs"] - 1) // 2]  # each kernel's lower median
    by_problem: dict[tuple, list[dict]] = {}
    for r in reps_all.to_dict("records"):
        if (r["shape"], r["layout"], r["method"]) not in wrong:
            by_problem.setdefault((r["shape"], r["layout"]), []).append(r)
    entries = []
    for shape, layout in sorted(tried, key=lambda t: (_dims(t[0]), t[1])):
        reps = sorted(by_problem.get((shape, layout), []),
                      key=lambda r: (-r["ratio"], r["device_us_median"], r["method"]))
        best = None
        for r in reps:
            if r["ratio"] < min_speedup:
                break
            if fresh(r["method"], r["source_hash"]):
                best = r
                break
            stale.add(r["method"])
        m, n, k = _dims(shape)
        common = dict(gpu_name=gpu, shape=shape, m=m, n=n, k=k, layout=layout)
        if best is not None:
            entries.append(dict(common, gpu_uuid=best["gpu_uuid"], kind="kernel", spec=best["method"],
                                family=best["family"], knobs=json.loads(best["config"] or "{}"),
                                source_hash=best["source_hash"], device_us=float(best["device_us_median"]),
                                paired_speedup=float(best["ratio"]), paired_runs=int(best["pairs"]),
                                baseline_method=best["baseline_method"], baseline_layout=best["baseline_layout"],
                                baseline_us=float(best["baseline_us"]),
                                registers=finite_float(best["registers"]),
                                spill_bytes=finite_float(best["spill_bytes"]),
                                measured_at=best["measured_at"], run_id=_str(best["run_id"]),
                                search_id=_str(best["search_id"]), source=best["source"]))
        else:
            top = reps[0] if reps else None
            ref_us = autotune.get((shape, layout))
            entries.append(dict(common, gpu_uuid=None, kind="baseline", spec=REFERENCE, family="baseline", knobs={},
                                source_hash="", device_us=finite_float(ref_us), paired_speedup=1.0,
                                best_candidate=top["method"] if top is not None else None,
                                best_candidate_speedup=float(top["ratio"]) if top is not None else None))
    return entries, len(stale)


def _dims(shape: str) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in shape.split("_"))
    return m, n, k


def _str(v) -> str | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def summarize(entries: Sequence[dict], stale: int) -> BuildSummary:
    kern = [e for e in entries if e["kind"] == "kernel"]
    gm = math.exp(sum(math.log(e["paired_speedup"]) for e in kern) / len(kern)) if kern else None
    return BuildSummary(len({e["shape"] for e in entries}), len(kern), len(entries) - len(kern),
                        len({e["shape"] for e in kern}), gm, stale)


def build(sources: Sequence[Path], out: Path, gpu: str, shapes: str = DEFAULT_SHAPES,
          min_speedup: float = SearchSettings.min_speedup, command: str = "") -> BuildSummary:
    """Write the library of ``gpu`` from ``sources`` (``source_paths``'s) to ``out`` atomically;
    ``command`` is the rebuild line recorded in the file."""
    from harness.shapes import parse_shapes

    names = [s.name for s in parse_shapes(shapes)]
    entries, stale = library_entries([read_source(p) for p in sources], gpu, names, min_speedup)
    summary = summarize(entries, stale)
    doc = {"version": LIBRARY_VERSION, "gpu_name": gpu,
           "created": max((e["measured_at"] for e in entries if e.get("measured_at")), default=None),
           "min_speedup": min_speedup, "shapes": shapes, "build": command,
           "sources": [str(p) for p in sources], "summary": summary.line(), "entries": entries}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(dumps(doc))
    os.replace(tmp, out)
    return summary


def dumps(doc: dict) -> str:
    """The library JSON with one entry a line: readable diffs, a third of the indented size."""
    head = {k: v for k, v in doc.items() if k != "entries"}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    body = ",\n".join("  " + json.dumps(e, allow_nan=False) for e in doc["entries"])
    return "{\n" + "\n".join(lines) + '\n "entries": [\n' + body + "\n ]\n}\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels_search.search.library_build",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", type=Path, help="compare Parquets, search DB folders, .txt lists of them")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpu", required=True, help='the GPU model, e.g. "NVIDIA H200"')
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help=f"the shapes it covers (default {DEFAULT_SHAPES})")
    ap.add_argument("--min-speedup", type=float, default=SearchSettings.min_speedup,
                    help="paired ratio a kernel needs over the strongest baseline "
                         f"(default {SearchSettings.min_speedup})")
    a = ap.parse_args(argv)
    command = " ".join(["python -m kernels_search.search.library_build", "--gpu", json.dumps(a.gpu),
                        "--out", str(a.out),
                        *([f"--shapes {a.shapes}"] if a.shapes != DEFAULT_SHAPES else []),
                        *([f"--min-speedup {a.min_speedup:g}"] if a.min_speedup != SearchSettings.min_speedup else []),
                        *map(str, a.sources)])
    try:
        summary = build(source_paths(a.sources), a.out, a.gpu, a.shapes, a.min_speedup, command)
    except ValueError as e:  # LibraryBuildError, ShapeError
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{a.out}: {a.gpu}, {summary.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
