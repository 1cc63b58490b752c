"""Parquet results -> a static HTML leaderboard (``hgemm-bench report``). Measures nothing.

``build_site`` is loaded on first use, so mounting the ``report`` command (``reports.cli``)
costs the CLI's start-up nothing.
"""

__all__ = ["build_site"]


def __getattr__(name: str):
    if name == "build_site":
        from reports.site import build_site

        return build_site
    raise AttributeError(f"module 'reports' has no attribute {name!r}")
