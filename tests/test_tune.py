"""``hgemm-bench tune`` on the CPU evaluator: ranking the pool, measuring in the search loop, the merge.

The ranker is a search of the ``cpuk`` test family (``test_search_plugin``) run here on a fake
evaluator whose times follow the knobs; the pool is cpuk's presets. Why these can fail: a worse
measurement that replaces a better kernel, a fallback entry that a verified winner does not replace,
an entry of another GPU model touched, a dry run that measures or says nothing of why, a library
method that does not read the user's library first.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from typer.testing import CliRunner

import test_search_plugin
from harness.cli import app
from harness.problem import Shape
from kernels_search.search import learner as learner_mod
from kernels_search.search import library, user_library
from kernels_search.search.db import KernelDB
from kernels_search.search.learner import Learner, default_families
from kernels_search.search.loop import run_search, search_settings
from kernels_search.search.settings import FirstPickSettings, TuneSettings
from kernels_search.search.tune import tune_main

GPU = "CPU: fake"
PRESETS = ("pad=0:split=1", "pad=1:split=1", "pad=0:split=2", "pad=3:split=1")
RANKER_SHAPES = [Shape(16, 16, 32), Shape(32, 16, 64), Shape(16, 32, 32), Shape(32, 32, 16)]


class FakeEvaluator:
    """Made-up correct rows: the baseline at 100 us, a cpuk config at 60 + 10 pad + 3 split us."""

    device = "cpu"

    def __init__(self):
        self.env = {"gpu_uuid": "cpu-0", "gpu_name": GPU, "device": "cpu"}
        self.calls: list[list[str]] = []

    def evaluate_shape(self, shape, specs, settings, groups, run_id):
        rows = test_search_plugin.made_up_rows(self.env, shape, specs, settings.layouts)
        time.sleep(0.05)
        self.calls.append(list(specs))
        return [(rows, [])]


@pytest.fixture(scope="module")
def ranker(tmp_path_factory):
    """A search folder of cpuk measured on four shapes (the learner tune ranks with)."""
    folder = tmp_path_factory.mktemp("ranker")
    fams = default_families("cpu")
    run_search(RANKER_SHAPES, 60, FakeEvaluator(), KernelDB(folder / "db"), Learner({"cpuk": fams["cpuk"]}, ("nn",)),
               batch_per_shape=6, settings=search_settings(["nn"]), max_rounds=2, search_id="ranker")
    return folder


@pytest.fixture
def presets(monkeypatch):
    fam = dataclasses.replace(test_search_plugin.FAMILY, presets=PRESETS)
    monkeypatch.setitem(learner_mod._EXTRA_FAMILIES, "cpuk", fam)
    return fam


def settings(ranker, lib, **kw) -> TuneSettings:
    return TuneSettings(device="cpu", layouts=("nn",), per_shape="20s", top=2, batch=2, library=lib, ranker=ranker,
                        first_pick=FirstPickSettings(min_shapes=1, min_near=0, prior="none"), **kw)


def entry(shape: Shape, layout: str, kind: str, speedup: float, gpu: str = GPU, spec: str = "cpuk:pad=2") -> dict:
    return dict(gpu_name=gpu, shape=shape.name, m=shape.m, n=shape.n, k=shape.k, layout=layout, kind=kind,
                spec=spec if kind == "kernel" else "torch", paired_speedup=speedup)


def test_tune_merges_a_better_kernel_keeps_a_better_entry_and_leaves_other_gpus(tmp_path, ranker, presets):
    a, b, c = Shape(64, 48, 32), Shape(48, 64, 32), Shape(24, 24, 24)
    lib = tmp_path / "library.json"
    old = [entry(a, "nn", "kernel", 5.0),  # better than anything measurable here (100 / 60 = 1.667x): kept
           entry(b, "nn", "kernel", 1.1),  # worse than the best preset: replaced
           entry(c, "nn", "baseline", 1.0),  # a fallback: replaced by a verified winner
           entry(a, "nn", "kernel", 1.01, gpu="NVIDIA H200")]  # another GPU model: untouched
    user_library.write(lib, old, library.LIBRARY_VERSION, 1.02)
    ev = FakeEvaluator()
    lines: list[str] = []
    tune_main([a, b, c], tmp_path / "tune", settings(ranker, lib), evaluator=ev, print_fn=lines.append)
    got = {user_library.key(e): e for e in user_library.read(lib)}
    assert len(got) == 4
    assert got[(GPU, a.name, "nn")]["paired_speedup"] == 5.0 and got[(GPU, a.name, "nn")]["spec"] == "cpuk:pad=2"
    best = "cpuk:pad=0,split=1,bug=0,small=0"
    assert (got[(GPU, b.name, "nn")]["spec"] == best
            and got[(GPU, b.name, "nn")]["paired_speedup"] == pytest.approx(100 / 63))
    assert got[(GPU, c.name, "nn")]["kind"] == "kernel" and got[(GPU, c.name, "nn")]["spec"] == best
    assert got[("NVIDIA H200", a.name, "nn")] == old[3]
    text = "\n".join(lines)
    assert f"{a.name} nn on {GPU}: kept" in text and f"{b.name} nn on {GPU}: replaced" in text
    # every call measured the baseline with the ranked candidates, at most ``batch`` of them
    assert ev.calls and all(specs[0] == "torch" and 1 <= len(specs) - 1 <= 2 for specs in ev.calls)
    # the library method reads the user's library (here: --library) in front of the packaged one
    served = library.load_entries(lib)
    assert {e["library_file"] for e in served} == {str(lib)}


def test_a_worse_retune_does_not_replace_the_entry(tmp_path, ranker, presets):
    s = Shape(40, 40, 40)
    lib = tmp_path / "library.json"
    tune_main([s], tmp_path / "one", settings(ranker, lib), evaluator=FakeEvaluator(), print_fn=lambda x: None)
    first = user_library.read(lib)
    assert first[0]["kind"] == "kernel" and first[0]["paired_speedup"] == pytest.approx(100 / 63)
    # the same shape again, only slower configs in the pool: the merge keeps the better entry
    slow = dataclasses.replace(presets, presets=("pad=3:split=1", "pad=1:split=2"))
    learner_mod._EXTRA_FAMILIES["cpuk"] = slow
    tune_main([s], tmp_path / "two", settings(ranker, lib), evaluator=FakeEvaluator(), print_fn=lambda x: None)
    assert user_library.read(lib) == first


def test_user_library_in_front_of_the_packaged_one(tmp_path, monkeypatch):
    monkeypatch.delenv("HGEMM_LIBRARY", raising=False)
    packaged = library.load_library(library.DEFAULT_PATH)
    e = packaged[0]
    mine = dict(e, kind="kernel", spec="cpuk:pad=1", paired_speedup=9.0)
    user_library.write(user_library.default_path(), [mine], library.LIBRARY_VERSION, 1.02)
    try:
        served = library.load_entries()
        same = [x for x in served if user_library.key(x) == user_library.key(e)]
        assert len(same) == 1 and same[0]["spec"] == "cpuk:pad=1"
        assert len(served) == len(packaged)
        assert library.LibraryMethod().config["user_library"] == str(user_library.default_path())
    finally:
        user_library.default_path().unlink()


def test_dry_run_lists_ranked_candidates_their_call_and_why_without_measuring(tmp_path, ranker, presets):
    got = CliRunner().invoke(app, ["tune", "--dry-run", "--device", "cpu", "--plugin", "test_search_plugin",
                                   "--ranker", str(ranker), "--shapes", "64_48_32,24_24_24", "--top", "3",
                                   "--batch", "2", "--out", str(tmp_path / "t")])
    assert got.exit_code == 0, got.output
    out = got.output
    assert "64_48_32: 3 candidates" in out and "24_24_24: 3 candidates" in out
    assert "#1  call 1" in out and "#3  call 2" in out
    assert "measured on" in out and ("first-pick candidate" in out or "pool, below" in out)
    assert "the best 3 per layout that beat the baseline are measured again" in out.replace("\n", " ")
    assert not (tmp_path / "t").exists()  # nothing measured, no DB


def test_dry_run_for_the_gpu_lists_the_triton_configs_where_triton_is_missing(tmp_path):
    """The GPU host measures the Triton families' presets (they compile there, in process): a dry run made
    on a machine without Triton lists them as well, so it shows what the tune would measure; configs that
    no evidence holds yet are not dropped, and a family none of whose configs the packaged H200 evidence
    holds (triton_streamk) has its first config measured right after the first NEW_FAMILY_SLOT ranked ones.
    A family the evidence holds (triton_splitk, runs 164-165) is ranked like any other. The shape is off the
    grid and in no evidence, so no config is lifted for having been measured on it."""
    from kernels_search.search.tune import NEW_FAMILY_SLOT
    from kernels_search.families import ALL

    got = CliRunner().invoke(app, ["tune", "--dry-run", "--device", "cuda", "--shapes", "128_64_4352",
                                   "--out", str(tmp_path / "t")])
    assert got.exit_code == 0, got.output
    for name in ("triton", "triton_splitk", "triton_streamk"):
        for k in ALL[name].preset_configs():
            assert ALL[name].spec(k) in got.output, (name, got.output[-2000:])
    lines = got.output.splitlines()
    ranks = [int(line.split()[0][1:]) for line in lines if "triton_streamk:" in line]
    early = sum("measured early" in line for line in lines)  # one config of each family new to the evidence
    assert early >= 1 and NEW_FAMILY_SLOT < ranks[0] <= NEW_FAMILY_SLOT + early, ranks  # moved up
    assert ranks[1] > 2 * NEW_FAMILY_SLOT, ranks  # its other configs keep their place
    at = next(i for i, line in enumerate(lines) if "triton_streamk:" in line)
    assert "a family new to the evidence, measured early" in lines[at + 1]
    at = max(i for i, line in enumerate(lines) if "triton_streamk:" in line)
    assert "pool, no evidence yet" in lines[at + 1] and "measured early" not in lines[at + 1]
    assert not any("triton_splitk:" in line and "measured early" in lines[i + 1] for i, line in enumerate(lines))


def test_a_missing_cuda_toolchain_does_not_stop_the_plan(monkeypatch):
    """Without CUTLASS headers the plan cannot key the library incumbent's binary (a tune on an H100 crashed
    there): it says so and plans anyway; building that candidate then fails as its own row."""
    from kernels_search import toolchain
    from kernels_search.search.tune import plan

    def missing():
        raise toolchain.ToolchainError("CUTLASS headers not found")

    monkeypatch.setattr(toolchain, "cutlass_include_dirs", missing)
    lines = []
    ranked, _ = plan([Shape(128, 256, 4096)], TuneSettings(device="cuda", top=3), print_fn=lines.append, dry_run=True)
    assert len(ranked["128_256_4096"]) == 3
    assert any("which binaries are built is not known here: CUTLASS headers not found" in x for x in lines)


def test_an_incumbent_is_judged_by_its_fresh_paired_speedup():
    s = Shape(64, 64, 16384)
    inc = dict(entry(s, "nn", "kernel", 1.04), spec="splitk_tma_swap:x")
    k = user_library.key(inc)
    fallback = entry(s, "nn", "baseline", 1.0)
    # re-measured below min_speedup in the tune's own paired calls: the fallback replaces it, also when
    # the incumbent is the packaged library's (behind the user's)
    for old, behind in (([inc], []), ([], [inc])):
        merged, (d,) = user_library.merge(old, [fallback], 1.02, behind, remeasured={k + (inc["spec"],): 0.96})
        assert d.action == "replaced" and merged == [fallback] and "re-measured" in d.line()
    # without the fresh figure, or with one that still wins, the recorded win stands
    for fresh in ({}, {k + (inc["spec"],): 1.03}, {k + ("another:spec",): 0.5}):
        merged, (d,) = user_library.merge([inc], [fallback], 1.02, remeasured=fresh)
        assert d.action == "kept" and merged == [inc]
    # a new kernel must beat the incumbent's fresh figure, not its recorded one
    new = dict(entry(s, "nn", "kernel", 1.10), spec="hopper:y")
    merged, (d,) = user_library.merge([inc], [new], 1.02, remeasured={k + (inc["spec"],): 1.05})
    assert d.action == "replaced" and merged == [new]
    merged, (d,) = user_library.merge([dict(inc, paired_speedup=1.3)], [new], 1.02,
                                      remeasured={k + (inc["spec"],): 1.2})
    assert d.action == "kept"


def test_paired_speedups_pairs_each_candidate_with_its_own_calls_baseline(tmp_path, ranker, presets):
    s = Shape(40, 40, 40)
    lib = tmp_path / "library.json"
    tune_main([s], tmp_path / "t", settings(ranker, lib), evaluator=FakeEvaluator(), print_fn=lambda x: None)
    got = library.paired_speedups(KernelDB(tmp_path / "t" / "db"), GPU, [s])
    # the fake times: baseline 100 us, a cpuk config 60 + 10 pad + 3 split us
    assert got[(GPU, s.name, "nn", "cpuk:pad=0,split=1,bug=0,small=0")] == pytest.approx(100 / 63)
    assert all(k[:3] == (GPU, s.name, "nn") for k in got) and len(got) == 2
    assert library.paired_speedups(KernelDB(tmp_path / "t" / "db"), "another GPU", [s]) == {}


def test_the_packaged_evidence_puts_gemv_in_a_decode_shapes_ranked_list(tmp_path):
    """On the H200's pool and evidence (no GPU needed): a decode shape's 48 ranked candidates hold the
    gemv family, which serves only M <= 32 and wins on some decode shapes; with no decode runs in the
    evidence it had no measurement anywhere and tune never ranked it."""
    got = CliRunner().invoke(app, ["tune", "--dry-run", "--shapes", "1_3072_3072", "--out", str(tmp_path / "t")])
    assert got.exit_code == 0, got.output
    assert "1_3072_3072:" in got.output and "gemv:mt=1" in got.output


def test_the_packaged_evidence_measures_gemv_rows_first_on_a_batch_1_decode_shape(tmp_path):
    """gemv_rows led the best baseline on the M = 1 decode shapes of runs 99-101 (in the evidence): tune's
    first paired call on an M = 1 shape the evidence lacks holds it, and an M = 8 shape, which its pool
    configs (m = 1 and 2) do not serve, never lists it."""
    got = CliRunner().invoke(app, ["tune", "--dry-run", "--shapes", "1_5120_5120,8_5120_5120",
                                   "--out", str(tmp_path / "t")])
    assert got.exit_code == 0, got.output
    first = [ln for ln in got.output.splitlines() if " call 1 " in ln]
    assert any("gemv_rows:m=1" in ln for ln in first), got.output
    m8 = got.output.split("8_5120_5120:")[1]
    assert "gemv_rows" not in m8 and "gemv:" in m8


def test_configs_measured_faster_on_the_shape_itself_are_measured_first(tmp_path, ranker, presets):
    """tune keeps each shape's own rows (a held-out first pick leaves them out): the pool configs the ranker's
    search measured faster than the baseline on this very shape come first, fastest first (the fake times:
    pad=0,split=1 63 us, pad=0,split=2 66 us against 100 us), whatever their score."""
    from kernels_search.search.tune import plan

    shape = RANKER_SHAPES[0]
    st = dataclasses.replace(settings(ranker, tmp_path / "library.json"), top=4, plugins=("test_search_plugin",))
    ranked, _ = plan([shape], st, print_fn=lambda x: None)
    got = ranked[shape.name]
    here = [t for t in got if t.here is not None]
    assert here and got[:len(here)] == here  # the shape's own winners lead
    assert [t.here for t in here] == sorted((t.here for t in here), reverse=True)
    assert here[0].spec == "cpuk:pad=0,split=1,bug=0,small=0" and here[0].here == pytest.approx(100 / 63)
    assert "measured on this shape: 1.587x" in here[0].why()


def test_the_packaged_evidence_measures_a_decode_shapes_own_winner_first(tmp_path):
    """On the H200's pool and evidence: the swapped splitk_dsmem preset led the best baseline on 16_4096_4096 in
    run 6dd4a42c7893 (1.097x, warm), so tune's first candidate there is it, said to be measured on this shape."""
    got = CliRunner().invoke(app, ["tune", "--dry-run", "--shapes", "16_4096_4096", "--out", str(tmp_path / "t")])
    assert got.exit_code == 0, got.output
    lines = got.output.splitlines()
    i = next(n for n, ln in enumerate(lines) if " #1 " in ln)
    assert "splitk_dsmem:bm=64,bn=16,stages=8,swap=1" in lines[i], got.output
    assert "measured on this shape: 1.09" in lines[i + 1]


