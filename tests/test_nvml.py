"""NVML handles follow the CUDA device torch uses, not torch's index (CPU tests, a fake NVML).

A host with two GPUs and CUDA_VISIBLE_DEVICES=1,0: torch's device 0 is NVML's device 1. Reading
NVML by torch's index would report the other GPU's clocks; the handle must come from the CUDA
device's UUID or PCI bus id.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from harness import env as envmod
from harness.nvml import NvmlLookupError, nvml_handle, pci_bus_id
from harness.timing.clocks import ClockSampler

# NVML's view: every GPU of the host, in PCI order.
GPUS = [
    dict(uuid="GPU-11111111-aaaa-bbbb-cccc-000000000000", domain=0, bus=0x17, dev=0, sm=1980, power=700_000),
    dict(uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000", domain=0, bus=0x65, dev=0, sm=1410, power=450_000),
]


class _Handle:
    def __init__(self, i):
        self.i = i


def fake_nvml(gpus=GPUS, with_uuid_lookup=True, with_bus_lookup=True) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.by_index_calls = []

    def by_uuid(u):
        u = u.decode() if isinstance(u, bytes) else u
        for i, g in enumerate(gpus):
            if g["uuid"] == u:
                return _Handle(i)
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    def by_bus(b):
        b = (b.decode() if isinstance(b, bytes) else b).lower()
        for i, g in enumerate(gpus):
            if b == f"{g['domain']:08x}:{g['bus']:02x}:{g['dev']:02x}.0":
                return _Handle(i)
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    def by_index(i):
        nv.by_index_calls.append(i)
        return _Handle(i)

    nv.nvmlInit = lambda: None
    nv.nvmlDeviceGetCount = lambda: len(gpus)
    if with_uuid_lookup:
        nv.nvmlDeviceGetHandleByUUID = by_uuid
    else:
        nv.nvmlDeviceGetHandleByUUID = lambda u: (_ for _ in ()).throw(RuntimeError("NVML_ERROR_NOT_SUPPORTED"))
    if with_bus_lookup:
        nv.nvmlDeviceGetHandleByPciBusId_v2 = by_bus
    nv.nvmlDeviceGetHandleByIndex = by_index
    nv.nvmlDeviceIsMigDeviceHandle = lambda h: 0
    nv.nvmlDeviceGetUUID = lambda h: gpus[h.i]["uuid"]
    nv.nvmlSystemGetDriverVersion = lambda: "570.00"
    nv.nvmlDeviceGetClockInfo = lambda h, which: gpus[h.i]["sm"] if which == 1 else 2619
    nv.nvmlDeviceGetMaxClockInfo = lambda h, which: 1980 if which == 1 else 2619
    nv.nvmlDeviceGetApplicationsClock = lambda h, which: gpus[h.i]["sm"] if which == 1 else 2619
    nv.nvmlDeviceGetEnforcedPowerLimit = lambda h: gpus[h.i]["power"]
    nv.nvmlDeviceGetPowerUsage = lambda h: gpus[h.i]["power"] // 2
    nv.nvmlDeviceGetTemperature = lambda h, which: 40 + h.i
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0
    return nv


def visible(order, uuid=True, bus=True):
    """torch.cuda.get_device_properties as CUDA_VISIBLE_DEVICES=order makes it: torch's device
    i is the host's GPU order[i]. torch spells the UUID without NVML's "GPU-" prefix."""

    def props(i):
        g = GPUS[order[i]]
        p = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                                  total_memory=141 << 30, L2_cache_size=60 << 20)
        if uuid:
            p.uuid = g["uuid"].removeprefix("GPU-")
        if bus:
            p.pci_domain_id, p.pci_bus_id, p.pci_device_id = g["domain"], g["bus"], g["dev"]
        return p

    return props


@pytest.fixture
def reordered(monkeypatch):
    """CUDA_VISIBLE_DEVICES=1,0 on a two-GPU host, with a fake NVML in sys.modules."""
    nv = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    monkeypatch.setattr(torch.cuda, "get_device_properties", visible([1, 0]))
    return nv


def test_handle_follows_uuid_when_visible_devices_reorder(reordered):
    assert nvml_handle(reordered, 0).i == 1
    assert nvml_handle(reordered, 1).i == 0
    assert reordered.by_index_calls == []


def test_handle_falls_back_to_pci_bus_id(monkeypatch):
    nv = fake_nvml(with_uuid_lookup=False)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(torch.cuda, "get_device_properties", visible([1, 0]))
    assert pci_bus_id(torch.cuda.get_device_properties(0)) == "00000000:65:00.0"
    assert nvml_handle(nv, 0).i == 1
    monkeypatch.setattr(torch.cuda, "get_device_properties", visible([1, 0], uuid=False))
    assert nvml_handle(nv, 0).i == 1


def test_no_identity_on_a_multi_gpu_host_is_an_error_not_a_guess(monkeypatch):
    nv = fake_nvml()
    monkeypatch.setattr(torch.cuda, "get_device_properties", visible([1, 0], uuid=False, bus=False))
    with pytest.raises(NvmlLookupError, match="NVML sees 2 GPUs"):
        nvml_handle(nv, 0)
    assert nv.by_index_calls == []
    one = fake_nvml(gpus=GPUS[1:])  # one GPU: NVML's index 0 cannot be another GPU
    assert nvml_handle(one, 0).i == 0


def test_env_and_clock_sampler_read_the_visible_gpu(reordered):
    info = envmod._nvml_info(0)
    assert info["gpu_uuid"] == GPUS[1]["uuid"]
    assert info["power_limit_w"] == 450.0
    assert info["sm_clock_mhz"] == 1410
    sample = ClockSampler(0).sample()
    assert sample.sm_mhz == 1410.0 and sample.power_w == 225.0 and sample.temp_c == 41.0
    assert reordered.by_index_calls == []


def test_clock_sampler_without_a_match_reads_nothing(monkeypatch):
    nv = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(torch.cuda, "get_device_properties", visible([1, 0], uuid=False, bus=False))
    sampler = ClockSampler(0)
    assert not sampler.available
    assert "no NVML device matches" in envmod._nvml_info(0)["nvml_error"]
