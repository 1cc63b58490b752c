"""Result schema and Parquet I/O: the contract between `compare`, `search` and `report`.

Two tables:

* ``results.parquet``: one row per (run, GPU, shape, layout, method, mode, cache) with the gate
  verdict, timing summaries, clocks and environment (``RESULT_SCHEMA``).
* ``<results>.samples/``: a Parquet dataset of raw per-round samples, one part file per
  (shape, mode, cache) group (``SAMPLE_SCHEMA``).

Writes are atomic (temp file + ``os.replace``), so a run killed at any instant leaves either the
previous complete file or the new complete file. ``ResultStore`` reloads what an earlier,
interrupted run finished and tells the runner which groups to skip: nothing is lost and nothing
is measured twice.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1
META_KEY = b"hgemm_bench.schema_version"
RUN_KEY = b"hgemm_bench.run_id"

RESULT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("schema_version", pa.int32()),
    ("run_id", pa.string()),
    ("measured_at", pa.string()),  # ISO-8601 UTC
    # environment
    ("device", pa.string()),  # "cuda" | "cpu"
    ("gpu_name", pa.string()),
    ("gpu_uuid", pa.string()),
    ("driver", pa.string()),
    ("cuda_version", pa.string()),
    ("torch_version", pa.string()),
    ("cublas_version", pa.string()),
    ("cublaslt_version", pa.string()),
    ("nvmath_version", pa.string()),
    ("hgemm_bench_version", pa.string()),
    ("hostname", pa.string()),
    # problem
    ("shape", pa.string()),  # "M_N_K"
    ("m", pa.int64()),
    ("n", pa.int64()),
    ("k", pa.int64()),
    ("layout", pa.string()),  # "nn" | "tn"
    ("dtype", pa.string()),
    # method
    ("method", pa.string()),
    ("family", pa.string()),
    ("is_baseline", pa.bool_()),
    ("config", pa.string()),  # JSON object: every knob
    ("source_hash", pa.string()),
    ("info", pa.string()),  # JSON object: method-specific extras decided in prepare
    ("setup_s", pa.float64()),
    # measurement settings
    ("mode", pa.string()),  # "offline" | "server"
    ("cache", pa.string()),  # "warm" | "cold"
    ("timing_method", pa.string()),  # "graph" | "spin-events" | "events" | "host-clock"
    ("qps", pa.float64()),  # server mode only
    ("input_sets", pa.int32()),  # buffers rotated through (cold: working set >= 2x L2)
    ("ci_target", pa.float64()),
    ("stop_reason", pa.string()),  # "ci" | "budget" | "max_rounds" | "calls"
    # verdict
    ("status", pa.string()),  # "ok" | "unsupported" | "gate_failed" | "error"
    ("status_reason", pa.string()),
    ("gate_passed", pa.bool_()),
    ("gate_rel_fro_err", pa.float64()),  # worst over the gate's input draws
    ("gate_max_norm_err", pa.float64()),
    ("gate_tol_rel_fro", pa.float64()),
    ("gate_tol_max_norm", pa.float64()),
    # device time per call, microseconds
    ("device_us_median", pa.float64()),
    ("device_us_mean", pa.float64()),
    ("device_us_p10", pa.float64()),
    ("device_us_p90", pa.float64()),
    ("device_us_p99", pa.float64()),
    ("device_us_ci_lo", pa.float64()),  # CI of the median
    ("device_us_ci_hi", pa.float64()),
    # host latency of one synchronous call, microseconds
    ("host_us_median", pa.float64()),
    ("host_us_mean", pa.float64()),
    ("host_us_p90", pa.float64()),
    ("host_us_p99", pa.float64()),
    # volume
    ("calls_per_batch", pa.int32()),
    ("rounds", pa.int32()),
    ("calls_measured", pa.int64()),
    # derived
    ("tflops", pa.float64()),
    ("floor_us", pa.float64()),
    ("below_floor", pa.bool_()),  # faster than physically possible: suspect, never ranked
    # clocks (NVML, sampled per round)
    ("sm_clock_mhz_mean", pa.float64()),
    ("mem_clock_mhz_mean", pa.float64()),
    ("power_w_mean", pa.float64()),
    ("temp_c_max", pa.float64()),
    ("throttled", pa.bool_()),
    ("throttle_reasons", pa.string()),
]
RESULT_SCHEMA = pa.schema(RESULT_FIELDS)
RESULT_COLUMNS = [f for f, _ in RESULT_FIELDS]

SAMPLE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()),
    ("gpu_uuid", pa.string()),
    ("shape", pa.string()),
    ("layout", pa.string()),
    ("method", pa.string()),
    ("mode", pa.string()),
    ("cache", pa.string()),
    ("round", pa.int32()),
    ("metric", pa.string()),  # "device_us" | "host_us"
    ("value", pa.float64()),
    ("sm_clock_mhz", pa.float64()),
]
SAMPLE_SCHEMA = pa.schema(SAMPLE_FIELDS)

# A finished row is identified by these; run_id is kept stable across resumes of one --out.
KEY_COLUMNS = ("gpu_uuid", "shape", "layout", "method", "mode", "cache")
# The unit the runner measures and writes at once: all methods/layouts of one shape.
GROUP_COLUMNS = ("gpu_uuid", "shape", "mode", "cache")


class ResultsError(ValueError):
    """A results file is missing, corrupt, or of a schema this version cannot read."""


def _with_meta(schema: pa.Schema, run_id: str) -> pa.Schema:
    return schema.with_metadata({META_KEY: str(SCHEMA_VERSION).encode(), RUN_KEY: run_id.encode()})


def rows_to_table(rows: Iterable[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a table in exactly ``schema``; missing keys become nulls, unknown keys are an error."""
    rows = list(rows)
    names = set(schema.names)
    for r in rows:
        extra = set(r) - names
        if extra:
            raise KeyError(f"row has columns not in the schema: {sorted(extra)}")
    cols = {f.name: pa.array([r.get(f.name) for r in rows], type=f.type) for f in schema}
    return pa.table(cols, schema=schema)


