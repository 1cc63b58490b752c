"""CPU tests of the ``skinny`` family: its knob rules, what it serves, and that every preset builds
for sm_90a without spills, on the tensor cores (HMMA) and, with ``tma=1``, through the TMA engine."""

from __future__ import annotations

import re

import pytest

from harness.problem import Problem, Shape
from kernels_search.families import ALL as FAMILIES
from kernels_search.families.skinny import SMEM_LIMIT, smem_bytes
from kernels_search.family import KnobError

from conftest import build_config, needs_nvcc, sass_of

FAM = FAMILIES["skinny"]


@pytest.mark.parametrize("spec, why", [
    ("wt=64,warps_w=8", r"multiple of 16\*warps_w"),
    ("nt=8,warps_n=2", r"multiple of 8\*warps_n"),
    ("wt=256,nt=128,warps_w=1,warps_n=1", "accumulator registers"),
    ("wt=256,bk=256,stages=8", "shared memory"),
    ("stages=4,minb=2", "exceed an SM's 228 KB"),
    ("orient=3", "not in"),
])
def test_rules_refuse_with_a_reason(spec, why):
    with pytest.raises(KnobError, match=why):
        FAM.parse(spec)


def test_odd_narrow_fragment_count_is_refused():
    # 24 columns a warp = 3 fragments of 8: ldmatrix feeds one or pairs
    assert "narrow fragments" in FAM.check({**FAM.defaults(), "nt": 24, "warps_n": 1})


def test_shared_memory_accounts_for_the_largest_kernel():
    k = FAM.defaults()
    # TMA: dense 128x128 wide stages, padded 8x(128+8) narrow stages, the largest output staging, slack
    assert smem_bytes(k) == 4 * (128 * 128 + 8 * 136) * 2 + 8 * 136 * 2 + 1024
    k0 = {**k, "tma": 0}
    assert smem_bytes(k0) == 4 * (128 * 136 + 8 * 136) * 2 + 8 * 136 * 2
    assert all(smem_bytes(FAM.parse(p)) <= SMEM_LIMIT for p in FAM.presets)


def test_serves_aligned_rows_only():
    k = FAM.defaults()
    assert FAM.supports(k, Problem(Shape(1, 4096, 4096), "tn"))
    assert FAM.supports(k, Problem(Shape(3, 60, 64), "tn"))            # N free in tn
    assert not FAM.supports(k, Problem(Shape(3, 60, 64), "nn"))        # nn: rows of B are N long
    assert "K a multiple of 8" in FAM.supports(k, Problem(Shape(16, 64, 100), "tn")).reason


def test_runtime_options_share_one_binary():
    a, b = FAM.parse("sched=0,splits=8,orient=2"), FAM.parse("")
    assert FAM.compile_knobs(a) == FAM.compile_knobs(b)
    assert FAM.opts(a, Problem(Shape(8, 64, 64))) == [8, 2, 0, 0]


@needs_nvcc
@pytest.mark.parametrize("preset", FAM.presets + ("tma=0",))
def test_presets_compile_without_spills(preset, cache):
    k = FAM.parse(preset)
    res = build_config(FAM, k)
    assert res.ok, res.log[-3000:]
    assert len(res.kernels) == 4, "one kernel per orientation x B layout"
    assert res.spill_bytes == 0, res.kernels
    sass = sass_of(res.lib_path)
    assert "HMMA.16816.F32" in sass
    assert ("UTMALDG.2D" in sass) == bool(k["tma"])
    assert re.search(r"LDGSTS", sass)  # the narrow operand (and the wide one without TMA) by cp.async
