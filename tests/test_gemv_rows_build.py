"""CPU tests of the ``gemv_rows`` family: its knob rules, what it serves, and that its configs build for
sm_90a without spills, on the CUDA cores (fp32 FMAs, no tensor-core or shared-memory staging of the
weights)."""

from __future__ import annotations

import pytest

from harness.problem import Problem, Shape
from kernels_search.families import ALL as FAMILIES
from kernels_search.families.gemv_rows import load_registers
from kernels_search.family import KnobError

from conftest import build_config, needs_nvcc, sass_of

FAM = FAMILIES["gemv_rows"]


@pytest.mark.parametrize("spec, why", [
    ("m=4", "registers a thread has"),
    ("r=8,u=1", "registers a thread has"),
    ("m=4,u=1", "registers a thread has"),
    ("m=3", "not in"),
])
def test_rules_refuse_with_a_reason(spec, why):
    with pytest.raises(KnobError, match=why):
        FAM.parse(spec)


def test_serves_tn_rows_up_to_m_with_k_a_multiple_of_8():
    k = FAM.defaults()
    assert FAM.supports(k, Problem(Shape(1, 4096, 4096), "tn"))
    assert "layout tn" in FAM.supports(k, Problem(Shape(1, 4096, 4096), "nn")).reason
    assert "M <= 1" in FAM.supports(k, Problem(Shape(2, 4096, 4096), "tn")).reason
    assert FAM.supports(FAM.parse("m=4,u=1,cps=2"), Problem(Shape(4, 64, 64), "tn"))
    assert "multiple of 8" in FAM.supports(k, Problem(Shape(1, 64, 100), "tn")).reason
    assert load_registers(FAM.parse("u=4,r=4,cps=2")) == 64 + 4
    assert load_registers(FAM.parse("m=2,r=2,u=4,cps=2")) == 32 + 4 + 4


@needs_nvcc
@pytest.mark.parametrize("spec", FAM.presets + ("m=4,u=1,cps=2", "u=4,r=4,cps=2", "threads=512,cps=2",
                                                "threads=128,r=8,u=1"))
def test_configs_compile_without_spills_on_the_cuda_cores(spec, cache):
    k = FAM.parse(spec)
    res = build_config(FAM, k)
    assert res.ok, res.log[-3000:]
    assert len(res.kernels) == 1
    assert res.spill_bytes == 0, res.kernels
    sass = sass_of(res.lib_path)
    assert "FFMA" in sass and "HMMA" not in sass
    assert "LDGSTS" not in sass and "UBLKCP" not in sass  # the weights go straight to registers
