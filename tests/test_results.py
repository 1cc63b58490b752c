"""Result schema round-trip, atomic writes, corrupt files, and resume bookkeeping."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.results import (RESULT_SCHEMA, SCHEMA_VERSION, ResultsError, ResultStore, read_results, read_samples,
                             rows_to_table, samples_dir)


def row(shape, method, layout="nn", mode="offline", cache="warm", **kw):
    r = dict(schema_version=SCHEMA_VERSION, run_id="x", gpu_uuid="GPU-1", shape=shape, m=1, n=2, k=3, layout=layout,
             method=method, mode=mode, cache=cache, status="ok", device_us_median=1.5, is_baseline=True,
             gate_passed=True, rounds=7, calls_measured=70)
    r.update(kw)
    return r


def sample(shape, method, i, v):
    return dict(run_id="x", gpu_uuid="GPU-1", shape=shape, layout="nn", method=method, mode="offline",
                cache="warm", round=i, metric="device_us", value=v, sm_clock_mhz=1980.0)


def test_round_trip_keeps_types_and_values(tmp_path):
    p = tmp_path / "r.parquet"
    st = ResultStore(p, "run1")
    st.add_group([row("1_2_3", "torch"), row("1_2_3", "cublas", layout="tn", below_floor=False)],
                 [sample("1_2_3", "torch", i, 1.0 + i) for i in range(3)])
    t = read_results(p)
    assert t.schema.equals(RESULT_SCHEMA, check_metadata=False)
    back = t.to_pylist()
    assert [r["method"] for r in back] == ["torch", "cublas"]
    assert back[1]["layout"] == "tn" and back[0]["device_us_median"] == 1.5 and back[0]["rounds"] == 7
    assert back[0]["below_floor"] is None and back[1]["below_floor"] is False
    s = read_samples(p)
    assert s.num_rows == 3 and s.column("value").to_pylist() == [1.0, 2.0, 3.0]
    assert samples_dir(p) == tmp_path / "r.samples"


def test_unknown_column_is_rejected():
    with pytest.raises(KeyError, match="not in the schema"):
        rows_to_table([dict(row("1_2_3", "t"), bogus=1)], RESULT_SCHEMA)


def test_resume_keeps_run_id_and_skips_done_groups(tmp_path):
    p = tmp_path / "r.parquet"
    st = ResultStore(p, "first")
    st.add_group([row("1_2_3", "torch", run_id="first")], [])
    st2 = ResultStore(p, "second")
    assert st2.resumed and st2.run_id == "first"
    assert ("GPU-1", "1_2_3", "offline", "warm") in st2.done_groups()
    # a group whose rows all failed for a harness error is retried
    st2.add_group([row("4_5_6", "torch", status="error", status_reason="harness error on this shape: OOM")], [])
    assert ("GPU-1", "4_5_6", "offline", "warm") not in st2.done_groups(retry_reason_prefix="harness error")
    # rewriting a group replaces it: no duplicates
    st2.add_group([row("4_5_6", "torch")], [])
    assert sum(r["shape"] == "4_5_6" for r in ResultStore(p, "z").rows) == 1


def test_a_group_retried_on_another_gpu_replaces_its_error_rows_only_when_asked(tmp_path):
    """A scale-out run measures a shape on whichever GPU is free: a retry there replaces the
    shape's error rows from the first GPU (``any_device``); the single-process path keeps a
    group per GPU."""
    p = tmp_path / "r.parquet"
    st = ResultStore(p, "r")
    st.add_group([row("1_2_3", "torch", gpu_uuid="GPU-1", status="error", status_reason="harness error")], [])
    st.add_group([row("7_7_7", "torch", gpu_uuid="GPU-1")], [])
    st.add_group([row("1_2_3", "torch", gpu_uuid="GPU-2")], [])
    assert sorted(r["gpu_uuid"] for r in st.rows if r["shape"] == "1_2_3") == ["GPU-1", "GPU-2"]
    st.add_group([row("1_2_3", "torch", gpu_uuid="GPU-3")], [], any_device=True)
    back = ResultStore(p, "z").rows
    assert [(r["shape"], r["gpu_uuid"]) for r in back] == [("7_7_7", "GPU-1"), ("1_2_3", "GPU-3")]


def test_each_group_is_converted_once_and_the_file_holds_every_group(tmp_path, monkeypatch):
    """A long run writes after every shape: each write converts only that shape's rows (a store
    that converted every stored row again per shape took about a minute of the grid's host time),
    and the file still holds every group in order, a group measured again replacing its rows."""
    import harness.results as results

    converted = []
    real = results.rows_to_table

    def counting(rows, schema):
        rows = list(rows)
        if schema is RESULT_SCHEMA:
            converted.append(len(rows))
        return real(rows, schema)

    monkeypatch.setattr(results, "rows_to_table", counting)
    p = tmp_path / "r.parquet"
    st = ResultStore(p, "r")
    for i in range(60):
        st.add_group([row(f"{i}_1_1", "torch"), row(f"{i}_1_1", "cublas", layout="tn")], [])
    assert sum(converted) <= 2 * 60 + 2  # linear in the rows, not 2 + 4 + ... + 120
    assert [r["shape"] for r in read_results(p).to_pylist()] == [f"{i}_1_1" for i in range(60) for _ in (0, 1)]
    st.add_group([row("5_1_1", "torch", device_us_median=9.0)], [])
    back = ResultStore(p, "z").rows
    assert [r["device_us_median"] for r in back if r["shape"] == "5_1_1"] == [9.0] and len(back) == 119


def test_add_group_refuses_mixed_groups(tmp_path):
    with pytest.raises(ValueError, match="one group"):
        ResultStore(tmp_path / "r.parquet", "r").add_group([row("1_2_3", "a"), row("2_2_2", "a")], [])


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(ResultsError, match="not found"):
        read_results(tmp_path / "missing.parquet")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(ResultsError, match="not a readable Parquet"):
        read_results(junk)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), other)
    with pytest.raises(ResultsError, match="not an hgemm-bench results file"):
        read_results(other)
    future = tmp_path / "future.parquet"
    t = rows_to_table([row("1_2_3", "t")], RESULT_SCHEMA).replace_schema_metadata(
        {b"hgemm_bench.schema_version": b"99"})
    pq.write_table(t, future)
    with pytest.raises(ResultsError, match="schema version 99"):
        read_results(future)


def _rewrite_forever(path, stop):
    """A writer like compare's: the results file replaced atomically, again and again, growing."""
    st = ResultStore(path, "w")
    i = 0
    while not stop.is_set():
        i += 1
        st.add_group([row(f"{i}_2_3", "torch", run_id="w")], [])


