#!/usr/bin/env python3
"""Pictures of the recorded benchmarks: SVG files drawn from the figures in benchmarks/results.md,
for docs/performance.md, so a reader sees the shape of a result before reading its numbers.

Three pictures, each drawn by a pure function from plain data (so a unit test draws it from
made-up figures and a bench draws it from what it has just measured):

- ``failover_svg``: failover of a stopped member, pods/s and time against the replicas evicted, per
  setting (kwok nodes per member, scheduler gate), with the line ``t(n) = d + n / r`` that
  benchmarks/failover_model.py fits and its projection to the seed's 40,000 pods in 15 minutes.
- ``install_split_svg``: where apply-to-Ready goes, step by step, ours against Karmada's Go operator
  (benchmarks/bench_install.py prints the steps; ``latest_install`` reads them back).
- ``registration_svg``: per-member registration latency (benchmarks/bench_members.py) with its P50,
  P90 and P99 against Karmada's published figures.

The files are reproducible: matplotlib is pinned (requirements-dev.txt), SVG ids come from a fixed
``svg.hashsalt``, no date is written and text stays text (``svg.fonttype`` none), so drawing the
same figures again gives the same bytes and a diff of docs/images/ shows only changed results.

    python benchmarks/plots.py [results.md] [outdir]    (default: benchmarks/results.md, docs/images)
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import failover_model as fm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
# Karmada's published registration latency for 100 members (the reference), and the goal.
PERCENTILES = {"P50": 50, "P90": 90, "P99": 99}
REGISTRATION_REFERENCE = {"P50": 5.4, "P90": 6.1, "P99": 6.9}
REGISTRATION_GOAL_P99 = 2.0
# The label of bench_members.py's line with every member's latency, which registration() reads back.
LATENCIES_LABEL = "registration latency per member"
# What makes the SVG files byte-identical from one drawing to the next (and the look of them).
STYLE = {
    "svg.hashsalt": "karmada-operator-benchmarks",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
SEED_RATE = fm.SEED_PODS / fm.SEED_SECONDS


@contextlib.contextmanager
def _svg(path: str | Path, width: float, height: float) -> Iterator:
    """A matplotlib Figure (the Agg backend, no pyplot state) saved to ``path`` as SVG at the end."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width, height), layout="constrained")
        yield fig
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="svg", metadata={"Date": None})


# --- percentiles ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile: the smallest value with at least ``q`` % of the values at or
    below it (no interpolation, so the figure is always one that was measured; with 100 values,
    P99 is the second largest)."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} outside (0, 100]")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


# --- failover ---------------------------------------------------------------------------------


def fits(points: Sequence[fm.Point], least: int = 3) -> dict[tuple[int, bool], fm.Fit]:
    """failover_model's fit for every setting with at least ``least`` sizes (as its report does)."""
    return {key: fm.fit(group) for key, group in fm.settings(points).items() if len(group) >= least}


def _setting(nodes: int, gate_off: bool) -> str:
    return f"{nodes} nodes/member, gate {'off' if gate_off else 'on'}"


