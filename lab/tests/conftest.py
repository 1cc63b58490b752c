"""Lab tests reuse the product tests' CPU search family (tests/test_search_plugin.py) and helpers."""

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
