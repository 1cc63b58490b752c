"""Assemble the static site: load, compute views, write the page, its per-run data and assets.

The output folder is self-contained (HTML, CSS, JS, the vendored Vega-Lite, one data script per
run, the input Parquet files and their raw samples), so it can be opened from disk, served by
any static host, or archived as is.

The report writes only files it owns. A folder it builds gets a manifest (``MANIFEST``) listing
every file written; a rebuild replaces exactly those files and leaves anything else alone. A
folder that is not empty and holds no manifest was not made by the report: it is refused, never
overwritten. Everything is staged inside the folder first, so rebuilding a site from its own
``data/`` copies, or a build that fails half-way, never destroys an input.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import jinja2
import pyarrow.parquet as pq

from harness.paths import OutputPathError, check_output_dir
from harness.results import META_KEY
from reports import headline as headline_rule
from reports.crossrun import cross_run
from reports.derive import METRICS
from reports.load import LoadedFile, load_all
from reports.payload import index_payload, run_payload, to_json, to_script
from reports.views import Run, build_runs

PKG = Path(__file__).parent
MANIFEST = ".hgemm-report.json"  # in the output folder: the files this report wrote there
WRITER = "hgemm-bench report"
STAGE_PREFIX = ".report-stage-"
FLOOR_DEFINITION = (
    "floor = max(2·M·N·K / peak fp16 rate, minimum bytes / memory bandwidth), minimum bytes = "
    "2·(M·K + K·N + M·N) (fp16 A and B read once, C written once); datasheet H200: 990 TFLOP/s dense "
    "fp16 tensor, 4.8 TB/s HBM3e. Efficiency = floor / measured time; a time under the floor is "
    "physically impossible and is flagged as suspect."
)


def owned_files(out_dir: Path) -> set[str]:
    """The files (relative POSIX paths) an earlier report wrote in ``out_dir``; empty for a
    folder that does not exist or is empty. OutputPathError for a folder the report may not
    write into: not empty and without a manifest, or with a manifest it cannot trust."""
    out_dir = Path(out_dir)
    check_output_dir(out_dir)
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return set()
    manifest = out_dir / MANIFEST
    if not manifest.is_file():
        raise OutputPathError(f"{out_dir} is not empty and was not made by `{WRITER}` (it has no {MANIFEST}); "
                              "give a new or empty folder")
    try:
        doc = json.loads(manifest.read_text())
        files = doc["files"]
        if doc.get("written_by") != WRITER or not isinstance(files, list):
            raise ValueError("not a report manifest")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise OutputPathError(f"{manifest} cannot be read as a report manifest ({e}); "
                              "give a new or empty folder") from e
    bad = [f for f in files if not isinstance(f, str) or PurePosixPath(f).is_absolute()
           or ".." in PurePosixPath(f).parts or f == MANIFEST]
    if bad:
        raise OutputPathError(f"{manifest} lists paths outside the folder ({bad[0]!r}); give a new or empty folder")
    return set(files)


def _write_manifest(out_dir: Path, files: set[str]) -> None:
    tmp = out_dir / f"{MANIFEST}.{os.getpid()}.tmp"  # created with the user's umask, as the site's other files
    tmp.write_text(json.dumps({"written_by": WRITER, "files": sorted(files)}, indent=1))
    os.replace(tmp, out_dir / MANIFEST)


def _copy_data(files: list[LoadedFile], stage: Path) -> list[dict]:
    """Copy each input and its samples to ``stage``/data/<i>-<stem>/ (numbered: inputs may share
    a name); return the page's download list."""
    out = []
    for i, f in enumerate(files):
        d = stage / "data" / f"{i}-{f.path.stem}"
        d.mkdir(parents=True)
        shutil.copy2(f.path, d / f.path.name)
        parts = []
        if f.samples_path.is_dir():
            (d / f.samples_path.name).mkdir()
            for p in sorted(f.samples_path.glob("*.parquet")):
                shutil.copy2(p, d / f.samples_path.name / p.name)
                parts.append(p.name)
        rel = f"data/{d.name}"
        out.append({
            "name": f.path.name,
            "href": f"{rel}/{f.path.name}",
            "rows": len(f.results),
            "schema_version": int((pq.read_schema(f.path).metadata or {}).get(META_KEY, b"0")),  # as written
            "samples_dir": f"{rel}/{f.samples_path.name}/" if parts else None,
            "samples": [f"{rel}/{f.samples_path.name}/{p}" for p in parts],
            "sample_rows": len(f.samples),
        })
    return out


