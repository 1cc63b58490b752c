"""Parquet results -> a static HTML leaderboard (``hgemm-bench report``). Measures nothing."""

from reports.site import build_site

__all__ = ["build_site"]
