"""Which run the site opens on: the latest full comparison, or the one asked for.

A *full comparison* is a GPU run with offline results in which every cuBLAS-family baseline and
at least one other method have rankable rows: the question the tool exists to answer (is
anything faster than cuBLAS here?), asked of every baseline. Studies that measure candidates
against one reference only do not qualify. Of those, the newest (by its last measured row)
leads; with none, the page's first run.
"""

from __future__ import annotations

import pandas as pd

from harness.results import rankable

FULL_BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")


class HeadlineError(ValueError):
    """A requested headline run matches no run of the site."""


def is_full_comparison(raw: pd.DataFrame) -> bool:
    """Whether one run's rows (one run, one GPU) make a full comparison (module docstring)."""
    if (raw["device"].fillna("") == "cpu").all() or not raw["mode"].eq("offline").any():
        return False
    ok = raw[rankable(raw, "device_us_median") & raw["mode"].eq("offline")]
    methods = set(ok["method"])
    others = set(ok.loc[~ok["is_baseline"].fillna(False).astype(bool), "method"])
    return set(FULL_BASELINES) <= methods and bool(others)


def pick(runs: list[dict], requested: str | None = None) -> str:
    """The id of the headline run. ``runs``: dicts with id, run_id, name, full and last (the
    last measured_at as text). ``requested`` names a run by run id, page id or name (exact)."""
    if requested:
        hits = [r["id"] for r in runs if requested in (r["id"], r["run_id"], r["name"])]
        if not hits:
            raise HeadlineError(f"--headline {requested!r} matches no run (give a run id or a run's name: "
                                + ", ".join(f"{r['run_id']} ({r['name']})" for r in runs[:8]) + ")")
        return hits[0]
    full = [r for r in runs if r["full"]]
    if not full:
        return runs[0]["id"]
    return max(full, key=lambda r: r["last"])["id"]
