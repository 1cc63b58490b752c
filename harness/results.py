"""Result schema and Parquet I/O: the contract between `compare`, `search` and `report`.

Two tables:

* ``results.parquet``: one row per (run, GPU, shape, layout, method, mode, cache) with the gate
  verdict, timing summaries, clocks and environment (``RESULT_SCHEMA``).
* ``<results>.samples/``: a Parquet dataset of raw per-round samples, one part file per
  (shape, mode, cache) group (``SAMPLE_SCHEMA``).

Each file's schema metadata holds the schema version, the run id and a one-line description of
every column (JSON under ``DESCRIPTIONS_KEY``). Files of an older schema version are read back in
the current one (``read_results``).

Writes are atomic (temp file + ``os.replace``), so a run killed at any instant leaves either the
previous complete file or the new complete file. ``ResultStore`` reloads what an earlier,
interrupted run finished and tells the runner which groups to skip: nothing is lost and nothing
is measured twice.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)  # older files are upgraded on read (``read_results``)
META_KEY = b"hgemm_bench.schema_version"
RUN_KEY = b"hgemm_bench.run_id"
DESCRIPTIONS_KEY = b"hgemm_bench.column_descriptions"  # JSON: column name -> one-line description
UPGRADED_KEY = b"hgemm_bench.upgraded_from"  # set by read_results on a table read from an older version

MEASURED_AT_TYPE = pa.timestamp("us", tz="UTC")

# (name, type, description). The description travels in every file's schema metadata.
RESULT_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("schema_version", pa.int32(), "results schema version the row was written under"),
    ("run_id", pa.string(), "one compare run (kept across resumes of one --out)"),
    ("run_label", pa.string(), "the run's name for people (compare --label); null: none given"),
    ("measured_at", MEASURED_AT_TYPE, "when the row's group finished measuring (UTC)"),
    # environment
    ("device", pa.string(), "cuda | cpu"),
    ("gpu_name", pa.string(), "GPU name (CUDA), or the CPU's"),
    ("gpu_uuid", pa.string(), "GPU UUID; 'cpu' on the CPU path"),
    ("driver", pa.string(), "NVIDIA driver version (NVML)"),
    ("cuda_version", pa.string(), "CUDA version torch was built with"),
    ("torch_version", pa.string(), "torch version"),
    ("cublas_version", pa.string(), "cuBLAS version (baselines' probe)"),
    ("cublaslt_version", pa.string(), "cuBLASLt version (baselines' probe)"),
    ("nvmath_version", pa.string(), "nvmath-python version (baselines' probe)"),
    ("hgemm_bench_version", pa.string(), "hgemm-bench package version"),
    ("git_commit", pa.string(), "commit of the hgemm-bench code that made the row: sha, sha-dirty, dirty or unknown"),
    ("nvcc_version", pa.string(), "nvcc version a kernel build would use (null: no nvcc)"),
    ("cutlass_version", pa.string(), "CUTLASS headers version a kernel build would use (null: none)"),
    ("triton_version", pa.string(), "installed Triton version (null: none)"),
    ("hostname", pa.string(), "host that measured"),
    ("power_limit_w", pa.float64(), "GPU enforced power limit, W (NVML; null on CPU)"),
    ("app_sm_clock_mhz", pa.float64(), "GPU application SM clock, MHz (NVML; null on CPU)"),
    ("app_mem_clock_mhz", pa.float64(), "GPU application memory clock, MHz (NVML; null on CPU)"),
    # problem
    ("shape", pa.string(), "M_N_K"),
    ("m", pa.int64(), "rows of A and C"),
    ("n", pa.int64(), "columns of B and C"),
    ("k", pa.int64(), "reduction length"),
    ("layout", pa.string(), "B layout: nn (B is K x N row-major) | tn (B stored N x K, as nn.Linear weights)"),
    ("dtype", pa.string(), "element type of A, B, C"),
    ("source_model", pa.string(), "model(s) whose GEMM this shape is (model:CONFIG shapes), ';'-joined, "
                                  "paired with source_layer; '@tp=N' when sharded; null for plain shapes"),
    ("source_layer", pa.string(), "layer(s) of source_model, ';'-joined in the same order: qkv_proj, o_proj, "
                                  "gate_up_proj | up_proj, down_proj, lm_head"),
    # method
    ("method", pa.string(), "method name"),
    ("family", pa.string(), "method family: baseline, peer (another tool's GEMM: inductor) or a kernel family"),
    ("is_baseline", pa.bool_(), "a baseline (cuBLAS family or torch)"),
    ("config", pa.string(), "JSON object: every knob of the method"),
    ("source_hash", pa.string(), "hash of the method's source, if it has one"),
    ("info", pa.string(), "JSON object: method-specific extras decided in prepare, anti-cheat figures"),
    ("setup_s", pa.float64(), "one-time setup seconds (handles, autotuning, compilation)"),
    ("compile_s", pa.float64(), "seconds of setup_s spent compiling for this shape (torch.compile's Inductor "
                                "with its autotuning); null: the method compiles nothing per shape"),
    # measurement settings
    ("mode", pa.string(), "offline (back to back) | server (Poisson arrivals)"),
    ("cache", pa.string(), "warm (same buffers) | cold (working set >= 2x L2, or L2 flushed)"),
    ("timing_method", pa.string(), "graph | spin-events | events | host-clock | cupti (server mode: the "
                                   "kernels' own GPU timestamps); info.timing_note says why, where not the usual one"),
    ("qps", pa.float64(), "server mode: mean arrival rate, calls/s"),
    ("input_sets", pa.int32(), "input buffers rotated through (cold: working set >= 2x L2)"),
    ("ci_target", pa.float64(), "offline: relative CI half-width the rounds stop at"),
    ("stop_reason", pa.string(), "ci | budget | max_rounds | calls"),
    # verdict
    ("status", pa.string(), "ok | unsupported | gate_failed | error"),
    ("status_reason", pa.string(), "why the status is not ok"),
    ("gate_passed", pa.bool_(), "passed the correctness gate"),
    ("gate_rel_fro_err", pa.float64(), "gate: worst relative Frobenius error over the draws"),
    ("gate_max_norm_err", pa.float64(), "gate: worst max normalized error over the draws"),
    ("gate_tol_rel_fro", pa.float64(), "gate: tolerance on the relative Frobenius error"),
    ("gate_tol_max_norm", pa.float64(), "gate: tolerance on the max normalized error"),
    # device time per call, microseconds
    ("device_us_median", pa.float64(), "GPU time per call, median over rounds, us"),
    ("device_us_mean", pa.float64(), "GPU time per call, mean, us"),
    ("device_us_p10", pa.float64(), "GPU time per call, 10th percentile, us"),
    ("device_us_p90", pa.float64(), "GPU time per call, 90th percentile, us"),
    ("device_us_p99", pa.float64(), "GPU time per call, 99th percentile, us"),
    ("device_us_ci_lo", pa.float64(), "95% CI of the median, low end, us"),
    ("device_us_ci_hi", pa.float64(), "95% CI of the median, high end, us"),
    # host latency of one synchronous call, microseconds
    ("host_us_median", pa.float64(),
     "wall time of one synchronous call (offline: one in each of the first 10 rounds), median, us"),
    ("host_us_mean", pa.float64(), "wall time of one synchronous call, mean, us"),
    ("host_us_p90", pa.float64(), "wall time of one synchronous call, 90th percentile, us"),
    ("host_us_p99", pa.float64(), "wall time of one synchronous call, 99th percentile, us"),
    ("idle_us_median", pa.float64(), "server mode, timed by CUPTI: how long the GPU sat idle before a call, "
                                     "median, us (null: not known)"),
    # volume
    ("calls_per_batch", pa.int32(), "calls per timed batch"),
    ("rounds", pa.int32(), "rounds measured"),
    ("calls_measured", pa.int64(), "calls measured in all"),
    # derived
    ("tflops", pa.float64(), "2*M*N*K / device_us_median, TFLOP/s"),
    ("floor_us", pa.float64(), "physical floor: time at the GPU's peak compute or bandwidth, us"),
    ("below_floor", pa.bool_(), "faster than physically possible: suspect, never ranked"),
    # clocks (NVML, sampled per round)
    ("sm_clock_mhz_mean", pa.float64(), "SM clock during the rounds, mean, MHz"),
    ("mem_clock_mhz_mean", pa.float64(), "memory clock during the rounds, mean, MHz"),
    ("power_w_mean", pa.float64(), "power draw during the rounds, mean, W"),
    ("temp_c_max", pa.float64(), "GPU temperature during the rounds, max, C"),
    ("throttled", pa.bool_(), "power or thermal throttling seen during the rounds"),
    ("throttle_reasons", pa.string(), "the throttle reasons seen, comma separated"),
]
# Columns a version added: an older file lacks them and reads back with nulls there.
ADDED_IN: dict[str, int] = {c: 2 for c in ("git_commit", "nvcc_version", "cutlass_version", "triton_version",
                                           "power_limit_w", "app_sm_clock_mhz", "app_mem_clock_mhz",
                                           "source_model", "source_layer")}
ADDED_IN.update({c: 3 for c in ("run_label", "compile_s")})
ADDED_IN["idle_us_median"] = 4
# Columns whose type a version changed, and that version: older files are converted on read.
RETYPED_IN: dict[str, int] = {"measured_at": 2}  # an ISO-8601 string before version 2


def _schema(fields: list[tuple[str, pa.DataType, str]]) -> pa.Schema:
    descriptions = json.dumps({name: desc for name, _, desc in fields})
    return pa.schema([(name, typ) for name, typ, _ in fields], metadata={DESCRIPTIONS_KEY: descriptions.encode()})


RESULT_SCHEMA = _schema(RESULT_FIELDS)
RESULT_COLUMNS = [f for f, _, _ in RESULT_FIELDS]
COLUMN_DESCRIPTIONS = {name: desc for name, _, desc in RESULT_FIELDS}

SAMPLE_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("run_id", pa.string(), "the run of the row this sample belongs to"),
    ("gpu_uuid", pa.string(), "GPU UUID; 'cpu' on the CPU path"),
    ("shape", pa.string(), "M_N_K"),
    ("layout", pa.string(), "nn | tn"),
    ("method", pa.string(), "method name"),
    ("mode", pa.string(), "offline | server"),
    ("cache", pa.string(), "warm | cold"),
    ("round", pa.int32(), "round (offline) or call (server) index"),
    ("metric", pa.string(), "device_us | host_us | idle_us (server mode, CUPTI: GPU idle before the call)"),
    ("value", pa.float64(), "the sample, us"),
    ("sm_clock_mhz", pa.float64(), "SM clock read in that round, MHz"),
]
SAMPLE_SCHEMA = _schema(SAMPLE_FIELDS)

# A finished row is identified by these; run_id is kept stable across resumes of one --out.
KEY_COLUMNS = ("gpu_uuid", "shape", "layout", "method", "mode", "cache")
# The unit the runner measures and writes at once: all methods/layouts of one shape.
GROUP_COLUMNS = ("gpu_uuid", "shape", "mode", "cache")


class ResultsError(ValueError):
    """A results file is missing, corrupt, or of a schema this version cannot read."""


def _with_meta(schema: pa.Schema, run_id: str) -> pa.Schema:
    return schema.with_metadata({**(schema.metadata or {}), META_KEY: str(SCHEMA_VERSION).encode(),
                                 RUN_KEY: run_id.encode()})


def to_timestamp(value: Any) -> datetime | None:
    """A UTC datetime from a datetime or an ISO-8601 string ("...Z", "+00:00", or naive: UTC)."""
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=timezone.utc)
    text = str(value).strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return to_timestamp(datetime.fromisoformat(text))


def rows_to_table(rows: Iterable[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a table in exactly ``schema``; missing keys become nulls, unknown keys are an error.
    Timestamp columns take datetimes or ISO-8601 strings (rows carry ``measured_at`` as a string
    in memory, so consumers of the rows need not handle datetimes)."""
    rows = list(rows)
    names = set(schema.names)
    for r in rows:
        extra = set(r) - names
        if extra:
            raise KeyError(f"row has columns not in the schema: {sorted(extra)}")

    def column(f: pa.Field) -> pa.Array:
        values = [r.get(f.name) for r in rows]
        if pa.types.is_timestamp(f.type):
            values = [to_timestamp(v) for v in values]
        return pa.array(values, type=f.type)

    return pa.table({f.name: column(f) for f in schema}, schema=schema)


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
    """Read a results file, checking it is ours and of a schema version we understand.

    A file of an older version (``READABLE_VERSIONS``) comes back in the current schema: columns
    added since are nulls, retyped columns converted (version 1's ``measured_at`` strings become
    timestamps); its metadata keeps the run id and names the version it was upgraded from."""
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
    if version not in READABLE_VERSIONS:
        raise ResultsError(
            f"{path} has results schema version {version}; this hgemm-bench reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )
    expected = [c for c in RESULT_COLUMNS if ADDED_IN.get(c, 1) <= version]
    missing = set(expected) - set(table.column_names)
    if missing:
        raise ResultsError(f"{path} lacks columns {sorted(missing)}")
    if version < SCHEMA_VERSION:
        try:
            table = _upgrade(table, version)
        except (ValueError, TypeError, pa.ArrowException) as e:
            raise ResultsError(f"{path}: cannot read its version-{version} columns ({e})") from e
    return table


def _upgrade(table: pa.Table, version: int) -> pa.Table:
    """A table of schema ``version`` in the current schema (see ``read_results``)."""
    cols = {}
    for field in RESULT_SCHEMA:
        if field.name not in table.column_names:
            cols[field.name] = pa.nulls(table.num_rows, type=field.type)
        elif RETYPED_IN.get(field.name, 0) > version and pa.types.is_timestamp(field.type):
            old = table.column(field.name).to_pylist()
            cols[field.name] = pa.array([to_timestamp(v) for v in old], type=field.type)
        else:
            cols[field.name] = table.column(field.name).cast(field.type)
    extra = [c for c in table.column_names if c not in cols]  # a newer writer's columns: kept
    for c in extra:
        cols[c] = table.column(c)
    meta = dict(RESULT_SCHEMA.metadata or {})
    meta.update({k: v for k, v in (table.schema.metadata or {}).items() if k != DESCRIPTIONS_KEY})
    meta.update({META_KEY: str(SCHEMA_VERSION).encode(), UPGRADED_KEY: str(version).encode()})
    return pa.table(cols).replace_schema_metadata(meta)


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

    The file's table is kept in memory and a group's rows are converted once and appended to it, so
    a write costs its group's conversion, not the run's: converting every stored row again per group
    grows with the square of the shapes (replaying the grid's 886-shape run on a 2-core host: 60.8 s
    against 10.8 s, ``lab/throughput/store_replay.py``).
    """

    def __init__(self, path: Path, run_id: str):
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        self.run_id = run_id
        self._table: pa.Table | None = None  # self.rows in RESULT_SCHEMA, built at the first write
        if self.path.exists():
            table = read_results(self.path)
            self.rows = table.to_pylist()
            stored = (table.schema.metadata or {}).get(RUN_KEY)
            if stored:
                self.run_id = stored.decode()
        self._groups = {group_key(r) for r in self.rows}

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

    def add_group(self, rows: list[dict[str, Any]], samples: list[dict[str, Any]], any_device: bool = False) -> None:
        """Write one group, replacing its earlier rows; ``any_device``: the group's rows from any
        GPU too (a scale-out run measures a shape on whichever GPU is free, so a group retried
        after a harness error may land on another GPU than its error rows)."""
        if not rows:
            return
        keys = {group_key(r) for r in rows}
        if len(keys) != 1:
            raise ValueError(f"add_group takes rows of one group, got {len(keys)}")
        (key,) = keys
        if samples:
            name = "__".join(str(x) for x in key).replace("/", "_") + ".parquet"
            atomic_write_table(rows_to_table(samples, SAMPLE_SCHEMA), samples_dir(self.path) / name)
        same = (lambda k: k[1:] == key[1:]) if any_device else (lambda k: k == key)
        new = rows_to_table(rows, RESULT_SCHEMA)
        again = key in self._groups or (any_device and any(same(k) for k in self._groups))
        if self._table is None or again:
            # the first write, or a group measured again: its earlier rows go, the table is rebuilt
            self.rows = [r for r in self.rows if not same(group_key(r))]
            self._groups = {group_key(r) for r in self.rows}
            self._table = rows_to_table(self.rows, RESULT_SCHEMA)
        self.rows.extend(rows)
        self._groups.add(key)
        # one chunk: a table of many small chunks writes about 4x slower
        self._table = pa.concat_tables([self._table, new]).combine_chunks()
        atomic_write_table(self._table.replace_schema_metadata(_with_meta(RESULT_SCHEMA, self.run_id).metadata),
                           self.path)


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