def test_reader_racing_atomic_writer_always_sees_a_whole_file(tmp_path):
    """A report or a watcher reads results while compare rewrites them; it must never see a
    mixture of two files (pq.read_table(path) did, about 300 times a second, before the fix)."""
    import multiprocessing as mp
    import time

    p = tmp_path / "r.parquet"
    ResultStore(p, "w").add_group([row("0_2_3", "torch", run_id="w")], [])
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    writer = ctx.Process(target=_rewrite_forever, args=(p, stop))
    writer.start()
    try:
        give_up = time.time() + 120
        while len(read_results(p)) == 1 and time.time() < give_up:  # the writer is still importing
            time.sleep(0.01)
        reads, sizes = 0, set()
        deadline = time.time() + 2
        while time.time() < deadline:
            sizes.add(len(read_results(p)))  # raises ResultsError on a torn read
            reads += 1
    finally:
        stop.set()
        writer.join(timeout=30)
        if writer.is_alive():
            writer.kill()
    assert reads > 50 and len(sizes) > 5, "the reader should have raced many rewrites"


def _v1_table(rows):
    """A results table as version 1 wrote it: no provenance columns, measured_at an ISO string."""
    from harness.results import ADDED_IN, RESULT_FIELDS

    fields = [(n, pa.string() if n == "measured_at" else t) for n, t, _ in RESULT_FIELDS if n not in ADDED_IN]
    schema = pa.schema(fields)
    cols = {n: pa.array([r.get(n) for r in rows], type=t) for n, t in fields}
    return pa.table(cols, schema=schema).replace_schema_metadata(
        {b"hgemm_bench.schema_version": b"1", b"hgemm_bench.run_id": b"old"})


