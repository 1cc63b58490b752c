"""The problem contract: what one GEMM is, independent of who computes it.

``C[M,N] = A[M,K] @ B[K,N]`` with fp16 inputs, fp32 accumulation and fp16 output. A and C are
row-major. B comes in one of two layouts named after the cuBLAS call that consumes it:

* ``nn``: B row-major, shape (K, N);
* ``tn``: B stored transposed, row-major (N, K).

Every method, baseline or searched kernel, is handed tensors in exactly this form; anything else
it needs (a transposed copy, padding, a workspace) it makes inside its timed call.
"""

from __future__ import annotations

from dataclasses import dataclass

LAYOUTS = ("nn", "tn")
DTYPES = ("float16",)  # bf16 is a later extension: dtype stays a field, never an assumption

# Datasheet rates used for the physical floor of a problem (H100/H200 SXM dense fp16 tensor
# rate and H200 HBM3e bandwidth). The floor is a bound no kernel can beat by much; a measured time
# under it is flagged, never celebrated. Other GPUs get their own entry.
PEAKS = {
    "NVIDIA H200": {"tflops": 990.0, "tbps": 4.8},
    "NVIDIA H100 80GB HBM3": {"tflops": 990.0, "tbps": 3.35},
}
DEFAULT_PEAK = {"tflops": 990.0, "tbps": 4.8}
# One empty graph node costs ~1.0 us on the H200 (REFERENCES.md): below it nothing is measurable.
LAUNCH_FLOOR_US = 1.0


@dataclass(frozen=True, order=True)
class Shape:
    """M, N, K of one GEMM. Any positive integers are valid."""

    m: int
    n: int
    k: int

    def __post_init__(self) -> None:
        for name, v in (("M", self.m), ("N", self.n), ("K", self.k)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")

    @property
    def name(self) -> str:
        return f"{self.m}_{self.n}_{self.k}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Problem:
    """One shape in one B layout and dtype: the unit a Method is prepared for."""

    shape: Shape
    layout: str = "nn"
    dtype: str = "float16"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {self.layout!r}; expected one of {LAYOUTS}")
        if self.dtype not in DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}; supported: {DTYPES}")

    @property
    def m(self) -> int:
        return self.shape.m

    @property
    def n(self) -> int:
        return self.shape.n

    @property
    def k(self) -> int:
        return self.shape.k

    @property
    def b_shape(self) -> tuple[int, int]:
        """Storage shape of B for this layout."""
        return (self.k, self.n) if self.layout == "nn" else (self.n, self.k)

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def min_bytes(self) -> float:
        """Fewest bytes any kernel must move: each input read once, the output written once."""
        return 2.0 * (self.m * self.k + self.k * self.n + self.m * self.n)

    def floor_us(self, gpu_name: str | None = None) -> float:
        """Physical floor: max(flops / peak rate, bytes / bandwidth), datasheet figures."""
        peak = PEAKS.get(gpu_name or "", DEFAULT_PEAK)
        return max(self.flops / (peak["tflops"] * 1e6), self.min_bytes / (peak["tbps"] * 1e6))

    def __str__(self) -> str:
        return f"{self.shape.name}:{self.layout}"
