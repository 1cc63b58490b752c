"""Pack the build-cache entries a device call created, to carry them to the next call.

The build cache (``$HGEMM_BUILD_CACHE``, kernels_search/build.py) holds one folder per build,
``<key[:2]>/<key>/`` (key: 64 hex digits, the sha256 of source, flags and toolchain). Entries
newer than ``--newer`` (a stamp file touched before the work began) are packed into a gzip
tarball whose paths are relative to the cache, so ``tar xzf OUT.tgz -C .hbcache`` restores them.
If that tarball exceeds ``--limit-mib``, it is rewritten with a selection that fits: first the
entries the exported library serves (the library's kernel specs -> their DB rows' ``build_key``),
then the newest others, by their size after gzip (estimated from the whole tarball's ratio,
checked on the result).

    python3 scripts/cache_pack.py OUT.tgz --cache DIR --newer STAMP [--library LIB.json --db DB] [--limit-mib 15]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from pathlib import Path

KEY = re.compile(r"[0-9a-f]{64}")


def entries(cache: Path, newer_than: float | None = None) -> list[Path]:
    """Cache entry folders (``<2 hex>/<64 hex>`` whose name starts with those 2), newest first;
    only those modified after ``newer_than`` (a timestamp) when given."""
    out = []
    for d in cache.glob("??/*"):
        if d.is_dir() and KEY.fullmatch(d.name) and d.name[:2] == d.parent.name:
            if newer_than is None or _mtime(d) > newer_than:
                out.append(d)
    return sorted(out, key=_mtime, reverse=True)


def _mtime(d: Path) -> float:
    """Latest modification of the folder or a file in it (a rename into the cache keeps the times)."""
    return max([d.stat().st_mtime] + [f.stat().st_mtime for f in d.iterdir() if f.is_file()])


def size(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def library_keys(library: Path, db: Path) -> set[str]:
    """Build keys of the kernels the library serves: its kernel specs, looked up in the search DB
    (candidate rows record ``build_key`` in their info)."""
    from kernels_search.search.db import KernelDB
    from kernels_search.search.library import load_library

    specs = {e["spec"] for e in load_library(library) if e.get("kind") == "kernel"}
    if not specs:
        return set()
    df = KernelDB(db).df
    if df.empty:
        return set()
    keys = set()
    for info in df.loc[df["method"].isin(specs), "info"].dropna():
        k = json.loads(info or "{}").get("build_key")
        if isinstance(k, str) and KEY.fullmatch(k):
            keys.add(k)
    return keys


def write(out: Path, cache: Path, dirs: list[Path]) -> int:
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for d in dirs:
            tar.add(d, arcname=str(d.relative_to(cache)))
    tmp.replace(out)
    return out.stat().st_size


def pack(out: Path, cache: Path, newer_than: float | None, limit: int, preferred: set[str] = frozenset()) -> dict:
    """Write ``out``; returns what was packed: entries, bytes, selected (True when not all fit)."""
    new = entries(cache, newer_than)
    if not new:
        out.unlink(missing_ok=True)
        return dict(entries=0, new=0, bytes=0, selected=False, preferred=0)
    n = write(out, cache, new)
    if n <= limit:
        return dict(entries=len(new), new=len(new), bytes=n, selected=False, preferred=len(preferred & {d.name for d in new}))
    order = [d for d in new if d.name in preferred] + [d for d in new if d.name not in preferred]
    sizes = {d: size(d) for d in order}
    # entries are selected by their size as gzip shrinks them (the ratio the whole tarball got,
    # shared libraries compress ~3x); a selection that still comes out too big is redone tighter
    ratio = min(1.0, n / max(1, sum(sizes.values())))
    budget = float(limit)
    while True:
        chosen, total = [], 0.0
        for d in order:
            s = sizes[d] * ratio
            if total + s <= budget:
                chosen.append(d)
                total += s
        if not chosen:
            out.unlink(missing_ok=True)
            return dict(entries=0, new=len(new), bytes=0, selected=True, preferred=0)
        n = write(out, cache, chosen)
        if n <= limit:
            return dict(entries=len(chosen), new=len(new), bytes=n, selected=True,
                        preferred=sum(d.name in preferred for d in chosen))
        budget *= 0.9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--newer", type=Path, help="stamp file: only entries modified after it")
    ap.add_argument("--library", type=Path, help="library JSON whose kernels go first when not all fit")
    ap.add_argument("--db", type=Path, help="the search DB folder the library was exported from")
    ap.add_argument("--limit-mib", type=float, default=15.0)
    args = ap.parse_args(argv)
    since = args.newer.stat().st_mtime if args.newer else None
    preferred: set[str] = set()
    if args.library and args.db and args.library.exists():
        try:
            preferred = library_keys(args.library, args.db)
        except Exception as e:  # the pack still works without the preference
            print(f"cache_pack: library keys unavailable ({type(e).__name__}: {e})", file=sys.stderr)
    r = pack(args.out, args.cache, since, int(args.limit_mib * 2**20), preferred)
    if not r["entries"]:
        print(f"cache_pack: no new build-cache entries in {args.cache}" + (" fit the limit" if r["new"] else ""))
        return 0
    print(f"cache_pack: {r['entries']} of {r['new']} new entries ({r['preferred']} served by the library) -> "
          f"{args.out} ({r['bytes'] / 2**20:.1f} MiB" + (f", selected to fit {args.limit_mib:g} MiB)" if r["selected"] else ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
