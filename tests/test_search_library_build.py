"""kernels_search/search/library_build.py: the packaged library rebuilt from paired evidence.

Why these can fail: a kernel admitted against its own layout's baseline when the other layout's
was faster, one lucky pair making a winner, a kernel that failed the gate elsewhere or whose
source changed since it was measured served anyway, a candidate paired with a baseline of another
run, a rebuild that differs byte for byte, a committed library stale against its sources, or a
nearby tuned kernel served where the shape's own (fallback) entry exists.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import kernels_search.search.library as lib
from harness.problem import Problem, Shape
from kernels_search.search import library_build as lb
from kernels_search.search.db import KernelDB

import test_search_plugin  # noqa: F401  (registers the cpuk family in this process)

ROOT = Path(__file__).resolve().parents[1]
GPU = "NVIDIA H200"
K_FAST = "cpuk:pad=0,split=1,bug=0,small=0"
K_SMALL = "cpuk:pad=0,split=2,bug=0,small=0"
K_SLOW = "cpuk:pad=3,split=1,bug=0,small=0"
K_OTHER = "cpuk:pad=1,split=1,bug=0,small=0"
SHAPES = ["16_16_32", "32_32_64", "64_64_64", "128_64_64", "16_32_16", "32_16_16"]


def row(run, shape, method, layout, us, *, base=False, gpu=GPU, status="ok", source_hash=None, **kw):
    m, n, k = map(int, shape.split("_"))
    fam = "baseline" if base else method.split(":")[0]
    knobs = {} if base else {a: int(b) for a, b in (p.split("=") for p in method.split(":", 1)[1].split(","))}
    return dict(dict(run_id=run, shape=shape, m=m, n=n, k=k, layout=layout, method=method, family=fam,
                     is_baseline=base, status=status, gate_passed=status == "ok", device_us_median=us,
                     gpu_name=gpu, gpu_uuid="GPU-1", config=json.dumps(knobs), mode="offline", cache="warm",
                     source_hash="" if base else (source_hash or hashlib.sha256(method.encode()).hexdigest()),
                     measured_at=f"2026-01-0{1 + len(str(run)) % 9}T00:00:00+00:00"), **kw)


def bases(run, shape, nn, tn, method="cublaslt-autotune"):
    return [row(run, shape, method, "nn", nn, base=True), row(run, shape, method, "tn", tn, base=True)]


@pytest.fixture
def sources(tmp_path):
    rows = [
        # the other layout's baseline is the strongest: 8.0 / 7.9 is 1.3 %, not 2 % (27 % over its own layout's)
        *bases("r1", "16_16_32", 10.0, 8.0), row("r1", "16_16_32", K_FAST, "nn", 7.9),
        row("r1", "16_16_32", K_FAST, "tn", 9.0, gpu="NVIDIA H100 80GB HBM3"),  # another GPU model: ignored
        row("r1", "16_16_32", K_OTHER, "nn", 2.0, gpu="NVIDIA H100 80GB HBM3"),
        # two pairs of K_FAST: 1.25x and 1.01x (its lower median 1.01x); K_SMALL once at 1.10x
        *bases("r1", "32_32_64", 10.0, 10.0), row("r1", "32_32_64", K_FAST, "nn", 8.0),
        *bases("r2", "32_32_64", 10.0, 11.0), row("r2", "32_32_64", K_FAST, "nn", 9.9),
        row("r2", "32_32_64", K_SMALL, "nn", 10.0 / 1.1),
        # K_FAST fastest but wrong in another run; a spec whose source changed since; K_SLOW 1.05x wins
        *bases("r1", "64_64_64", 10.0, 10.0), row("r1", "64_64_64", K_FAST, "nn", 5.0),
        row("r1", "64_64_64", K_OTHER, "nn", 4.0, source_hash="0" * 64),
        row("r1", "64_64_64", K_SLOW, "nn", 10.0 / 1.05),
        *bases("r2", "64_64_64", 10.0, 10.0), row("r2", "64_64_64", K_FAST, "nn", None, status="gate_failed"),
        *bases("r1", "128_64_64", 10.0, 10.0),  # baselines only: no entry
        *bases("r1", "256_256_256", 10.0, 10.0), row("r1", "256_256_256", K_FAST, "nn", 1.0),  # not in the shapes
        row("r1", "32_32_64", K_OTHER, "nn", 1.0, mode="server"),  # not how the library is served
    ]
    compare = tmp_path / "compare.parquet"
    pd.DataFrame(rows).to_parquet(compare)
    db = KernelDB(tmp_path / "db")
    call = dict(search_id="s", round=0, origin="policy", failure="", elapsed_s=1.0)
    # a candidate of call c1 has no baseline in c1: unpaired (the baselines of c2 are another call)
    db.append([dict(row(None, "16_32_16", K_FAST, "nn", 1.0), call_id="c1", **call)])
    db.append([dict(r, call_id="c2", **call) for r in bases(None, "16_32_16", 10.0, 10.0)])
    db.append([dict(r, call_id="c3", **call) for r in
               [*bases(None, "32_16_16", 10.0, 10.0), row(None, "32_16_16", K_FAST, "tn", 5.0)]])
    return [compare, tmp_path / "db"]


def entries_of(sources):
    entries, stale = lb.library_entries([lb.read_source(p) for p in sources], GPU, SHAPES)
    return {(e["shape"], e["layout"]): e for e in entries}, stale


def test_a_kernel_enters_only_paired_against_the_strongest_baseline_of_both_layouts(sources):
    by, stale = entries_of(sources)
    assert set(by) == {("16_16_32", "nn"), ("32_32_64", "nn"), ("64_64_64", "nn"), ("16_32_16", "nn"),
                       ("32_16_16", "tn")}
    a = by[("16_16_32", "nn")]
    assert a["kind"] == "baseline" and a["spec"] == "cublaslt-autotune" and a["best_candidate"] == K_FAST
    assert a["best_candidate_speedup"] == pytest.approx(8.0 / 7.9)
    b = by[("32_32_64", "nn")]
    assert b["kind"] == "kernel" and b["spec"] == K_SMALL and b["paired_speedup"] == pytest.approx(1.1)
    assert b["paired_runs"] == 1 and b["run_id"] == "r2" and b["baseline_us"] == 10.0
    c = by[("64_64_64", "nn")]
    assert c["kind"] == "kernel" and c["spec"] == K_SLOW and c["paired_speedup"] == pytest.approx(1.05) and stale == 1
    assert by[("16_32_16", "nn")]["kind"] == "baseline" and by[("16_32_16", "nn")]["best_candidate"] is None
    f = by[("32_16_16", "tn")]
    assert f["kind"] == "kernel" and f["paired_speedup"] == 2.0 and f["search_id"] == "s" and f["knobs"]["pad"] == 0


def test_a_kernel_is_represented_by_its_lower_median_pair(sources, tmp_path):
    """Two pairs at 1.25x and 1.01x: K_FAST counts as 1.01x, so K_SMALL (1.10x once) wins; a third
    pair at 1.3x moves its lower median to 1.25x."""
    more = tmp_path / "more.parquet"
    pd.DataFrame([*bases("r3", "32_32_64", 10.0, 10.0),
                  row("r3", "32_32_64", K_FAST, "nn", 10.0 / 1.3)]).to_parquet(more)
    by, _ = entries_of([*sources, more])
    e = by[("32_32_64", "nn")]
    assert e["spec"] == K_FAST and e["paired_runs"] == 3 and e["paired_speedup"] == pytest.approx(1.25)


def test_the_build_is_byte_identical_and_records_its_rebuild_line(sources, tmp_path, capsys):
    lst = tmp_path / "sources.txt"
    lst.write_text("# the two\ncompare.parquet\ndb\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)  # a list's paths are relative to the current directory
    try:
        args = ["--gpu", GPU, "--out", "a.json", "--shapes", ",".join(SHAPES), "sources.txt"]
        assert lb.main(args) == 0
        assert "3 kernel entries on 3 shapes" in capsys.readouterr().out
        os.utime("compare.parquet")
        assert lb.main([*args[:3], "b.json", *args[4:]]) == 0
        a, b = Path("a.json").read_text(), Path("b.json").read_text()
        assert a.replace("a.json", "b.json") == b
        doc = json.loads(a)
        assert doc["gpu_name"] == GPU and doc["sources"] == ["compare.parquet", "db"]
        assert doc["build"].startswith('python -m kernels_search.search.library_build --gpu "NVIDIA H200" --out a.json')
        assert doc["created"] == max(e["measured_at"] for e in doc["entries"] if e["kind"] == "kernel")
        assert lib.load_library("a.json")[0]["shape"] == "16_16_32"
        assert lb.main(["--gpu", GPU, "--out", "c.json", "missing.parquet"]) == 2
        assert "missing.parquet: no such file" in capsys.readouterr().err
    finally:
        os.chdir(cwd)


def test_the_packaged_library_is_its_sources_rebuilt_and_covers_the_grid():
    """The committed library.json is what its recorded sources build, byte for byte: a source list
    or rule edited without a rebuild fails here."""
    path = ROOT / "kernels_search" / "library" / "library.json"
    doc = json.loads(path.read_text())
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert doc["build"].endswith(" lab/library/h200-sources.txt")
        srcs = lb.source_paths(["lab/library/h200-sources.txt"])
        assert [str(p) for p in srcs] == doc["sources"]
        out = Path(os.environ.get("TMPDIR", "/tmp")) / f"library-rebuild-{os.getpid()}.json"
        lb.build(srcs, out, doc["gpu_name"], doc["shapes"], doc["min_speedup"], doc["build"])
        rebuilt = out.read_text()
        out.unlink()
    finally:
        os.chdir(cwd)
    assert rebuilt == path.read_text()
    kern = [e for e in doc["entries"] if e["kind"] == "kernel"]
    assert doc["gpu_name"] == "NVIDIA H200" and len({e["shape"] for e in kern}) > 300
    assert all(e["paired_speedup"] >= doc["min_speedup"] for e in kern)


def test_an_exact_entry_wins_over_a_nearer_kernel_also_when_it_is_a_fallback(tmp_path):
    """The packaged library: a grid shape whose own entry is a fallback, with kernels within the
    nearest-shape distance, is served by its own entry first; on the CPU, through the dispatcher,
    an exact fallback entry serves although a kernel tuned one step away supports the shape."""
    entries = lib.load_library(ROOT / "kernels_search" / "library" / "library.json")
    checked = 0
    for e in (e for e in entries if e["kind"] == "baseline"):
        order = lib.plan(entries, Problem(Shape(e["m"], e["n"], e["k"]), e["layout"]), GPU, 4, lib.MAX_DISTANCE)
        if any(x["kind"] == "kernel" for _, x in order[1:]):
            assert order[0] == ("exact", e) and [m for m, _ in order].count("exact") == 1
            checked += 1
    assert checked > 10
    gpu = lib.current_gpu_name("cpu")
    path = tmp_path / "lib.json"
    rows = [dict(gpu_name=gpu, shape=s, m=m, n=n, k=k, layout="nn", kind=kind, spec=spec, family="x", knobs={})
            for s, (m, n, k), kind, spec in (("16_16_32", (16, 16, 32), "baseline", "torch"),
                                             ("16_16_64", (16, 16, 64), "kernel", K_FAST))]
    path.write_text(json.dumps({"version": lib.LIBRARY_VERSION, "entries": rows}))
    lib.clear_cache()
    info = lib.served_by(16, 16, 32, "nn", library=path)
    assert info["library_match"] == "exact" and info["fallback"] == "torch"
    near = lib.served_by(16, 16, 48, "nn", library=path)  # no entry of its own: the nearest rule, as before
    assert near["library_match"] == "nearest" and near["library_spec"] == K_FAST
    lib.clear_cache()


def test_a_run_with_timestamped_rows_joins_the_sources_and_is_recorded_as_iso_text(tmp_path):
    """compare writes measured_at as a UTC timestamp: a winning kernel from such a run makes an entry whose
    measured_at (and the file's "created") is the same ISO text a text-stamped run gives."""
    rows = [*bases("r9", "32_32_64", 10.0, 10.0), row("r9", "32_32_64", K_FAST, "tn", 5.0)]
    df = pd.DataFrame(rows)
    df["measured_at"] = pd.to_datetime(["2026-12-05T15:30:00.123456+00:00"] * len(df), utc=True)
    src = tmp_path / "stamped.parquet"
    df.to_parquet(src)
    assert lb.main(["--gpu", GPU, "--out", str(tmp_path / "lib.json"), "--shapes", "32_32_64", str(src)]) == 0
    doc = json.loads((tmp_path / "lib.json").read_text())
    (e,) = [e for e in doc["entries"] if e["kind"] == "kernel"]
    assert e["spec"] == K_FAST and e["measured_at"] == "2026-12-05T15:30:00+00:00" == doc["created"]



def test_peers_and_external_kernels_are_no_candidates(tmp_path):
    """A shape measured only with a peer (``inductor``, family peer) or an external kernel (family ext) beside the
    baselines got no candidate of ours: no entry, not even a fallback, however fast they ran."""
    rows = [*bases("r1", "16_16_32", 10.0, 10.0),
            dict(row("r1", "16_16_32", K_FAST, "nn", 1.0), method="inductor", family="peer", config="{}"),
            *bases("r1", "32_32_64", 10.0, 10.0),
            dict(row("r1", "32_32_64", K_FAST, "tn", 1.0), method="ext:32_32_64", family="ext", config="{}"),
            *bases("r1", "64_64_64", 10.0, 10.0), row("r1", "64_64_64", K_FAST, "nn", 5.0)]
    p = tmp_path / "peers.parquet"
    pd.DataFrame(rows).to_parquet(p)
    by, _ = entries_of([p])
    assert set(by) == {("64_64_64", "nn")} and by[("64_64_64", "nn")]["spec"] == K_FAST
