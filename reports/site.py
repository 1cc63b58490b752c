"""Assemble the static site: load, compute views, render the template, copy data and assets.

The output directory is self-contained (HTML, CSS, JS, the input Parquet files and their raw
samples), so it can be opened from disk, served by any static host, or archived as is.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import jinja2

from harness.results import SCHEMA_VERSION
from reports import tabledata
from reports.derive import METRICS
from reports.load import LoadedFile, load_all
from reports.views import build_runs

PKG = Path(__file__).parent
FLOOR_DEFINITION = (
    "floor = max(2·M·N·K / peak fp16 rate, minimum bytes / memory bandwidth), minimum bytes = "
    "2·(M·K + K·N + M·N) (fp16 A and B read once, C written once); datasheet H200: 990 TFLOP/s dense "
    "fp16 tensor, 4.8 TB/s HBM3e. Efficiency = floor / measured time; a time under the floor is "
    "physically impossible and is flagged as suspect."
)


def _copy_data(files: list[LoadedFile], out_dir: Path) -> list[dict]:
    """Copy each input and its samples to data/<i>-<stem>/ (numbered: inputs may share a name).

    The copies are staged beside the old data/ and swapped in at the end, so rebuilding a site
    from its own data/ copies (or a failed copy) never destroys an input.
    """
    data = out_dir / "data"
    stage = Path(tempfile.mkdtemp(prefix=".data-", dir=out_dir))
    out = []
    try:
        for i, f in enumerate(files):
            d = stage / f"{i}-{f.path.stem}"
            d.mkdir(parents=True)
            shutil.copy2(f.path, d / f.path.name)
            parts = []
            if f.samples_path.is_dir():
                shutil.copytree(f.samples_path, d / f.samples_path.name)
                parts = sorted(p.name for p in (d / f.samples_path.name).glob("*.parquet"))
            out.append({
                "name": f.path.name,
                "href": f"data/{d.name}/{f.path.name}",
                "rows": len(f.results),
                "samples_dir": f"data/{d.name}/{f.samples_path.name}/" if parts else None,
                "samples": [f"data/{d.name}/{f.samples_path.name}/{p}" for p in parts],
                "sample_rows": len(f.samples),
            })
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if data.exists():
        shutil.rmtree(data)
    stage.rename(data)
    return out


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(PKG / "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["x"] = lambda v: "—" if v is None or v != v else f"{v:.3f}×"
    env.filters["pct"] = lambda v: "—" if v is None or v != v else f"{v:.0%}"
    env.filters["us"] = lambda v: "—" if v is None or v != v else f"{v:.4g} µs"
    return env


def build_site(result_paths: list[Path], out_dir: Path, baseline: str = "cublaslt-autotune",
               metric: str = "device") -> Path:
    """Build the static report from results files into ``out_dir``; return the index.html path.

    Raises ``harness.results.ResultsError`` (naming the file) for a missing, foreign, empty or
    wrong-version input before anything is written.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {sorted(METRICS)}")
    paths = [Path(p) for p in result_paths]
    files, df = load_all(paths)
    runs = build_runs(df, baseline, metric)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    downloads = _copy_data(files, out_dir)
    static = out_dir / "static"
    static.mkdir(exist_ok=True)
    for p in (PKG / "static").iterdir():
        if p.is_file():
            shutil.copy2(p, static / p.name)
    html = _env().get_template("index.html.j2").render(
        runs=runs,
        downloads=downloads,
        baseline=baseline,
        metric=metric,
        floor_definition=FLOOR_DEFINITION,
        schema_version=SCHEMA_VERSION,
        built_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        data_json=tabledata.encode(runs),
    )
    index = out_dir / "index.html"
    index.write_text(html, encoding="utf-8")
    return index
