"""lab/first_picks.py: the held-out picks made without a GPU are the search's own picks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.problem import Shape


from lab import first_picks


@pytest.mark.slow
def test_first_picks_script_reproduces_the_searchs_held_out_picks(tmp_path, capsys, monkeypatch):
    """A tiny CPU search with a held-out check; the script, run afterwards in this process (its
    random state untouched by the search), names the same pick for every held-out shape, each one
    of the configs with the evidence the default rule asks for, where any has it (two rounds of
    CPU timings do not always measure one config on every searched shape: then the model's pool
    decides, as in the search)."""
    from kernels_search.search.run import search_main
    from kernels_search.search.settings import SearchSettings

    shapes = [Shape(16, 16, 32), Shape(32, 16, 64), Shape(16, 32, 32)]
    held = [Shape(16, 16, 16), Shape(32, 32, 64)]
    doc = search_main(shapes, tmp_path / "s", SearchSettings(budget="120s", device="cpu", batch=3, layouts=("nn",),
                      plugins=("test_search_plugin",), timing_budget_s=0.1, max_rounds=2), holdout=held,
                      print_fn=lambda line: None)
    made = {r["shape"]: r["spec"] for r in doc["first_pick"]}
    assert set(made) == {s.name for s in held}
    capsys.readouterr()
    assert first_picks.main([str(tmp_path / "s"), "--all", "--device", "cpu", "--plugin", "test_search_plugin"]) == 0
    out = capsys.readouterr().out
    pol, _ = first_picks.policy_for(tmp_path / "s", device="cpu", plugins=["test_search_plugin"])
    default = first_picks.parse_rule("ranked/m10/n2/d/c").picker(pol)  # the default, without a prior (none for the CPU)
    for s in held:
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(s.name))
        assert "measured" in line and line.rstrip().endswith(made[s.name])
        known = {c.spec for c in default.candidates(s)}
        assert made[s.name] in known or not known
        assert not known or min(len(pol.measured_on[spec]) for spec in known) >= 2
    assert "2 of 2 held-out shapes measured" in out
    # fresh held-out shapes: none of them measured, each listed with a pick
    assert first_picks.main([str(tmp_path / "s"), "--holdout-seed", "4", "--device", "cpu",
                             "--plugin", "test_search_plugin"]) == 0
    out = capsys.readouterr().out
    fresh = first_picks.fresh_holdout(tmp_path / "s", 4)
    assert "0 of 2 held-out shapes measured" in out
    assert all(any(ln.strip().startswith(s.name + " ") for ln in out.splitlines()) for s in fresh)
    # two rules side by side: --prebuild compiles every pick printed in PICK_METHODS, in one batch
    import kernels_search.search.loop as loop

    built = []
    monkeypatch.setattr(loop, "auto_prebuild", lambda specs: built.append(list(specs)) or 0.0)
    args = [str(tmp_path / "s"), "--rules", "model,neighbours", "--device", "cpu", "--plugin", "test_search_plugin"]
    assert first_picks.main(args + ["--compare-args", "--prebuild"]) == 0
    out = capsys.readouterr().out
    methods = next(ln for ln in out.splitlines() if ln.startswith("PICK_METHODS=")).split("=", 1)[1]
    assert len(built) == 1 and built[0] and all(spec in methods for spec in built[0])
    # --also-picks: picks made elsewhere join the measured methods; a file lacking a held-out shape is refused
    held_names = [ln.split("=", 1)[1] for ln in out.splitlines() if ln.startswith("PICK_SHAPES=")][0].split(",")
    other = next(spec for spec in pol.measured_on if spec not in methods)
    (tmp_path / "old.tsv").write_text("# earlier picks\n" + "".join(f"{n}\t{other}\n" for n in held_names))
    assert first_picks.main(args + ["--also-picks", str(tmp_path / "old.tsv"), "--compare-args"]) == 0
    methods = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("PICK_METHODS=")).split("=", 1)[1]
    assert other in methods
    # --plan-out: each held-out shape with its own picks (2 rules and the file's), as `compare --plan`
    # reads them; together they are every method PICK_METHODS names
    from harness.cli import _split_methods
    from harness.plan import read_plan
    from harness.shapes import parse_shape

    assert first_picks.main(args + ["--also-picks", str(tmp_path / "old.tsv"), "--compare-args",
                                    "--plan-out", str(tmp_path / "plan.txt")]) == 0
    methods = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("PICK_METHODS=")).split("=", 1)[1]
    planned = {shape.name: _split_methods([text]) for shape, text in read_plan(tmp_path / "plan.txt")}
    assert list(planned) == held_names
    assert all(1 < len(specs) == len(set(specs)) <= 3 and specs[-1] == other for specs in planned.values())
    assert set().union(*map(set, planned.values())) == set(_split_methods([methods]))
    assert first_picks.main(args + ["--plan-out", str(tmp_path / "p2.txt")]) == 2  # no --compare-args: nothing to write
    assert "--plan-out needs --rules and --compare-args" in capsys.readouterr().err and not (tmp_path / "p2.txt").exists()
    assert first_picks.main(args + ["--compare-args", "--differing"]) == 2  # nothing to choose shapes for
    assert "--differing chooses the shapes --plan-out writes" in capsys.readouterr().err
    # --top 3: each shape's plan holds the rule's pick first, then its runners-up, as the policy ranks them
    assert first_picks.main([str(tmp_path / "s"), "--rules", "model/m1", "--device", "cpu", "--plugin",
                             "test_search_plugin", "--compare-args", "--top", "3", "--plan-out", str(tmp_path / "top.txt")]) == 0
    capsys.readouterr()
    ranked = {shape.name: _split_methods([text]) for shape, text in read_plan(tmp_path / "top.txt")}
    m1 = first_picks.parse_rule("model/m1").picker(pol)  # evidence on one other searched shape: several configs have it
    for name, specs in ranked.items():
        assert specs == [c.spec for c in m1.ranking(parse_shape(name), top=3)]
        assert 1 < len(specs) <= 3
    assert first_picks.main(args + ["--top", "3"]) == 2  # a study's plan needs --compare-args
    assert "--top 3" in capsys.readouterr().err
    (tmp_path / "short.tsv").write_text(f"{held_names[0]}\t{other}\n")
    assert first_picks.main(args + ["--also-picks", str(tmp_path / "short.tsv"), "--compare-args"]) == 2
    assert f"short.tsv: no pick for held-out shapes {held_names[1]}" in capsys.readouterr().err
    # the prior lists folded in: /prior=LIST's alone, also for the single --rule; none for rules without /prior
    folded = []
    monkeypatch.setattr(first_picks, "with_prior_policy", lambda pol, specs, holdout, gpu=None, leave_out=False: folded.append(specs) or pol)
    base = [str(tmp_path / "s"), "--device", "cpu", "--plugin", "test_search_plugin"]
    assert first_picks.main(base + ["--rule", "model/prior=x.txt"]) == 0
    assert first_picks.main(base + ["--rules", "model/prior=x.txt,neighbours", "--compare-args"]) == 0
    assert folded == [[Path("x.txt")], [Path("x.txt")]]
    capsys.readouterr()
    # a compare that finished no shape wrote no file: a named error, not a traceback
    assert first_picks.main(args + ["--report", str(tmp_path / "none.parquet")]) == 2
    assert "none.parquet: no such results file" in capsys.readouterr().err


def test_fresh_holdout_avoids_the_searched_and_held_out_shapes(tmp_path):
    """As many grid shapes as the search held out, none searched or held out by it (nor in an
    exclusion file), the same for the same seed and another set for another seed."""
    from harness.shapes import sample_grid
    from kernels_search.search.run import holdout_shapes

    searched = sample_grid(40, seed=0)
    held = holdout_shapes(searched, 20, seed=1)
    (tmp_path / "shapes.txt").write_text("".join(f"{s.name}\n" for s in searched))
    (tmp_path / "holdout.txt").write_text("".join(f"{s.name}\n" for s in held))
    fresh = first_picks.fresh_holdout(tmp_path, 2)
    assert len(fresh) == 20 == len(set(fresh))
    assert not {s.name for s in fresh} & {s.name for s in searched + held}
    assert fresh == first_picks.fresh_holdout(tmp_path, 2)
    assert fresh != first_picks.fresh_holdout(tmp_path, 3)
    # --holdout-exclude: shapes reported before are avoided too, and the draw is still 20 shapes
    (tmp_path / "seen.txt").write_text("".join(f"{s.name}\n" for s in fresh[:5]))
    avoiding = first_picks.fresh_holdout(tmp_path, 2, tmp_path / "seen.txt")
    assert len(avoiding) == 20 and not {s.name for s in avoiding} & {s.name for s in fresh[:5]}


def test_a_grid_with_too_few_unmeasured_shapes_left_says_so(tmp_path, capsys):
    """When the exclusion file leaves fewer grid shapes than a draw takes, the short draw is named;
    when it leaves none, the script stops with a named error before any policy work."""
    from harness.shapes import _named_sets, sample_grid
    from kernels_search.search.run import holdout_shapes

    searched = sample_grid(40, seed=0)
    (tmp_path / "shapes.txt").write_text("".join(f"{s.name}\n" for s in searched))
    (tmp_path / "holdout.txt").write_text("".join(f"{s.name}\n" for s in holdout_shapes(searched, 20, seed=1)))
    grid = [s.name for s in _named_sets()["cuda-l2"]]
    (tmp_path / "seen.txt").write_text("".join(f"{n}\n" for n in grid[:-25]))  # 25 left, some searched
    draws = first_picks.fresh_draws(tmp_path, [3, 4], tmp_path / "seen.txt")
    left = set(grid[-25:]) - {s.name for s in searched} - set((tmp_path / "holdout.txt").read_text().split())
    assert sum(len(d) for d in draws.values()) == len(left) < 40
    lines = first_picks.short_draws(draws, tmp_path)
    assert lines and all("the grid has no more" in ln for ln in lines)
    assert lines[-1].startswith(f"seed 4: {len(draws[4])} of 20 shapes")
    (tmp_path / "seen.txt").write_text("".join(f"{n}\n" for n in grid))
    rc = first_picks.main([str(tmp_path), "--holdout-seed", "5", "--holdout-exclude", str(tmp_path / "seen.txt")])
    assert rc == 2 and "a fresh grid draw is no longer possible" in capsys.readouterr().err


def test_side_by_side_speedups_take_the_best_layout_and_count_a_failed_pick_as_its_reward():
    """One compare call's rows: each pick's speedup over cuBLASLt autotune is best layout vs best
    layout; a pick with no correct row counts as exp(-1) (what the search's reward gives a
    failure); a shape the reference did not measure is an error, not a silent gap."""
    import math

    import pandas as pd

    rows = [("64_64_64", "cublaslt-autotune", "nn", "ok", 4.0), ("64_64_64", "cublaslt-autotune", "tn", "ok", 3.0),
            ("64_64_64", "k:a", "nn", "ok", 2.0), ("64_64_64", "k:a", "tn", "ok", 2.5),
            ("128_64_64", "cublaslt-autotune", "nn", "ok", 6.0),
            ("128_64_64", "k:b", "nn", "gate_failed", 1.0)]
    df = pd.DataFrame(rows, columns=["shape", "method", "layout", "status", "device_us_median"])
    sp = first_picks.speedups(df, {"64_64_64": "k:a", "128_64_64": "k:b"})
    assert sp == {"64_64_64": 1.5, "128_64_64": math.exp(-1)}
    with pytest.raises(ValueError, match="256_64_64"):
        first_picks.speedups(df, {"256_64_64": "k:a"})


def test_a_compare_stopped_by_its_time_limit_reports_only_the_shapes_it_finished():
    """``finished_shapes``: a shape counts only with rows (any status: a failed pick still counts)
    of the reference and of every rule's pick in every layout the compare measured; one it never
    reached, or stopped in (a layout or a pick missing), is left out, not scored as a failure."""
    import pandas as pd

    rows = []
    for shape, methods in (("64_64_64", ("ref", "k:a", "k:b")), ("128_64_64", ("ref", "k:a", "k:b")),
                           ("256_64_64", ("ref", "k:a")), ("512_64_64", ("ref", "k:a", "k:b"))):
        for m in methods:
            for lay in ("nn", "tn"):
                if not (shape == "512_64_64" and m == "k:b" and lay == "tn"):
                    rows.append((shape, m, lay, "gate_failed" if (shape, m) == ("128_64_64", "k:b") else "ok", 1.0))
    df = pd.DataFrame(rows, columns=["shape", "method", "layout", "status", "device_us_median"])
    names = ("64_64_64", "128_64_64", "256_64_64", "512_64_64", "1024_64_64")
    picks = {"r1": {s: "k:a" for s in names}, "r2": {s: "k:b" for s in names}}
    assert first_picks.finished_shapes(df, picks, reference="ref") == {"64_64_64", "128_64_64"}
    assert first_picks.finished_shapes(df, {"r1": picks["r1"]}, reference="ref") == {
        "64_64_64", "128_64_64", "256_64_64", "512_64_64"}


def test_local_prebuild_lists_the_unmeasured_cuda_mutations_of_each_shapes_best_configs(tmp_path):
    """lab/local_prebuild.py: for each shape, the one-knob mutations of its two best configs
    that a resumed search's local picks can choose, less what the shape measured already and
    less Triton configs (nothing to build)."""
    import dataclasses
    import json

    from lab import local_prebuild
    from kernels_search.search.db import KernelDB
    from kernels_search.search.learner import Learner
    from kernels_search.proposals import Candidate, Outcome
    from test_search_learner import OTHER, TILED

    fams = {"tiled": TILED, "other": dataclasses.replace(OTHER, backend="triton")}
    pol = Learner(fams, ("nn",))
    s, t = Shape(1024, 1024, 1024), Shape(64, 64, 64)
    best, second, worst = ({"tile": 128, "split": 1, "stages": 3, "raster": 1},
                           {"tile": 64, "split": 1, "stages": 3, "raster": 1},
                           {"tile": 16, "split": 16, "stages": 2, "raster": 0})
    rows = []
    for shape, fam, knobs, r in ((s, "tiled", best, 0.3), (s, "tiled", second, 0.2), (s, "tiled", worst, -0.4),
                                 (s, "other", {"x": 1, "y": 1}, 0.1), (t, "other", {"x": 2, "y": 0}, 0.5)):
        spec = fams[fam].spec(knobs)
        pol.observe(shape, [Outcome(Candidate(fam, knobs, spec), "nn", "ok", r, None, None)])
        rows.append({"is_baseline": False, "shape": shape.name, "method": spec, "family": fam,
                     "config": json.dumps(knobs)})
    db = KernelDB(tmp_path / "db")
    db.append(rows)
    got = local_prebuild.local_cuda_specs(pol, db, [s, t])
    assert got[t.name] == []  # its only config is a Triton one
    want = {TILED.spec(m) for k in (best, second) for m in pol._mutations("tiled", k)} - {TILED.spec(best), TILED.spec(second)}
    assert set(got[s.name]) == want and got[s.name]
    assert TILED.spec(worst) not in got[s.name] and all(sp.startswith("tiled:") for sp in got[s.name])
    # ranked by the posterior mean, as the first local pick is; one spec per binary in the build order
    cands = [pol.candidate_for(sp) for sp in got[s.name]]
    mean = pol.predict(s, cands)[0].max(axis=1)
    assert list(mean) == sorted(mean, reverse=True)
    order = local_prebuild.build_order(pol, got)
    assert order[0] == got[s.name][0] and set(order) <= set(got[s.name])
    assert len({pol.compile_key(c.family, c.knobs) for c in map(pol.candidate_for, order)}) == len(order)


def test_side_by_side_refuses_an_unfinished_search_and_names_the_policy_state(tmp_path, capsys):
    """A search stopped by a run limit is a mid-search policy: measuring its picks as the search's
    needs --unfinished; every run names the state its picks come from."""
    import json

    from kernels_search.search.run import search_main

    from kernels_search.search.settings import SearchSettings

    search_main([Shape(16, 16, 32), Shape(32, 16, 64)], tmp_path / "s",
                SearchSettings(budget="120s", device="cpu", batch=2, layouts=("nn",), plugins=("test_search_plugin",),
                               timing_budget_s=0.05, max_rounds=1),
                holdout=[Shape(16, 16, 16)], print_fn=lambda line: None)
    args = [str(tmp_path / "s"), "--rules", "model,neighbours", "--device", "cpu",
            "--plugin", "test_search_plugin", "--compare-args"]
    summary = tmp_path / "s" / "summary.json"
    doc = json.loads(summary.read_text())
    assert doc["finished"]
    capsys.readouterr()
    assert first_picks.main(args) == 0
    captured = capsys.readouterr()
    assert "PICK_METHODS=" in captured.out and ", finished" in captured.err
    summary.write_text(json.dumps(dict(doc, finished=False, stop_reason="run-limit")))
    assert first_picks.main(args) == 2
    captured = capsys.readouterr()
    assert "PICK_METHODS=" not in captured.out
    assert "NOT finished (stop: run-limit)" in captured.err and "--unfinished" in captured.err
    assert first_picks.main(args + ["--unfinished"]) == 0
    assert "PICK_METHODS=" in capsys.readouterr().out


def test_a_rule_spec_names_the_evidence_its_picks_need():
    """``RULE/mN`` picks only configs measured on >= N other shapes: a config excellent on three
    shapes is the cautious rule's pick with the default evidence (2 shapes), and the config measured
    on all eight is the pick under ``cautious/m5``; a malformed spec is a named error."""
    from types import SimpleNamespace

    import pandas as pd

    from kernels_search.family import Family, Knob
    from kernels_search.search.learner import Learner
    from kernels_search.proposals import Candidate, Outcome
    from kernels_search.search.settings import LearnerSettings

    fam = Family(name="f", knobs=(Knob("tile", (32, 64, 128), 64), Knob("stages", (2, 3), 2)))
    pol = Learner({"f": fam}, ("nn",), LearnerSettings(elites=0))
    wide, few = {"tile": 32, "stages": 2}, {"tile": 64, "stages": 3}
    shapes = [Shape(2 ** a, 2 ** a, 2 ** (a + 1)) for a in range(6, 14)]
    for i, s in enumerate(shapes):
        outs = [Outcome(Candidate("f", wide, fam.spec(wide)), "nn", "ok", 0.05, None, None)]
        if i in (2, 3, 4):
            outs.append(Outcome(Candidate("f", few, fam.spec(few)), "nn", "ok", 0.3, None, None))
        pol.observe(s, outs)
    held = [Shape(1024, 1024, 1024)]
    picks = first_picks.picks_by_rule(pol, SimpleNamespace(df=pd.DataFrame()), held, ["cautious", "cautious/m5"])
    assert picks["cautious"][held[0].name] == fam.spec(few)
    assert picks["cautious/m5"][held[0].name] == fam.spec(wide)
    assert first_picks.parse_rule("model/m20") == ("model", 20, False, 0, "", False, False)
    assert first_picks.parse_rule("neighbours") == ("neighbours", 2, False, 0, "", False, False)
    assert first_picks.parse_rule("cautious/m10/prior") == ("cautious", 10, True, 0, "", False, False)
    assert first_picks.parse_rule("model/prior") == ("model", 2, True, 0, "", False, False)
    assert first_picks.parse_rule("cautious/m10/n2/prior") == ("cautious", 10, True, 2, "", False, False)
    assert first_picks.parse_rule("cautious/n3") == ("cautious", 2, False, 3, "", False, False)
    assert first_picks.parse_rule("cautious/m10/n2/prior=results/a_b.txt") == ("cautious", 10, True, 2, "results/a_b.txt", False, False)
    assert first_picks.parse_rule("paired/m10/n2/d/prior") == ("paired", 10, True, 2, "", True, False)
    assert first_picks.parse_rule("geopaired/d") == ("geopaired", 2, False, 0, "", True, False)
    assert not first_picks.parse_rule("paired/m10").decline_one_slice
    assert first_picks.parse_rule("paired/m10/n2/d/c/prior") == ("paired", 10, True, 2, "", True, True)
    assert first_picks.parse_rule("paired/c") == ("paired", 2, False, 0, "", False, True)
    for bad in ("cautious/20", "cautious/m0", "best", "model/mx", "cautious/prior/m10", "cautious/m2/m3",
                "model/priors", "paired/c/d", "paired/prior/c", "paired/cc", "cautious/n2/m10", "cautious/n0",
                "cautious//prior", "cautious/x1", "cautious/prior=",
                "cautious/prior=a,x", "paired/d/m10", "paired/prior/d", "paired/dd"):
        with pytest.raises(ValueError, match=r"RULE\[/mN\]\[/nK\]\[/d\]\[/c\]\[/prior\[=LIST\]\]"):
            first_picks.parse_rule(bad)
    with pytest.raises(ValueError, match="needs the policy with the prior"):
        first_picks.picks_by_rule(pol, SimpleNamespace(df=pd.DataFrame()), held, ["cautious/prior"])


def test_several_draws_in_one_call_are_disjoint_and_the_report_gives_intervals_and_the_paired_ratio(tmp_path):
    """``--holdout-seed 9,10``: the first draw is seed 9's alone, the second avoids it (as a second
    draw against an exclusion file holding the first's shapes would); the report gives each draw's
    geomean, the 95 % bootstrap interval over all shapes, and the first rule over each other, paired."""
    import math

    from harness.shapes import sample_grid
    from kernels_search.search.run import holdout_shapes

    searched = sample_grid(40, seed=0)
    (tmp_path / "shapes.txt").write_text("".join(f"{s.name}\n" for s in searched))
    (tmp_path / "holdout.txt").write_text("".join(f"{s.name}\n" for s in holdout_shapes(searched, 20, seed=1)))
    draws = first_picks.fresh_draws(tmp_path, [9, 10])
    assert list(draws) == [9, 10] and draws[9] == first_picks.fresh_holdout(tmp_path, 9)
    assert not {s.name for s in draws[9]} & {s.name for s in draws[10]} and len(draws[10]) == 20
    (tmp_path / "first.txt").write_text("".join(f"{s.name}\n" for s in draws[9]))
    assert draws[10] == first_picks.fresh_holdout(tmp_path, 10, tmp_path / "first.txt")
    # the report: rule a is 1.1x on every shape of seed 9 and 0.9x on seed 10; rule b is 1.0x everywhere
    sp = {"a": {s.name: 1.1 for s in draws[9]} | {s.name: 0.9 for s in draws[10]},
          "b": {s.name: 1.0 for s in draws[9] + draws[10]}}
    lines = first_picks.report_lines(sp, draws)
    assert lines[0] == "| seed 9 | 1.100x | 1.000x |" and lines[1] == "| seed 10 | 0.900x | 1.000x |"
    g = math.sqrt(1.1 * 0.9)
    assert lines[2].startswith(f"| geomean, 40 shapes (95 % bootstrap) | **{g:.3f}x (") and "**1.000x (1.000-1.000)**" in lines[2]
    lo, hi = (float(x) for x in lines[2].split("**")[1].split("(")[1].rstrip(")").split("-"))
    assert 0.9 < lo < g < hi < 1.1
    assert lines[3].startswith(f"paired, a over b: {g:.3f}x (") and lines[3].endswith("better on 20, worse on 20 of 40")
    assert lines == first_picks.report_lines(sp, draws)  # seeded


def test_the_first_pick_of_record_pools_the_default_column_of_each_table_since_a_section():
    """lab/first_pick_record.py: the default's column (named either way), from the section on
    only, a cut shape ("-") left out; a shape in two tables, a table without a default column, or an
    off-grid shape in such a table, is a named error."""
    import math

    from lab import first_pick_record as rec

    md = "\n".join([
        "## old session", "| shape | paired/m10/n2/prior |", "|---|---|", "| 64_64_64 | 0.500x |", "",
        "## new session", "| shape | cautious/m10/n2/prior | paired/m10/n2/prior |", "|---|---|---|",
        "| 128_64_64 | 9.000x | 1.100x |", "| 256_64_64 | 9.000x | - |", "",
        "| shape | with the study (default) | without |", "|---|---|---|", "| 512_64_64 | 0.900x | 2.000x |", ""])
    tables = rec.default_ratios(md, "## new session")
    assert tables == [[("128_64_64", 1.1)], [("512_64_64", 0.9)]]
    n, g, lo, hi = rec.pooled(tables, boot=200)
    assert n == 2 and math.isclose(g, math.sqrt(1.1 * 0.9)) and 0.9 <= lo <= g <= hi <= 1.1
    with pytest.raises(ValueError, match="more than one table: 128_64_64"):
        rec.pooled(tables + [[("128_64_64", 1.0)]])
    with pytest.raises(ValueError, match="without a default column"):
        rec.default_ratios(md + "\n| shape | cautious/m10/n2/prior |\n| 1024_64_64 | 1.0x |\n", "## new session")
    with pytest.raises(ValueError, match="no line starts with"):
        rec.default_ratios(md, "## missing")
    with pytest.raises(ValueError, match="off-grid shape in a grid table: 96_64_64"):
        rec.default_ratios(md + "\n| shape | paired/m10/n2/prior |\n| 96_64_64 | 1.0x |\n", "## new session")


def test_held_out_shapes_from_a_file_refuse_measured_repeated_and_malformed_shapes(tmp_path, capsys):
    """--holdout-shapes: the file's shapes in order (comments and blank lines skipped); a shape the
    search measured or the exclusion file names, one listed twice, a malformed one, an empty file
    or both --holdout-shapes and --holdout-seed is a named error before the policy is built."""
    from harness.shapes import sample_grid

    searched = sample_grid(6, seed=0)
    (tmp_path / "shapes.txt").write_text("".join(f"{s.name}\n" for s in searched[:4]))
    (tmp_path / "holdout.txt").write_text(f"{searched[4].name}\n")
    (tmp_path / "seen.txt").write_text("768_768_768\n")
    f = tmp_path / "off.txt"
    f.write_text("# off-grid\n3072_96_1536\n\n6144_6144_384  # a comment\n")
    assert [s.name for s in first_picks.listed_holdout(tmp_path, f, tmp_path / "seen.txt")] == ["3072_96_1536", "6144_6144_384"]
    for text, msg in ((f"3072_96_1536\n{searched[0].name}\n768_768_768\n", f"measured before: {searched[0].name}, 768_768_768"),
                      ("3072_96_1536\n3072_96_1536\n", "listed twice: 3072_96_1536"),
                      ("3072x96\n", "malformed shape"), ("# nothing\n", "no shapes")):
        f.write_text(text)
        rc = first_picks.main([str(tmp_path), "--holdout-shapes", str(f), "--holdout-exclude", str(tmp_path / "seen.txt")])
        assert rc == 2 and msg in capsys.readouterr().err
    f.write_text("3072_96_1536\n")
    assert first_picks.main([str(tmp_path), "--holdout-shapes", str(f), "--holdout-seed", "3"]) == 2
    assert "not both" in capsys.readouterr().err


def test_a_differing_plan_holds_only_the_shapes_where_the_rules_disagree(tmp_path):
    """``--differing``: a paired test's plan measures only the shapes with more than one distinct
    pick, and its header says of how many; without it every shape is planned."""
    from harness.plan import read_plan
    from harness.problem import Shape

    held = [Shape(64, 64, 64), Shape(128, 128, 128), Shape(256, 256, 256)]
    picks = {"a": {"64_64_64": "x:1", "128_128_128": "x:1", "256_256_256": "x:2"},
             "b": {"64_64_64": "x:1", "128_128_128": "x:3", "256_256_256": "x:2"}}
    first_picks.write_plan(tmp_path / "d.txt", held, picks, differing=True)
    assert [s.name for s, _ in read_plan(tmp_path / "d.txt")] == ["128_128_128"]
    assert (tmp_path / "d.txt").read_text().startswith("# 1 of 3 held-out shapes, those where the rules pick differently")
    first_picks.write_plan(tmp_path / "all.txt", held, picks, note="n")
    assert [s.name for s, _ in read_plan(tmp_path / "all.txt")] == [s.name for s in held]
    assert "(n)" in (tmp_path / "all.txt").read_text().splitlines()[0]
