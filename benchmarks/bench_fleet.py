#!/usr/bin/env python3
"""A fleet of Karmadas from one operator (issue 36, item 2), on the test bed.

For each runtime concurrency in BENCH_FLEET_CONCURRENCY (``--max-concurrent-reconciles``, the
in-cluster manager's setting), one ansible-operator (the real runtime, as the e2e tests run it)
gets BENCH_FLEET_N KarmadaDeployments applied at once, each in its own namespace with one etcd
member (tests/support/karmada_e2e.sample_for_test_bed: emptyDir, one karmada-apiserver, no
members). Printed, from what the machine says (not the operator's report):

- time from the apply to every instance Ready (each instance's own time too), and instances
  Ready per minute per core, beside Kamaji's 100 control planes in 7.5 min on 25 nodes of
  4 vCPU (0.13 per minute per vCPU; theirs share one datastore, ours each run an etcd);
- the operator's CPU-seconds per instance during the install: utime + stime of ansible-operator
  and every process it started (/proc/<pid>/stat, children reaped included), and its peak memory
  (PSS of that process tree, sampled each second: tests/support/memory.py), whole and per instance;
- at rest, for the first concurrency only: the operator's idle CPU over BENCH_FLEET_REST seconds,
  the CPU of one fast-path pass per instance (a Service each instance owns touched: the pass the
  10-minute reconcile period runs), the cost per instance per hour (idle share + 6 such passes)
  as mCPU, and the memory per instance (PSS at rest minus the operator's before the apply, / N),
  beside Kamaji's 12 mCPU and 6 MiB per instance;
- one instance's failure: the same N plus one more whose karmada-apiserver image does not exist,
  at the first concurrency: the N good ones' time to Ready against the clean run's (goal within
  10 %).

Env: BENCH_FLEET_N (default 5), BENCH_FLEET_CONCURRENCY (default "4,2": 4 is the manager's),
BENCH_FLEET_REST (seconds, default 120), BENCH_FLEET_TIMEOUT (seconds per wait, default 1500),
BENCH_FLEET_ISOLATION=0 skips the failure run. Needs root; a host cluster that is not running is
started with hack/testenv/up.sh and taken down afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_install as bi  # noqa: E402

from support.karmada_crds_server import karmada_version, serve  # noqa: E402
from support.karmada_e2e import sample_for_test_bed  # noqa: E402
from support.memory import MemoryWatch, tree_cpu_seconds, tree_pss_mib  # noqa: E402
from support.operator_runtime import OperatorProcess  # noqa: E402
from support.testenv import HACK, settings  # noqa: E402

N = int(os.environ.get("BENCH_FLEET_N", "5"))
CONCURRENCY = [int(c) for c in os.environ.get("BENCH_FLEET_CONCURRENCY", "4,2").split(",") if c.strip()]
REST = float(os.environ.get("BENCH_FLEET_REST", "120"))
TIMEOUT = float(os.environ.get("BENCH_FLEET_TIMEOUT", "1500"))
ISOLATION = os.environ.get("BENCH_FLEET_ISOLATION", "1") != "0"
NAME = bi.NAME
CORES = os.cpu_count() or 1
PERIOD_PASSES_PER_HOUR = 6  # watches.yaml: reconcilePeriod 10m
KAMAJI_PER_MIN_PER_CPU = 100 / 7.5 / (25 * 4)
KAMAJI_MCPU, KAMAJI_MIB = 12.0, 6.0
BAD_IMAGE = {"registry": "ko-testenv.local", "repository": "no-such-kube-apiserver", "tag": "v0.0.0"}


def say(line: str) -> None:
    print(line, flush=True)


def namespaces(count: int, prefix: str = "bench-fleet") -> list[str]:
    return [f"{prefix}-{i}" for i in range(1, count + 1)]


def apply_all(host, crds, nss: list[str], bad: str = "") -> None:
    docs = []
    for ns in nss:
        cr = sample_for_test_bed(NAME, crds.url, crds.sha256)
        cr["metadata"]["namespace"] = ns
        cr["spec"].pop("members", None)
        if ns == bad:
            cr["spec"]["apiServer"]["image"] = BAD_IMAGE
        docs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, cr]
    host.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def ready_times(host, nss: list[str], started: float) -> dict[str, float]:
    """Each namespace's KarmadaDeployment Ready, in seconds after ``started`` (watching them all)."""
    done: dict[str, float] = {}
    deadline = started + TIMEOUT
    while len(done) < len(nss) and time.monotonic() < deadline:
        out = host.kubectl("get", "karmadadeployments", "-A", "-o", "json", check=False, timeout=60)
        if out.returncode == 0:
            for obj in json.loads(out.stdout)["items"]:
                ns = obj["metadata"]["namespace"]
                ready = bi.condition(obj, "Ready")
                if ns in nss and ns not in done and ready.get("status") == "True" \
                        and ready.get("observedGeneration") == obj["metadata"]["generation"]:
                    done[ns] = time.monotonic() - started
        time.sleep(1)
    return done


