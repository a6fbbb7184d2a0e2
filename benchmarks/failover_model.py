#!/usr/bin/env python3
"""The failover measurements of benchmarks/results.md, fitted and projected to the seed's scale.

Model: a member stops; after a fixed part ``d`` (the 30 s failure threshold, the taint, the
first binding) the evicted replicas come back at a steady rate ``r``, so the time until all of
``n`` evicted replicas run again is ``t(n) = d + n / r``. Fitted by least squares on the runs
of bench_failover.py recorded in benchmarks/results.md (each line ``failover of N replicas ...
all Running T s``; the run's node count and scheduler gate from its header), separately for
each (nodes per member, gate) setting with at least three sizes. Printed: the inputs, ``d`` and
``r``, each measured point's error, and the projection to 40,000 evicted pods (the seed: 15
minutes) as measured here (2 shared cores) and per core, with the assumption that makes it
(the rate scales with cores: true while CPU is what paces it, which the runs' CPU figures show
only at the largest size; docs/performance.md, "Failover").

    python benchmarks/failover_model.py [results.md]
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.md"
SEED_PODS, SEED_SECONDS = 40000, 900  # the seed: 40,000 pods failed over in 15 minutes
BED_CORES = 2
LINE = re.compile(r"failover of (\d+) replicas from member1.*?all Running ([\d.]+) s")
NODES = re.compile(r"BENCH_FAILOVER_NODES=(\d+)")


@dataclass(frozen=True)
class Point:
    evicted: int
    seconds: float
    nodes: int
    gate_off: bool
    run: str  # the run's timestamp, as its header gives it


@dataclass(frozen=True)
class Fit:
    fixed: float  # d, seconds
    rate: float  # r, pods per second (on the bed's cores)

    def seconds(self, evicted: float) -> float:
        return self.fixed + evicted / self.rate


def points(text: str) -> list[Point]:
    """Every failover size of every recorded failover run that finished."""
    found: list[Point] = []
    nodes, gate_off, run = 0, False, ""
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        header, _, body = block.partition("\n")
        stamp = header.split(" ", 1)[0]
        if "(continued)" not in header:  # a continued block is the run before it
            if "BENCH=failover" not in header and "bench_failover.py" not in block:
                nodes = 0
                continue
            match = NODES.search(header)
            nodes = int(match.group(1)) if match else 0
            gate_off = '"CustomizedClusterResourceModeling": false' in header or "gate off" in header
            run = stamp
        if not nodes:
            continue
        for m in LINE.finditer(body):
            found.append(Point(int(m.group(1)), float(m.group(2)), nodes, gate_off, run))
    return found


def fit(pts: Sequence[Point]) -> Fit:
    """Least squares of seconds on evicted replicas: intercept d, slope 1/r."""
    n = len(pts)
    if n < 2:
        raise ValueError("a fit needs at least two sizes")
    mx = sum(p.evicted for p in pts) / n
    my = sum(p.seconds for p in pts) / n
    sxx = sum((p.evicted - mx) ** 2 for p in pts)
    sxy = sum((p.evicted - mx) * (p.seconds - my) for p in pts)
    slope = sxy / sxx
    return Fit(my - slope * mx, 1 / slope)


def settings(pts: Sequence[Point]) -> dict[tuple[int, bool], list[Point]]:
    """The points per setting (nodes per member, gate off), each size of each run once, smallest first."""
    out: dict[tuple[int, bool], dict[tuple, Point]] = {}
    for p in pts:
        out.setdefault((p.nodes, p.gate_off), {})[(p.evicted, p.seconds, p.run)] = p
    return {key: sorted(group.values(), key=lambda p: p.evicted) for key, group in sorted(out.items())}


def report(pts: Sequence[Point]) -> list[str]:
    out = []
    for (nodes, gate_off), group in settings(pts).items():
        if len(group) < 3:
            continue
        model = fit(group)
        gate = "off" if gate_off else "on (Karmada's default)"
        out.append(f"{nodes} kwok nodes per member, scheduler gate CustomizedClusterResourceModeling {gate}: "
                   f"{len(group)} sizes from run(s) {', '.join(sorted({p.run for p in group}))}")
        out.append(f"  model t(n) = {model.fixed:.1f} s + n / {model.rate:.1f} pods/s")
        worst = 0.0
        for p in group:
            predicted = model.seconds(p.evicted)
            error = (predicted - p.seconds) / p.seconds * 100
            worst = max(worst, abs(error))
            out.append(f"  {p.evicted:>6} evicted: measured {p.seconds:7.1f} s, model {predicted:7.1f} s "
                       f"({error:+5.1f} %)")
        here = model.seconds(SEED_PODS)
        per_core = model.rate / BED_CORES
        cores_for_seed = SEED_PODS / (SEED_SECONDS - model.fixed) / per_core if model.fixed < SEED_SECONDS else 0
        out.append(f"  worst error on the measured points {worst:.1f} %; largest size measured "
                   f"{group[-1].evicted} ({SEED_PODS / group[-1].evicted:.0f}x short of the seed's)")
        out.append(f"  projected: {SEED_PODS} evicted pods in {here:.0f} s = {here / 60:.1f} min on this bed's "
                   f"{BED_CORES} cores ({per_core:.1f} pods/s per core); the seed's 15 min would take about "
                   f"{cores_for_seed:.0f} such cores if the rate scaled with cores")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    text = Path(args[0] if args else RESULTS).read_text()
    lines = report(points(text))
    print("\n".join(lines) if lines else "no failover run with three sizes recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
