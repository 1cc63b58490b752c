"""hgemm-bench harness: problems, the timing core, the correctness gate, results and the CLI.

The harness knows no specific kernel: baselines and searched kernels reach it as Methods
through ``harness.registry``.
"""

__version__ = "0.1.0"
