"""CPU tests of the lab's study scripts: lab/study_table.py (what a plan measured), lab/class_plan.py
and lab/mirror_plan.py (plans of a shape class)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from lab import study_table


def test_study_table_takes_best_layouts_the_plans_first_config_and_sets_new_specs_apart():
    """Ratios are the baseline's best layout over each config's best layout in the same rows; the
    rank-1 column is the plan's first config, not the fastest; a gate failure is no row (left out of
    the best, and a rank-1 without a row is NaN, not a ratio); new configs compete only with new."""
    rows = [
        ("64_64_64", "cublaslt-autotune", "nn", "ok", 4.0), ("64_64_64", "cublaslt-autotune", "tn", "ok", 2.0),
        ("64_64_64", "k:a", "nn", "ok", 4.0), ("64_64_64", "k:a", "tn", "ok", 2.5),
        ("64_64_64", "k:new", "nn", "ok", 1.6), ("64_64_64", "k:b", "tn", "gate_failed", 0.5),
        ("128_64_64", "cublaslt-autotune", "nn", "ok", 3.0),
        ("128_64_64", "k:a", "nn", "gate_failed", 1.0), ("128_64_64", "k:new", "nn", "ok", 6.0),
        ("128_64_64", "k:b", "nn", "ok", 3.0),
        ("256_64_64", "k:a", "nn", "ok", 1.0),  # no baseline row: not a measured shape
    ]
    df = pd.DataFrame(rows, columns=["shape", "method", "layout", "status", "device_us_median"])
    r = study_table.ratios(df)
    assert r == {"64_64_64": {"k:a": 0.8, "k:new": 1.25}, "128_64_64": {"k:new": 0.5, "k:b": 1.0}}
    planned = {"64_64_64": ["k:a", "k:new", "k:b"], "128_64_64": ["k:a", "k:new", "k:b"], "256_64_64": ["k:a"]}
    lines = study_table.summarize(df, planned, {"k:new"}, per_shape=True)
    assert lines[0] == "2 of 3 planned shapes measured with cublaslt-autotune"
    assert lines[1].startswith("- rank-1 (first planned config): 0.800x") and lines[1].endswith("over 1")
    assert lines[2].startswith(f"- best planned config: {math.sqrt(1.25 * 1.0):.3f}x")
    assert lines[5].startswith(f"- best new over best other, per shape: {math.sqrt(1.25 / 0.8 * 0.5):.3f}x")
    assert lines[5].endswith("new faster on 1 of 2")
    assert "| 128_64_64 | nan | 1.000 | 0.500 | 1.000 | k:new |" in lines


def _compare_rows(rows, path):
    """A compare Parquet with the columns the prior reader needs, from (shape, method, layout, us)."""
    from kernels_search.search.prior import NEEDED

    df = pd.DataFrame(rows, columns=["shape", "method", "layout", "device_us_median"])
    df["status"] = "ok"
    for col in NEEDED:
        if col not in df.columns:
            df[col] = {"m": 64, "n": 64, "k": 64}.get(col, "")
    df.to_parquet(path)
    return path


def test_class_plan_selects_the_class_less_exclusions_and_anchors_each_shape_on_its_best_ratio(tmp_path, capsys):
    """The where-expression picks the class, excluded shape files and a search's shapes drop out, the
    anchor is the config with the best ratio to autotune in any one file (not the fastest time across
    files), a spec is not repeated as its own anchor, and a shape with no prior row has none."""
    from lab import class_plan

    spec = "splitk:bm=32,bn=64,bk=64,warps_m=2,warps_n=2,kslices=1,stages=4,splits=2,reduce=2,spread=0"
    grid = tmp_path / "grid.txt"
    grid.write_text("# grid\n64_128_64\n2048_128_64\n4096_256_64\n4096_512_64\n8192_128_64\n16384_128_64\n12288_128_64\n")
    (tmp_path / "ex.txt").write_text("8192_128_64\n")
    search = tmp_path / "search"
    search.mkdir()
    (search / "shapes.txt").write_text("16384_128_64\n")
    (search / "holdout.txt").write_text("")
    # file a: 2048_128_64's best ratio is k:a (2/1); 4096_256_64's is the spec itself.
    a = _compare_rows([("2048_128_64", "cublaslt-autotune", "nn", 2.0), ("2048_128_64", "k:a", "tn", 1.0),
                       ("2048_128_64", "k:b", "nn", 1.5),
                       ("4096_256_64", "cublaslt-autotune", "nn", 1.0), ("4096_256_64", spec, "nn", 0.9)],
                      tmp_path / "a.parquet")
    # file b: k:b is faster in time on 2048_128_64 (0.8 us) but against a faster autotune (1.0): ratio 1.25 < 2.
    b = _compare_rows([("2048_128_64", "cublaslt-autotune", "nn", 1.0), ("2048_128_64", "k:b", "tn", 0.8)],
                      tmp_path / "b.parquet")
    specs = tmp_path / "specs.txt"
    specs.write_text("# under study, canonicalised by the registry\nsplitk:bm=32,bn=64,bk=64,warps_m=2,warps_n=2,splits=2\n")
    out = tmp_path / "plan.txt"
    rc = class_plan.main(["--where", "n in (128, 256) and m >= 2048", "--specs", str(specs), "--prior", str(a), str(b),
                          "--shapes", str(grid), "--exclude", str(tmp_path / "ex.txt"), "--exclude-search", str(search),
                          "--note", "a test study", "--out", str(out)])
    assert rc == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "# a test study" and "python -m lab.class_plan --where" in lines[1]
    assert "3 shapes (3 with a config to measure), 1 configs each, then the anchor (2 shapes have an anchor)" in lines[1]
    assert lines[2:] == [f"2048_128_64 {spec},k:a", f"4096_256_64 {spec}", f"12288_128_64 {spec}"]


def test_class_plan_anchor_variant_pairs_each_anchor_with_its_variant(tmp_path, capsys):
    """--anchor-variant without --specs: each shape's anchor, then the anchor with the knob set
    (canonical), only where the anchor's family has the knob; a shape whose anchor lacks it is not
    planned (the anchor alone answers nothing). A value outside the knob's space is an error, as is
    a plan with neither specs nor a variant. study_table's --new-knob then sets the variants apart."""
    from lab import class_plan
    from harness.registry import resolve

    hop = "hopper:tile_m=64,tile_n=128,schedule=single,stages=8"
    swap = "hopper_swap:tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=single,stages=6"
    tri = "triton:block_m=64,block_n=64,block_k=64"
    grid = tmp_path / "grid.txt"
    grid.write_text("2048_128_64\n4096_128_64\n8192_128_64\n16384_128_64\n")
    prior = _compare_rows([(s, b, "nn", 2.0) for s in ("2048_128_64", "4096_128_64", "8192_128_64")
                           for b in ("cublaslt-autotune",)]
                          + [("2048_128_64", hop, "nn", 1.0), ("4096_128_64", swap, "tn", 1.0),
                             ("8192_128_64", tri, "nn", 1.0)], tmp_path / "p.parquet")
    out = tmp_path / "plan.txt"
    common = ["--where", "m >= 2048", "--prior", str(prior), "--shapes", str(grid), "--out", str(out)]
    assert class_plan.main([*common, "--anchor-variant", "l2_promo=256"]) == 0
    lines = out.read_text().splitlines()
    assert "4 shapes (2 with a config to measure), 0 configs each, then the anchor and the anchor with l2_promo=256" in lines[1]
    (h256,) = resolve([hop + ",l2_promo=256"])
    (s256,) = resolve([swap + ",l2_promo=256"])
    assert lines[2:] == [f"2048_128_64 {hop},{h256.name}", f"4096_128_64 {swap},{s256.name}"]
    planned = {"2048_128_64": [resolve([hop])[0].name, h256.name], "4096_128_64": [resolve([swap])[0].name, s256.name]}
    assert study_table.with_knob(planned, "l2_promo=256") == {h256.name, s256.name}
    assert study_table.with_knob(planned, "l2_promo=0") == {resolve([hop])[0].name, resolve([swap])[0].name}
    assert class_plan.main([*common, "--anchor-variant", "l2_promo=64"]) == 2
    assert "l2_promo" in capsys.readouterr().err
    # a valid value the anchor's other knobs rule out skips that anchor (epi_n 128 does not divide 192)
    wide = "hopper:tile_m=128,tile_n=192,cluster_m=2,schedule=pingpong"
    assert class_plan.variant(wide, {"epi_n": "128"}) is None
    assert class_plan.variant(wide, {"epi_n": "64"}) == resolve([wide + ",epi_n=64"])[0].name
    with pytest.raises(class_plan.ClassPlanError, match="epi_n"):
        class_plan.variant(wide, {"epi_n": "32"})
    assert class_plan.main(common) == 2
    assert "nothing to measure" in capsys.readouterr().err