def failover_svg(points: Sequence[fm.Point], fits: Mapping[tuple[int, bool], fm.Fit], path: str | Path,
                 title: str | None = None) -> Path:
    """Failover against the replicas evicted, one colour per setting (nodes per member, scheduler
    gate): left the pods/s from the stop (evicted / time until all run again), right that time in
    minutes. The measured points are dots; a setting with a fit has its line t(n) = d + n / r,
    solid over the sizes measured and dashed beyond them up to the seed's 40,000 pods, where the
    projected time is written. The seed (40,000 pods in 15 minutes, 44.4 pods/s, their hardware)
    is marked on both sides."""
    path = Path(path)
    groups = fm.settings(points)
    with _svg(path, 10, 4.4) as fig:
        rate_ax, time_ax = fig.subplots(1, 2)
        xs_all = [p.evicted for p in points] or [100]
        x_min = min(xs_all) / 1.6
        for i, key in enumerate(sorted(set(groups) | set(fits))):
            colour = COLOURS[i % len(COLOURS)]
            group = groups.get(key, [])
            model = fits.get(key)
            label = _setting(*key)
            if model is not None:
                label += f": t(n) = {model.fixed:.1f} s + n / {model.rate:.1f} pods/s"
            if group:
                rate_ax.plot([p.evicted for p in group], [p.evicted / p.seconds for p in group], "o", color=colour,
                             label=label)
                time_ax.plot([p.evicted for p in group], [p.seconds / 60 for p in group], "o", color=colour)
            if model is None:
                continue
            lo, hi = (group[0].evicted, group[-1].evicted) if group else (x_min, x_min)
            for start, end, style in ((lo, hi, "-"), (hi, fm.SEED_PODS, "--")):
                xs = [start * (end / start) ** (k / 60) for k in range(61)] if end > start else []
                rate_ax.plot(xs, [x / model.seconds(x) for x in xs], style, color=colour, linewidth=1.2)
                time_ax.plot(xs, [model.seconds(x) / 60 for x in xs], style, color=colour, linewidth=1.2)
            projected = model.seconds(fm.SEED_PODS)
            time_ax.annotate(f"{projected / 60:.1f} min", (fm.SEED_PODS, projected / 60), xytext=(4, 0),
                             textcoords="offset points", va="center", color=colour, fontsize=8)
            rate_ax.annotate(f"{fm.SEED_PODS / projected:.1f} pods/s", (fm.SEED_PODS, fm.SEED_PODS / projected),
                             xytext=(4, 0), textcoords="offset points", va="center", color=colour, fontsize=8)
        seed = f"seed: {fm.SEED_PODS:,} pods in {fm.SEED_SECONDS / 60:.0f} min ({SEED_RATE:.1f} pods/s, their hardware)"
        rate_ax.axhline(SEED_RATE, color="black", linestyle=":", linewidth=1, label=seed)
        time_ax.axhline(fm.SEED_SECONDS / 60, color="black", linestyle=":", linewidth=1)
        time_ax.plot([fm.SEED_PODS], [fm.SEED_SECONDS / 60], "*", color="black", markersize=11, label=seed)
        for ax in (rate_ax, time_ax):
            ax.set_xscale("log")
            ax.set_xlim(x_min, fm.SEED_PODS * 3)
            ax.axvline(fm.SEED_PODS, color="grey", linewidth=0.6)
            ax.set_xlabel("replicas evicted from the stopped member (log)")
            ax.grid(True, which="major", linewidth=0.3)
        rates = [p.evicted / p.seconds for p in points]
        rates += [fm.SEED_PODS / m.seconds(fm.SEED_PODS) for m in fits.values()]
        rate_ax.set_ylim(0, max(rates + [SEED_RATE]) * 1.15)
        rate_ax.set_ylabel("pods/s from the stop")
        rate_ax.set_title("Failover rate (dots measured, dashed projected)")
        rate_ax.legend(loc="center left", bbox_to_anchor=(0, 0.62))
        time_ax.set_yscale("log")
        time_ax.set_ylabel("minutes from the stop until all run again (log)")
        time_ax.set_title("Time until every evicted replica runs again")
        time_ax.legend(loc="upper left")
        fig.suptitle(title or f"Failover on the {fm.BED_CORES}-core test bed, fitted and projected to "
                              f"{fm.SEED_PODS:,} pods (benchmarks/failover_model.py)")
    return path


# --- install ----------------------------------------------------------------------------------

INSTALL_MARK = "== benchmarks/bench_install.py"
UNFAIR = re.compile(r"not a fair run|not used for the figures", re.I)
OURS_STEP = re.compile(r"^\s*ours \(([\w.-]+)\): install step\s+([\d.]+) s\s+(.+?)\s*$", re.M)
OURS_READY = re.compile(r"^\s*ours \(([\w.-]+)\): Ready in ([\d.]+) s, (\d+) etcd member", re.M)
THEIRS_STEP = re.compile(r"^\s*theirs: install step\s+([\d.]+) s\s+(.+?)\s*$", re.M)
THEIRS_READY = re.compile(r"^install apply-to-Ready\s+karmada's Go operator, (\d+) etcd member\(s\): ([\d.]+) s", re.M)