def remove_all(host, nss: list[str]) -> None:
    """Delete every CR at once (their finalizers run in parallel), then the namespaces."""
    host.kubectl("delete", "karmadadeployments", "--all-namespaces", "--all", "--wait=false", check=False)
    host.kubectl("wait", "--for=delete", "karmadadeployments", "--all-namespaces", "--all", "--timeout=900s",
                 check=False, timeout=960)
    for ns in nss:
        bi.remove_install(host, "karmadadeployment", ns)


def fleet_run(host, crds, work: Path, concurrency: int, rest: bool, bad: bool = False) -> dict:
    nss = namespaces(N)
    bad_ns = "bench-fleet-bad" if bad else ""
    work.mkdir(parents=True, exist_ok=True)
    operator = OperatorProcess(str(Path(settings()["KO_LINKS"]) / "ansible-operator"), host.kubeconfig,
                               work, extra_args=[f"--max-concurrent-reconciles={concurrency}"])
    result: dict = {"concurrency": concurrency}
    try:
        operator.wait_healthy()
        pid = operator.proc.pid
        time.sleep(5)
        idle_pss = tree_pss_mib(pid)
        cpu0 = tree_cpu_seconds(pid)
        memory = MemoryWatch(pid)
        started = time.monotonic()
        apply_all(host, crds, nss + ([bad_ns] if bad else []), bad_ns)
        times = ready_times(host, nss, started)
        peak = memory.finish()
        cpu = tree_cpu_seconds(pid) - cpu0
        result.update(times=times, peak=peak, cpu=cpu, idle_pss=idle_pss)
        label = f"concurrency {concurrency}{' + 1 failing instance' if bad else ''}"
        if len(times) < N:
            result["error"] = f"{N - len(times)} of {N} not Ready after {TIMEOUT:.0f} s"
            say(f"fleet {label}: not measured: {result['error']}; operator log {operator.log_path}")
            return result
        total = max(times.values())
        per_min_core = N / (total / 60) / CORES
        say(f"fleet {label}: {N} KarmadaDeployments (1 etcd each) applied at once -> all Ready in {total:.1f} s "
            f"(each: {', '.join(f'{times[ns]:.0f}' for ns in nss)} s); {per_min_core:.3f} Ready per minute per "
            f"core vs Kamaji's {KAMAJI_PER_MIN_PER_CPU:.3f} per minute per vCPU (theirs share one datastore, "
            f"ours each run an etcd): ratio {per_min_core / KAMAJI_PER_MIN_PER_CPU:.2f}x")
        say(f"fleet {label}: operator CPU during the install {cpu:.1f} s = {cpu / N:.1f} CPU-s per instance; "
            f"peak memory {peak:.0f} MiB (idle before: {idle_pss:.0f} MiB) = {(peak - idle_pss) / N:.0f} MiB per "
            f"instance above idle")
        result["total"] = total
        if rest:
            result.update(at_rest(host, operator, nss, idle_pss))
        return result
    finally:
        remove_all(host, nss + ([bad_ns] if bad else []))
        operator.stop()


