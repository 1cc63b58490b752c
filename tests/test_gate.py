"""The correctness gate catches each kind of wrong method, on the CPU, with the right reason."""

import torch
import pytest

from harness.gate import GateCandidate, run_gate
from harness.problem import Problem, Shape


def good(layout):
    def fn(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)
    return fn


def wrong_values(layout):
    def fn(a, b, c):
        good(layout)(a, b, c)
        c[1, 2] += 0.5
    return fn


def unwritten(layout):
    def fn(a, b, c):
        good(layout)(a, b, c)
        c[-1, -1] = float("nan")  # as if the last tile were never stored
    return fn


def unwritten_ragged(layout):
    """A tile loop that forgets the ragged edge: the last row is never written."""
    def fn(a, b, c):
        full = torch.matmul(a, b if layout == "nn" else b.t())
        c[:-1].copy_(full[:-1])
    return fn


def guard_writer(layout):
    def fn(a, b, c):
        good(layout)(a, b, c)
        flat = c.view(-1)
        base = torch.as_strided(flat, (flat.numel() + 8,), (1,))  # 8 elements past the end of C
        base[flat.numel():] = 0
    return fn


def pointer_cache(layout):
    cache = {}
    def fn(a, b, c):
        key = (a.data_ptr(), b.data_ptr())
        if key not in cache:
            good(layout)(a, b, c)
            cache[key] = c.clone()
        c.copy_(cache[key])
    return fn


def input_mutator(layout):
    def fn(a, b, c):
        good(layout)(a, b, c)
        a.mul_(1.0).add_(0.0)
        a[0, 0] = 0
    return fn


def fp16_accumulate(layout):
    """Accumulates in fp16, in K-chunks of 1: the classic precision cheat."""
    def fn(a, b, c):
        bb = b if layout == "nn" else b.t()
        acc = torch.zeros(c.shape, dtype=torch.float16)
        for k0 in range(0, a.shape[1], 64):
            acc += (a[:, k0:k0 + 64].float() @ bb[k0:k0 + 64].float()).half()
        c.copy_(acc)
    return fn


def raiser(layout):
    def fn(a, b, c):
        raise RuntimeError("illegal memory access (simulated)")
    return fn


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("maker,shape,needle", [
    (wrong_values, (32, 48, 64), "wrong values"),
    (unwritten, (32, 48, 64), "unwritten"),
    (unwritten_ragged, (33, 17, 65), "unwritten"),
    (guard_writer, (16, 16, 16), "outside C"),
    (pointer_cache, (32, 32, 32), "cached"),
    (input_mutator, (16, 24, 32), "inputs"),
    (fp16_accumulate, (64, 64, 8192), "wrong values"),
    (raiser, (8, 8, 8), "raised RuntimeError"),
])
def test_gate_catches(layout, maker, shape, needle):
    p = Problem(Shape(*shape), layout)
    res = run_gate(p, [GateCandidate("ref", good(layout), anchor=True), GateCandidate("bad", maker(layout))],
                   "cpu", seed=123)
    assert res["ref"].passed, res["ref"].reason
    assert not res["bad"].passed
    assert needle in res["bad"].reason


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 3, 5), (64, 64, 64), (33, 65, 4096)])
def test_gate_passes_correct_methods_and_derives_tolerance(shape):
    p = Problem(Shape(*shape), "nn")
    via_fp32 = lambda a, b, c: c.copy_((a.float() @ b.float()).half())  # noqa: E731
    res = run_gate(p, [GateCandidate("ref", good("nn"), anchor=True), GateCandidate("fp32", via_fp32)], "cpu", seed=7)
    for r in res.values():
        assert r.passed, r.reason
        assert 0 <= r.rel_fro_err <= r.tol_rel_fro
    assert res["ref"].tol_rel_fro >= 4 * 2**-12  # never tighter than the fp16 rounding floor


def test_broken_anchor_does_not_loosen_the_gate():
    p = Problem(Shape(32, 32, 32), "nn")
    res = run_gate(p, [GateCandidate("broken_anchor", wrong_values("nn"), anchor=True),
                       GateCandidate("bad", wrong_values("nn"))], "cpu", seed=1)
    assert not res["broken_anchor"].passed and not res["bad"].passed
