"""Every figure the README quotes is one the docs or the recorded benchmarks hold: a figure
changed in docs/ or benchmarks/results.md and left behind in the README fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A number with a unit of time, size, ratio or share, as the README writes figures.
FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?(ms|s|min|minutes|GiB|MiB|x|%)(?!\w)")
SPELLINGS = {"min": ("min", "minutes"), "minutes": ("minutes", "min")}


def figures(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FIGURE.finditer(text)]


def test_the_pattern_finds_figures_as_the_readme_writes_them():
    assert figures("0.8 s against 5.7 s, 24 minutes, 2.12x, 91%, 134 MiB; v1.18.2 and 2-core are none") == [
        ("0.8", "s"), ("5.7", "s"), ("24", "minutes"), ("2.12", "x"), ("91", "%"), ("134", "MiB")]


def test_every_readme_figure_is_in_the_docs_or_the_recorded_benchmarks():
    sources = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    sources += (ROOT / "benchmarks" / "results.md").read_text()
    quoted = figures((ROOT / "README.md").read_text())
    assert len(quoted) >= 5, quoted  # the README quotes figures; the pattern still finds them
    missing = [f"{num} {unit}" for num, unit in quoted
               if not any(f"{num}{sep}{u}" in sources for u in SPELLINGS.get(unit, (unit,)) for sep in (" ", ""))]
    assert missing == [], f"README figures found nowhere in docs/ or benchmarks/results.md: {missing}"
