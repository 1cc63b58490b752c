"""CPU tests of the ``inductor`` peer: registration as a non-baseline, one compiled graph per
shape however many shapes, and a real CPU ``compare`` that gates, times and records its compile
time and the run's label. (tests/test_inductor_gpu.py checks it on CUDA.)"""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import torch

import baselines  # noqa: F401  (registers the methods)
from harness import registry
from harness.method import Method, PrepareContext
from harness.problem import Problem, Shape


def test_inductor_is_a_registered_peer_not_a_default_baseline():
    assert "inductor" not in registry.default_specs()
    (m,) = registry.resolve(["inductor"])
    assert isinstance(m, Method)
    assert m.name == "inductor" and m.family == "peer" and m.is_baseline is False
    assert m.config["mode"] == "max-autotune-no-cudagraphs" and "cpu" in m.devices and "cuda" in m.devices
    with pytest.raises(ValueError):
        registry.resolve(["inductor:mode=default"])


def _prepare(m, shape, layout):
    p = Problem(Shape(*shape), layout)
    a = torch.randn(p.m, p.k, dtype=torch.float16)
    b = torch.randn(*p.b_shape, dtype=torch.float16)
    c = torch.full((p.m, p.n), float("nan"), dtype=torch.float16)
    prep = m.prepare(p, PrepareContext("cpu", (a, b, c), lambda fns: [0.0] * len(fns)))
    return p, prep, (a, b, c)


def test_every_shape_gets_its_own_compiled_graph_past_the_recompile_limit():
    """With one function compiled for many shapes, Dynamo stops compiling past its recompile
    limit and silently runs eager torch.mm; a code object per shape keeps each one compiled.
    The limit is set to 1 here, so a second shape would already fall back."""
    from torch._dynamo.utils import counters

    (m,) = registry.resolve(["inductor"])
    before = counters["stats"]["unique_graphs"]
    with torch._dynamo.config.patch(recompile_limit=1):
        for shape, layout in (((16, 24, 8), "nn"), ((8, 16, 24), "nn"), ((16, 24, 8), "tn")):
            p, prep, (a, b, c) = _prepare(m, shape, layout)
            assert prep.compile_s is not None and 0 < prep.compile_s <= prep.setup_s
            a.copy_(torch.randn_like(a))  # the prepared call computes from the current values
            prep.fn(a, b, c)
            want = a.float() @ (b.float() if layout == "nn" else b.float().t())
            assert torch.allclose(c.float(), want, rtol=1e-2, atol=1e-2)
    assert counters["stats"]["unique_graphs"] - before == 3


@pytest.mark.slow
def test_cpu_compare_records_inductor_compile_time_and_the_label(tmp_path):
    out = tmp_path / "run.parquet"
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "compare", "--device", "cpu",
           "-s", "64_64_64", "-s", "96_128_32", "-m", "torch,inductor", "--budget", "0.2", "--min-rounds", "2",
           "--max-rounds", "4", "--label", "inductor on CPU", "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    df = pd.read_parquet(out)
    ind = df[df["method"] == "inductor"]
    assert len(ind) == 4 and (ind["status"] == "ok").all() and ind["gate_passed"].all()
    assert not ind["is_baseline"].any() and (ind["family"] == "peer").all()
    assert (ind["compile_s"] > 0).all() and (ind["compile_s"] <= ind["setup_s"]).all()
    assert df.loc[df["method"] == "torch", "compile_s"].isna().all()
    assert (df["run_label"] == "inductor on CPU").all()
    # a resumed run keeps its label; a different one is refused
    again = subprocess.run(cmd[:-4] + ["--label", "another", "-o", str(out)], capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 2 and "labelled 'inductor on CPU'" in again.stdout + again.stderr
