"""The failover model (benchmarks/failover_model.py): the fit, and the points it reads from the
recorded runs (their node count and scheduler gate from each run's header)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import failover_model as fm  # noqa: E402

RESULTS = """\
## 2026-12-04T05:49:51Z — 2 cores (BENCH=failover, gate off: `BENCH_FAILOVER_NODES=200 BENCH_FAILOVER_SIZES=500,1000`)
```
  failover of 250 replicas from member1, from the SIGTERM: Cluster not Ready 38.5 s, all Running 43.4 s
  failover of 500 replicas from member1, from the SIGTERM: Cluster not Ready 39.0 s, all Running 53.2 s
```
## 2026-12-04T06:00:00Z — 2 cores (BENCH=install: not a failover run)
```
  failover of 9 replicas from member1: all Running 1.0 s
```
## 2026-12-04T06:55:30Z — 2 cores (BENCH=failover, `BENCH_FAILOVER_NODES=50`)
```
  failover of 100 replicas from member1: all Running 43.5 s
```
## 2026-12-04T06:55:30Z (continued) — the next size of the same run
```
  failover of 250 replicas from member1: all Running 69.2 s
  failover of 300 replicas from member1, ... not finished in the limit
```
"""


def test_points_carry_their_runs_settings_and_skip_other_benchmarks():
    pts = fm.points(RESULTS)
    assert [(p.evicted, p.seconds, p.nodes, p.gate_off) for p in pts] == [
        (250, 43.4, 200, True), (500, 53.2, 200, True), (100, 43.5, 50, False), (250, 69.2, 50, False)]
    assert pts[-1].run == "2026-12-04T06:55:30Z"  # a continued block is the run before it


def test_the_fit_recovers_a_line_and_projects_with_it():
    pts = [fm.Point(n, 30 + n / 20, 200, True, "r") for n in (250, 1000, 5000)]
    model = fm.fit(pts)
    assert model.fixed == pytest.approx(30) and model.rate == pytest.approx(20)
    assert model.seconds(40000) == pytest.approx(2030)
    lines = fm.report(pts)
    assert "model t(n) = 30.0 s + n / 20.0 pods/s" in lines[1]
    assert "worst error on the measured points 0.0 %" in lines[-2]
    assert "40000 evicted pods in 2030 s = 33.8 min" in lines[-1]
    with pytest.raises(ValueError):
        fm.fit(pts[:1])


def test_the_recorded_runs_give_the_documented_model():
    """docs/performance.md quotes this fit: the gate-off runs on 200 nodes, five sizes."""
    pts = [p for p in fm.points((ROOT / "benchmarks" / "results.md").read_text()) if p.nodes == 200 and p.gate_off]
    assert sorted(p.evicted for p in pts) == [250, 500, 1000, 2500, 5000]
    model = fm.fit(pts)
    assert (round(model.fixed, 1), round(model.rate, 1)) == (27.6, 20.1)
