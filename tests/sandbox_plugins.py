"""Deliberately misbehaving CPU methods for the sandbox tests, registered as a plug-in.

Imported by the sandbox's worker process through ``plugins=["sandbox_plugins"]``; each method
misbehaves in one way at one stage, the way untrusted kernels do on a GPU.
"""

import os
import signal
import time

import torch

from harness.method import SUPPORTED, Prepared
from harness.registry import register


class _Cpu:
    family = "test"
    config: dict = {}
    source_hash = ""
    is_baseline = False
    devices = ("cpu",)

    def __init__(self, name, prepare_hook=None, call_hook=None):
        self.name = name
        self.prepare_hook = prepare_hook
        self.call_hook = call_hook

    def supports(self, problem, device):
        return SUPPORTED

    def prepare(self, problem, ctx):
        if self.prepare_hook:
            self.prepare_hook()
        lay, hook = problem.layout, self.call_hook

        def fn(a, b, c):
            if hook:
                hook()
            torch.matmul(a, b if lay == "nn" else b.t(), out=c)
        return Prepared(fn)


def _hang():
    time.sleep(3600)


def _exit():
    os._exit(7)  # like a process killed by a fatal CUDA error


def _segv():
    os.kill(os.getpid(), signal.SIGSEGV)


def _raise():
    raise RuntimeError("misaligned address (simulated)")


for name, kw in {
    "t-good": {},
    "t-hang-prepare": {"prepare_hook": _hang},
    "t-hang-call": {"call_hook": _hang},
    "t-exit-call": {"call_hook": _exit},
    "t-segv-call": {"call_hook": _segv},
    "t-raise-call": {"call_hook": _raise},
}.items():
    register(name, lambda args, _n=name, _kw=kw: _Cpu(_n, **_kw), help="sandbox test method")


def _decline():
    from harness.method import Unsupported

    raise Unsupported("kernel declined these options at run time (simulated can_implement refusal)")


register("t-decline-call", lambda args: _Cpu("t-decline-call", call_hook=_decline), help="sandbox test method")


class _SlowBaseline(_Cpu):
    """A trusted method whose calls take 0.3 s: slow, not hung (no anti-cheat stage: a baseline)."""

    is_baseline = True


register("t-slow-baseline", lambda args: _SlowBaseline("t-slow-baseline", call_hook=lambda: time.sleep(0.3)),
         help="sandbox test method")