@dataclass(frozen=True)
class Install:
    """One side of a recorded install: its steps (name -> seconds, as printed) and apply-to-Ready."""
    label: str
    steps: dict[str, float]
    total: float
    etcd: int


@dataclass(frozen=True)
class InstallRun:
    run: str  # the run's timestamp, as its header gives it
    ours: dict[str, Install]  # per namespace (bench-ours: 3 etcd members, bench-ours-1: 1)
    theirs: Install | None

    def same_size(self) -> Install | None:
        """Ours at the etcd size Karmada's operator ran with (the fair comparison)."""
        if self.theirs is None:
            return None
        return next((o for o in self.ours.values() if o.etcd == self.theirs.etcd), None)


def _when(stamp: str) -> datetime:
    for form in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ"):
        with contextlib.suppress(ValueError):
            return datetime.strptime(stamp, form)
    return datetime.min


def _blocks(text: str) -> Iterator[tuple[str, str, str]]:
    """(timestamp, header, body) of every run recorded in results.md."""
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        header, _, body = block.partition("\n")
        yield header.split(" ", 1)[0], header, body


def install_runs(text: str) -> list[InstallRun]:
    """Every install bench recorded in results.md, oldest first: its section of a ``make bench`` run
    (from ``== benchmarks/bench_install.py`` to the next bench) or a ``BENCH=install`` run's
    block. Runs whose header says they are not fair (a stalled machine) are left out."""
    found = []
    for stamp, header, body in _blocks(text):
        if UNFAIR.search(header):
            continue
        if INSTALL_MARK in body:
            section = body.split(INSTALL_MARK, 1)[1].split("\n== ", 1)[0]
        elif "BENCH=install" in header:
            section = body
        else:
            continue
        steps: dict[str, dict[str, float]] = {}
        for m in OURS_STEP.finditer(section):
            steps.setdefault(m.group(1), {})[m.group(3)] = float(m.group(2))
        ours = {m.group(1): Install(f"ours (Ansible), {m.group(3)} etcd member{'s' if m.group(3) != '1' else ''}",
                                    steps.get(m.group(1), {}), float(m.group(2)), int(m.group(3)))
                for m in OURS_READY.finditer(section)}
        theirs = None
        ready = THEIRS_READY.search(section)
        if ready:
            etcd = int(ready.group(1))
            theirs = Install(f"Karmada's Go operator, {etcd} etcd member{'s' if etcd != 1 else ''}",
                             {m.group(2): float(m.group(1)) for m in THEIRS_STEP.finditer(section)},
                             float(ready.group(2)), etcd)
        if ours or theirs:
            found.append(InstallRun(stamp, ours, theirs))
    return sorted(found, key=lambda r: _when(r.run))  # stable: a tie keeps the file's order


def latest_install(text: str) -> InstallRun | None:
    """The most recent recorded install run with both sides' steps at the same etcd size (runs
    with ``BENCH_INSTALL_ONLY=ours`` have no Karmada operator to compare with)."""
    both = [r for r in install_runs(text) if r.same_size() and r.same_size().steps and r.theirs.steps]
    return both[-1] if both else None


CATEGORIES = [  # (what a step is about, its colour, words in the step names of either operator)
    ("etcd", "#1f77b4", ("etcd",)),
    ("karmada-apiserver", "#ff7f0e", ("karmada_deployment/apiserver", "karmadaapiserver")),
    ("other components", "#2ca02c", ("component", "aggregated", "search", "metric", "controlplane")),
    ("certificates", "#9467bd", ("pki", "cert")),
    ("CRDs, system objects", "#8c564b", ("crd", "system", "apiservice")),
    ("operator waiting (no run)", "#d9d9d9", ("no run in progress",)),
]
OTHER = ("other steps", "#7f7f7f")
SHORT = {"(no run in progress)": "waiting"}
CHARS = 100  # about how many 7-point characters the bars' axis holds across
REST = ("outside the printed steps", "#f2f2f2")


