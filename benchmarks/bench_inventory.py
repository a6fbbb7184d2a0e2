#!/usr/bin/env python3
"""The karmada_members inventory plugin over one KarmadaDeployment with 1000 members (the CRD's maximum).

Starts a throwaway kube-apiserver (tests/support/kube_apiserver.py), creates the CR with
1000 members and a status where half of them are Joined and unchanged (so every group is
populated), then times, median of N runs:

- ``ansible-inventory --list`` end to end (process start, Ansible's own loading, the API
  call, JSON output): what an operator reconcile pays;
- the plugin's ``parse`` alone, in this process (API list + plan + populating Ansible's
  inventory), with its API list and plan parts shown separately.

Env: INVENTORY_BENCH_MEMBERS (default 1000), INVENTORY_BENCH_RUNS (default 3), KO_PREBUILT_BIN.
Prints e.g. ``inventory 1000 members: ansible-inventory --list 1.84 s; plugin parse 0.21 s (target < 1 s)``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils", "tests"):
    sys.path.insert(0, str(ROOT / sub))
# Before Ansible is imported: its configuration is read once, at import time.
os.environ["ANSIBLE_INVENTORY_ENABLED"] = "karmada_members"
os.environ["ANSIBLE_INVENTORY_PLUGINS"] = str(ROOT / "plugins" / "inventory")
os.environ["ANSIBLE_INVENTORY_UNPARSED_FAILED"] = "true"

import yaml  # noqa: E402
from ansible.inventory.data import InventoryData  # noqa: E402
from ansible.parsing.dataloader import DataLoader  # noqa: E402
from ansible.plugins.loader import inventory_loader  # noqa: E402

from karmada_operator.members import plan as km
from support import kube_apiserver  # noqa: E402
from support.waiting import crds_established  # noqa: E402

BIN = Path(os.environ.get("KO_PREBUILT_BIN") or Path.home() / ".cache" / "karmada-operator" / "links")
ANSIBLE_INVENTORY = str(Path(sys.executable).parent / "ansible-inventory")
TARGET_S = 1.0
# The throwaway API server's kubeconfig skips TLS verification; one warning per request is noise here.
warnings.filterwarnings("ignore", message="Unverified HTTPS request")


def members(count: int) -> list[dict]:
    return [{"name": f"member-{i:04d}", "kubeconfigSecretRef": {"name": f"member-{i:04d}-kubeconfig"},
             "syncMode": "Pull" if i % 4 == 0 else "Push", "region": f"region-{i % 8}", "zones": [f"z{i % 3}"],
             "provider": "kwok", "labels": {"team": f"t{i % 10}"}} for i in range(count)]


def create_deployment(server: kube_apiserver.KubeAPIServer, spec_members: list[dict]) -> None:
    server.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd" / "bases"))
    crds_established(server.kubectl)
    server.kubectl("create", "namespace", "karmada-system")
    obj = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
           "metadata": {"name": "karmada", "namespace": "karmada-system"}, "spec": {"members": spec_members}}
    server.kubectl("create", "-f", "-", input_text=yaml.safe_dump(obj))
    status = {"status": {"members": [{"name": m["name"], "state": "Joined", "ready": True,
                                      "syncMode": m["syncMode"], "specHash": km.member_spec_hash(m)}
                                     for m in spec_members[::2]]}}
    server.kubectl("patch", "karmadadeployment", "karmada", "-n", "karmada-system", "--subresource=status",
                   "--type=merge", "-p", json.dumps(status))


def cli_list(config: Path) -> int:
    result = subprocess.run([ANSIBLE_INVENTORY, "-i", str(config), "--list"], capture_output=True, text=True,
                            check=False, cwd=ROOT, timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"ansible-inventory failed:\n{result.stderr}")
    return len(json.loads(result.stdout)["_meta"]["hostvars"])


def plugin_parse(config: Path) -> tuple[int, float, float]:
    """Hosts found, and the seconds spent in the API list and in the plan (inside parse)."""
    plugin = inventory_loader.get("karmada_members")
    timings: dict[str, float] = {}
    fetch, build = plugin.fetch_deployments, km.build_inventory

    def timed_fetch():
        started = time.perf_counter()
        try:
            return fetch()
        finally:
            timings["list"] = time.perf_counter() - started

    def timed_build(objs):
        started = time.perf_counter()
        try:
            return build(objs)
        finally:
            timings["plan"] = time.perf_counter() - started

    plugin.fetch_deployments = timed_fetch
    km.build_inventory = timed_build
    try:
        inventory = InventoryData()
        plugin.parse(inventory, DataLoader(), str(config), cache=False)
    finally:
        km.build_inventory = build
    return len(inventory.hosts), timings["list"], timings["plan"]


def median_of(runs: int, fn):
    samples, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), result


def main() -> int:
    count = int(os.environ.get("INVENTORY_BENCH_MEMBERS", "1000"))
    runs = int(os.environ.get("INVENTORY_BENCH_RUNS", "3"))
    work = Path(tempfile.mkdtemp(prefix="ko-inventory-bench-"))
    server = kube_apiserver.start(str(BIN / "etcd"), str(BIN / "kube-apiserver"), str(BIN / "kubectl"), work)
    try:
        create_deployment(server, members(count))
        config = work / "karmada_members.yml"
        config.write_text(yaml.safe_dump({"plugin": "karmada_members", "kubeconfig": str(server.kubeconfig)}))
        cli_s, cli_hosts = median_of(runs, lambda: cli_list(config))
        parse_s, (hosts, list_s, plan_s) = median_of(runs, lambda: plugin_parse(config))
        if cli_hosts != count or hosts != count:
            raise SystemExit(f"expected {count} hosts, got {cli_hosts} (cli) and {hosts} (parse)")
        verdict = "meets" if parse_s < TARGET_S else "MISSES"
        print(f"inventory {count} members: ansible-inventory --list {cli_s:.2f} s; plugin parse {parse_s:.2f} s "
              f"(target < {TARGET_S:g} s, {verdict}; median of {runs})")
        print(f"inventory {count} members: inside parse, API list {list_s:.2f} s, plan {plan_s:.3f} s "
              f"(last run)")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
