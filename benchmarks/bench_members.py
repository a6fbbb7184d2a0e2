#!/usr/bin/env python3
"""Benchmark member join: our operator joining N members at once vs a sequential `karmadactl join` loop.

On the local host cluster, with kwok member clusters from the test bed
(``hack/testenv/members.sh N NODES``). BENCH_MEMBERS lists the sizes, ascending (default
"20,50": the issue's two); BENCH_MEMBER_NODES the fake nodes per member (default 10). Members
are started light (KO_MEMBERS_LIGHT=1: no scheduler, only the controllers a join uses) so 50
fit in 24 GiB, unless BENCH_MEMBERS_LIGHT=0.

1. Our operator (the real ansible-operator with watches.yaml) installs one small Karmada
   (KarmadaDeployment ``bench`` in karmada-system, 1 etcd member, no members) and waits Ready.
2. For each size N:
   a. Ours: ``spec.members`` is set to N members in one patch (every BENCH_MEMBERS_PULL_EVERY-th,
      default 10th, in Pull mode with its karmada-agent on the host; the rest Push; provider,
      four regions and three zones in turn); the figure is the time
      from the patch to status saying N/N joined, every Cluster Ready. Also printed: how long
      the member play itself took inside that reconcile (the ``Join or unjoin`` task, first
      start to last result, from ansible-runner's job events: all members run in parallel),
      how many reconcile runs it took, and the operator's peak memory. Per member: the
      registration latency, from the patch to the member's Cluster turning Ready (its Ready
      condition's ``lastTransitionTime`` in karmada-apiserver), every value and P50/P90/P99
      against Karmada's published figures and the goal; for the largest size also drawn to
      docs/images/registration-<N>.svg (benchmarks/plots.py).
   At the largest size, before the unjoin: distribution latency (benchmarks/distribution.py):
      BENCH_DISTRIBUTION Deployments (default 1000; 0 skips it) created through karmada-apiserver
      at BENCH_DISTRIBUTION_RATE per second (default 10), each propagated to one member, from the
      create's acknowledgement until the member's watch delivers it: P50/P99 against Karmada's
      published P99 (1.3 s Push, 0.99 s Pull) and the goal (P99 <= 1 s), as ratios, per mode.
      Then churn (BENCH_MEMBERS_CHURN, default 10): that many members removed from spec in one
      edit and added back in one, each timed, and every other member's Cluster compared before
      and after (uid, generation, labels, annotations, finalizers, spec: all but its status).
   b. All members are removed from spec again and the operator unjoins them.
   c. Theirs: ``karmadactl join`` (built from the pinned Karmada module) once per member, one
      after the other (what a platform team's script does), against the same Karmada; the
      figure is from the first call to every Cluster Ready. Then ``karmadactl unjoin`` each.
   d. The ratio theirs/ours (how many times faster the operator is).

Everything started here is stopped at the end. Needs root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import distribution  # noqa: E402  (benchmarks/ is the script's directory)
from bench_install import task_spans, task_times  # noqa: E402
from plots import (  # noqa: E402
    LATENCIES_LABEL,
    PERCENTILES,
    REGISTRATION_GOAL_P99,
    REGISTRATION_REFERENCE,
    percentile,
    registration_svg,
)

from support import karmada_e2e  # noqa: E402
from support.karmada_crds_server import serve  # noqa: E402
from support.memory import MemoryWatch, tree_cpu_seconds  # noqa: E402
from support.operator_runtime import OperatorProcess  # noqa: E402
from support.testenv import HACK, host_handle, member_handles, settings  # noqa: E402
from support.waiting import condition, crds_established  # noqa: E402

SIZES = sorted(int(n) for n in os.environ.get("BENCH_MEMBERS", "20,50").split(","))
NODES = int(os.environ.get("BENCH_MEMBER_NODES", "10"))
LIGHT = os.environ.get("BENCH_MEMBERS_LIGHT", "1")
TIMEOUT = float(os.environ.get("BENCH_MEMBERS_TIMEOUT", "1200"))
# Deployments distributed at the largest size, one member each, created at DISTRIBUTION_RATE/s (0: skipped)
DISTRIBUTION = int(os.environ.get("BENCH_DISTRIBUTION", "1000"))
DISTRIBUTION_RATE = float(os.environ.get("BENCH_DISTRIBUTION_RATE", "10"))
# Every PULL_EVERY-th member joins in Pull mode, its karmada-agent on the host (kwok runs no pods); 0: all Push
PULL_EVERY = int(os.environ.get("BENCH_MEMBERS_PULL_EVERY", "10"))
# Members removed and added back at the largest size (0: skipped)
CHURN = int(os.environ.get("BENCH_MEMBERS_CHURN", "10"))
REGIONS, ZONES = ("region-a", "region-b", "region-c", "region-d"), ("zone-1", "zone-2", "zone-3")
NAME, NS = "bench", "karmada-system"


def member_spec(member, index: int) -> dict:
    """spec.members[] for the index-th member (1-based): a mix of Push and Pull, regions and zones."""
    pull = PULL_EVERY > 0 and index % PULL_EVERY == 0
    return {"name": member.name, "kubeconfigSecretRef": {"name": member.secret_name},
            "syncMode": "Pull" if pull else "Push", **({"agentPlacement": "Host"} if pull else {}),
            "provider": "kwok", "region": REGIONS[(index - 1) % len(REGIONS)],
            "zones": [ZONES[(index - 1) % len(ZONES)]]}


def members_spec(members) -> list[dict]:
    return [member_spec(m, int(m.name.removeprefix("member"))) for m in members]


def untouched_view(cluster: dict) -> dict:
    """What of a Cluster must not move when other members come and go: all but its status (and
    the resourceVersion and managedFields that a status write changes)."""
    meta = cluster["metadata"]
    return {"uid": meta.get("uid"), "generation": meta.get("generation"), "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {}, "finalizers": meta.get("finalizers") or [],
            "spec": cluster.get("spec") or {}}


def touched(before: dict[str, dict], items: list[dict], names) -> list[str]:
    """The Clusters of ``names`` whose untouched_view differs from ``before`` (or that are gone)."""
    now = {c["metadata"]["name"]: untouched_view(c) for c in items}
    return sorted(n for n in names if now.get(n) != before.get(n))


def say(line: str) -> None:
    print(line, flush=True)


def wait_until(predicate, timeout: float, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(subprocess.SubprocessError, json.JSONDecodeError, KeyError):
            value = predicate()
            if value:
                return value
        time.sleep(interval)
    return None


def clusters(fleet: karmada_e2e.Deployment) -> list[dict] | None:
    """Karmada's Cluster objects, or None when karmada-apiserver does not answer."""
    out = fleet.karmadactl("get", "clusters", "-o", "json", check=False)
    return json.loads(out.stdout)["items"] if out.returncode == 0 else None


