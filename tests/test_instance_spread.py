"""scripts/instance_spread.py on the CPU path (the H200 is where its numbers mean something)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "instance_spread", Path(__file__).resolve().parents[1] / "scripts" / "instance_spread.py")
instance_spread = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(instance_spread)


def test_instances_are_separate_prepares_timed_in_the_same_rounds(monkeypatch):
    from harness import registry

    prepared = []
    real = registry.resolve

    def counting(specs):
        ms = real(specs)
        prepared.extend(id(m) for m in ms)
        return ms

    monkeypatch.setattr(registry, "resolve", counting)
    out = instance_spread.measure("torch", "32_32_32", instances=3, rounds=3, device="cpu")
    assert len(set(prepared)) == 3  # one method object, one prepare, per instance
    assert [r["instance"] for r in out["instances"]] == [0, 1, 2]
    assert all(r["median_us"] > 0 and r["entry_gap"] >= 0 for r in out["instances"])
    meds = [r["median_us"] for r in out["instances"]]
    assert out["spread"] == pytest.approx(max(meds) / min(meds) - 1)
    assert out["noise"] == max(r["entry_gap"] for r in out["instances"])


def test_cli_needs_two_instances(capsys):
    with pytest.raises(SystemExit) as e:
        instance_spread.main(["torch", "8_8_8", "--instances", "1"])
    assert e.value.code == 2 and "at least 2" in capsys.readouterr().err
