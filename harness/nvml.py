"""The NVML handle of a CUDA device, found by what the device is, never by its index.

torch numbers GPUs after ``CUDA_VISIBLE_DEVICES`` (and ``CUDA_DEVICE_ORDER``, fastest first by
default); NVML numbers every GPU of the host in PCI order and ignores both. torch's device ``i``
is then often another GPU to NVML, and clocks, power and throttle flags read by index would be
another GPU's. So the handle comes from the CUDA device's UUID, else its PCI bus id; by index only
when NVML sees one GPU (there is no other to confuse it with). Anything else is ``NvmlLookupError``:
no reading is better than another GPU's reading.

The NVML module is passed in (``pynvml``, or a stand-in in tests); this module imports none.
"""

from __future__ import annotations

import torch


class NvmlLookupError(RuntimeError):
    """No NVML device could be matched to the CUDA device with certainty."""


def _uuid_candidates(props) -> list[str]:
    """NVML spellings of the CUDA device's UUID: NVML prefixes "GPU-" (a MIG instance: "MIG-"),
    torch gives the bare hex groups."""
    text = str(getattr(props, "uuid", "") or "").strip()
    if not text:
        return []
    if text.startswith(("GPU-", "MIG-")):
        return [text]
    return [f"GPU-{text}", f"MIG-{text}"]


def cuda_uuid(props) -> str | None:
    """The CUDA device's UUID as NVML spells a whole GPU ("GPU-..."), or None when torch gives none."""
    c = _uuid_candidates(props)
    return c[0] if c else None


def pci_bus_id(props) -> str | None:
    """``DDDDDDDD:BB:DD.0``, NVML's own bus-id format, from torch's device properties (CUDA
    builds of torch carry ``pci_domain_id``, ``pci_bus_id``, ``pci_device_id``); None without them."""
    try:
        return f"{int(props.pci_domain_id):08x}:{int(props.pci_bus_id):02x}:{int(props.pci_device_id):02x}.0"
    except (AttributeError, TypeError, ValueError):
        return None


def nvml_handle(nvml, device_index: int):
    """The NVML handle of torch's CUDA device ``device_index`` (NVML already initialised).

    Tried in order: the device's UUID, its PCI bus id, and index 0 when NVML counts exactly one
    GPU. Raises NvmlLookupError naming what was tried when none matches."""
    props = torch.cuda.get_device_properties(device_index)
    tried = []
    for uuid in _uuid_candidates(props):
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid.encode())
        except Exception as e:
            tried.append(f"UUID {uuid} ({e})")
    bus = pci_bus_id(props)
    if bus:
        by_bus = getattr(nvml, "nvmlDeviceGetHandleByPciBusId_v2", None) or nvml.nvmlDeviceGetHandleByPciBusId
        try:
            return by_bus(bus.encode())
        except Exception as e:
            tried.append(f"PCI bus id {bus} ({e})")
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception as e:
        count = None
        tried.append(f"device count ({e})")
    if count == 1:
        return nvml.nvmlDeviceGetHandleByIndex(0)
    raise NvmlLookupError(f"no NVML device matches CUDA device {device_index}; tried "
                          f"{', '.join(tried) or 'nothing (torch gave no UUID or PCI bus id)'}"
                          + (f"; NVML sees {count} GPUs, so its index is no substitute" if count else ""))


def physical_handle(nvml, handle):
    """The whole GPU behind ``handle``: a MIG instance's parent (clocks, power and throttle
    reasons are the physical GPU's), else ``handle`` itself."""
    try:
        is_mig = nvml.nvmlDeviceIsMigDeviceHandle(handle)
        if int(getattr(is_mig, "value", is_mig)):  # pynvml returns a ctypes c_uint
            return nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
    except Exception:
        pass
    return handle


def open_device(device_index: int):
    """(pynvml, handle, physical handle) of torch's CUDA device ``device_index``: NVML initialised,
    the handle matched as ``nvml_handle`` does, and the whole GPU behind it (``physical_handle``).
    Raises whatever importing or initialising NVML raises, or NvmlLookupError."""
    import pynvml

    pynvml.nvmlInit()
    h = nvml_handle(pynvml, device_index)
    return pynvml, h, physical_handle(pynvml, h)
