"""Process-wide cuBLAS / cuBLASLt handles and the cuBLAS workspace, one per CUDA device.

Handles are expensive to create and hold no per-problem state, so every prepared call on a device
shares them (torch does the same). Everything here is imported lazily: on a machine without CUDA
the baselines package still imports, registers its methods and answers ``supports()``.

nvmath-python's bindings load libcublas through cuda-pathfinder, which first looks for a copy
already loaded in the process. ``torch`` is imported before any binding is called, so nvmath uses
the very libcublas that torch loaded (``baselines.versions`` records which file that was).
"""

from __future__ import annotations

import threading

from harness.cuda_streams import current_stream_ptr  # noqa: F401  (the timed calls read it as ch.current_stream_ptr)

# cudaDataType_t / cublasComputeType_t values (checked against nvmath's enums in the tests).
CUDA_R_16F = 2
CUDA_R_32F = 0
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1

DATA_TYPES = {"float16": CUDA_R_16F}

# cuBLAS's documented workspace recommendation for Hopper is 32 MiB (4 MiB for older GPUs);
# torch gives its cuBLAS handles the same on sm90. Used for cublasGemmEx and as the cuBLASLt
# heuristic's MAX_WORKSPACE_BYTES so the "cublaslt" baseline sees what torch's cuBLASLt sees.
CUBLAS_WORKSPACE_BYTES = 32 * 1024 * 1024

_lock = threading.Lock()
_cublas: dict[int, tuple[int, object]] = {}  # device -> (handle, workspace tensor)
_cublaslt: dict[int, int] = {}  # device -> handle
_lt_workspace: dict[int, object] = {}  # device -> the buffer every cuBLASLt call shares

# Every prepared cuBLASLt call (heuristic, autotune and its tuning runs, a library's fallback) uses a
# view of one per-device buffer, as cuBLAS shares one workspace per handle and torch one per
# handle and stream. The timed calls run one at a time on one stream, so sharing is safe. Why it
# matters: with a buffer per prepared call, two instances of the same algorithm on the same inputs
# measured up to 4 % apart on an H200, only for algorithms that use a workspace: where the
# buffer lands moves the timing. False gives every call its own buffer (to measure that case).
SHARED_LT_WORKSPACE = True


def current_device() -> int:
    import torch

    return torch.cuda.current_device()


def allocate_workspace(nbytes: int, device: int):
    """A device buffer of ``nbytes`` (at least 1 byte so the pointer is real) owned by torch."""
    import torch

    return torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=torch.device("cuda", device))


def lt_workspace(nbytes: int, device: int):
    """The workspace for one prepared cuBLASLt call: the first ``nbytes`` of the device's shared
    buffer (at least ``CUBLAS_WORKSPACE_BYTES``; a larger request replaces it with a larger one,
    and calls prepared earlier keep the buffer they hold), or a buffer of its own when
    ``SHARED_LT_WORKSPACE`` is False."""
    if not SHARED_LT_WORKSPACE:
        return allocate_workspace(nbytes, device)
    nbytes = max(int(nbytes), 1)
    with _lock:
        buf = _lt_workspace.get(device)
        if buf is None or buf.numel() < nbytes:
            buf = _lt_workspace[device] = allocate_workspace(max(nbytes, CUBLAS_WORKSPACE_BYTES), device)
    return buf[:nbytes]


def cublas_handle(device: int) -> tuple[int, object]:
    """(cublasHandle_t, its 32 MiB workspace tensor) for ``device``, created once."""
    with _lock:
        if device not in _cublas:
            import torch
            from nvmath.bindings import cublas

            with torch.cuda.device(device):
                handle = cublas.create()
                workspace = allocate_workspace(CUBLAS_WORKSPACE_BYTES, device)
            _cublas[device] = (handle, workspace)
        return _cublas[device]


def cublaslt_handle(device: int) -> int:
    """cublasLtHandle_t for ``device``, created once (cuBLASLt takes stream and workspace per call)."""
    with _lock:
        if device not in _cublaslt:
            import torch
            from nvmath.bindings import cublasLt

            with torch.cuda.device(device):
                _cublaslt[device] = cublasLt.create()
        return _cublaslt[device]
