"""scripts/cache_pack.py: the build-cache entries one device call created, packed to carry back.

Why this can fail: old entries packed again, paths that do not unpack into the cache folder,
an over-limit tarball, or the library's own kernels dropped while others are kept.
"""

import importlib.util
import json
import os
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("cache_pack", ROOT / "scripts" / "cache_pack.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def entry(cache, key, nbytes, t):
    d = cache / key[:2] / key
    d.mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"ok": True, "key": key}))
    (d / "kernel.so").write_bytes(os.urandom(nbytes))  # random: gzip cannot shrink it
    for f in (d / "meta.json", d / "kernel.so", d):
        os.utime(f, (t, t))
    return d


def key(i):
    return f"{i:02x}" * 32


def test_packs_new_entries_and_selects_the_librarys_kernels_first_when_over_the_limit(tmp_path):
    cp = _script()
    cache = tmp_path / "cache"
    now = time.time()
    entry(cache, key(1), 1000, now - 100)  # carried in: older than the stamp
    stamp = tmp_path / "stamp"
    stamp.touch()
    os.utime(stamp, (now - 50, now - 50))
    entry(cache, key(2), 300_000, now - 40)
    entry(cache, key(3), 300_000, now - 30)  # served by the library
    entry(cache, key(4), 300_000, now - 20)
    (cache / ".tmp-abc").mkdir()  # a build in progress is never packed
    (cache / "zz").mkdir()
    out = tmp_path / "cache-new.tgz"
    assert cp.main([str(out), "--cache", str(cache), "--newer", str(stamp)]) == 0
    with tarfile.open(out) as tar:
        names = {n for n in tar.getnames() if n.count("/") == 1}
    assert names == {f"{key(i)[:2]}/{key(i)}" for i in (2, 3, 4)}
    # unpacks into a cache folder as it was
    dest = tmp_path / "restored"
    dest.mkdir()
    with tarfile.open(out) as tar:
        tar.extractall(dest)
    assert (dest / key(3)[:2] / key(3) / "kernel.so").stat().st_size == 300_000
    # over the limit: the library's entry first, then the newest others that still fit
    r = cp.pack(out, cache, stamp.stat().st_mtime, limit=700_000, preferred={key(3)})
    assert r["selected"] and r["entries"] == 2 and r["preferred"] == 1 and r["bytes"] <= 700_000
    with tarfile.open(out) as tar:
        names = {n for n in tar.getnames() if n.count("/") == 1}
    assert names == {f"{key(i)[:2]}/{key(i)}" for i in (3, 4)}
    # nothing new: no tarball
    assert cp.pack(out, cache, now, limit=10**9)["entries"] == 0 and not out.exists()


def test_library_keys_map_library_specs_to_build_keys_through_the_db(tmp_path):
    cp = _script()
    from kernels_search.search.db import KernelDB

    db = KernelDB(tmp_path / "db")
    spec = "splitk:bm=64,splits=2"
    db.append([dict(search_id="s", call_id="c", is_baseline=False, method=spec, shape="64_64_64", layout=lay,
                    info=json.dumps({"build_key": key(7)})) for lay in ("nn", "tn")]
              + [dict(search_id="s", call_id="c", is_baseline=False, method="splitk:bm=128", shape="64_64_64",
                      layout="nn", info=json.dumps({"build_key": key(8)}))])
    lib = tmp_path / "library.json"
    lib.write_text(json.dumps({"version": 1, "entries": [
        {"kind": "kernel", "spec": spec, "shape": "64_64_64", "layout": "nn"},
        {"kind": "baseline", "spec": "cublaslt", "shape": "64_64_64", "layout": "tn"}]}))
    assert cp.library_keys(lib, tmp_path / "db") == {key(7)}


def test_compressible_entries_are_selected_by_their_packed_size(tmp_path):
    """Shared libraries shrink ~3x in the tarball: selecting by raw size would leave most of a
    call's builds behind (on the H200: 12 of 70 entries, 4.3 of the 15 MiB allowed)."""
    cp = _script()
    cache = tmp_path / "cache"
    now = time.time()
    for i in range(1, 9):
        d = entry(cache, key(i), 1000, now - 40 + i)
        half = os.urandom(100_000)
        (d / "kernel.so").write_bytes(half + bytes(200_000))  # 300 kB that gzip packs to ~100 kB
    out = tmp_path / "cache-new.tgz"
    r = cp.pack(out, cache, now - 100, limit=600_000)
    assert r["selected"] and r["bytes"] <= 600_000
    assert r["entries"] >= 5  # by raw size only 2 would fit