def at_rest(host, operator: OperatorProcess, nss: list[str], idle_pss: float) -> dict:
    """The operator's cost at rest per instance (module docstring)."""
    pid = operator.proc.pid
    if bi.baseline.wait_until(lambda: all(bi.quiet(ns) for ns in nss), 900, 2) is None:
        say("fleet at rest: not measured (runs kept going for 900 s after Ready)")
        return {}
    pss = tree_pss_mib(pid)
    cpu_a = tree_cpu_seconds(pid)
    time.sleep(REST)
    idle_cpu = tree_cpu_seconds(pid) - cpu_a
    # one fast-path pass per instance: the periodic reconcile's work, triggered now
    before = {ns: set(bi.runs(ns)) for ns in nss}
    cpu_b = tree_cpu_seconds(pid)
    for ns in nss:
        host.kubectl("annotate", "service", bi.TRIGGER_SERVICE, "-n", ns, f"bench/touch={time.time()}",
                     "--overwrite")

    def finished():
        return all(any(n not in before[ns] and (r / "status").exists() for n, r in bi.runs(ns).items())
                   for ns in nss)

    if bi.baseline.wait_until(finished, 600, 0.5) is None:
        say("fleet at rest: the fast-path passes did not all finish within 600 s")
        return {}
    time.sleep(2)
    pass_cpu = (tree_cpu_seconds(pid) - cpu_b) / len(nss)
    per_hour = idle_cpu / REST * 3600 / len(nss) + PERIOD_PASSES_PER_HOUR * pass_cpu
    mcpu = per_hour / 3600 * 1000
    mib = (pss - idle_pss) / len(nss)
    say(f"fleet at rest ({len(nss)} instances): idle {idle_cpu:.2f} CPU-s in {REST:.0f} s; a fast-path pass "
        f"{pass_cpu:.2f} CPU-s per instance; per instance per hour {per_hour:.1f} CPU-s ({PERIOD_PASSES_PER_HOUR} "
        f"passes + the idle share) = {mcpu:.1f} mCPU vs Kamaji's {KAMAJI_MCPU:.0f} mCPU: ratio "
        f"{mcpu / KAMAJI_MCPU:.2f}x; memory {pss:.0f} MiB at rest, {mib:.1f} MiB per instance above the idle "
        f"operator vs Kamaji's {KAMAJI_MIB:.0f} MiB: ratio {mib / KAMAJI_MIB:.2f}x")
    return {"mcpu": mcpu, "mib": mib}


def guarded(label: str, run, *args) -> dict | None:
    """One fleet run; an error (its cleanup has run) is printed as "not measured", never a figure."""
    result, why = bi.guarded(lambda *a: (run(*a), ""), *args)
    if result is None:
        say(f"{label}: not measured: {why}")
    return result


def main() -> int:
    bed = bi.host_up("fleet benchmark")
    if bed is None:
        return 0
    host, started_cluster = bed
    busy = bi.pgrep("ansible-operator run")
    if busy:
        say(f"fleet benchmark: not measured (another ansible-operator runs here: {busy[0][:160]})")
        return 0
    work = Path(tempfile.mkdtemp(prefix="ko-fleet-bench-"))
    crds = serve()
    say(f"Karmada {karmada_version()}, {N} instances, {CORES} cores; logs in {work}")
    host.kubectl("apply", "-k", str(ROOT / "config" / "crd"))
    for crd in ("karmadadeployments", "etcdbackups", "etcdrestores"):
        bi.wait_established(host, f"{crd}.operator.karmada.io")
    clean = {}
    try:
        for i, c in enumerate(CONCURRENCY):
            clean[c] = guarded(f"fleet concurrency {c}", fleet_run, host, crds, work / f"c{c}", c, i == 0)
        if ISOLATION and CONCURRENCY:
            c = CONCURRENCY[0]
            failing = guarded(f"fleet concurrency {c} + 1 failing instance", fleet_run, host, crds,
                              work / f"c{c}-bad", c, False, True)
            base = (clean.get(c) or {}).get("total")
            if base and failing and failing.get("total"):
                say(f"fleet isolation at concurrency {c}: {N} good instances Ready in {failing['total']:.1f} s beside "
                    f"one whose karmada-apiserver image does not exist, vs {base:.1f} s without it: "
                    f"{failing['total'] / base:.2f}x (goal <= 1.10x)")
            else:
                say("fleet isolation: not measured (a run has no figure)")
        figures = {c: r.get("total") for c, r in clean.items() if r}
        if figures:
            best = min((t, c) for c, t in figures.items() if t)[1] if any(figures.values()) else None
            say("fleet by concurrency: " + ", ".join(f"{c}: {t:.1f} s" if t else f"{c}: no figure"
                                                    for c, t in figures.items())
                + (f"; fastest {best}" if best else ""))
    finally:
        crds.stop()
        if started_cluster:
            subprocess.run([str(HACK / "down.sh")], capture_output=True, text=True, timeout=600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