def test_without_a_top_the_budget_or_the_ranked_pool_ends_a_shape(tmp_path, ranker, presets):
    """With no ``top`` every ranked pool config (the cpuk presets with evidence on some shape: at least three here)
    is measured while the shape's budget lasts; with ``top=2``, two."""
    from kernels_search.search.tune import plan

    s = Shape(40, 48, 40)
    st = dataclasses.replace(settings(ranker, tmp_path / "lib.json"), top=None, plugins=("test_search_plugin",))
    ranked = len(plan([s], st, print_fn=lambda x: None)[0][s.name])
    assert ranked >= 3
    for top, want in ((None, ranked), (2, 2)):
        ev = FakeEvaluator()
        st = dataclasses.replace(settings(ranker, tmp_path / f"lib-{top}.json"), top=top)
        tune_main([s], tmp_path / f"t-{top}", st, evaluator=ev, print_fn=lambda x: None)
        measured = {spec for call in ev.calls for spec in call if spec.startswith("cpuk")}
        assert len(measured) == want, (top, measured)


class LuckyEvaluator(FakeEvaluator):
    """A cpuk config's first call on a shape runs at ``lucky`` of its fake time, every later call at
    ``later`` of it (the baseline at 100 us throughout): a winner's first pair flatters it."""

    def __init__(self, lucky: float, later: float = 1.0):
        super().__init__()
        self.lucky, self.later, self.seen = lucky, later, set()

    def evaluate_shape(self, shape, specs, settings, groups, run_id):
        [(rows, errs)] = super().evaluate_shape(shape, specs, settings, groups, run_id)
        for r in rows:
            if not r["is_baseline"]:
                key = (shape.name, r["method"], r["layout"])
                r["device_us_median"] *= self.later if key in self.seen else self.lucky
                self.seen.add(key)
        return [(rows, errs)]


