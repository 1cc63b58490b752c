"""Output paths, checked before any work: a bad ``--out`` / ``-o`` is one clear error line.

A run that measures for minutes and then cannot write its results loses them; a path whose
parent is a file, a directory given where a file is meant, or a folder the user cannot write
in is caught up front instead. Permission bits are not the last word (root on a read-only
mount, procfs, ACLs), so a folder that will receive files is also probed with a temporary file,
removed at once; nothing else is created here.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputPathError(ValueError):
    """An output path cannot be written; the message names the path and why."""


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_parents(path: Path) -> None:
    """Every missing folder above ``path`` can be created: the nearest existing ancestor is a
    folder this user may write in."""
    anc = _nearest_existing(path.parent)
    if not anc.is_dir():
        raise OutputPathError(f"cannot create {path}: {anc} is a file, not a folder")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot create {path}: no permission to write in {anc}")
    _probe_write(anc, path)


def _probe_write(folder: Path, path: Path) -> None:
    """A file can really be created in ``folder`` (and is removed again)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".hgemm-write-probe.", dir=folder)
    except OSError as e:
        raise OutputPathError(f"cannot create {path}: {folder} refuses new files ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: Path, *, companions: tuple[Path, ...] = ()) -> None:
    """``path`` can be written as a file (created or replaced atomically, in its folder), and so
    can each companion folder (e.g. a results file's ``.samples/``)."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{path} is a folder; give a file path (e.g. {path / 'compare.parquet'})")
    _check_parents(path)  # an existing parent folder is the nearest ancestor it checks for permission
    for c in companions:
        c = Path(c)
        if c.exists() and not c.is_dir():
            raise OutputPathError(f"cannot write {path}: {c} (where its samples go) is a file, not a folder")
        if c.is_dir() and not os.access(c, os.W_OK | os.X_OK):
            raise OutputPathError(f"cannot write {path}: no permission to write in {c}")


def check_output_dir(path: Path) -> None:
    """``path`` is a folder this user may write in, or one that can be created."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{path} is a file; give a folder")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputPathError(f"cannot write in {path}: permission denied")
        _probe_write(path, path)
        return
    _check_parents(path)