def test_version_1_files_read_in_the_current_schema(tmp_path):
    from harness.results import UPGRADED_KEY

    p = tmp_path / "v1.parquet"
    pq.write_table(_v1_table([row("1_2_3", "torch", schema_version=1, measured_at="2026-11-30T10:00:05+00:00"),
                              row("1_2_3", "cublas", schema_version=1, measured_at=None)]), p)
    t = read_results(p)
    assert t.schema.equals(RESULT_SCHEMA, check_metadata=False)
    assert pa.types.is_timestamp(t.schema.field("measured_at").type)
    df = t.to_pandas()
    assert str(df["measured_at"][0]) == "2026-11-30 10:00:05+00:00" and df["measured_at"].isna()[1]
    assert df["git_commit"].isna().all() and df["schema_version"].tolist() == [1, 1]
    assert t.schema.metadata[UPGRADED_KEY] == b"1"
    # a resumed version-1 run keeps its rows and run id, and is written back in the current version
    st = ResultStore(p, "new")
    assert st.run_id == "old" and len(st.rows) == 2
    st.add_group([row("4_5_6", "torch", run_id="old", measured_at="2026-12-01T00:00:00Z", git_commit="abc")], [])
    again = read_results(p)
    assert int(again.schema.metadata[b"hgemm_bench.schema_version"]) == SCHEMA_VERSION
    assert UPGRADED_KEY not in again.schema.metadata
    assert again.column("git_commit").to_pylist() == [None, None, "abc"]
    # a version-1 file missing one of its own columns is still an error
    broken = tmp_path / "broken.parquet"
    pq.write_table(_v1_table([row("1_2_3", "torch")]).drop(["device_us_median"]), broken)
    with pytest.raises(ResultsError, match="lacks columns"):
        read_results(broken)


def test_measured_at_is_a_utc_timestamp_and_every_column_is_described(tmp_path):
    import json

    from harness.results import DESCRIPTIONS_KEY, RESULT_COLUMNS, SAMPLE_SCHEMA

    p = tmp_path / "r.parquet"
    ResultStore(p, "r").add_group([row("1_2_3", "torch", measured_at="2026-11-30T10:00:05Z"),
                                   row("1_2_3", "cublas", measured_at="2026-11-30T11:00:05")],  # naive: UTC
                                  [sample("1_2_3", "torch", 0, 1.0)])
    schema = pq.read_schema(p)
    assert schema.field("measured_at").type == pa.timestamp("us", tz="UTC")
    when = read_results(p).column("measured_at").to_pylist()
    assert [w.isoformat() for w in when] == ["2026-11-30T10:00:05+00:00", "2026-11-30T11:00:05+00:00"]
    desc = json.loads(schema.metadata[DESCRIPTIONS_KEY])
    assert list(desc) == RESULT_COLUMNS and all(isinstance(v, str) and v.strip() for v in desc.values())
    samples_schema = pq.read_schema(next(samples_dir(p).glob("*.parquet")))
    assert set(json.loads(samples_schema.metadata[DESCRIPTIONS_KEY])) == set(SAMPLE_SCHEMA.names)


def test_version_3_files_read_with_the_idle_column_null(tmp_path):
    from harness.results import ADDED_IN, RESULT_FIELDS, UPGRADED_KEY

    fields = [(n, t) for n, t, _ in RESULT_FIELDS if ADDED_IN.get(n, 1) <= 3]
    assert "idle_us_median" not in dict(fields) and "compile_s" in dict(fields)
    r = row("1_2_3", "torch", schema_version=3)
    table = pa.table({n: pa.array([r.get(n)], type=t) for n, t in fields}).replace_schema_metadata(
        {b"hgemm_bench.schema_version": b"3", b"hgemm_bench.run_id": b"old"})
    p = tmp_path / "v3.parquet"
    pq.write_table(table, p)
    t = read_results(p)
    assert t.schema.equals(RESULT_SCHEMA, check_metadata=False) and t.schema.metadata[UPGRADED_KEY] == b"3"
    assert t.column("idle_us_median").to_pylist() == [None]
