"""The per-user folders of hgemm-bench (XDG base directories): the build cache and the user's data.

``cache_root()`` is ``$XDG_CACHE_HOME/hgemm-bench`` (default ``~/.cache/hgemm-bench``): compiled
kernels, which can be rebuilt (``build.cache_dir`` keeps them under ``build/``, or wherever
``$HGEMM_BUILD_CACHE`` says). ``data_root()`` is ``$XDG_DATA_HOME/hgemm-bench`` (default
``~/.local/share/hgemm-bench``): what a user measured and cannot rebuild without a GPU (the tuned
library, ``search.user_library``). A relative XDG path is ignored, as the XDG spec asks. Nothing
is created here.
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "hgemm-bench"


def _xdg(var: str, default: str) -> Path:
    val = os.environ.get(var, "")
    base = Path(val) if val and os.path.isabs(val) else Path.home() / default
    return base / APP


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hgemm-bench`` (default ``~/.cache/hgemm-bench``)."""
    return _xdg("XDG_CACHE_HOME", ".cache")


def data_root() -> Path:
    """``$XDG_DATA_HOME/hgemm-bench`` (default ``~/.local/share/hgemm-bench``)."""
    return _xdg("XDG_DATA_HOME", ".local/share")
