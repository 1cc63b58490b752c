"""CPU tests of the ``gemv_rows_tc`` family: its knob rules, what it serves, and that its configs build
for sm_90a without spills, the weights staged by cp.async and multiplied on the tensor cores."""

from __future__ import annotations

import pytest

from harness.problem import Problem, Shape
from kernels_search import build, toolchain
from kernels_search.families import ALL as FAMILIES
from kernels_search.families.gemv_rows_tc import smem_bytes
from kernels_search.family import KnobError

FAM = FAMILIES["gemv_rows_tc"]
needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")


@pytest.mark.parametrize("spec, why", [
    ("r=64,stages=4", "shared memory"),  # 4 stages x 72 rows x 1 KB
    ("cps=2", "shared memory"),          # 164 KB against the 113 KB each of 2 CTAs a SM has
    ("m=12", "not in"),
])
def test_rules_refuse_with_a_reason(spec, why):
    with pytest.raises(KnobError, match=why):
        FAM.parse(spec)


def test_shared_memory_counts_the_ring_and_the_warp_parts():
    k = FAM.defaults()
    assert smem_bytes(k) == 2 * 4 * (32 + 8) * 512 + 4 * 8 * 8 * 16
    assert smem_bytes(FAM.parse("m=16")) == 2 * 4 * (32 + 16) * 512 + 4 * 8 * 16 * 16


def test_serves_tn_rows_up_to_m_with_k_a_multiple_of_8():
    k = FAM.defaults()
    assert FAM.supports(k, Problem(Shape(8, 4096, 4096), "tn"))
    assert FAM.supports(k, Problem(Shape(1, 4096, 4096), "tn"))
    assert "layout tn" in FAM.supports(k, Problem(Shape(8, 4096, 4096), "nn")).reason
    assert "M <= 8" in FAM.supports(k, Problem(Shape(9, 4096, 4096), "tn")).reason
    assert FAM.supports(FAM.parse("m=16"), Problem(Shape(16, 64, 64), "tn"))
    assert "multiple of 8" in FAM.supports(k, Problem(Shape(8, 64, 100), "tn")).reason


@needs_nvcc
@pytest.mark.parametrize("spec", FAM.presets + ("kc=256,threads=128,cps=2", "m=16,r=64,kc=256", "r=16,kc=1024,stages=3"))
def test_configs_compile_without_spills_on_the_tensor_cores(spec, cache):
    k = FAM.parse(spec)
    res = build.build(FAM.render(k), FAM.extra_flags(k), extra_key=FAM.extra_key(k))
    assert res.ok, res.log[-3000:]
    assert len(res.kernels) == 1
    assert res.spill_bytes == 0, res.kernels
    if not toolchain.find_cuobjdump():
        pytest.skip("cuobjdump not installed")
    sass = toolchain.dump_sass(res.lib_path)
    assert "HMMA" in sass and "LDSM" in sass and "LDGSTS" in sass  # cp.async in, ldmatrix out, mma
