"""NetworkPolicy enforced on the test bed, for the tests that prove a policy: kube-router's
firewall (hack/versions.env KUBE_ROUTER_VERSION; iptables and ipset, which this kernel has),
run as a host process beside the bed's kube-proxy with its routing, service proxy and CNI
parts off. The bed's bridge plugin enforces nothing by itself.

It runs only inside :func:`enforced` (the bed's other tests run without it, as before) and
removes its iptables chains and ipsets when it stops (:func:`cleanup`).
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import requests

from support.processes import stop_process
from support.testenv import HostCluster
from support.waiting import wait_for

HEALTH_PORT = 20244
# kube-router's firewall: its filter-table chains and its ipsets (pkg/controllers/netpol)
CHAINS = ("KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-")
IPSETS = ("KUBE-SRC-", "KUBE-DST-", "kube-router-")


def _binary(host: HostCluster) -> str:
    return str(Path(host.settings["KO_LINKS"]) / "kube-router")


def cleanup() -> None:
    """What kube-router's firewall leaves in iptables' filter table and in ipset, gone
    (idempotent). Not ``kube-router --cleanup-config``: that also flushes every IPVS service and
    undoes its routing and service proxy, which the bed does not run."""
    rules = subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True, check=True).stdout
    for line in rules.splitlines():
        if line.startswith("-A ") and any(f" -j {c}" in line for c in CHAINS):
            subprocess.run(["iptables", "-w", "-t", "filter", "-D", *shlex.split(line)[1:]], capture_output=True,
                           check=False)
    chains = [line[1:].split()[0] for line in rules.splitlines() if line.startswith(tuple(f":{c}" for c in CHAINS))]
    for flag in ("-F", "-X"):
        for chain in chains:
            subprocess.run(["iptables", "-w", "-t", "filter", flag, chain], capture_output=True, check=False)
    sets = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False).stdout.split()
    for name in sets:
        if name.startswith(IPSETS):
            subprocess.run(["ipset", "destroy", name], capture_output=True, check=False)


def leftovers() -> list[str]:
    """kube-router's chains and ipsets still there (empty after :func:`cleanup`)."""
    rules = subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True, check=True).stdout
    sets = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False).stdout.split()
    return ([line for line in rules.splitlines() if line.startswith(tuple(f":{c}" for c in CHAINS))]
            + [name for name in sets if name.startswith(IPSETS)])


@contextlib.contextmanager
def enforced(host: HostCluster, work: Path) -> Iterator[Path]:
    """kube-router's network policy controller on the bed's node while the block runs; yields
    its log's path."""
    log = work / "kube-router.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [_binary(host), "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
             "--enable-cni=false", f"--kubeconfig={host.kubeconfig}", f"--hostname-override={host.node_name}",
             f"--service-cluster-ip-range={host.settings['KO_SERVICE_CIDR']}", f"--health-port={HEALTH_PORT}",
             "--metrics-port=0", "--v=1"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"kube-router exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(requests.RequestException):
                return requests.get(f"http://127.0.0.1:{HEALTH_PORT}/healthz", timeout=2).status_code == 200
            return False

        wait_for(healthy, 120, "kube-router's network policy controller healthy",
                 lambda: log.read_text()[-3000:])
        yield log
    finally:
        stop_process(proc)
        cleanup()