def ready_clusters(fleet: karmada_e2e.Deployment) -> set[str]:
    return {c["metadata"]["name"] for c in clusters(fleet) or [] if condition(c, "Ready").get("status") == "True"}


def cluster_names(fleet: karmada_e2e.Deployment) -> set[str]:
    items = clusters(fleet)
    return {c["metadata"]["name"] for c in items} if items is not None else {"?"}


def registration_latencies(items: list[dict], patched_at: float) -> dict[str, float]:
    """Per Cluster Ready: seconds from the spec patch (``time.time()`` as it was sent) to its Ready
    condition's ``lastTransitionTime``, which karmada-controller-manager sets on this machine's
    clock. That timestamp has 1 s resolution (RFC 3339, fractions dropped), so each figure is up
    to 1 s short of the true one; one that comes out below 0 counts as 0."""
    out = {}
    for c in items:
        ready = condition(c, "Ready")
        if ready.get("status") == "True" and ready.get("lastTransitionTime"):
            at = datetime.fromisoformat(ready["lastTransitionTime"]).timestamp()
            out[c["metadata"]["name"]] = max(0.0, at - patched_at)
    return out


def registration_report(n: int, latencies: list[float]) -> list[str]:
    """The lines the bench prints: every member's latency (plots.py reads them back from
    benchmarks/results.md), then P50/P90/P99 (nearest rank) with Karmada's reference figures and
    the goal for P99, each as a ratio ours/theirs."""
    values = sorted(latencies)
    ours = {name: percentile(values, q) for name, q in PERCENTILES.items()}
    p99 = ours["P99"]
    return [
        f"join {n} members  {LATENCIES_LABEL}, s (spec patch to each Cluster's Ready lastTransitionTime, "
        f"1 s resolution): {' '.join(f'{v:.1f}' for v in values)}",
        f"join {n} members  registration latency over {len(values)} members (nearest rank): "
        + ", ".join(f"{name} {secs:.1f} s" for name, secs in ours.items())
        + "; Karmada's reference " + " / ".join(f"{name} {secs:.1f} s" for name, secs in REGISTRATION_REFERENCE.items())
        + ": ratio ours/reference " + " / ".join(f"{ours[name] / secs:.2f}x" for name, secs in
                                                 REGISTRATION_REFERENCE.items())
        + f"; goal P99 <= {REGISTRATION_GOAL_P99:.0f} s: ratio P99/goal {p99 / REGISTRATION_GOAL_P99:.2f}x "
          f"({'meets' if p99 <= REGISTRATION_GOAL_P99 else 'misses'})",
    ]