def atomic_write_table(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` so that readers only ever see a complete file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_parquet_file(path: Path) -> pa.Table:
    """Read one Parquet file through a single open handle.

    ``pq.read_table(path)`` opens the path more than once (footer, then pages); if a writer's
    ``os.replace`` lands in between, it mixes two files' bytes and fails ("Couldn't deserialize
    thrift"). An open handle pins one inode, so a reader racing an atomic writer always sees one
    whole file, old or new.
    """
    with open(path, "rb") as f:
        return pq.read_table(f)


def read_results(path: Path) -> pa.Table:
    """Read a results file, checking it is ours and of a schema version we understand."""
    path = Path(path)
    if not path.exists():
        raise ResultsError(f"results file not found: {path}")
    try:
        table = read_parquet_file(path)
    except Exception as e:  # pyarrow raises several types for damaged files
        raise ResultsError(f"{path} is not a readable Parquet file ({e})") from e
    meta = table.schema.metadata or {}
    if META_KEY not in meta:
        raise ResultsError(f"{path} is Parquet but not an hgemm-bench results file (no schema version)")
    version = int(meta[META_KEY])
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"{path} has results schema version {version}; this hgemm-bench reads version {SCHEMA_VERSION}"
        )
    missing = set(RESULT_COLUMNS) - set(table.column_names)
    if missing:
        raise ResultsError(f"{path} lacks columns {sorted(missing)}")
    return table


def samples_dir(results_path: Path) -> Path:
    """Raw samples live beside the results file: ``results.parquet`` -> ``results.samples/``."""
    p = Path(results_path)
    return p.with_name(p.stem + ".samples")


def read_samples(results_path: Path) -> pa.Table:
    d = samples_dir(results_path)
    parts = sorted(d.glob("*.parquet")) if d.exists() else []
    if not parts:
        return SAMPLE_SCHEMA.empty_table()
    return pa.concat_tables([read_parquet_file(p).cast(SAMPLE_SCHEMA) for p in parts])


def group_key(row: dict[str, Any]) -> tuple:
    return tuple(row[c] for c in GROUP_COLUMNS)


class ResultStore:
    """Append-by-group store over one results file, resumable after a kill.

    ``add_group(rows, samples)`` first writes the group's samples part file, then rewrites the
    results file with the group's rows added; both atomically. If a kill lands between the two,
    the rerun measures the group again and overwrites the same samples part: no duplicates.
    """

    def __init__(self, path: Path, run_id: str):
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        self.run_id = run_id
        if self.path.exists():
            table = read_results(self.path)
            self.rows = table.to_pylist()
            stored = (table.schema.metadata or {}).get(RUN_KEY)
            if stored:
                self.run_id = stored.decode()

    @property
    def resumed(self) -> bool:
        return bool(self.rows)

    def done_groups(self, retry_reason_prefix: str | None = None) -> set[tuple]:
        """Groups already measured. Groups whose every row failed for ``retry_reason_prefix``
        (a harness-level error such as out-of-memory) are left out, so a rerun retries them."""
        done, retry = set(), {}
        for r in self.rows:
            key = group_key(r)
            done.add(key)
            failed = bool(retry_reason_prefix) and (r.get("status_reason") or "").startswith(retry_reason_prefix)
            retry[key] = retry.get(key, True) and failed
        return {k for k in done if not retry[k]}

    def add_group(self, rows: list[dict[str, Any]], samples: list[dict[str, Any]]) -> None:
        if not rows:
            return
        keys = {group_key(r) for r in rows}
        if len(keys) != 1:
            raise ValueError(f"add_group takes rows of one group, got {len(keys)}")
        (key,) = keys
        if samples:
            name = "__".join(str(x) for x in key).replace("/", "_") + ".parquet"
            atomic_write_table(rows_to_table(samples, SAMPLE_SCHEMA), samples_dir(self.path) / name)
        self.rows = [r for r in self.rows if group_key(r) != key] + list(rows)
        atomic_write_table(
            rows_to_table(self.rows, RESULT_SCHEMA).replace_schema_metadata(
                _with_meta(RESULT_SCHEMA, self.run_id).metadata
            ),
            self.path,
        )


def rankable(df: "pd.DataFrame", metric_column: str | None = None) -> "pd.Series":
    """Rows that may enter a ranking or a speedup: measured cleanly (``status == "ok"``), passed
    the correctness gate, and not faster than the physical floor (``below_floor``: suspect, never
    celebrated); with ``metric_column``, also holding a positive time in it. The one rule for the
    terminal summary and the report: a row some file marks ``ok`` without a passed gate is not
    ranked anywhere."""
    ok = df["status"].eq("ok").fillna(False).astype(bool)
    gate = df["gate_passed"].fillna(False).astype(bool)
    below = df["below_floor"].fillna(False).astype(bool)
    out = ok & gate & ~below
    if metric_column is not None:
        out &= df[metric_column].notna() & (df[metric_column] > 0)
    return out


def config_json(d: dict[str, Any] | None) -> str:
    return json.dumps(d or {}, sort_keys=True, default=str)
