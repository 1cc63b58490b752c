"""The environment a run measured in: recorded on every row, printed by ``hgemm-bench env``.

Numbers from different GPUs, drivers or library versions do not compare, so every result row
carries these columns: the GPU and its driver, power limit and application clocks (NVML), and
what made the row (``harness.provenance``: git commit, nvcc, CUTLASS, Triton). Library versions
of the methods (cuBLAS, cuBLASLt, nvmath) come from plug-ins through ``register_probe``: the
harness itself knows no specific library.
"""

from __future__ import annotations

import platform
import socket
from typing import Callable

import torch

import harness

_PROBES: list[Callable[[], dict]] = []


class NoGPUError(RuntimeError):
    """--device cuda was asked for on a machine where torch sees no CUDA GPU."""


def register_probe(fn: Callable[[], dict]) -> None:
    """Add a function returning extra environment columns (e.g. cuBLAS versions)."""
    _PROBES.append(fn)


def resolve_device(requested: str) -> str:
    """'auto' -> 'cuda' when a GPU is visible else 'cpu'; 'cuda' without a GPU is an error."""
    if requested not in ("auto", "cuda", "cpu"):
        raise ValueError(f"unknown device {requested!r}; expected auto, cuda or cpu")
    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        why = "torch was built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible to torch"
        raise NoGPUError(f"--device cuda was requested but {why} (torch {torch.__version__}); use --device cpu or auto")
    if requested == "auto":
        return "cuda" if has_cuda else "cpu"
    return requested


def available_bytes(device: str) -> int | None:
    """Memory a run may still allocate: free device memory on a GPU, available RAM on the CPU
    (``MemAvailable``: free plus what the kernel can reclaim). None when it cannot be told."""
    if device == "cuda":
        free, _total = torch.cuda.mem_get_info()
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def fp16_flops_per_s(device: str, gpu_name: str | None = None) -> float:
    """Rough rate of one fp16 GEMM call, for time estimates (never for results): on a GPU the
    datasheet peak (of ``gpu_name``, else of this process's GPU); on the CPU one 256^3
    ``torch.matmul`` timed here (tens of milliseconds; larger products run slower on a CPU, so
    estimates from it are lower bounds)."""
    if device == "cuda":
        from harness.problem import DEFAULT_PEAK, PEAKS

        name = gpu_name or torch.cuda.get_device_name(torch.cuda.current_device())
        return PEAKS.get(name, DEFAULT_PEAK)["tflops"] * 1e12
    import time

    n = 256
    a = torch.ones((n, n), dtype=torch.float16)
    torch.matmul(a, a)  # the first call pays one-time set-up
    t0 = time.perf_counter()
    torch.matmul(a, a)
    return 2.0 * n**3 / max(time.perf_counter() - t0, 1e-6)


def _nvml_info(index: int) -> dict:
    """Driver, UUID, clocks and power limit of torch's CUDA device ``index``, from NVML; the
    handle is matched by UUID / PCI bus id (``harness.nvml``), so with CUDA_VISIBLE_DEVICES set
    these are the measured GPU's figures, not those of NVML's device ``index``."""
    try:
        from harness.nvml import open_device

        pynvml, h, gpu = open_device(index)

        def s(x):
            return x.decode() if isinstance(x, bytes) else str(x)

        info = {
            "gpu_uuid": s(pynvml.nvmlDeviceGetUUID(h)),
            "driver": s(pynvml.nvmlSystemGetDriverVersion()),
        }
        for key, fn in (
            ("sm_clock_max_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(gpu, pynvml.NVML_CLOCK_SM)),
            ("mem_clock_max_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(gpu, pynvml.NVML_CLOCK_MEM)),
            ("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(gpu, pynvml.NVML_CLOCK_SM)),
            ("power_limit_w", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(gpu) / 1000.0),
            # the clocks the GPU runs at under load unless boost or a lock moves them
            ("app_sm_clock_mhz", lambda: float(pynvml.nvmlDeviceGetApplicationsClock(gpu, pynvml.NVML_CLOCK_SM))),
            ("app_mem_clock_mhz", lambda: float(pynvml.nvmlDeviceGetApplicationsClock(gpu, pynvml.NVML_CLOCK_MEM))),
        ):
            try:
                info[key] = fn()
            except Exception:
                pass
        return info
    except Exception as e:
        return {"nvml_error": str(e)}


def collect(device: str) -> dict:
    """Environment columns (the result schema's) plus extra facts for ``hgemm-bench env``."""
    from harness import provenance

    info: dict = {
        "device": device,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
        "hgemm_bench_version": harness.__version__,
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        **provenance.collect(),
    }
    if device == "cuda":
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info.update(
            gpu_name=props.name,
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", 50 << 20),
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            compute_capability=f"{props.major}.{props.minor}",
        )
        info.update(_nvml_info(idx))
        from harness.nvml import cuda_uuid

        uuid = cuda_uuid(props)
        if "gpu_uuid" not in info and uuid:  # NVML absent or unmatched: torch's UUID still names the GPU
            info["gpu_uuid"] = uuid
    else:
        info.update(gpu_name=f"CPU: {platform.processor() or platform.machine()}", gpu_uuid="cpu", driver="")
    for probe in _PROBES:
        try:
            info.update(probe())
        except Exception as e:  # a probe must never stop a run
            info.setdefault("probe_errors", []).append(str(e))
    return info