def members_joined(fleet: karmada_e2e.Deployment, count: int) -> bool:
    status = fleet.get().get("status", {})
    joined = [m for m in status.get("members", []) if m["state"] == "Joined" and m["ready"]]
    return len(joined) == count and status.get("readyMembers") == f"{count}/{count}"


def member_play_seconds(run: Path) -> float | None:
    """First start to last result of the member task in one run (all members in parallel)."""
    stamps = []
    for event in (run / "job_events").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            data = json.loads(event.read_text())
            task = (data.get("event_data") or {}).get("task") or ""
            if task.startswith("Join or unjoin") and data.get("created"):
                stamps.append(datetime.fromisoformat(data["created"]).timestamp())
    return max(stamps) - min(stamps) if len(stamps) >= 2 else None


def member_steps(run: Path) -> list[tuple[str, float, float]]:
    """Where the members' joins went, from the member task's result in one run (each member's
    ``seconds`` per step): (step, median, max) over the members, in the order of the steps."""
    per_step: dict[str, list[float]] = {}
    for event in (run / "job_events").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            data = json.loads(event.read_text())
            if data.get("event") != "runner_on_ok" or not (data.get("event_data") or {}).get("task", "").startswith(
                    "Join or unjoin"):
                continue
            for result in ((data["event_data"].get("res") or {}).get("members") or {}).values():
                for step, secs in (result.get("seconds") or {}).items():
                    per_step.setdefault(step, []).append(float(secs))
    return [(step, statistics.median(v), max(v)) for step, v in per_step.items()]


def quiet(fleet: karmada_e2e.Deployment, settle: float = 10) -> bool:
    """No run in progress and none finished in the last ``settle`` seconds."""
    artifacts = karmada_e2e.RUNNER_ROOT / NS / NAME / "artifacts"
    current = [d for d in artifacts.iterdir() if d.is_dir() and d.name != "latest"] if artifacts.is_dir() else []
    if any(not (d / "status").exists() for d in current):
        return False
    latest = max(((d / "status").stat().st_mtime for d in current), default=0)
    return time.time() - latest >= settle


def set_members(fleet: karmada_e2e.Deployment, members: list[dict]) -> None:
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                       "-p", json.dumps({"spec": {"members": members}}))


PLAY: dict[str, float] = {}  # the member play's own duration and peak memory in the last measured run


def bench_ours(fleet: karmada_e2e.Deployment, members, operator: OperatorProcess) -> tuple[float | None, str]:
    spec = members_spec(members)
    # Start from a settled operator: no run in progress (the install's last run still
    # writing status would pick the edit up half-way).
    if not wait_until(lambda: quiet(fleet), 600, 1):
        return None, "reconcile runs did not settle within 600 s after Ready"
    before = {r.name for r in fleet.runs()}
    PLAY.clear()
    start = time.monotonic()
    memory = MemoryWatch(operator.proc.pid)
    cpu0 = tree_cpu_seconds(operator.proc.pid)
    patched_at = time.time()
    set_members(fleet, spec)
    if not wait_until(lambda: members_joined(fleet, len(members)), TIMEOUT, 0.5):
        memory.finish()
        return None, f"not all joined after {TIMEOUT:.0f} s: {fleet.get().get('status', {}).get('readyMembers')}"
    elapsed = time.monotonic() - start
    wait_until(lambda: quiet(fleet, 2), 300, 1)  # the run ends after writing status (not timed)
    PLAY["memory"] = memory.finish()
    PLAY["cpu"] = tree_cpu_seconds(operator.proc.pid) - cpu0
    new = [r for r in fleet.runs() if r.name not in before]
    plays = [s for s in (member_play_seconds(r) for r in new) if s is not None]
    if plays:
        PLAY["seconds"] = max(plays)
    # Where the joining run's time went: the edit to its first task, then its slowest tasks.
    joining = max(new, key=lambda r: member_play_seconds(r) or 0.0, default=None)
    if joining is not None:
        spans = task_spans(joining)
        if spans:
            PLAY["lag"] = spans[0][0] - (time.time() - (time.monotonic() - start))
            PLAY["run"] = spans[-1][0] + spans[-1][1] - spans[0][0]
        PLAY["top"] = task_times(joining, 8)
        PLAY["steps"] = member_steps(joining)
    detail = (f"{len(new)} reconcile run(s); member play {max(plays):.1f} s for {len(members)} members in parallel"
              if plays else f"{len(new)} reconcile run(s)")
    if ready_clusters(fleet) != {m.name for m in members}:
        return None, f"status says joined but Karmada's Clusters are {sorted(ready_clusters(fleet))}"
    names = {m.name for m in members}
    # At the 0.1 s printed, so docs/images/registration-<N>.svg drawn again from results.md is the same file.
    by_member = {name: round(secs, 1) for name, secs in
                 registration_latencies(clusters(fleet) or [], patched_at).items() if name in names}
    PLAY["latencies"] = list(by_member.values())
    modes = {m["name"]: m["syncMode"] for m in spec}
    PLAY["by_mode"] = {mode: [v for name, v in by_member.items() if modes[name] == mode]
                       for mode in sorted(set(modes.values()))}
    return elapsed, detail


