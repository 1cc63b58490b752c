"""Load and validate results files: the report's only door to the data.

Every problem with an input (missing, not Parquet, not ours, wrong schema version, no rows) is a
``ResultsError`` that names the file, raised before anything is written, so a bad input never
produces a half-built or silently empty site.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.results import ResultsError, read_results, read_samples, samples_dir


@dataclass
class LoadedFile:
    """One results file: its rows, its raw samples (possibly empty) and where they came from."""

    path: Path
    results: pd.DataFrame
    samples: pd.DataFrame

    @property
    def samples_path(self) -> Path:
        return samples_dir(self.path)


def load_file(path: Path) -> LoadedFile:
    """Read one results file and its samples; raise ResultsError on anything unusable."""
    path = Path(path)
    table = read_results(path)  # missing / corrupt / foreign / wrong version / missing columns
    if table.num_rows == 0:
        raise ResultsError(f"{path} holds no result rows (an empty run cannot be reported)")
    df = table.to_pandas()
    for col in ("run_id", "method", "shape", "mode", "cache", "layout"):
        if df[col].isna().any():
            raise ResultsError(f"{path} has rows without a {col!r}; the file is not a valid results table")
    try:
        samples = read_samples(path).to_pandas()
    except Exception as e:  # a damaged samples part must not be silently dropped
        raise ResultsError(f"{samples_dir(path)}: unreadable samples ({e})") from e
    return LoadedFile(path=path, results=df, samples=samples)


def load_all(paths: list[Path]) -> tuple[list[LoadedFile], pd.DataFrame]:
    """Load every file; return them and all their rows in one frame (``source`` = file index).

    The same run may appear in two files only if they hold different GPUs; identical
    (run, GPU, shape, layout, method, mode, cache) keys in two inputs are an error, since a
    report that silently picked one of two measurements would not be honest.
    """
    if not paths:
        raise ResultsError("no results files given")
    files = [load_file(p) for p in paths]
    frames = []
    for i, f in enumerate(files):
        d = f.results.copy()
        d["source"] = i
        frames.append(d)
    df = pd.concat(frames, ignore_index=True)
    key = ["run_id", "gpu_uuid", "shape", "layout", "method", "mode", "cache"]
    dup = df[df.duplicated(key, keep=False)]
    if not dup.empty:
        srcs = sorted({str(files[s].path) for s in dup["source"]})
        first = dup.iloc[0]
        raise ResultsError(
            f"the same measurement appears twice ({first['run_id']}, {first['shape']}, {first['layout']}, "
            f"{first['method']}, {first['mode']}, {first['cache']}) in: {', '.join(srcs)}"
        )
    return files, df
