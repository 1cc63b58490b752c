"""CPU tests of the ``gemv`` family: its knob rules, what it serves, and that its presets build for
sm_90a without spills, on the tensor cores, with every weight load issued before the MMAs that
consume it (no shared-memory staging)."""

from __future__ import annotations

import pytest

from harness.problem import Problem, Shape
from kernels_search.families import ALL as FAMILIES
from kernels_search.families.gemv import rows_per_cta, smem_bytes
from kernels_search.family import KnobError

from conftest import build_config, needs_nvcc, sass_of

FAM = FAMILIES["gemv"]


@pytest.mark.parametrize("spec, why", [
    ("warps=4,kw=8", "must divide warps"),
    ("mt=4,rw=4,u=8", "registers per thread"),
    ("mt=4,rw=2,u=4,warps=8,minb=2", "exceed an SM's 64K registers"),
    ("mt=4,rw=2,warps=16,kw=8,u=1,minb=1", "static shared memory"),
    ("splits=3", "not in"),
])
def test_rules_refuse_with_a_reason(spec, why):
    with pytest.raises(KnobError, match=why):
        FAM.parse(spec)


def test_serves_tn_decode_rows_only():
    k = FAM.defaults()
    assert FAM.supports(k, Problem(Shape(8, 4096, 4096), "tn"))
    assert "layout tn" in FAM.supports(k, Problem(Shape(8, 4096, 4096), "nn")).reason
    assert "M <= 8" in FAM.supports(k, Problem(Shape(9, 4096, 4096), "tn")).reason
    assert FAM.supports(FAM.parse("mt=4"), Problem(Shape(32, 4096, 4096), "tn"))
    assert "K a multiple of 8" in FAM.supports(k, Problem(Shape(1, 64, 100), "tn")).reason


def test_geometry():
    k = FAM.parse("rw=2,warps=8,kw=2,minb=1")
    assert rows_per_cta(k) == 16 * 2 * 4
    assert smem_bytes(k) == 1 * 4 * 2 * 1 * 32 * 16
    assert FAM.opts(FAM.parse("splits=8"), Problem(Shape(8, 64, 64), "tn")) == [8]


@needs_nvcc
@pytest.mark.parametrize("preset", FAM.presets + ("rw=2,u=8,warps=8,kw=8,minb=1",))
def test_presets_compile_without_spills(preset, cache):
    k = FAM.parse(preset)
    res = build_config(FAM, k)
    assert res.ok, res.log[-3000:]
    assert len(res.kernels) == 1
    assert res.spill_bytes == 0, res.kernels
    sass = sass_of(res.lib_path)
    assert "HMMA.16816.F32" in sass
    assert "LDGSTS" not in sass and "LDSM" not in sass  # no operand staged in shared memory
    ops = [ln for ln in sass.splitlines() if "LDG.E" in ln or "HMMA" in ln or "LDS" in ln]
    first_mma = next(i for i, ln in enumerate(ops) if "HMMA" in ln)
    assert not any("LDS" in ln for ln in ops[:first_mma])
    # a run's loads (u chunks of 2*rw weight and mt activation vectors) are in flight together: all
    # but the last chunk's are issued before the first MMA (ptxas may start on the first chunk early)
    assert first_mma >= max(k["u"] - 1, 1) * (2 * k["rw"] + k["mt"]), ops[: first_mma + 1]