def test_class_plan_names_a_bad_where_and_an_unknown_spec(tmp_path, capsys):
    """A --where that is not Python, one that fails on a shape, and a spec the registry does not know are
    errors (exit 2) that name the problem; no plan is written."""
    from lab import class_plan

    grid = tmp_path / "grid.txt"
    grid.write_text("2048_128_64\n")
    specs = tmp_path / "specs.txt"
    specs.write_text("splitk:bm=32,bn=64,bk=64,warps_m=2,warps_n=2,splits=2\n")
    out = tmp_path / "plan.txt"
    common = ["--prior", str(tmp_path / "none.parquet"), "--shapes", str(grid), "--out", str(out)]
    assert class_plan.main(["--where", "n in (128,", "--specs", str(specs), *common]) == 2
    assert "not a Python expression" in capsys.readouterr().err
    assert class_plan.main(["--where", "q > 1", "--specs", str(specs), *common]) == 2
    assert "on 2048_128_64: NameError" in capsys.readouterr().err
    specs.write_text("nosuchfamily:x=1\n")
    assert class_plan.main(["--where", "m > 1", "--specs", str(specs), *common]) == 2
    assert "nosuchfamily" in capsys.readouterr().err and not out.exists()


def test_mirror_configs_keep_cublas_tile_in_the_orientation_that_holds_it():
    """Autotune's a x b tile runs a along our N and b along our M: a b that hopper's tile_m holds
    gives hopper (cluster axes swapped to ours), any other b the transposed hopper_swap with the tile
    as cuBLAS has it; each comes as the persistent schedule, single, and single without the cluster;
    spellings a family declines are skipped (a 256-row tile has no pingpong and no single)."""
    from lab import mirror_plan
    from harness.registry import resolve

    def canon(*specs):
        return [m.name for m in resolve(list(specs))]

    assert mirror_plan.mirror_configs("64x192", "2x1x1") == canon(
        "hopper_swap:tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=pingpong",
        "hopper_swap:tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=single,stages=6",
        "hopper_swap:tile_m=64,tile_n=192,cluster_m=1,cluster_n=1,schedule=single,stages=6")
    assert mirror_plan.mirror_configs("32x128", "2x1x1") == canon(
        "hopper:tile_m=128,tile_n=32,cluster_m=1,cluster_n=2,schedule=pingpong",
        "hopper:tile_m=128,tile_n=32,cluster_m=1,cluster_n=2,schedule=single,stages=6",
        "hopper:tile_m=128,tile_n=32,cluster_m=1,cluster_n=1,schedule=single,stages=6")
    assert mirror_plan.mirror_configs("32x256", "2x1x1") == canon(
        "hopper:tile_m=256,tile_n=32,cluster_m=1,cluster_n=2,schedule=cooperative")
    assert mirror_plan.mirror_configs("64x64", "1x1x1") == canon(
        "hopper:tile_m=64,tile_n=64,cluster_m=1,cluster_n=1,schedule=pingpong",
        "hopper:tile_m=64,tile_n=64,cluster_m=1,cluster_n=1,schedule=single,stages=6")
    assert mirror_plan.mirror_configs("UNDEFINED", "1x1x1") == []