def churn(fleet: karmada_e2e.Deployment, members, k: int) -> list[str]:
    """At N members: the last ``k`` removed from spec in one edit, then added back in one: the time
    of each (edit to status and Karmada's Clusters agreeing), and whether any other member's
    Cluster moved (anything but its status) meanwhile."""
    lines = []
    n, stay, moved = len(members), members[:-k], members[-k:]
    before = {c["metadata"]["name"]: untouched_view(c) for c in clusters(fleet) or []}
    others = [m.name for m in stay]
    start = time.monotonic()
    set_members(fleet, members_spec(stay))
    gone = wait_until(lambda: members_joined(fleet, len(stay)) and cluster_names(fleet) == set(others), TIMEOUT, 0.5)
    removed = time.monotonic() - start
    moved_names = [m.name for m in moved]
    if not gone:
        return [f"churn at {n} members: the {k} removed were not all unjoined after {TIMEOUT:.0f} s"]
    hit = touched(before, clusters(fleet) or [], others)
    lines.append(f"churn at {n} members: remove {k} ({', '.join(moved_names)}) in one spec edit: {removed:.1f} s to "
                 f"unjoined; the other {len(others)} Clusters touched (anything but status): {len(hit)}"
                 + (f" {hit[:5]}" if hit else ""))
    start = time.monotonic()
    set_members(fleet, members_spec(members))
    back = wait_until(lambda: members_joined(fleet, n) and ready_clusters(fleet) == {m.name for m in members},
                      TIMEOUT, 0.5)
    added = time.monotonic() - start
    if not back:
        return [*lines, f"churn at {n} members: the {k} added back were not all Ready after {TIMEOUT:.0f} s"]
    hit = touched(before, clusters(fleet) or [], others)
    lines.append(f"churn at {n} members: add the {k} back in one spec edit: {added:.1f} s to Ready; the other "
                 f"{len(others)} Clusters touched: {len(hit)}" + (f" {hit[:5]}" if hit else ""))
    return lines


