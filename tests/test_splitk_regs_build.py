"""CPU tests of the ``splitk_regs`` family: its knob rules, what it serves, and that its configs build for
sm_90a without spills, with both operands loaded straight into registers (tensor-core MMAs, no cp.async
or bulk-copy staging of A or B) and the slices reduced through distributed shared memory."""

from __future__ import annotations

import pytest

from harness.problem import Problem, Shape
from kernels_search.families import ALL as FAMILIES
from kernels_search.families.splitk_regs import registers, smem_bytes
from kernels_search.family import KnobError

from conftest import build_config, needs_nvcc, sass_of

FAM = FAMILIES["splitk_regs"]


@pytest.mark.parametrize("spec, why", [
    ("fm=4,fn=8,warps=16", "registers a thread"),
    ("fm=4,fn=8,u=2", "registers a thread"),
    ("fm=3", "not in"),
    ("splits=32", "not in"),
])
def test_rules_refuse_with_a_reason(spec, why):
    with pytest.raises(KnobError, match=why):
        FAM.parse(spec)


def test_serves_tn_with_k_a_multiple_of_8_and_passes_the_slice_count():
    k = FAM.defaults()
    assert FAM.supports(k, Problem(Shape(128, 64, 4096), "tn"))
    assert "layout tn" in FAM.supports(k, Problem(Shape(128, 64, 4096), "nn")).reason
    assert "multiple of 8" in FAM.supports(k, Problem(Shape(128, 64, 100), "tn")).reason
    assert FAM.opts(FAM.parse("splits=8"), Problem(Shape(128, 64, 4096), "tn")) == [8]
    assert registers(FAM.parse("fm=4,fn=8")) == 128 + 4 * (8 + 8)
    # half the warps' parts; the tile reuses them
    assert smem_bytes(FAM.parse("")) == max(4 * 2 * 4 * 32 * 16, 32 * 36 * 4)


@needs_nvcc
@pytest.mark.parametrize("spec", ["", "fm=4,fn=8", "fm=2,fn=8", "fm=1,fn=4,warps=4", "fm=2,fn=2,warps=16", "u=2"])
def test_configs_compile_without_spills_loading_operands_into_registers(spec, cache):
    k = FAM.parse(spec)
    res = build_config(FAM, k)
    assert res.ok, res.log[-3000:]
    assert len(res.kernels) == 1
    assert res.spill_bytes == 0, res.kernels
    sass = sass_of(res.lib_path)
    assert "HMMA" in sass and "LDG.E.NA.128.CONSTANT" in sass  # 16-byte non-coherent loads into MMA registers
    assert "LDGSTS" not in sass and "UBLKCP" not in sass and "LDSM" not in sass  # no shared-memory staging of A or B
    assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass  # the cluster barriers around the DSMEM reduction
