"""The cross-run leaderboard: every method once, scored in the latest run that measured it.

Per method, the newest GPU run whose offline / warm / device-time view ranks it against the
requested baseline gives its row: the geometric-mean speedup (best layout per shape) over all
its shapes and per shape class (``reports.shapeclass``), with shape counts and the win rate.
Every speedup is still paired within that one run; rows of different runs were measured on
different shapes at different times, so the page shows each row's run next to it. A method
measured on fewer shapes than a bootstrap CI needs (a study's config tried on one or two
shapes) has no CI and is listed after the methods that have one: a lucky shape must not put a
config above a library scored on forty.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from harness.timing.stats import CONFIDENCE, geomean, geomean_ci, min_samples_for_ci
from reports.shapeclass import CLASSES
from reports.views import TABLE_COLUMNS, Run

VIEW = ("offline", "warm", "device")
MIN_SHAPES = min_samples_for_ci(CONFIDENCE)  # fewer shapes: no CI, listed after the rest
_C = {c: i for i, c in enumerate(TABLE_COLUMNS)}


def _r(v: float):
    return None if v is None or not np.isfinite(v) else float(f"{v:.4g}")


def cross_run(runs: list[Run], baseline: str) -> list[dict]:
    """One dict per method (the baseline itself left out), best geomean first."""
    latest: dict[str, tuple[str, Run, list[list]]] = {}
    for run in runs:
        if run.cpu:
            continue
        view = next((v for v in run.views if (v.mode, v.cache, v.metric) == VIEW and v.baseline == baseline), None)
        if view is None:
            continue
        best = defaultdict(list)
        for row in view.table:
            if row[_C["layout"]].startswith("best (") and row[_C["speedup"]] is not None:
                best[row[_C["method"]]].append(row)
        for method, rows in best.items():
            if method != baseline and (method not in latest or run.last > latest[method][0]):
                latest[method] = (run.last, run, rows)
    out = []
    for method, (_, run, rows) in latest.items():
        s = np.array([r[_C["speedup"]] for r in rows], dtype=float)
        item = {"method": method, "key": run.keys.get(method, method), "role": run.roles.get(method, "kernel"),
                "run": run.id, "run_name": run.name, "run_id": run.run_id, "started": run.started,
                "shapes": len(rows), "geomean": _r(geomean(s)), "win_rate": _r(float(np.mean(s > 1.0)))}
        lo, hi = geomean_ci(s)
        item.update(ci_lo=_r(lo), ci_hi=_r(hi), ranked=len(rows) >= MIN_SHAPES)
        for cls, _ in CLASSES:
            sc = np.array([r[_C["speedup"]] for r in rows if r[_C["shape_class"]] == cls], dtype=float)
            item[cls] = _r(geomean(sc)) if sc.size else None
            item[f"{cls}_n"] = int(sc.size)
        out.append(item)
    out.sort(key=lambda d: (not d["ranked"], d["geomean"] is None, -(d["geomean"] or 0), d["method"]))
    return out
