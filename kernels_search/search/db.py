"""Kernel DB: every candidate the search measured, append-only Parquet parts, resumable.

Layout on disk: ``<db>/parts/part-<ns>-<id>.parquet``, one part per ``evaluate_shape`` call,
holding that call's candidate rows and baseline rows. A part is written to a temporary file in
the same folder and moved into place with ``os.replace``, so a search killed at any instant
leaves whole parts only (a stray ``.tmp`` is ignored and removed on the next open). Rows carry a
``row_id``; loading drops duplicates, so a part written twice (never in normal use) cannot
double-count.

Columns (``FIELDS``): a DB row is a ``compare`` result row (``harness.results.RESULT_FIELDS``:
identity, environment, problem, method with its ``config`` JSON and ``is_baseline``, verdict,
``device_us_median`` and the other timing summaries; ``device_us_median`` is null for a failed
row) plus what the search adds (``SEARCH_FIELDS``): identity (row_id, search_id, call_id, round,
recorded_at), the proposer (origin), the failure kind, build figures (compile_s, build_cached,
ptxas registers and spills), the comparison (baseline_us: the strongest baseline of the shape in
the same call, baseline_method, speedup, reward) and cost (eval_s: the call's wall time,
prebuild_s: seconds its candidates spent compiling on the build pool before the call, wait_s:
seconds the loop waited for their background builds, elapsed_s: this part's share of the search
budget, wall time since the previous call's rows; elapsed_s - eval_s - wait_s is the loop's own
bookkeeping). Every knob also gets a string column ``knob_<name>`` (null where the family has
no such knob). Parts written before the DB shared compare's columns named three of them
otherwise (``device_us``, ``knobs``, ``kind``); they are renamed on read (``upgrade``).
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.problem import Shape
from harness.results import RESULT_FIELDS
from kernels_search.search.features import shape_distance

SEARCH_FIELDS: list[tuple[str, pa.DataType]] = [
    ("row_id", pa.string()),
    ("search_id", pa.string()),
    ("call_id", pa.string()),  # one evaluate_shape call = one part
    ("round", pa.int32()),
    ("recorded_at", pa.string()),
    ("origin", pa.string()),  # the proposer and how it chose (policy:design, policy:greedy, llm, baseline...)
    ("failure", pa.string()),  # "" | compile | wrong | crash | timeout | unsupported | error | harness
    ("compile_s", pa.float64()),
    ("build_cached", pa.bool_()),
    ("registers", pa.float64()),
    ("spill_bytes", pa.float64()),
    ("ptxas", pa.string()),
    ("baseline_us", pa.float64()),
    ("baseline_method", pa.string()),
    ("speedup", pa.float64()),
    ("reward", pa.float64()),
    ("eval_s", pa.float64()),
    ("prebuild_s", pa.float64()),  # absent (null) in parts written before it existed
    ("wait_s", pa.float64()),  # likewise
    ("elapsed_s", pa.float64()),
]
# the compare columns by name and type (the DB keeps ``measured_at`` as ISO-8601 text, as its rows
# and the library export carry it), then the search's own; a name both define (``compile_s``: the
# seconds a method spent compiling) is the search's, filled from the build's figures
FIELDS = [(name, pa.string() if name == "measured_at" else typ) for name, typ, *_ in RESULT_FIELDS
          if name not in {n for n, _ in SEARCH_FIELDS}] + SEARCH_FIELDS
SCHEMA = pa.schema(FIELDS)
COLUMNS = [f for f, _ in FIELDS]
RENAMED = {"device_us": "device_us_median", "knobs": "config"}  # a part's old column -> compare's name


def upgrade(table: pa.Table) -> pa.Table:
    """A part as this schema names it: ``device_us`` -> ``device_us_median``, ``knobs`` ->
    ``config``, ``kind`` ("candidate" | "baseline") -> ``is_baseline``."""
    names = table.column_names
    for old, new in RENAMED.items():
        if old in names and new not in names:
            table = table.rename_columns([new if c == old else c for c in table.column_names])
    if "kind" in names and "is_baseline" not in names:
        is_baseline = pc.fill_null(pc.equal(table["kind"], "baseline"), False)
        table = table.drop_columns(["kind"]).append_column("is_baseline", is_baseline)
    return table


def finite_float(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def ptxas_of(info: Mapping[str, Any]) -> dict:
    """The ptxas figures a CUDA method put in its Prepared.info (``ptxas_<key>``)."""
    return {k[len("ptxas_"):]: v for k, v in info.items() if k.startswith("ptxas_")}


class KernelDB:
    """Append-only store of measured candidates; the whole table is kept in memory as pandas."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.parts_dir = self.path / "parts"
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.parts_dir.glob("*.tmp"):  # a write that a kill interrupted
            tmp.unlink(missing_ok=True)
        self.df = self._load()

    # ------------------------------------------------------------------ I/O
    def part_files(self) -> list[Path]:
        return sorted(self.parts_dir.glob("part-*.parquet"))

    def _load(self) -> pd.DataFrame:
        tables = [upgrade(pq.read_table(p)) for p in self.part_files()]
        if not tables:
            return pd.DataFrame({c: pd.Series(dtype=t.to_pandas_dtype()) for c, t in FIELDS})
        table = pa.concat_tables(tables, promote_options="default")
        df = table.to_pandas()
        return df.drop_duplicates("row_id", keep="first").reset_index(drop=True)

    def reload(self) -> None:
        self.df = self._load()

    def append(self, rows: list[dict]) -> Path | None:
        """Write one part atomically; returns its path. Rows get a row_id and recorded_at (set
        on the given dicts too, so callers can refer to them); a key outside ``FIELDS`` is an error."""
        if not rows:
            return None
        unknown = set().union(*(set(r) for r in rows)) - set(COLUMNS)
        if unknown:
            raise KeyError(f"kernel DB rows have columns not in the schema: {sorted(unknown)}")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        knob_cols: set[str] = set()
        out = []
        for r in rows:
            r.setdefault("row_id", uuid.uuid4().hex)
            r.setdefault("recorded_at", now)
            r = dict(r)
            for k, v in json.loads(r.get("config") or "{}").items():
                r[f"knob_{k}"] = str(v)
                knob_cols.add(f"knob_{k}")
            out.append(r)
        fields = FIELDS + [(c, pa.string()) for c in sorted(knob_cols)]
        schema = pa.schema(fields)
        table = pa.Table.from_pylist([{f: r.get(f) for f, _ in fields} for r in out], schema=schema)
        name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.parts_dir / (name + ".tmp")
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh)
            fh.flush()
            os.fsync(fh.fileno())
        final = self.parts_dir / name
        os.replace(tmp, final)
        new = table.to_pandas()
        self.df = new if self.df.empty else pd.concat([self.df, new], ignore_index=True)
        return final

    # ------------------------------------------------------------------ queries
    def knob_columns(self) -> set[str]:
        """The ``knob_<name>`` columns (one per knob name seen in any family)."""
        return {c for c in self.df.columns if c.startswith("knob_")}

    def _sel(self, gpu: str | None = None, shape: Shape | str | None = None, layout: str | None = None,
             baseline: bool | None = False) -> pd.DataFrame:
        df = self.df
        if df.empty:
            return df
        mask = pd.Series(True, index=df.index)
        if gpu is not None:
            mask &= df["gpu_name"] == gpu  # the GPU model: a search may span machines of one model
        if shape is not None:
            mask &= df["shape"] == (shape.name if isinstance(shape, Shape) else shape)
        if layout is not None:
            mask &= df["layout"] == layout
        if baseline is not None:
            mask &= df["is_baseline"] == baseline
        return df[mask]

    def candidates(self, gpu: str | None = None, shape: Shape | str | None = None,
                   layout: str | None = None) -> pd.DataFrame:
        return self._sel(gpu, shape, layout)

    def measured_specs(self, shape: Shape, gpu: str | None = None) -> set[str]:
        """Specs already measured on this shape (never proposed again)."""
        return set(self._sel(gpu, shape)["method"])

    def correct(self, gpu: str | None = None, shape: Shape | str | None = None,
                layout: str | None = None) -> pd.DataFrame:
        df = self._sel(gpu, shape, layout)
        return df[(df["status"] == "ok") & df["device_us_median"].notna()] if not df.empty else df

    def best(self, gpu: str | None = None, shape: Shape | str | None = None,
             layout: str | None = None) -> pd.DataFrame:
        """The fastest correct candidate per (gpu_name, shape, layout): one row each."""
        df = self.correct(gpu, shape, layout)
        if df.empty:
            return df
        idx = df.groupby(["gpu_name", "shape", "layout"])["device_us_median"].idxmin()
        return df.loc[idx.values].reset_index(drop=True)

    def best_baselines(self, gpu: str | None = None) -> pd.DataFrame:
        """The fastest correct baseline row per (gpu_name, shape, layout)."""
        df = self._sel(gpu, baseline=True)
        if df.empty:
            return df
        df = df[(df["status"] == "ok") & df["device_us_median"].notna()]
        if df.empty:
            return df
        idx = df.groupby(["gpu_name", "shape", "layout"])["device_us_median"].idxmin()
        return df.loc[idx.values].reset_index(drop=True)

    def shapes(self, gpu: str | None = None) -> list[Shape]:
        df = self._sel(gpu)
        if df.empty:
            return []
        return [Shape(int(m), int(n), int(k))
                for m, n, k in df[["m", "n", "k"]].drop_duplicates().itertuples(index=False)]

    def neighbours(self, shape: Shape, gpu: str | None = None, k: int = 4,
                   with_correct: bool = True) -> list[tuple[Shape, float]]:
        """The ``k`` measured shapes nearest to ``shape`` (log-space distance), itself excluded."""
        pool = self.correct(gpu) if with_correct else self._sel(gpu)
        if pool.empty:
            return []
        seen = {Shape(int(m), int(n), int(kk))
                for m, n, kk in pool[["m", "n", "k"]].drop_duplicates().itertuples(index=False)}
        seen.discard(shape)
        return sorted(((s, shape_distance(shape, s)) for s in seen), key=lambda t: (t[1], t[0]))[:k]

    def failed_builds(self) -> set[tuple[str, str]]:
        """(family, source_hash) of configs whose build failed (shape-independent failures)."""
        df = self._sel()
        if df.empty:
            return set()
        bad = df[df["failure"] == "compile"]
        return set(zip(bad["family"], bad["source_hash"].fillna("")))

    def budget_used(self, search_id: str) -> float:
        """Seconds of search budget spent by earlier parts of ``search_id``."""
        df = self.df
        if df.empty:
            return 0.0
        sel = df[df["search_id"] == search_id]
        if sel.empty:
            return 0.0
        per_call = sel.groupby("call_id")["elapsed_s"].first()  # every row of a call carries it
        return float(per_call.sum())

    def search_totals(self, search_id: str) -> dict:
        """What every run of ``search_id`` did together, read back from its rows.

        ``candidates``: candidate evaluations (one per method per call, whatever the layouts);
        ``calls``: ``evaluate_shape`` calls; ``budget_used_s``: as ``budget_used``; ``compile_s``:
        parallel prebuild (``prebuild_s``, once per call) plus the candidates' setup (build/load in
        the worker); ``measure_s``: per call, its wall time minus every row's setup. The same
        split the loop reports per run, so the totals are the sum over runs (calls recorded
        before ``prebuild_s`` existed count no prebuild)."""
        df = self.df
        sel = df[df["search_id"] == search_id] if not df.empty else df
        if sel.empty:
            return dict(candidates=0, calls=0, budget_used_s=0.0, compile_s=0.0, measure_s=0.0)
        cand = sel[~sel["is_baseline"].astype(bool)]
        per_call = sel.groupby("call_id")
        setup = per_call["setup_s"].sum(min_count=1).fillna(0.0)
        eval_s = per_call["eval_s"].first().fillna(0.0)
        pre = per_call["prebuild_s"].first().fillna(0.0) if "prebuild_s" in sel else 0.0 * eval_s
        return dict(candidates=int(len(cand.drop_duplicates(["call_id", "method"]))),
                    calls=int(sel["call_id"].nunique()), budget_used_s=self.budget_used(search_id),
                    compile_s=float(pre.sum() + cand["setup_s"].fillna(0.0).sum()),
                    measure_s=float((eval_s - setup).clip(lower=0.0).sum()))

    def last_round(self, search_id: str) -> int:
        df = self.df
        sel = df[df["search_id"] == search_id] if not df.empty else df
        return int(sel["round"].max()) if not sel.empty else -1