def test_an_entry_needs_a_confirming_call_and_counts_by_its_worse_pair(tmp_path, ranker, presets):
    s = Shape(40, 40, 40)
    best = "cpuk:pad=0,split=1,bug=0,small=0"
    lib = tmp_path / "library.json"
    ev, lines = LuckyEvaluator(lucky=0.8), []
    tune_main([s], tmp_path / "t", settings(ranker, lib), evaluator=ev, print_fn=lines.append)
    (e,) = user_library.read(lib)
    # first call 100 / (0.8 x 63), the confirming call 100 / 63: the entry keeps the worse
    assert e["spec"] == best and e["paired_runs"] == 2 and e["paired_speedup"] == pytest.approx(100 / 63)
    # the confirming call measured the tune's winners (both ranked configs beat the baseline) again, together,
    # with the baseline
    assert len(ev.calls) == 2 and ev.calls[1][0] == "torch" and set(ev.calls[1][1:]) == set(ev.calls[0][1:])
    assert any(f"confirm {best}: nn " in x and "(counts 1.587x)" in x for x in lines)
    pairs = library.spec_pairs(KernelDB(tmp_path / "t" / "db"), GPU, [s])
    assert pairs[(GPU, s.name, "nn", best)] == pytest.approx([100 / 50.4, 100 / 63])
    # a rerun of the finished tune measures nothing again and keeps the entry
    n = len(ev.calls)
    tune_main([s], tmp_path / "t", settings(ranker, lib), evaluator=ev, print_fn=lambda x: None)
    assert len(ev.calls) == n and user_library.read(lib) == [e]


