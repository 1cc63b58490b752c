"""Names of runs a person can read: the run's own label, else one built from its file's name.

``compare --label`` stores a label in every row (``run_label``). Runs written before that, or
without one, are named after their results file: the stem, or its folder's name when the stem
is generic (``results``, ``compare``), with a leading ``NN-`` index dropped and dashes read as
spaces (``results/runs/14-h200-search-g-library/h200-search-g-library.parquet`` ->
"h200 search g library").
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

GENERIC_STEMS = {"results", "compare", "run", "out", "output", "data"}


def name_from_path(path: Path) -> str:
    path = Path(path)
    stem = path.stem
    if stem.lower() in GENERIC_STEMS and path.parent.name:
        stem = path.parent.name
    stem = re.sub(r"^\d+[-_]", "", stem)
    return re.sub(r"[-_]+", " ", stem).strip() or path.stem


def run_name(raw: pd.DataFrame, paths: list[Path]) -> str:
    """The readable name of one run: its label if its rows carry one, else from its first file."""
    labels = raw["run_label"].dropna() if "run_label" in raw else pd.Series(dtype=str)
    labels = [v for v in pd.unique(labels) if str(v).strip()]
    if labels:
        return "; ".join(sorted(map(str, labels)))
    return name_from_path(paths[0]) if paths else str(raw["run_id"].iloc[0])
