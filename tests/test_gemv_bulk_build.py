"""CPU tests of the ``gemv_bulk`` family: its knob rules, what it serves, and that its presets build
for sm_90a without spills, the weights copied by the TMA's bulk copy and multiplied on the tensor
cores."""

from __future__ import annotations

import pytest

from harness.problem import Problem, Shape
from kernels_search import build, toolchain
from kernels_search.families import ALL as FAMILIES
from kernels_search.families.gemv_bulk import SMEM_LIMIT, fragment_registers, smem_bytes
from kernels_search.family import KnobError

FAM = FAMILIES["gemv_bulk"]
needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")


@pytest.mark.parametrize("spec, why", [
    ("rt=64,kc=1024,stages=2", "bytes of shared memory"),
    ("rt=64,kc=512,stages=4", "bytes of shared memory"),
    ("mt=2,rt=64,kc=256,stages=3", "accumulators"),
    ("mt=2,kc=1024,stages=3", "registers"),
    ("kc=128", "not in"),
    ("ctas=4", "not in"),
])
def test_rules_refuse_with_a_reason(spec, why):
    with pytest.raises(KnobError, match=why):
        FAM.parse(spec)


def test_shared_memory_of_the_presets_fits_and_counts_stages_and_the_warp_hand_off():
    for k in FAM.preset_configs():
        assert smem_bytes(k) <= SMEM_LIMIT
    k = FAM.parse("rt=32,kc=512,stages=5,warps=8")
    assert smem_bytes(k) == 5 * 32 * (2 * 512 + 64) + 7 * 1 * 4 * 32 * 16


def test_fragment_registers_count_accumulators_and_two_stages_of_activation():
    assert fragment_registers(FAM.parse("mt=1,rt=32,kc=1024,warps=8,stages=3")) == 4 * 4 + 2 * 4 * 1 * 2 * 4
    assert fragment_registers(FAM.parse("mt=2,rt=32,kc=512,warps=8")) == 96


def test_serves_tn_decode_rows_with_k_a_multiple_of_64():
    k = FAM.defaults()
    assert FAM.supports(k, Problem(Shape(16, 4096, 4096), "tn"))
    assert "layout tn" in FAM.supports(k, Problem(Shape(8, 4096, 4096), "nn")).reason
    assert "M <= 16" in FAM.supports(k, Problem(Shape(17, 4096, 4096), "tn")).reason
    assert FAM.supports(FAM.parse("mt=2"), Problem(Shape(32, 4096, 4096), "tn"))
    assert "multiple of 64" in FAM.supports(k, Problem(Shape(1, 4096, 4104), "tn")).reason
    assert FAM.opts(k, Problem(Shape(8, 64, 64), "tn")) == [0]


@needs_nvcc
@pytest.mark.parametrize("preset", FAM.presets + ("rt=16,kc=512,warps=4", "rt=64,kc=256,stages=3"))
def test_presets_compile_without_spills(preset, cache):
    k = FAM.parse(preset)
    res = build.build(FAM.render(k), FAM.extra_flags(k), extra_key=FAM.extra_key(k))
    assert res.ok, res.log[-3000:]
    assert len(res.kernels) == 1
    assert res.spill_bytes == 0, res.kernels
    if not toolchain.find_cuobjdump():
        pytest.skip("cuobjdump not installed")
    sass = toolchain.dump_sass(res.lib_path)
    assert "HMMA.16816.F32" in sass
    assert "UBLKCP" in sass  # the weights arrive by bulk copy, not by per-thread loads
