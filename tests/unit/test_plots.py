"""The benchmarks' pictures (benchmarks/plots.py): each SVG drawn from made-up figures is valid SVG
with its labels as text and the same bytes when drawn again; the install parser reads both
operators' steps from the real benchmarks/results.md; the nearest-rank percentile and the members
bench's registration latency lines (benchmarks/bench_members.py)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import failover_model as fm  # noqa: E402
import plots  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def texts(path: Path) -> str:
    """Every text of the SVG (it must parse), joined: with svg.fonttype none labels stay text."""
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    return "\n".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))


def drawn_twice(draw, tmp_path: Path, name: str) -> Path:
    first, second = draw(tmp_path / "a" / name), draw(tmp_path / "b" / name)
    assert first.read_bytes() == second.read_bytes(), "drawing the same figures again changed the file"
    return first


# --- percentile -------------------------------------------------------------------------------


def test_percentile_is_nearest_rank():
    hundred = list(range(1, 101))
    assert [plots.percentile(hundred, q) for q in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert plots.percentile([3.0, 1.0, 2.0], 50) == 2.0  # unsorted input
    assert plots.percentile([15, 20, 35, 40, 50], 30) == 20  # the textbook case: rank ceil(1.5) = 2
    assert plots.percentile([15, 20, 35, 40, 50], 40) == 20
    assert plots.percentile([7.5], 99) == 7.5
    assert plots.percentile([1, 2, 3, 4], 1) == 1  # never below the first rank
    with pytest.raises(ValueError):
        plots.percentile([], 50)
    with pytest.raises(ValueError):
        plots.percentile([1, 2], 0)


# --- failover ---------------------------------------------------------------------------------


def test_failover_svg_draws_points_fit_and_projection(tmp_path):
    pts = [fm.Point(n, 30 + n / 20, 200, True, "r1") for n in (250, 1000, 5000)]
    pts += [fm.Point(n, 40 + n / 5, 50, False, "r2") for n in (100, 250, 500)]
    models = plots.fits(pts)
    assert models[(200, True)].rate == pytest.approx(20)
    path = drawn_twice(lambda p: plots.failover_svg(pts, models, p), tmp_path, "failover.svg")
    text = texts(path)
    assert "200 nodes/member, gate off: t(n) = 30.0 s + n / 20.0 pods/s" in text
    assert "50 nodes/member, gate on: t(n) = 40.0 s + n / 5.0 pods/s" in text
    assert "33.8 min" in text  # 30 + 40000 / 20 = 2030 s, the projection to the seed's size
    assert "seed: 40,000 pods in 15 min" in text


def test_fits_group_per_setting_and_need_three_sizes():
    pts = [fm.Point(n, 30 + n / 20, 200, True, "r") for n in (250, 1000, 5000)]
    pts += [fm.Point(250, 42.5, 200, True, "r"), fm.Point(100, 10, 50, False, "s"), fm.Point(200, 12, 50, False, "s")]
    assert sorted(plots.fm.settings(pts)) == [(50, False), (200, True)]
    assert len(plots.fm.settings(pts)[(200, True)]) == 3  # the same size of the same run once
    assert list(plots.fits(pts)) == [(200, True)]


# --- install ----------------------------------------------------------------------------------


def test_install_svg_stacks_both_operators_with_totals(tmp_path):
    ours = {"karmada_deployment/components": 5.8, "karmada_deployment/etcd": 3.0, "(no run in progress)": 0.4}
    theirs = {"deploy-etcd": 12.5, "KarmadaApiserver": 12.0, "certs": 1.0}
    path = drawn_twice(lambda p: plots.install_split_svg(ours, theirs, p, totals=(10.0, 27.0)), tmp_path,
                       "install-split.svg")
    text = texts(path)
    for label in ("10.0 s", "27.0 s", "components", "deploy-etcd", "KarmadaApiserver", "etcd",
                  "ours (Ansible)", "Karmada's Go operator", "outside the printed steps"):
        assert label in text, label


def test_install_runs_read_both_sides_of_a_make_bench_section():
    text = """\
