#!/usr/bin/env python3
"""Benchmark a Karmada upgrade by our operator, next to a fresh install, in one run.

1. A fresh install: the sample KarmadaDeployment (1 etcd member, no members, Karmada's CRDs from
   a local HTTP server) at the previous release (KARMADA_PREVIOUS_VERSION in hack/versions.env),
   apply-to-Ready.
2. The upgrade of that plane to KARMADA_VERSION (spec.karmadaVersion and spec.crds in one edit):
   edit-to-done, done being the Ready condition at the new generation with status.upgrade
   Succeeded *and* every Karmada program reporting the new version from its own binary
   (tests/support/plane_versions.py: `<binary> version` run in each pod). The components'
   rollout windows from status.upgrade are printed as they finished.
3. The ratio upgrade/install: what an upgrade costs against installing the same plane anew.

One plane at a time on the test bed (the real ansible-operator with watches.yaml, as
tests/support/operator_runtime.py runs it); removed at the end. Every wait is bounded
(BENCH_UPGRADE_TIMEOUT seconds, default 1200). Needs the previous release's binaries
(`make testenv-bin-previous`) and a running host cluster (started with hack/testenv/up.sh if
it is not, and taken down again at the end).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_install as install  # noqa: E402
import karmada_operator_baseline as baseline  # noqa: E402
from bench_install import say  # noqa: E402

from support import plane_versions  # noqa: E402
from support.karmada_crds_server import karmada_version, pinned, serve  # noqa: E402
from support.operator_runtime import OperatorProcess  # noqa: E402
from support.testenv import HACK, settings  # noqa: E402

NS = "bench-upgrade"
NAME = install.NAME
TIMEOUT = float(os.environ.get("BENCH_UPGRADE_TIMEOUT", "1200"))
KARMADA_PROGRAMS = ("karmada-aggregated-apiserver", "karmada-controller-manager", "karmada-scheduler",
                    "karmada-webhook")


def kd(host) -> dict | None:
    return install.get(host, "karmadadeployment", NS)


def upgraded(host, version: str) -> bool:
    """Done, read twice: the operator's report (Ready at this generation, upgrade Succeeded) and
    the binaries themselves (every Karmada program on ``version``)."""
    obj = kd(host)
    if not obj:
        return False
    ready = install.condition(obj, "Ready")
    status = obj.get("status") or {}
    if not (ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"]["generation"]
            and (status.get("upgrade") or {}).get("phase") == "Succeeded"
            and status.get("karmadaVersion") == version):
        return False
    found = plane_versions.versions(plane_versions.plane(host, NS, NAME))
    return all(found.get(app) == {version} for app in KARMADA_PROGRAMS)


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end.replace("Z", "+00:00"))
            - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def bench(host, work: Path, old: str, new: str) -> tuple[tuple[float | None, str], tuple[float | None, str]]:
    """((install seconds, why not), (upgrade seconds, why not))."""
    busy = install.pgrep("ansible-operator run")
    if busy:
        why = f"another ansible-operator runs on this machine (proxy port 8888): {busy[0][:160]}"
        return (None, why), (None, why)
    crds = {old: serve(version=old), new: serve(version=new)}
    created_crds = not install.crd_exists(host, "karmadadeployments.operator.karmada.io")
    operator = None
    try:
        host.kubectl("apply", "-k", str(ROOT / "config" / "crd"))
        for crd in ("karmadadeployments", "etcdbackups", "etcdrestores"):
            install.wait_established(host, f"{crd}.operator.karmada.io")
        host.kubectl("create", "namespace", NS, check=False)
        operator = OperatorProcess(str(Path(settings()["KO_LINKS"]) / "ansible-operator"), host.kubeconfig, work)
        operator.wait_healthy()
        sample = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
        sample["metadata"]["namespace"] = NS
        spec = sample["spec"]
        spec.pop("members", None)
        spec["karmadaVersion"] = old
        spec["crds"] = {"url": crds[old].url, "sha256": crds[old].sha256}
        spec["etcd"]["local"]["replicas"] = 1
        start = time.monotonic()
        host.kubectl("apply", "-f", "-", input=yaml.safe_dump(sample))
        obj, why = install.wait_ready(host, "karmadadeployment", NS)
        if obj is None:
            return (None, f"{why}; operator log {operator.log_path}"), (None, "no plane to upgrade")
        fresh = time.monotonic() - start
        found = plane_versions.versions(plane_versions.plane(host, NS, NAME))
        say(f"  install at {old}: Ready in {fresh:.1f} s; binaries: "
            + ", ".join(f"{app} {'/'.join(sorted(v))}" for app, v in sorted(found.items())))
        # Settle: the install's last passes end before the edit (the upgrade is timed alone).
        baseline.wait_until(lambda: install.quiet(NS, settle=10), 300, 2)

        start = time.monotonic()
        host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", yaml.safe_dump(
            {"spec": {"karmadaVersion": new, "crds": {"url": crds[new].url, "sha256": crds[new].sha256}}}))
        done = baseline.wait_until(lambda: upgraded(host, new), TIMEOUT, 2)
        if not done:
            last = install.condition(kd(host) or {}, "Ready")
            return (fresh, ""), (None, f"not upgraded after {TIMEOUT:.0f} s (Ready={last.get('status')}, "
                                       f"{last.get('reason')}: {last.get('message', '')[:300]})")
        took = time.monotonic() - start
        up = (kd(host) or {}).get("status", {}).get("upgrade") or {}
        for comp in up.get("components") or []:
            if comp.get("startTime") and comp.get("endTime"):
                say(f"  upgrade step {seconds_between(comp['startTime'], comp['endTime']):6.1f} s  {comp.get('name')}")
        say(f"  upgrade {old} -> {new}: every Karmada binary on {new} {took:.1f} s after the edit "
            f"(status.upgrade {up.get('startTime')} .. {up.get('endTime')})")
        return (fresh, ""), (took, "")
    finally:
        install.remove_install(host, "karmadadeployment", NS)
        if operator is not None:
            operator.stop()
        for server in crds.values():
            server.stop()
        if created_crds:
            host.kubectl("delete", "-k", str(ROOT / "config" / "crd"), check=False)


def main() -> int:
    bed = install.host_up("upgrade benchmark")
    if bed is None:
        return 0
    host, started_cluster = bed
    old, new = pinned("KARMADA_PREVIOUS_VERSION"), karmada_version()
    work = Path(tempfile.mkdtemp(prefix="ko-upgrade-bench-"))
    say(f"Karmada {old} -> {new} on the local host cluster (node {host.node_name}), 1 etcd member; logs in {work}")
    try:
        fresh, upgrade = bench(host, work, old, new)
    except Exception as exc:  # noqa: BLE001 - reported as "not measured", never as a figure
        fresh = upgrade = (None, f"{type(exc).__name__}: {str(exc)[-400:]}")
    finally:
        if started_cluster:
            subprocess.run([str(HACK / "down.sh")], capture_output=True, text=True, timeout=600)
    say(f"fresh install at {old} apply-to-Ready (ours): {install.figure(fresh)}")
    say(f"upgrade {old} -> {new} edit-to-every-binary-upgraded (ours): {install.figure(upgrade)}")
    say(f"ratio upgrade/fresh install: {install.ratio(upgrade, fresh)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
