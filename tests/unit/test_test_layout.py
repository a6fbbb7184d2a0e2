"""The test tree itself: pytest imports test modules by basename (no packages), so two modules
of one name in different directories cannot be collected in one run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_two_test_modules_share_a_basename():
    names = Counter(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert not [n for n, count in names.items() if count > 1], [n for n, count in names.items() if count > 1]
