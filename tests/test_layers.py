"""The product's layers as tests: import-linter's contracts, and a scan of the product's code.

The product is harness/, baselines/, kernels_search/ and reports/. harness/ is the bottom layer
(it knows no kernel and no report); the other three sit above it, independent of each other; no
package of the product has an import cycle; nothing in it imports scripts/, lab/ or tests/. The
contracts live in pyproject.toml (``[tool.importlinter]``), so ``lint-imports`` run from the
repository root checks the same thing. An installed copy of the package has no site/, scripts/ or
lab/ beside it, so product code names no path under site/ and never edits ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from importlinter import api
from importlinter.application import use_cases

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"
PRODUCT = ("harness", "baselines", "kernels_search", "reports")
CONTRACTS = [c["id"] for c in api.read_configuration(str(CONFIG))["contracts_options"]]


def test_the_contracts_read_this_checkout():
    """import-linter finds the packages on sys.path: they must be this tree's, not another copy's."""
    for name in PRODUCT:
        origin = Path(importlib.util.find_spec(name).origin).resolve()
        assert origin.is_relative_to(ROOT), f"{name} imports from {origin}, not from {ROOT}"


@pytest.mark.parametrize("contract", CONTRACTS)
def test_import_contract_is_kept(contract, capsys):
    kept = use_cases.lint_imports(config_filename=str(CONFIG), limit_to_contracts=(contract,),
                                  cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    assert kept, f"import-linter contract {contract!r} is broken:\n{report[report.find('Broken contracts'):]}"


# A product that breaks every contract once: the contracts must name each break.
BROKEN_TREE = {
    "harness/__init__.py": "",
    "harness/cli.py": "import kernels_search.search\nfrom reports import site\n",
    "harness/runner.py": "from harness import sandbox\n",
    "harness/sandbox.py": "from harness.runner import run\n",
    "baselines/__init__.py": "import harness.runner\n",
    "kernels_search/__init__.py": "",
    "kernels_search/search.py": "import scripts.first_picks\nimport baselines\n",
    "reports/__init__.py": "",
    "reports/site.py": "from lab import notes\n",
}


def test_the_contracts_catch_each_kind_of_break(tmp_path):
    """The same contracts, run over a small tree that breaks each of them: none may be vacuous."""
    for rel, text in BROKEN_TREE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    config = CONFIG.read_text()
    (tmp_path / "pyproject.toml").write_text(config[config.index("[tool.importlinter]"):])
    code = textwrap.dedent("""
        import sys
        import importlinter.api  # configures import-linter's readers
        from importlinter.application.use_cases import lint_imports
        sys.exit(0 if lint_imports(config_filename="pyproject.toml", cache_dir=None, no_logo=True) else 1)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 1, out
    assert f"Contracts: 0 kept, {len(CONTRACTS)} broken." in out
    for expected in ("harness.cli -> kernels_search.search", "harness.cli -> reports",
                     "kernels_search.search -> baselines", "No cycles are allowed in harness",
                     "kernels_search.search -> scripts", "reports.site -> lab"):
        assert expected in out, f"{expected!r} not reported:\n{proc.stdout}"


SITE_PATH = re.compile(r"(?<![\w.-])site/")
SYS_PATH_EDIT = re.compile(r"\bsys\.path\s*(\.\s*(insert|append|extend|remove|pop|clear)\b|\[[^\]]*\]\s*=|\+=|=[^=])"
                           r"|\baddsitedir\b")


@pytest.mark.parametrize("text, site, edit", [
    ('OUT = Path("site/data")', True, False),
    ("see site/index.html", True, False),
    ("sys.path.insert(0, str(ROOT / 'scripts'))", False, True),
    ("sys.path.append(here)", False, True),
    ("sys.path[:0] = [str(ROOT)]", False, True),
    ("sys.path += [lab]", False, True),
    ("sys.path = [x] + sys.path", False, True),
    ("site.addsitedir(p)", False, True),
    ("lib/python3.11/site-packages/torch", False, False),
    ("for p in sys.path: print(p)", False, False),
    ("if sys.path == before: pass", False, False),
    ("a website/ or a _site/ folder", False, False),
])
def test_the_scan_patterns(text, site, edit):
    assert bool(SITE_PATH.search(text)) is site
    assert bool(SYS_PATH_EDIT.search(text)) is edit


def product_sources() -> list[Path]:
    files = sorted(p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py"))
    assert len(files) > 50, "the product's sources were not found"
    return files


def test_product_code_names_no_site_path_and_edits_no_sys_path():
    hits = []
    for path in product_sources():
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if SITE_PATH.search(line) or SYS_PATH_EDIT.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not hits, "product code names a site/ path or edits sys.path:\n" + "\n".join(hits)
