"""torch's current CUDA stream as a raw ``cudaStream_t``, read cheaply on every call.

Timed calls read it each time (a graph capture switches streams), through the C accessors torch's
compiled kernels use: ``torch.cuda.current_stream()`` builds a Stream object and cost ~25 us a call,
a third of a cuBLASLt call's host time, measured on an H200 host. torch is imported on first use, so
importing this module needs no GPU.
"""

from __future__ import annotations

import functools


def current_stream_ptr() -> int:
    """The raw cudaStream_t of torch's current stream (the capture stream inside torch.cuda.graph)."""
    raw_stream, device = _stream_accessors()
    return raw_stream(device())


@functools.cache
def _stream_accessors():
    """(raw stream of a device index, current device index), looked up once."""
    import torch

    try:
        return torch._C._cuda_getCurrentRawStream, torch._C._cuda_getDevice
    except AttributeError:  # a torch without them: the public, slower path
        return (lambda dev: torch.cuda.current_stream(dev).cuda_stream), torch.cuda.current_device