def category(step: str) -> tuple[str, str]:
    """The kind of work a step name stands for, and its colour (shared by both operators' names)."""
    low = step.lower()
    for name, colour, words in CATEGORIES:
        if any(w in low for w in words):
            return name, colour
    return OTHER


def install_split_svg(ours: Mapping[str, float], theirs: Mapping[str, float], path: str | Path, *,
                      totals: tuple[float, float] | None = None,
                      labels: tuple[str, str] = ("ours (Ansible)", "Karmada's Go operator"),
                      title: str = "Install, apply to Ready, by step") -> Path:
    """Two horizontal stacked bars, ours and Karmada's operator: each step (name -> seconds) a
    segment, longest first, coloured by the kind of work (etcd, karmada-apiserver, ...) so the
    two operators' differently named steps compare; a segment wide enough carries its step's name.
    ``totals`` are the recorded apply-to-Ready times: what the printed steps do not cover (the bench
    prints the top 12) is a last, pale segment, and each bar ends with its total."""
    path = Path(path)
    sides = [(labels[0], dict(ours)), (labels[1], dict(theirs))]
    ends = [totals[i] if totals else sum(steps.values()) for i, (_, steps) in enumerate(sides)]
    width = max(ends + [sum(s.values()) for _, s in sides]) or 1
    with _svg(path, 10, 3.2) as fig:
        ax = fig.subplots()
        used: dict[str, str] = {}
        for row, ((_, steps), end) in enumerate(zip(sides, ends, strict=True)):
            y = len(sides) - 1 - row
            left = 0.0
            segments = [(secs, name, *category(name)) for name, secs in
                        sorted(steps.items(), key=lambda item: (-item[1], item[0])) if secs > 0]
            if end - sum(steps.values()) > 0.05:
                segments.append((end - sum(steps.values()), "", *REST))
            for secs, name, kind, colour in segments:
                ax.barh(y, secs, left=left, height=0.6, color=colour, edgecolor="white", linewidth=0.8)
                used.setdefault(kind, colour)
                short = SHORT.get(name, name.rsplit("/", 1)[-1])
                if name and secs >= (len(short) + 1) * width / CHARS:  # the name fits in its segment
                    ax.text(left + secs / 2, y, short, ha="center", va="center", fontsize=7,
                            color="black" if colour in ("#d9d9d9", "#f2f2f2") else "white")
                left += secs
            ax.text(max(left, end) + width * 0.01, y, f"{end:.1f} s", va="center", fontweight="bold")
        ax.set_yticks(range(len(sides)), [label.replace(", ", "\n", 1) for label, _ in reversed(sides)])
        ax.set_xlim(0, width * 1.1)
        ax.set_xlabel("seconds from apply to Ready")
        ax.set_title(title)
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=c, label=k) for k, c in used.items()], loc="upper center",
                  bbox_to_anchor=(0.5, -0.3), ncol=4, frameon=False)
    return path


# --- registration -----------------------------------------------------------------------------

LATENCIES = re.compile(rf"^join (\d+) members\s+{re.escape(LATENCIES_LABEL)}[^:]*:\s*([-\d. ]+)$", re.M)


def registration(text: str) -> tuple[str, int, list[float]] | None:
    """The per-member registration latencies bench_members.py printed in the most recent recorded
    members run that has them, at that run's largest size: (run, members, seconds)."""
    found = []
    for stamp, _, body in _blocks(text):
        sizes = [(int(m.group(1)), [float(v) for v in m.group(2).split()]) for m in LATENCIES.finditer(body)]
        if sizes:
            n, values = max(sizes, key=lambda s: s[0])
            found.append((_when(stamp), stamp, n, values))
    if not found:
        return None
    _, stamp, n, values = sorted(found, key=lambda f: f[0])[-1]
    return stamp, n, values