def test_mirror_plan_reads_autotunes_choice_and_plans_only_unmeasured_mirrors(tmp_path, capsys):
    """Autotune's choice is its fastest row's algorithm across files; a shape whose anchor is at or
    above --below is not planned, nor one whose mirrors were all measured; a measured mirror is
    dropped (by today's canonical name, so a row without a newer knob still counts), the anchor ends
    the row, and the header has the command."""
    from lab import mirror_plan
    from harness.registry import resolve

    def info(tile, cluster):
        return json.dumps({"algo_tile_id": tile, "algo_cluster_shape_id": cluster})

    single = "hopper_swap:tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=single,stages=6"
    old_name = single  # a row recorded before l2_promo existed
    rows = [  # (shape, method, us, info): 116 = 64x192, 3 = 2x1x1; 15 = 64x64, 2 = 1x1x1
        ("12288_128_2048", "cublaslt-autotune", 16.0, info(116, 3)),
        ("12288_128_2048", "cublaslt-autotune", 17.0, info(15, 2)),  # slower: not the choice
        ("12288_128_2048", "hopper:tile_m=128,tile_n=128,cluster_m=2,schedule=pingpong,stages=6", 17.2, ""),
        ("12288_128_2048", old_name, 30.0, ""),
        ("8192_128_2048", "cublaslt-autotune", 8.0, info(15, 2)),
        ("8192_128_2048", "hopper:tile_m=64,tile_n=128,cluster_m=1,schedule=single,stages=8", 8.0, ""),  # 1.0x
        ("16384_128_2048", "cublaslt-autotune", 20.0, info(15, 2)),
    ]
    df = pd.DataFrame(rows, columns=["shape", "method", "device_us_median", "info"])
    df["layout"], df["status"], df["run_id"] = "nn", "ok", "r1"
    df["is_baseline"] = df["method"].str.startswith("cublaslt")
    df["status_reason"] = ""
    df.to_parquet(tmp_path / "p.parquet")
    grid = tmp_path / "grid.txt"
    grid.write_text("8192_128_2048\n12288_128_2048\n16384_128_2048\n")
    out = tmp_path / "plan.txt"
    rc = mirror_plan.main(["--where", "m >= 2048 and n <= 256", "--below", "0.97", "--prior", str(tmp_path / "p.parquet"),
                           "--shapes", str(grid), "--out", str(out), "--specs-out", str(tmp_path / "new.txt")])
    assert rc == 0
    lines = out.read_text().splitlines()
    assert "python -m lab.mirror_plan --where" in lines[1] and "2 shapes, 4 distinct new configs" in lines[1]
    new = study_table.read_specs(tmp_path / "new.txt")
    assert len(new) == 4 and all(n in out.read_text() for n in new)
    pp, sg, s1 = (m.name for m in resolve([single.replace("single,stages=6", "pingpong"), single,
                                           single.replace("cluster_m=2", "cluster_m=1")]))
    anchor = "hopper:tile_m=128,tile_n=128,cluster_m=2,schedule=pingpong,stages=6"
    assert lines[2] == f"12288_128_2048 {pp},{s1},{anchor}"  # the measured single 2x1 left out
    p64, s64 = (m.name for m in resolve(["hopper:tile_m=64,tile_n=64,cluster_m=1,cluster_n=1,schedule=pingpong",
                                         "hopper:tile_m=64,tile_n=64,cluster_m=1,cluster_n=1,schedule=single,stages=6"]))
    assert lines[3] == f"16384_128_2048 {p64},{s64}"  # no anchor: nothing measured there
    assert len(lines) == 4  # 8192_128_2048's anchor is at 1.0x: not planned
