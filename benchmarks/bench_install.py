#!/usr/bin/env python3
"""Benchmark a Karmada install on the local host cluster: our operator vs Karmada's own, in one run.

1. Our operator (the real ansible-operator with watches.yaml, as tests/support/operator_runtime.py
   runs it): apply-to-Ready of the sample KarmadaDeployment (3 etcd members, minus ``members``,
   Karmada's CRDs from a local HTTP server) in namespace bench-ours, then the no-op reconcile:
   an annotation on the karmada-apiserver Service (an object the CR owns) triggers a run; its
   duration is read from the ansible-runner artifacts (first to last job event), with the time
   from the annotation to the run's ``status`` file. Then the same with 1 etcd member
   (bench-ours-1), the size Karmada's operator can install here (see THEIRS_ETCD below).
2. Karmada's Go operator (``hack/testenv/build-bins.sh karmada-operator``) as a local process,
   its ``Karmada`` CR with the same images in namespace bench-karmada: apply-to-Ready (its
   condition Ready). See benchmarks/karmada_operator_baseline.py for how the CR matches ours.
3. The ratio ours/theirs of the apply-to-Ready times at the same etcd size, and ours with 3
   members over theirs.

The installs run one after the other; each is removed afterwards (CR, finalizers, PVCs, Secrets,
namespace) and the processes started here are stopped. Every wait is bounded
(BENCH_INSTALL_TIMEOUT seconds per install, default 1200). BENCH_INSTALL_ONLY=ours|theirs runs
one side. Needs root: a host cluster that is not running is started with hack/testenv/up.sh
(and taken down again at the end).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import karmada_operator_baseline as baseline  # noqa: E402

from support.karmada_crds_server import karmada_version, serve  # noqa: E402
from support.karmada_e2e import run_seconds  # noqa: E402
from support.memory import MemoryWatch  # noqa: E402
from support.operator_runtime import OperatorProcess  # noqa: E402
from support.testenv import HACK, host_handle, settings  # noqa: E402

NAME = "karmada"
NS_OURS, NS_THEIRS = "bench-ours", "bench-karmada"
TIMEOUT = float(os.environ.get("BENCH_INSTALL_TIMEOUT", "1200"))
ONLY = os.environ.get("BENCH_INSTALL_ONLY", "")  # "ours" or "theirs": one side only (no ratio)
# Karmada's operator v1.18.2 cannot start a 3-member etcd here: its headless etcd Service has no
# publishNotReadyAddresses, so cluster DNS has no name for a member until it is Ready, and a
# member is Ready only once it reaches its peers by those names (seen: "lookup
# karmada-etcd-1.karmada-etcd.<ns>.svc.cluster.local: no such host", readiness /readyz timing
# out, never Ready). So its install uses 1 member, and ours is measured with 1 member as well.
THEIRS_ETCD = int(os.environ.get("BENCH_THEIRS_ETCD_REPLICAS", "1"))
THEIRS_ETCD_WHY = ("Karmada's operator makes its headless etcd Service without publishNotReadyAddresses, so 3 "
                   "members never resolve each other's names and never turn Ready (BENCH_THEIRS_ETCD_REPLICAS=3 "
                   "tries anyway)")
# Annotating the KarmadaDeployment itself triggers nothing: watches.yaml leaves
# watchAnnotationsChanges at false, so the runtime reconciles on generation changes only.
# An update of an object the CR owns does (watchDependentResources; status-only updates are
# ignored), and an extra annotation is outside what the role applies, so the run has nothing to do.
TRIGGER_SERVICE = "karmada-apiserver"
RUNNER_ROOT = Path("/tmp/ansible-operator/runner/operator.karmada.io/v1alpha1/KarmadaDeployment")


def say(line: str) -> None:
    print(line, flush=True)


def versions() -> dict[str, str]:
    out = {}
    for line in (ROOT / "hack" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def condition(obj: dict, ctype: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), {})


def get(host, kind: str, ns: str) -> dict | None:
    proc = host.kubectl("get", kind, NAME, "-n", ns, "-o", "json", check=False, timeout=30)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def pgrep(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split(" ", 1)[0] != str(os.getpid())]


def crd_exists(host, name: str) -> bool:
    return host.kubectl("get", "crd", name, check=False, timeout=30).returncode == 0


def wait_established(host, name: str, timeout: float = 120) -> None:
    """`kubectl wait` fails on a CRD whose status has no conditions yet: poll instead."""
    def established():
        proc = host.kubectl("get", "crd", name, "-o", "json", check=False, timeout=30)
        return proc.returncode == 0 and condition(json.loads(proc.stdout), "Established").get("status") == "True"

    if not baseline.wait_until(established, timeout, 1):
        raise RuntimeError(f"CRD {name} not Established after {timeout:.0f} s")


# --- cleanup -------------------------------------------------------------------------------


def remove_install(host, kind: str, ns: str) -> None:
    """Delete the CR (its operator still running, so its finalizer does the work), then what
    is left in the namespace, then the namespace. A CR still there after 10 minutes loses its
    finalizers (the namespace's deletion removes the rest) and the line says so."""
    if get(host, kind, ns) is not None:
        host.kubectl("delete", kind, NAME, "-n", ns, "--wait=false", check=False)
        if baseline.wait_until(lambda: get(host, kind, ns) is None, 600, 2) is None:
            say(f"  cleanup: {kind} {ns}/{NAME} still there after 600 s; removing its finalizers")
            host.kubectl("patch", kind, NAME, "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                         check=False)
    for what in ("pvc", "secret"):
        host.kubectl("delete", what, "--all", "-n", ns, "--wait=false", check=False)
    host.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    gone = baseline.wait_until(
        lambda: host.kubectl("get", "namespace", ns, check=False, timeout=30).returncode != 0, 300, 2)
    if gone is None:
        say(f"  cleanup: namespace {ns} still terminating after 300 s")


# --- our operator --------------------------------------------------------------------------


def runs(ns: str) -> dict[str, Path]:
    artifacts = RUNNER_ROOT / ns / NAME / "artifacts"
    if not artifacts.is_dir():
        return {}
    return {d.name: d for d in artifacts.iterdir() if d.is_dir() and d.name != "latest"}


def task_starts(run: Path) -> tuple[list[tuple[float, dict]], float | None]:
    """One ansible-runner run's task start events, in order, as (time, event_data), and the time
    of its last event of any kind."""
    starts = []
    last = None
    for event in (run / "job_events").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            doc = json.loads(event.read_text())
            created = doc.get("created")
            if not created:
                continue
            stamp = datetime.fromisoformat(created).timestamp()
            last = stamp if last is None else max(last, stamp)
            if doc.get("event") == "playbook_on_task_start":
                starts.append((stamp, doc.get("event_data") or {}))
    starts.sort(key=lambda item: item[0])
    return starts, last


def task_spans(run: Path) -> list[tuple[float, float, dict]]:
    """(start, seconds, event_data) of every task in one run: wall time from its start event to the
    next task's (loops included)."""
    starts, last = task_starts(run)
    ends = [s for s, _ in starts[1:]] + [last]
    return [(stamp, max(0.0, (end or stamp) - stamp), data) for (stamp, data), end in zip(starts, ends, strict=True)]


def task_times(run: Path, top: int = 10) -> list[tuple[float, str]]:
    """Where one ansible-runner run spent its time: wall seconds per task, summed over tasks of the
    same name, longest first."""
    totals: dict[str, float] = {}
    for _, secs, data in task_spans(run):
        name = f"{data.get('role') + ' : ' if data.get('role') else ''}{data.get('task')}"
        totals[name] = totals.get(name, 0.0) + secs
    return sorted(((secs, name) for name, secs in totals.items()), reverse=True)[:top]


def step_of(data: dict) -> str:
    """The install step a task belongs to: its task file (roles/karmada_deployment/tasks/etcd.yml
    -> karmada_deployment/etcd), or the playbook for tasks written there."""
    path = (data.get("task_path") or "").rsplit(":", 1)[0]
    parts = Path(path).parts
    if "roles" in parts and "tasks" in parts:
        return f"{parts[parts.index('roles') + 1]}/{Path(path).stem}"
    return Path(path).stem or "?"


def install_split(ns: str, started: float, ready_at: float) -> list[tuple[float, str]]:
    """Where apply-to-Ready went: the wall seconds of every run started in that window summed per
    step (task file), plus the time no run was in progress (the operator waiting to requeue or
    for an event), longest first."""
    totals: dict[str, float] = {}
    busy: list[tuple[float, float]] = []
    for run in runs(ns).values():
        spans = [span for span in task_spans(run) if started <= span[0] <= ready_at]
        for stamp, secs, data in spans:
            secs = min(secs, ready_at - stamp)
            totals[step_of(data)] = totals.get(step_of(data), 0.0) + secs
        if spans:
            busy.append((spans[0][0], min(ready_at, spans[-1][0] + spans[-1][1])))
    covered, edge = 0.0, started
    for begin, end in sorted(busy):
        begin = max(begin, edge)
        if end > begin:
            covered += end - begin
            edge = end
    totals["(no run in progress)"] = max(0.0, (ready_at - started) - covered)
    return sorted(((secs, step) for step, secs in totals.items()), reverse=True)


def recap(run: Path) -> dict[str, int]:
    text = re.sub(r"\x1b\[[0-9;]*m", "", (run / "stdout").read_text(errors="replace"))
    lines = [raw for raw in text.splitlines() if raw.startswith("localhost") and "changed=" in raw]
    if not lines:
        return {}
    return {k: int(v) for k, v in (item.split("=") for item in lines[-1].split(":", 1)[1].split())}


def quiet(ns: str, settle: float = 20) -> bool:
    """No run in progress and none finished in the last ``settle`` seconds."""
    current = runs(ns).values()
    if any(not (r / "status").exists() for r in current):
        return False
    latest = max(((r / "status").stat().st_mtime for r in current), default=0)
    return time.time() - latest >= settle


def wait_ready(host, kind: str, ns: str, alive=None) -> tuple[dict | None, str]:
    """Wait (up to TIMEOUT) for the one object of ``kind`` in ``ns`` to be Ready: (object, "")
    or (None, why), the why naming its last Ready condition. ``alive`` false ends the wait."""
    def ready():
        if alive is not None and not alive():
            return "exited"
        obj = get(host, kind, ns)
        return obj if obj and condition(obj, "Ready").get("status") == "True" else None

    obj = baseline.wait_until(ready, TIMEOUT, 1)
    if isinstance(obj, dict):
        return obj, ""
    last = condition(get(host, kind, ns) or {}, "Ready")
    what = "the operator exited" if obj == "exited" else f"not Ready after {TIMEOUT:.0f} s"
    return None, f"{what} (Ready={last.get('status')}, {last.get('reason')}: {last.get('message', '')[:300]})"


def bench_ours(host, crds, work: Path, ns: str = NS_OURS, etcd_replicas: int = 3,
               measure_noop: bool = True) -> tuple[float | None, str]:
    """Returns (apply-to-Ready seconds or None, reason); prints the no-op reconcile line itself."""
    work.mkdir(parents=True, exist_ok=True)
    busy = pgrep("ansible-operator run")
    if busy:
        return None, f"another ansible-operator runs on this machine (proxy port 8888): {busy[0][:160]}"
    created_crds = not crd_exists(host, "karmadadeployments.operator.karmada.io")
    operator = None
    try:
        host.kubectl("apply", "-k", str(ROOT / "config" / "crd"))
        for crd in ("karmadadeployments", "etcdbackups", "etcdrestores"):
            wait_established(host, f"{crd}.operator.karmada.io")
        host.kubectl("create", "namespace", ns, check=False)
        operator = OperatorProcess(str(Path(settings()["KO_LINKS"]) / "ansible-operator"), host.kubeconfig, work)
        operator.wait_healthy()
        sample = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
        sample["metadata"]["namespace"] = ns
        sample["spec"]["crds"] = {"url": crds.url, "sha256": crds.sha256}
        sample["spec"].pop("members", None)  # member join is issue 7
        sample["spec"]["etcd"]["local"]["replicas"] = etcd_replicas
        start, wall_start = time.monotonic(), time.time()
        memory = MemoryWatch(operator.proc.pid)
        host.kubectl("apply", "-f", "-", input=yaml.safe_dump(sample))
        obj, why = wait_ready(host, "karmadadeployment", ns)
        peak = memory.finish()
        if obj is None:
            return None, f"{why}; operator log {operator.log_path}"
        ready = time.monotonic() - start
        for secs, step in install_split(ns, wall_start, wall_start + ready)[:12]:
            say(f"  ours ({ns}): install step {secs:6.1f} s  {step}")
        members = len(obj["status"].get("etcd", {}).get("members", []))
        say(f"  ours ({ns}): Ready in {ready:.1f} s, {members} etcd member(s), "
            f"components {' '.join(sorted(c['name'] for c in obj['status'].get('components', [])))}")
        say(f"  ours ({ns}): operator peak memory during the install {peak:.0f} MiB (PSS of ansible-operator and "
            f"every process it started, sampled each second)")
        if measure_noop:
            noop(host, operator, ns)
        return ready, ""
    finally:
        remove_install(host, "karmadadeployment", ns)
        if operator is not None:
            operator.stop()
        if created_crds:
            host.kubectl("delete", "-k", str(ROOT / "config" / "crd"), check=False)


def noop(host, operator: OperatorProcess, ns: str) -> None:
    """Both no-op reconciles: the fast path (an owned Service touched: one check, then the run
    ends) and the full pass (operator.karmada.io/full-pass on the KarmadaDeployment)."""
    noop_run(host, operator, ns, "fast path, a Service touched",
             ["annotate", "service", TRIGGER_SERVICE, "-n", ns, f"bench/touch={time.time()}", "--overwrite"])
    noop_run(host, operator, ns, "full pass, operator.karmada.io/full-pass",
             ["annotate", "karmadadeployment", NAME, "-n", ns, f"operator.karmada.io/full-pass={time.time()}",
              "--overwrite"])


def noop_run(host, operator: OperatorProcess, ns: str, label: str, trigger: list[str]) -> None:
    if baseline.wait_until(lambda: quiet(ns), 600, 2) is None:
        say(f"no-op reconcile ours ({label}): not measured (reconciles kept running for 600 s after Ready)")
        return
    before = set(runs(ns))
    start = time.monotonic()
    memory = MemoryWatch(operator.proc.pid)
    host.kubectl(*trigger)
    new = baseline.wait_until(
        lambda: [r for n, r in runs(ns).items() if n not in before and (r / "status").exists()], 600, 0.5)
    wall = time.monotonic() - start
    peak = memory.finish()
    if not new:
        say(f"no-op reconcile ours ({label}): not measured (no finished run within 600 s of {' '.join(trigger[:3])}; "
            f"log {operator.log_path})")
        return
    run = min(new, key=lambda r: (r / "status").stat().st_mtime)
    seconds = run_seconds(run)
    stats = recap(run)
    status = (run / "status").read_text().strip()
    if seconds is None:
        say(f"no-op reconcile ours ({label}): not measured (run {run.name} has no job events); trigger to run done "
            f"{wall:.1f} s")
        return
    say(f"no-op reconcile ours ({label}): {seconds:.1f} s (ansible-runner run {run.name}, first to last job event; "
        f"{status}, changed={stats.get('changed')} ok={stats.get('ok')}; trigger to run finished: {wall:.1f} s; "
        f"operator peak memory {peak:.0f} MiB)")
    # BENCH_NOOP_TOP: how many tasks to print (all of them with a large number)
    for secs, task in task_times(run, int(os.environ.get("BENCH_NOOP_TOP", "10"))):
        say(f"  no-op top task {secs:6.2f} s  {task[:110]}")


# --- Karmada's operator ---------------------------------------------------------------------


def bench_theirs(host, crds, work: Path, etcd_replicas: int = 1) -> tuple[float | None, str]:
    work.mkdir(parents=True, exist_ok=True)
    v = versions()
    kv = v["KARMADA_VERSION"]
    busy = pgrep("karmada-operator --kubeconfig")
    if busy:
        return None, f"another karmada-operator runs on this machine: {busy[0][:160]}"
    binary = Path(settings()["KO_LINKS"]) / "karmada-operator"
    if not binary.exists():
        build = subprocess.run([str(HACK / "build-bins.sh"), "karmada-operator"], capture_output=True, text=True,
                               timeout=1800)
        if build.returncode != 0:
            return None, f"hack/testenv/build-bins.sh karmada-operator failed: {build.stderr.strip()[-300:]}"
    crd = baseline.crd_file(kv)
    if not crd.exists():
        return None, f"{crd} missing (the Karmada module is downloaded by `make testenv-bin`)"
    images = baseline.required_images(kv, v["KUBERNETES_VERSION"], v["ETCD_IMAGE_TAG"])
    present = baseline.node_images(settings()["KO_CONTAINERD_SOCK"])
    missing = sorted(f"{r}:{t}" for r, t in images.values() if f"{r}:{t}" not in present)
    if missing:
        return None, f"images not on the node: {', '.join(missing)} (hack/testenv/images.sh)"

    created_crd = not crd_exists(host, baseline.KARMADA_CRD)
    created_data_dir = not baseline.DATA_DIR.exists()
    operator = None
    try:
        # 1.1 MB of schema: too big for client-side apply's last-applied annotation.
        host.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
        wait_established(host, baseline.KARMADA_CRD)
        host.kubectl("create", "namespace", NS_THEIRS, check=False)
        operator = baseline.KarmadaOperatorProcess(binary, host.kubeconfig, work)
        cr = baseline.karmada_cr(NAME, NS_THEIRS, crds.url, images, etcd_replicas=etcd_replicas)
        start = time.monotonic()
        host.kubectl("apply", "-f", "-", input=json.dumps(cr))
        obj, why = wait_ready(host, "karmada", NS_THEIRS, alive=operator.running)
        if obj is None:
            return None, f"{why}; log {operator.log_path}:\n{operator.log_tail()}"
        elapsed = time.monotonic() - start
        pods = sorted(p["metadata"]["name"] for p in host.get("pods", "-n", NS_THEIRS)["items"])
        say(f"  theirs: Ready, {len(pods)} pods: {' '.join(pods)}")
        steps = operator.step_split()
        for secs, step in steps[:12]:
            say(f"  theirs: install step {secs:6.1f} s  {step}")
        if steps:
            say(f"  theirs: {elapsed - sum(s for s, _ in steps):.1f} s of apply-to-Ready outside tagged steps "
                f"(before its first step's log line and after its last)")
        return elapsed, ""
    finally:
        remove_install(host, "karmada", NS_THEIRS)
        if operator is not None:
            operator.stop()
        if created_crd:
            host.kubectl("delete", "crd", baseline.KARMADA_CRD, check=False)
        if created_data_dir:
            shutil.rmtree(baseline.DATA_DIR, ignore_errors=True)


def guarded(bench, *args) -> tuple[float | None, str]:
    """Run one install benchmark; an error (its cleanup has run) becomes the reason for no figure."""
    try:
        return bench(*args)
    except Exception as exc:  # noqa: BLE001 - reported as "not measured", never as a figure
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return None, f"{type(exc).__name__}: {str(exc)[-400:]} (at {Path(where.filename).name}:{where.lineno})"


def host_up(what: str):
    """The test bed's host cluster, started with hack/testenv/up.sh when it is not running:
    (handle, whether this call started it), or None after saying why ``what`` is not measured."""
    host = host_handle()
    if host.kubeconfig.exists() and host.ready():
        return host, False
    up = subprocess.run([str(HACK / "up.sh")], capture_output=True, text=True, timeout=1800)
    if up.returncode != 0 or not host.ready():
        say(f"{what}: not measured (hack/testenv/up.sh failed: {up.stderr.strip()[-400:]})")
        return None
    return host, True


def main() -> int:
    bed = host_up("install benchmark")
    if bed is None:
        return 0
    host, started_cluster = bed
    work = Path(tempfile.mkdtemp(prefix="ko-install-bench-"))
    crds = serve()
    say(f"Karmada {karmada_version()} on the local host cluster (node {host.node_name}); "
        f"logs in {work}; one install at a time")
    skipped = (None, "skipped (BENCH_INSTALL_ONLY)")
    ours3 = ours1 = theirs = skipped
    try:
        if ONLY in ("", "ours"):
            ours3 = guarded(bench_ours, host, crds, work / "ours-3", NS_OURS, 3, True)
            say(f"install apply-to-Ready  karmada-operator (ansible, ours), 3 etcd members: {figure(ours3)}")
            if THEIRS_ETCD != 3:
                ours1 = guarded(bench_ours, host, crds, work / "ours-1", f"{NS_OURS}-1", THEIRS_ETCD, False)
                say(f"install apply-to-Ready  karmada-operator (ansible, ours), {THEIRS_ETCD} etcd member: "
                    f"{figure(ours1)}")
        if ONLY in ("", "theirs"):
            if THEIRS_ETCD != 3:
                say(f"  theirs with {THEIRS_ETCD} etcd member: {THEIRS_ETCD_WHY}")
            theirs = guarded(bench_theirs, host, crds, work / "theirs", THEIRS_ETCD)
            say(f"install apply-to-Ready  karmada's Go operator, {THEIRS_ETCD} etcd member(s): {figure(theirs)}")
    finally:
        crds.stop()
        if started_cluster:
            subprocess.run([str(HACK / "down.sh")], capture_output=True, text=True, timeout=600)
    same = ours3 if THEIRS_ETCD == 3 else ours1
    say(f"ratio ours/theirs (both {THEIRS_ETCD} etcd member(s)): {ratio(same, theirs)}")
    if THEIRS_ETCD != 3:
        say(f"ratio ours (3 etcd members)/theirs ({THEIRS_ETCD}): {ratio(ours3, theirs)}")
    return 0


def figure(result: tuple[float | None, str]) -> str:
    return f"{result[0]:.1f} s" if result[0] is not None else f"not measured: {result[1]}"


def ratio(ours: tuple[float | None, str], theirs: tuple[float | None, str]) -> str:
    if ours[0] is None or theirs[0] is None:
        return "not measured (one of the installs has no figure)"
    return f"{ours[0] / theirs[0]:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