def _install(stage: Path, out_dir: Path, old: set[str]) -> set[str]:
    """Move every file staged into ``out_dir``, replacing the files of the earlier build
    (``old``) and nothing else; return the files now owned. A staged path that exists in
    ``out_dir`` without being an earlier build's file stops the build before anything moves."""
    new = {p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file()}
    clash = sorted(r for r in new if r not in old and (out_dir / r).exists() or (out_dir / r).is_dir())
    if clash:
        raise OutputPathError(f"{out_dir / clash[0]} exists and was not written by `{WRITER}`; "
                              "it is left alone: give a new or empty folder")
    _write_manifest(out_dir, old | new)  # a build interrupted from here on still owns every file it wrote
    for rel in sorted(old - new):
        target = out_dir / rel
        if target.is_file() or target.is_symlink():
            target.unlink()
        for parent in target.parents:  # folders an earlier build made and left empty
            if parent == out_dir or not parent.is_relative_to(out_dir):
                break
            try:
                parent.rmdir()
            except OSError:
                break
    for rel in sorted(new):
        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage / rel, out_dir / rel)
    _write_manifest(out_dir, new)
    return new


class BaselineError(ValueError):
    """The leaderboard's baseline is a method no input file holds (a typo would give a page without speedups)."""


DEFAULT_BASELINE = "cublaslt-autotune"


def build_site(result_paths: list[Path], out_dir: Path, baseline: str | None = None,
               metric: str = "device", headline: str | None = None) -> Path:
    """Build the static report from results files into ``out_dir``; return the index.html path.

    ``headline``: the run the page opens on (run id or name); default the latest full comparison
    (``reports.headline``). Raises ``harness.paths.OutputPathError`` for an output folder the
    report may not write into (see ``owned_files``), ``harness.results.ResultsError`` (naming the
    file) for a missing, foreign, empty or wrong-version input and ``reports.headline.HeadlineError``
    for a headline that names no run, and ``BaselineError`` for a ``baseline`` that no file holds,
    all before anything is written. ``baseline`` None: ``DEFAULT_BASELINE``, which may be absent (a
    torch-only run): its page then has no speedups.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {sorted(METRICS)}")
    out_dir = Path(out_dir)
    old = owned_files(out_dir)
    paths = [Path(p) for p in result_paths]
    files, df = load_all(paths)
    if baseline is None:
        baseline = DEFAULT_BASELINE
    elif baseline not in set(df["method"]):
        raise BaselineError(f"--baseline {baseline!r} is no method of these results; they hold "
                            f"{', '.join(sorted(set(df['method'])))}")
    runs = build_runs(df, baseline, metric, [f.path for f in files])
    lead = headline_rule.pick([{"id": r.id, "run_id": r.run_id, "name": r.name, "full": r.full, "last": r.last}
                               for r in runs], headline)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not old:
        _write_manifest(out_dir, set())  # the folder is the report's from here on
    for leftover in out_dir.glob(f"{STAGE_PREFIX}*"):  # of an interrupted build of ours
        shutil.rmtree(leftover, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=out_dir))
    try:
        _build(stage, files, runs, baseline, metric, lead, chosen=bool(headline))
        _install(stage, out_dir, old)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out_dir / "index.html"


def _build(stage: Path, files: list[LoadedFile], runs: list[Run], baseline: str, metric: str, lead: str,
           chosen: bool = False) -> None:
    """Write the whole site into ``stage``; ``chosen``: the headline was asked for, not the default."""
    downloads = _copy_data(files, stage)
    for src in (PKG / "static", PKG / "static" / "vendor"):
        dst = stage / src.relative_to(PKG)
        dst.mkdir(parents=True, exist_ok=True)
        for p in src.iterdir():
            if p.is_file():
                shutil.copy2(p, dst / p.name)
    for r in runs:
        (stage / "data" / f"{r.id}.js").write_text(to_script("HG.run", run_payload(r, downloads)), encoding="utf-8")
    meta = {"built_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "files": len(files),
            "floor": FLOOR_DEFINITION}
    index = index_payload(runs, lead, cross_run(runs, baseline), baseline, metric, meta, chosen=chosen)
    html = jinja2.Environment(loader=jinja2.FileSystemLoader(PKG / "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined).get_template("index.html.j2").render(
        index_json=to_json(index))
    (stage / "index.html").write_text(html, encoding="utf-8")
