"""Synthetic CPU kernel family for the search tests, registered as a plug-in (``cpuk``).

Imported by the evaluator's worker through ``plugins=["test_search_plugin"]``. Its knobs change
real work on the CPU, so the measured reward depends on them the way a GPU family's does:

* ``pad``: extra redundant matmuls per call (0 is fastest, 3 slowest);
* ``split``: K split into that many fp32 partial products (correct, a little slower when > 1);
* ``bug``: 0 correct; 1 adds 1.0 to C (the gate fails: reward -1); 2 kills the worker in the
  call (a crash: reward -1, worker restarted). Validity rules keep bug=1 to pad<=1 and bug=2 to
  the single config pad=3, split=4, so crashes are rare but reachable.
* pad=2 with split=4 "fails to compile" (prepare raises a build error: reward -1).
* ``small``: 1 serves shapes with M <= 64 only (``supports`` declines others), for the library
  dispatcher's nearest-shape rule.

This module holds no tests.
"""

import hashlib
import os

from harness.method import SUPPORTED, Prepared, unsupported
from harness.registry import register
from kernels_search.family import Family, Knob
from kernels_search.search.learner import register_search_family


class CpuFamily(Family):
    def check(self, k):
        if k["bug"] == 1 and k["pad"] > 1:
            return "bug=1 needs pad <= 1"
        if k["bug"] == 2 and (k["pad"], k["split"]) != (3, 4):
            return "bug=2 only with pad=3, split=4"
        return ""

    def supports(self, k, problem):
        if k["small"] and problem.m > 64:
            return unsupported("small=1 serves M <= 64 only")
        return SUPPORTED


FAMILY = CpuFamily(name="cpuk", backend="cpu", knobs=(
    Knob("pad", (0, 1, 2, 3), 0),
    Knob("split", (1, 2, 4), 1),
    Knob("bug", (0, 1, 2), 0),
    Knob("small", (0, 1), 0),
))


class CpuKernel:
    family = "cpuk"
    is_baseline = False
    devices = ("cpu",)

    def __init__(self, knobs):
        FAMILY.validate(knobs)
        self.knobs = dict(knobs)
        self.config = dict(knobs)
        self.name = FAMILY.spec(knobs)
        self.source_hash = hashlib.sha256(self.name.encode()).hexdigest()

    def supports(self, problem, device):
        return FAMILY.supports(self.knobs, problem)

    def prepare(self, problem, ctx):
        k = self.knobs
        if k["pad"] == 2 and k["split"] == 4:
            raise RuntimeError("build failed: synthetic nvcc error (pad=2 with split=4)")
        lay, pad, split, bug = problem.layout, k["pad"], k["split"], k["bug"]
        K = problem.k

        def fn(a, b, c):
            bb = (b if lay == "nn" else b.t()).float()
            af = a.float()
            step = -(-K // split)
            acc = None
            for s in range(0, K, step):
                part = af[:, s:s + step] @ bb[s:s + step]
                acc = part if acc is None else acc + part
            for _ in range(pad):
                acc = acc + 0.0 * (af @ bb)
            if bug == 1:
                acc = acc + 1.0
            elif bug == 2:
                os._exit(9)
            c.copy_(acc)
        return Prepared(fn, info={"ptxas_max_registers": 32 + 8 * pad, "ptxas_spill_bytes": 0})


register("cpuk", lambda args: CpuKernel(FAMILY.parse(args)), help="search test CPU family")
register_search_family(FAMILY)


def made_up_rows(env, shape, specs, layouts) -> list[dict]:
    """Correct rows of ``specs`` on ``shape`` as an evaluator returns them, measured by nothing: a
    baseline at 100 us, a cpuk config at 60 + 10 pad + 3 split us (fake evaluators of the search tests)."""
    import json

    from harness.registry import resolve

    rows = []
    for m in resolve(specs):
        for lay in layouts:
            us = 100.0 if m.is_baseline else 60.0 + 10.0 * m.config["pad"] + 3.0 * m.config["split"]
            rows.append(dict(env, shape=shape.name, m=shape.m, n=shape.n, k=shape.k, layout=lay,
                             method=m.name, family=m.family, is_baseline=m.is_baseline,
                             config=json.dumps(m.config, default=str), source_hash="", info="{}", setup_s=0.0,
                             status="ok", status_reason="", gate_passed=True, device_us_median=us))
    return rows