def bench_theirs(fleet: karmada_e2e.Deployment, members, karmadactl: Path) -> tuple[float | None, str]:
    conf = fleet.kubeconfig()
    start = time.monotonic()
    for m in members:
        proc = subprocess.run([str(karmadactl), "join", m.name, "--kubeconfig", str(conf),
                               "--cluster-kubeconfig", str(m.kubeconfig)], capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            return None, f"karmadactl join {m.name} failed: {proc.stderr.strip()[-300:]}"
    loop = time.monotonic() - start
    want = {m.name for m in members}
    if not wait_until(lambda: ready_clusters(fleet) >= want, TIMEOUT, 0.5):
        return None, f"not all Ready after {TIMEOUT:.0f} s: {sorted(ready_clusters(fleet))}"
    return time.monotonic() - start, f"join calls {loop:.1f} s, then waiting for Ready"


def unjoin_theirs(fleet: karmada_e2e.Deployment, members, karmadactl: Path) -> None:
    """Cleanup, not measured: all at once (each call waits up to a minute for the Cluster to go)."""
    conf = fleet.kubeconfig()
    procs = [subprocess.Popen([str(karmadactl), "unjoin", m.name, "--kubeconfig", str(conf), "--cluster-kubeconfig",
                               str(m.kubeconfig), "--wait=60s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for m in members]
    for proc in procs:
        proc.wait(timeout=300)


def ensure_members(count: int) -> list:
    """Members 1..count running (members.sh adds the missing ones)."""
    members = member_handles(count, NODES)
    if not all(m.kubeconfig.exists() and m.ready() for m in members):
        env = dict(os.environ, KO_MEMBERS_LIGHT=LIGHT)
        subprocess.run([str(HACK / "members.sh"), str(count), str(NODES)], check=True, capture_output=True,
                       text=True, timeout=3600, env=env)
    return members


def measure(fleet: karmada_e2e.Deployment, members, operator: OperatorProcess, karmadactl: Path) -> bool:
    """One size: ours, unjoin, theirs, unjoin, ratios. False when the next size cannot be measured."""
    n = len(members)
    ours = bench_ours(fleet, members, operator)
    say(f"join {n} members  karmada-operator (ours, one spec patch): {figure(ours)}")
    play = dict(PLAY)
    if "run" in play:
        say(f"join {n} members  ours: the edit to the joining run's first task {play['lag']:.1f} s, that run "
            f"{play['run']:.1f} s; its slowest tasks: "
            + "; ".join(f"{name} {secs:.1f} s" for secs, name in play.get("top", [])))
    if play.get("steps"):
        say(f"join {n} members  ours: each member's join by step, median/max over the members: "
            + "; ".join(f"{step} {med:.1f}/{top:.1f} s" for step, med, top in play["steps"]))
    if play.get("latencies"):
        for line in registration_report(n, play["latencies"]):
            say(line)
        for mode, values in (play.get("by_mode") or {}).items():
            if values and len(play["by_mode"]) > 1:
                ordered = sorted(values)
                say(f"join {n} members  registration latency, the {len(values)} {mode} members: "
                    + ", ".join(f"{name} {percentile(ordered, q):.1f} s" for name, q in PERCENTILES.items()))
        if n == SIZES[-1]:
            draw_registration(n, play["latencies"])
    if "memory" in play:
        say(f"join {n} members  operator peak memory {play['memory']:.0f} MiB (PSS of ansible-operator and every "
            f"process it started, sampled each second, patch to the last run's end)")
    if "cpu" in play:
        say(f"join {n} members  operator CPU during the join {play['cpu']:.1f} CPU-s = {play['cpu'] / n:.2f} CPU-s per "
            "member (utime + stime of ansible-operator and every process it started, patch to the last run's end)")
    if ours[0] is not None and n == SIZES[-1] and DISTRIBUTION > 0:
        try:
            by_member, missing = distribution.measure(fleet.kubeconfig(), {m.name: m.kubeconfig for m in members},
                                                      DISTRIBUTION, DISTRIBUTION_RATE)
            modes = {m["name"]: m["syncMode"] for m in members_spec(members)}
            for mode in sorted(set(modes.values())):
                values = [v for name, vs in by_member.items() if modes[name] == mode for v in vs]
                lost = sum(count for name, count in missing.items() if modes[name] == mode)
                say(f"join {n} members  " + distribution.report(n, mode, values, lost)
                    + f" (created at {DISTRIBUTION_RATE:.0f}/s over all {n} members)")
        except Exception as exc:  # noqa: BLE001 (a figure not measured is said, the join figures stand)
            say(f"join {n} members  distribution latency not measured: {type(exc).__name__}: {exc}")
    if ours[0] is not None and n == SIZES[-1] and 0 < CHURN < n:
        for line in churn(fleet, members, CHURN):
            say(line)
    set_members(fleet, [])
    if not wait_until(lambda: not fleet.get().get("status", {}).get("members") and not cluster_names(fleet),
                      TIMEOUT, 1):
        say("  ours: members not all unjoined; karmadactl join would conflict, stopping")
        return False
    # Our unjoin deletes the member-side namespace; karmadactl cannot use one still terminating.
    wait_until(lambda: all(m.kubectl("get", "namespace", "karmada-cluster", check=False).returncode != 0
                           for m in members), 600, 2)
    theirs = bench_theirs(fleet, members, karmadactl)
    say(f"join {n} members  karmadactl join, sequential loop: {figure(theirs)}")
    unjoin_theirs(fleet, members, karmadactl)
    if ours[0] and theirs[0]:
        say(f"join {n} members  ratio karmadactl loop/ours, end to end: {theirs[0] / ours[0]:.2f}x (ours "
            f"{ours[0]:.1f} s from the spec patch to all joined; loop {theirs[0]:.1f} s; goal >= 4x)")
        if play.get("seconds"):
            say(f"join {n} members  ratio karmadactl loop/ours, member join work only: "
                f"{theirs[0] / play['seconds']:.2f}x (member play {play['seconds']:.1f} s)")
    return wait_until(lambda: not cluster_names(fleet), 600, 2) is not None


def draw_registration(n: int, latencies: list[float]) -> None:
    """docs/images/registration-<n>.svg; without matplotlib (requirements-dev.txt) a line says so."""
    try:
        path = registration_svg(latencies, ROOT / "docs" / "images" / f"registration-{n}.svg")
    except ImportError as exc:
        say(f"join {n} members  registration latency not drawn ({exc}; pip install -r requirements-dev.txt)")
        return
    say(f"join {n} members  registration latency drawn: {path.relative_to(ROOT)}")


def main() -> int:
    host = host_handle()
    started_cluster = started_members = False
    if not (host.kubeconfig.exists() and host.ready()):
        subprocess.run([str(HACK / "up.sh")], check=True, capture_output=True, text=True, timeout=1800)
        started_cluster = True
    links = Path(settings()["KO_LINKS"])
    karmadactl = links / "karmadactl"
    if not karmadactl.exists():
        subprocess.run([str(HACK / "build-bins.sh"), "karmadactl"], check=True, capture_output=True, text=True,
                       timeout=1800)
    work = Path(tempfile.mkdtemp(prefix="ko-members-bench-"))
    # The runner's records of an earlier, interrupted bench: a run killed with it never wrote its
    # status, and quiet() would wait for it for ever.
    shutil.rmtree(karmada_e2e.RUNNER_ROOT / NS / NAME, ignore_errors=True)
    crds = serve()
    operator = None
    try:
        host.kubectl("apply", "-k", str(ROOT / "config/crd"))
        crds_established(host.kubectl, ["karmadadeployments.operator.karmada.io"])
        operator = OperatorProcess(str(links / "ansible-operator"), host.kubeconfig, work)
        operator.wait_healthy()
        fleet = karmada_e2e.Deployment(host, operator, work, NAME, NS)
        cr = karmada_e2e.sample()
        cr["metadata"]["name"] = NAME
        cr["spec"].update({"crds": {"url": crds.url, "sha256": crds.sha256}, "members": [],
                           "etcd": {"local": {"replicas": 1, "storage": {"type": "EmptyDir"}}},
                           "apiServer": {"replicas": 1, "serviceType": "ClusterIP"},
                           "certificates": {"keyAlgorithm": "ECDSA"}})
        host.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        if not wait_until(lambda: condition(fleet.get(), "Ready").get("status") == "True", TIMEOUT, 2):
            say(f"member join benchmark: not measured (Karmada not Ready; log {operator.log_path})")
            return 0
        for n in SIZES:
            started = time.monotonic()
            # Set before members.sh runs: it may start some before it fails or is interrupted.
            started_members = started_members or not all(m.kubeconfig.exists() and m.ready()
                                                         for m in member_handles(n, NODES))
            try:
                members = ensure_members(n)
            except subprocess.CalledProcessError as exc:
                say(f"join {n} members  not measured: hack/testenv/members.sh {n} {NODES} failed: "
                    f"{(exc.stderr or '').strip()[-300:]}")
                break
            say(f"{n} kwok member clusters ({NODES} nodes each{', light' if LIGHT == '1' else ''}; up in "
                f"{time.monotonic() - started:.0f} s), Karmada {cr['spec']['karmadaVersion']} from our operator; "
                f"logs in {work}")
            if not measure(fleet, members, operator, karmadactl):
                break
    finally:
        # Each step on its own, so an interrupted or failed run still stops the operator (it holds
        # port 8888) and the members it started.
        with contextlib.suppress(Exception):
            if operator is not None:
                karmada_e2e.delete_karmada(host, NS, NAME)  # the unjoin of N members outlasts kubectl's 120 s
        with contextlib.suppress(Exception):
            if operator is not None:
                operator.stop()
        crds.stop()
        if started_members:
            subprocess.run([str(HACK / "members.sh"), "--down"], capture_output=True, text=True, timeout=600)
        if started_cluster:
            subprocess.run([str(HACK / "down.sh")], capture_output=True, text=True, timeout=600)
    return 0


def figure(result: tuple[float | None, str]) -> str:
    return f"{result[0]:.1f} s ({result[1]})" if result[0] is not None else f"not measured: {result[1]}"


if __name__ == "__main__":
    sys.exit(main())