## 2026-12-04T01:00:00Z — 2 cores (BENCH=install, NOT a fair run: not used for the figures)
```
  theirs: install step   99.0 s  deploy-etcd
install apply-to-Ready  karmada's Go operator, 1 etcd member(s): 99.0 s
```
## 2026-12-04T02:00:00Z — 2 cores — ONE FULL `make bench`
```
== benchmarks/bench_etcd.py
  ours (bench-ours): install step    9.9 s  not an install
== benchmarks/bench_install.py
  ours (bench-ours): install step   33.8 s  karmada_deployment/etcd
  ours (bench-ours): Ready in 51.9 s, 3 etcd member(s), components a b
  ours (bench-ours-1): install step    5.8 s  karmada_deployment/components
  ours (bench-ours-1): install step    2.5 s  (no run in progress)
  ours (bench-ours-1): Ready in 22.2 s, 1 etcd member(s), components a b
  theirs: install step   12.5 s  deploy-etcd
  theirs: install step    0.0 s  post-check
install apply-to-Ready  karmada's Go operator, 1 etcd member(s): 34.7 s
== benchmarks/bench_members.py
  theirs: install step   1.0 s  not an install either
```
## 2026-12-05T05:44:15Z — 2 cores (BENCH=install BENCH_INSTALL_ONLY=ours)
```
== benchmarks/bench_install.py
  ours (bench-ours-1): install step    4.0 s  karmada_deployment/components
  ours (bench-ours-1): Ready in 23.8 s, 1 etcd member(s), components a b
```
"""
    runs = plots.install_runs(text)
    assert [r.run for r in runs] == ["2026-12-04T02:00:00Z", "2026-12-05T05:44:15Z"]
    latest = plots.latest_install(text)
    assert latest.run == "2026-12-04T02:00:00Z"  # the later run has no Karmada operator
    ours = latest.same_size()
    assert (ours.steps, ours.total, ours.etcd) == (
        {"karmada_deployment/components": 5.8, "(no run in progress)": 2.5}, 22.2, 1)
    assert latest.ours["bench-ours"].steps == {"karmada_deployment/etcd": 33.8}
    assert (latest.theirs.steps, latest.theirs.total) == ({"deploy-etcd": 12.5, "post-check": 0.0}, 34.7)


def test_install_parser_on_the_recorded_results():
    run = plots.latest_install((ROOT / "benchmarks" / "results.md").read_text())
    assert run is not None
    ours, theirs = run.same_size(), run.theirs
    assert ours.steps and theirs.steps and ours.etcd == theirs.etcd
    assert 0 < sum(ours.steps.values()) <= ours.total + 1 and 0 < sum(theirs.steps.values()) <= theirs.total + 1
    assert any("etcd" in step for step in ours.steps) and any("etcd" in step for step in theirs.steps)


# --- registration -----------------------------------------------------------------------------


def test_registration_svg_marks_percentiles_reference_and_goal(tmp_path):
    latencies = [1.0 + (i % 7) * 0.5 for i in range(100)]
    path = drawn_twice(lambda p: plots.registration_svg(latencies, p), tmp_path, "registration-100.svg")
    text = texts(path)
    for label in ("ours P50 2.5 s", "ours P90 4.0 s", "ours P99 4.0 s", "Karmada P50 5.4 s", "Karmada P90 6.1 s",
                  "Karmada P99 6.9 s", "goal P99 <= 2 s", "100 members"):
        assert label in text, label
    with pytest.raises(ValueError):
        plots.registration_svg([], tmp_path / "none.svg")


def test_the_members_bench_lines_are_what_the_plot_reads_back():
    import bench_members

    line, summary = bench_members.registration_report(4, [3.0, 1.5, 2.0, 7.0])
    assert line == ("join 4 members  registration latency per member, s (spec patch to each Cluster's Ready "
                    "lastTransitionTime, 1 s resolution): 1.5 2.0 3.0 7.0")
    assert "P50 2.0 s, P90 7.0 s, P99 7.0 s" in summary
    assert ("Karmada's reference P50 5.4 s / P90 6.1 s / P99 6.9 s: ratio ours/reference 0.37x / 1.15x / 1.01x"
            in summary)
    assert "goal P99 <= 2 s: ratio P99/goal 3.50x (misses)" in summary
    smaller = f"join 2 members  {plots.LATENCIES_LABEL}, s (x): 1.0 1.0"
    recorded = (f"## 2026-12-07T01:00:00Z — 2 cores (BENCH=members)\n```\n{smaller}\n{line}\n{summary}\n```\n"
                "## 2026-12-07T02:00:00Z — 2 cores (BENCH=install)\n")
    assert plots.registration(recorded) == ("2026-12-07T01:00:00Z", 4, [1.5, 2.0, 3.0, 7.0])
    assert plots.registration("## 2026-12-07T01:00:00Z\njoin 4 members  karmada-operator: 1.0 s\n") is None


def test_registration_latencies_from_the_clusters_ready_condition():
    import bench_members

    patched = datetime.fromisoformat("2026-12-07T01:00:00.400+00:00").timestamp()

    def cluster(name, status, when):
        return {"metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": status, "lastTransitionTime": when}]}}

    items = [cluster("m1", "True", "2026-12-07T01:00:05Z"), cluster("m2", "False", "2026-12-07T01:00:03Z"),
             cluster("m3", "True", "2026-12-07T01:00:00Z"), {"metadata": {"name": "m4"}}]
    assert bench_members.registration_latencies(items, patched) == {"m1": pytest.approx(4.6), "m3": 0.0}


def test_the_distribution_line_gives_percentiles_and_ratios_to_the_reference_and_the_goal():
    import distribution

    line = distribution.report(20, "Push", [0.1 * i for i in range(1, 101)], 2)
    assert "distribute 100 Deployments over 20 members (Push)" in line
    assert "P50 5.00 s, P99 9.90 s, max 10.00 s; 2 not arrived" in line
    assert "reference P99 1.3 s (Push): ratio 7.62x" in line and "ratio 9.90x (misses)" in line
    assert distribution.report(20, "Push", [0.2, 0.3], 0).endswith("ratio 0.30x (meets)")
    assert "nothing arrived" in distribution.report(20, "Pull", [], 5)
    # one object per member, each policy placing only its own member's objects there
    policy = distribution._policy("member7")
    assert policy["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["member7"]}}
    assert policy["spec"]["resourceSelectors"][0]["labelSelector"] == {"matchLabels": {distribution.LABEL: "member7"}}


def test_the_member_mix_and_what_churn_counts_as_touching_another_member():
    from types import SimpleNamespace

    import bench_members

    members = [SimpleNamespace(name=f"member{i}", secret_name=f"member{i}-kubeconfig") for i in range(1, 21)]
    spec = bench_members.members_spec(members)
    pull = [m["name"] for m in spec if m["syncMode"] == "Pull"]
    assert pull == ["member10", "member20"] and all(m["agentPlacement"] == "Host" for m in spec if m["name"] in pull)
    assert all("agentPlacement" not in m for m in spec if m["name"] not in pull)
    assert {m["region"] for m in spec} == set(bench_members.REGIONS)
    assert {z for m in spec for z in m["zones"]} == set(bench_members.ZONES)

    def cluster(name, rv, generation=1, ready="True", taints=()):
        return {"metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": rv, "generation": generation},
                "spec": {"syncMode": "Push", "taints": list(taints)},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}}

    before = {c["metadata"]["name"]: bench_members.untouched_view(c) for c in [cluster("a", "1"), cluster("b", "1")]}
    # a status write moves the resourceVersion only: not touched
    assert bench_members.touched(before, [cluster("a", "9", ready="False"), cluster("b", "1")], ["a", "b"]) == []
    # a spec change (generation), or a Cluster gone, is
    moved = [cluster("a", "9", generation=2, taints=[{"key": "k", "effect": "NoSchedule"}])]
    assert bench_members.touched(before, moved, ["a", "b"]) == ["a", "b"]