def registration_svg(latencies_seconds: Sequence[float], path: str | Path,
                     reference: Mapping[str, float] = REGISTRATION_REFERENCE,
                     goal: float = REGISTRATION_GOAL_P99, title: str | None = None) -> Path:
    """Per-member registration latency: a histogram (members per half second) and the cumulative
    share of members (right axis), with our P50, P90 and P99 (nearest rank) as solid lines,
    Karmada's published figures (``reference``, name -> seconds) dashed and the goal for P99 dotted."""
    path = Path(path)
    values = sorted(latencies_seconds)
    if not values:
        raise ValueError("no latencies")
    with _svg(path, 8, 4) as fig:
        ax = fig.subplots()
        top = max(values + list(reference.values()) + [goal])
        bins = [k * 0.5 for k in range(int(top / 0.5) + 2)]
        ax.hist(values, bins=bins, color="#c6dbef", edgecolor="white", label=f"{len(values)} members")
        ax.set_xlabel("seconds from the spec patch to the member's Cluster Ready (1 s resolution)")
        ax.set_ylabel("members")
        cdf = ax.twinx()
        cdf.step(values, [100 * (i + 1) / len(values) for i in range(len(values))], where="post", color="#08519c",
                 linewidth=1.2)
        cdf.set_ylim(0, 105)
        cdf.set_ylabel("members registered (%)")
        for name, q in PERCENTILES.items():
            ours = percentile(values, q)
            ax.axvline(ours, color="#08519c", linewidth=1.2)
            ax.annotate(f"ours {name} {ours:.1f} s", (ours, 1), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", ha="right", fontsize=7, color="#08519c")
        for name, secs in reference.items():
            ax.axvline(secs, color="#a50f15", linestyle="--", linewidth=1)
            ax.annotate(f"Karmada {name} {secs:.1f} s", (secs, 1), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", ha="left", fontsize=7, color="#a50f15")
        ax.axvline(goal, color="black", linestyle=":", linewidth=1)
        ax.annotate(f"goal P99 <= {goal:.0f} s", (goal, 0.02), xycoords=("data", "axes fraction"), rotation=90,
                    va="bottom", ha="left", fontsize=7)
        ax.set_xlim(0, top * 1.1)
        ax.legend(loc="center right")
        ax.set_title(title or f"Member registration latency, {len(values)} members joined in one spec patch")
    return path


# --- the command ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    results = Path(args[0]) if args else fm.RESULTS
    outdir = Path(args[1]) if len(args) > 1 else IMAGES
    text = results.read_text()

    pts = fm.points(text)
    models = fits(pts)
    runs = ", ".join(sorted({p.run for p in pts if (p.nodes, p.gate_off) in models}))
    print(f"{failover_svg([p for p in pts if (p.nodes, p.gate_off) in models], models, outdir / 'failover.svg')}: "
          f"{len(models)} setting(s) from run(s) {runs}")

    run = latest_install(text)
    if run is None:
        print("install-split.svg skipped: no recorded install run with both operators' steps")
    else:
        ours, theirs = run.same_size(), run.theirs
        drawn = install_split_svg(ours.steps, theirs.steps, outdir / "install-split.svg",
                                  totals=(ours.total, theirs.total), labels=(ours.label, theirs.label),
                                  title=f"Install, apply to Ready, by step\nrun {run.run} in benchmarks/results.md "
                                        f"(the latest with both operators)")
        print(f"{drawn}: run {run.run}, {ours.label} {ours.total:.1f} s, {theirs.label} {theirs.total:.1f} s")

    found = registration(text)
    if found is None:
        print(f"registration-<N>.svg skipped: no recorded members run in {results} has per-member latencies "
              f"(the '{LATENCIES_LABEL}' line bench_members.py prints; BENCH=members BENCH_MEMBERS=100 make bench)")
    else:
        stamp, n, values = found
        drawn = registration_svg(values, outdir / f"registration-{n}.svg")
        print(f"{drawn}: run {stamp}, {n} members")
    return 0


if __name__ == "__main__":
    sys.exit(main())
