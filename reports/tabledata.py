"""A run's per-shape tables as compact JSON for the page's script, which decodes them into rows.

Every measured row of every view of a run is in its data file (the per-shape table and the
drill-down must find any of them), so the encoding, not the content, is what is kept small:
family config names of ~180 characters and flag texts would otherwise repeat on every row, and
each best-layout row would repeat the measured row it was copied from. Here:

- ``values[column]``: text columns with few distinct values (method, layout, flags, shape
  class, origin) hold an index into this list, so each distinct text is written once;
- a best-layout row (``layout = "best (nn)"``) whose every cell but the speedup equals its
  measured row in the same view is written ``[i, speedup]``: ``i`` is that row's position in
  the view, and its layout is ``"best (<the row's layout>)"``. Other rows are written in full.
- ``keys``: aligned with ``values["method"]``, each method's short key (``reports.keys``: the
  name the plots use), or null where the name is its own key.

Rows keep the tables' order (TABLE_COLUMNS, sorted by M, N, K, method, layout).
"""

from __future__ import annotations

from reports.views import TABLE_COLUMNS, Run

CODED = ("layout", "method", "flags", "shape_class", "origin")
_C = {c: i for i, c in enumerate(TABLE_COLUMNS)}
_SAME = [i for c, i in _C.items() if c not in ("layout", "speedup")]  # cells a best row shares with its source


def _best_refs(rows: list[list]) -> list:
    """Rows with each best-layout copy of a measured row replaced by ``[index, speedup]``."""
    where = {(r[_C["m"]], r[_C["n"]], r[_C["k"]], r[_C["method"]], r[_C["layout"]]): i for i, r in enumerate(rows)}
    out: list = []
    for r in rows:
        lay = r[_C["layout"]]
        if lay.startswith("best (") and lay.endswith(")"):
            i = where.get((r[_C["m"]], r[_C["n"]], r[_C["k"]], r[_C["method"]], lay[6:-1]))
            if i is not None and all(rows[i][j] == r[j] for j in _SAME):
                out.append([i, r[_C["speedup"]]])
                continue
        out.append(r)
    return out


def encode(run: Run) -> dict:
    """One run's tables: ``{"columns", "values", "keys", "views": {view id: rows}}``."""
    views = {v.id: _best_refs(v.table) for v in run.views}
    full = [row for rows in views.values() for row in rows if len(row) == len(TABLE_COLUMNS)]
    values = {c: sorted({row[_C[c]] for row in full}) for c in CODED}
    index = {_C[c]: {val: j for j, val in enumerate(values[c])} for c in CODED}
    coded = {vid: [[index[i][x] if i in index else x for i, x in enumerate(row)] if len(row) == len(TABLE_COLUMNS)
                   else row for row in rows]
             for vid, rows in views.items()}
    keys = [run.keys[m] if run.keys.get(m, m) != m else None for m in values["method"]]
    return {"columns": TABLE_COLUMNS, "values": values, "keys": keys, "views": coded}