def test_a_win_that_the_confirming_call_does_not_repeat_leaves_the_fallback(tmp_path, ranker, presets):
    s = Shape(40, 40, 40)
    # first calls 1.59-1.98x over the baseline, then every config 2x slower (0.79x): no entry is a win
    ev = LuckyEvaluator(lucky=0.8, later=2.0)
    lib = tmp_path / "library.json"
    tune_main([s], tmp_path / "t", settings(ranker, lib), evaluator=ev, print_fn=lambda x: None)
    (e,) = user_library.read(lib)
    assert e["kind"] == "baseline" and e["spec"] == "torch"
    # one call deciding (confirm 0), the same luck makes the entry a kernel at its lucky figure
    lib0 = tmp_path / "library0.json"
    tune_main([s], tmp_path / "t0", settings(ranker, lib0, confirm=0), evaluator=LuckyEvaluator(0.8, 2.0),
              print_fn=lambda x: None)
    (e0,) = user_library.read(lib0)
    assert e0["kind"] == "kernel" and e0["paired_runs"] == 1 and e0["paired_speedup"] == pytest.approx(100 / 50.4)


def test_library_entries_rank_configs_by_their_lower_median_pair(tmp_path):
    s = Shape(40, 40, 40)
    db = KernelDB(tmp_path / "db")
    rows = []
    # (call, method, us): the baseline at 100 us in every call; A once at 50 us (2.0x), B at 60, 80, 70 us
    for call, method, us in (("c1", "torch", 100.0), ("c1", "A", 50.0), ("c2", "torch", 100.0), ("c2", "B", 60.0),
                             ("c3", "torch", 100.0), ("c3", "B", 80.0), ("c4", "torch", 100.0), ("c4", "B", 70.0)):
        rows.append(dict(gpu_uuid="cpu-0", gpu_name=GPU, shape=s.name, m=s.m, n=s.n, k=s.k, layout="nn",
                         method=method, family="baseline" if method == "torch" else "cpuk",
                         is_baseline=method == "torch", config="{}", status="ok", device_us_median=us, call_id=call,
                         search_id="x", round=0, elapsed_s=1.0))
    db.append(rows)
    (one,) = library.library_entries(db, GPU, 1.02, [s])
    assert one["spec"] == "A" and one["paired_runs"] == 1 and one["paired_speedup"] == pytest.approx(2.0)
    (two,) = library.library_entries(db, GPU, 1.02, [s], min_pairs=2)
    # B's pairs 1.667x, 1.25x, 1.429x: its lower median (the middle one) counts
    assert two["spec"] == "B" and two["paired_runs"] == 3 and two["paired_speedup"] == pytest.approx(100 / 70)
    assert library.paired_speedups(db, GPU, [s])[(GPU, s.name, "nn", "B")] == pytest.approx(100 / 70)
