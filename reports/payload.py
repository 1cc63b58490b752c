"""What the page's script reads: the site index (inline in index.html) and one file per run.

The index is small (the run list, the cross-run leaderboard, which run leads) so the first paint
waits for nothing else; a run's views, tables, environment and clocks are in ``data/<run>.js``,
loaded when the run is first shown. Run files are scripts (``HG.run({...})``), not JSON: a page
opened from disk (``file://``) may load scripts but may not ``fetch()`` files.
"""

from __future__ import annotations

import json
import math

from harness.timing.stats import CONFIDENCE, min_samples_for_ci
from reports import tabledata
from reports.crossrun import MIN_SHAPES
from reports.shapeclass import CLASSES
from reports.stats import Entry
from reports.views import Run


def _r(v, digits: int = 4):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return float(f"{v:.{digits}g}") if isinstance(v, float) else v


def ci_text(e: Entry, long: bool = False) -> str:
    """A leaderboard entry's geomean CI, or why there is none."""
    level = f"{CONFIDENCE:.0%}"
    if e.ci_lo == e.ci_lo and e.ci_hi == e.ci_hi:
        return f"{level} CI {e.ci_lo:.3f}× – {e.ci_hi:.3f}×" if long else f"{e.ci_lo:.3f}× – {e.ci_hi:.3f}×"
    need = min_samples_for_ci(CONFIDENCE)
    if 0 < e.covered < need:
        return (f"no {level} CI: {e.covered} shape(s), it needs {need}" if long
                else f"no CI ({e.covered} < {need} shapes)")
    return f"no {level} CI" if long else "—"


def ranked_first(entries: list[Entry]) -> list[Entry]:
    """Entries with a geomean CI (or the baseline) first, each group in its leaderboard order: a
    config that won on the two shapes it was tried on is listed, never ranked above a method
    scored on many."""
    return sorted(entries, key=lambda e: not (e.is_baseline or e.covered >= MIN_SHAPES))


def _entry(e: Entry, rank: int) -> dict:
    return {"rank": rank, "ranked": e.is_baseline or e.covered >= MIN_SHAPES, "label": e.label, "method": e.method,
            "layout": e.layout, "baseline": e.is_baseline,
            "geomean": _r(e.geomean), "ci_lo": _r(e.ci_lo), "ci_hi": _r(e.ci_hi), "ci": ci_text(e),
            "ci_long": ci_text(e, long=True), "win_rate": _r(e.win_rate), "wins": e.wins, "covered": e.covered,
            "shapes": e.shapes_total, "gate_failures": e.gate_failures, "suspect": e.suspect,
            "time_us": _r(e.median_us_geomean)}


def run_payload(run: Run, downloads: list[dict]) -> dict:
    return {
        "id": run.id, "run_id": run.run_id, "name": run.name, "label": run.label, "gpu": run.gpu_name,
        "gpu_uuid": run.gpu_uuid, "cpu": run.cpu, "keys": run.keys, "roles": run.roles,
        "views": [{"id": v.id, "mode": v.mode, "cache": v.cache, "metric": v.metric, "metric_label": v.metric_label,
                   "baseline": v.baseline, "baseline_note": v.baseline_note,
                   "entries": _entries(v.entries, v.compile_s)} for v in run.views],
        "tables": tabledata.encode(run),
        "env": run.env, "methodology": run.methodology, "excluded": run.excluded, "unsupported": run.unsupported,
        "clocks": run.clocks, "downloads": [downloads[i] for i in run.sources],
    }


def _entries(entries: list[Entry], compile_s: dict[str, float]) -> list[dict]:
    rank: dict[str, int] = {}
    out = []
    for e in ranked_first(entries):
        rank[e.layout] = rank.get(e.layout, 0) + 1
        out.append(dict(_entry(e, rank[e.layout]), compile_s=_r(compile_s.get(e.method), 3)))
    return out


def index_payload(runs: list[Run], headline: str, board: list[dict], baseline: str, metric: str,
                  meta: dict, chosen: bool = False) -> dict:
    """``chosen``: the headline run was named by the site's builder (``--headline``), not picked as
    the latest full comparison; the page says which."""
    return {
        "headline": headline, "headline_chosen": chosen, "baseline": baseline, "metric": metric, "board": board,
        "board_min_shapes": MIN_SHAPES,
        "classes": [{"id": c, "text": t} for c, t in CLASSES], "meta": meta,
        "runs": [{"id": r.id, "run_id": r.run_id, "name": r.name, "label": r.label, "gpu": r.gpu_name, "cpu": r.cpu,
                  "started": r.started, "full": r.full, "file": f"data/{r.id}.js",
                  "methods": len(r.keys), "shapes": _shapes(r),
                  "views": [{"id": v.id, "mode": v.mode, "cache": v.cache, "metric": v.metric} for v in r.views]}
                 for r in runs],
    }


def _shapes(run: Run) -> int:
    return max((len({(row[0], row[1], row[2]) for row in v.table}) for v in run.views), default=0)


def to_json(obj: dict) -> str:
    """Compact JSON, safe inside a ``<script>`` element (no ``</``)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return text.replace("</", "<\\/")


def to_script(call: str, obj: dict) -> str:
    """``call(<obj as JSON>);``: a data file a ``<script>`` element can load."""
    return f"{call}({to_json(obj)});\n"
