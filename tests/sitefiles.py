"""Read a built site back as the page's script reads it: the inline index and the run files."""

from __future__ import annotations

import json
import re
from pathlib import Path


def site_index(index_html: Path) -> dict:
    html = Path(index_html).read_text(encoding="utf-8")
    text = re.search(r'<script type="application/json" id="hg-index">(.*?)</script>', html, re.S).group(1)
    return json.loads(text.replace("<\\/", "</"))


def run_file(site: Path, run_id: str) -> dict:
    """One run's data file (``data/<id>.js``: ``HG.run({...});``) as the object it passes."""
    text = (Path(site) / "data" / f"{run_id}.js").read_text(encoding="utf-8")
    m = re.fullmatch(r"HG\.run\((.*)\);\n", text, re.S)
    assert m, f"{run_id}.js is not one HG.run(...) call"
    return json.loads(m.group(1).replace("<\\/", "</"))


def site_runs(index_html: Path) -> tuple[dict, dict[str, dict]]:
    """(index, {page run id: run data}) of a built site."""
    index = site_index(index_html)
    site = Path(index_html).parent
    return index, {r["id"]: run_file(site, r["id"]) for r in index["runs"]}
