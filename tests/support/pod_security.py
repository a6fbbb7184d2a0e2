"""What the API server's own Pod Security admission says of live pods.

Each pod's spec is offered, as a server-side dry run (nothing is created), to a namespace
labelled ``pod-security.kubernetes.io/enforce: restricted``: the PodSecurity admission plugin of
the host's kube-apiserver accepts it or refuses it naming every check it fails. The verdict is
the plugin's, not a reading of ours of the rules.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import yaml

from support.testenv import HostCluster

CHECK_NS = "ko-pod-security-check"


def restricted_verdicts(host: HostCluster, pods: list[dict]) -> dict[str, str]:
    """Pod name -> "" when "restricted" admits it, else the admission's refusal."""
    host.kubectl("create", "namespace", CHECK_NS, check=False)
    host.kubectl("label", "namespace", CHECK_NS, "--overwrite", "pod-security.kubernetes.io/enforce=restricted",
                 "pod-security.kubernetes.io/enforce-version=latest")
    # the ServiceAccount admission wants the namespace's default account, which its controller
    # makes a moment after the namespace
    deadline = time.monotonic() + 60
    while host.kubectl("get", "serviceaccount", "default", "-n", CHECK_NS, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"no default ServiceAccount in {CHECK_NS} after 60 s"
        time.sleep(1)
    verdicts = {}
    for pod in pods:
        spec = copy.deepcopy(pod["spec"])
        # what the API server filled in for the original, which a new pod may not say itself
        for key in ("nodeName", "priority", "preemptionPolicy", "serviceAccountName", "serviceAccount"):
            spec.pop(key, None)
        offered = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod["metadata"]["name"], "namespace": CHECK_NS}, "spec": spec}
        proc = host.kubectl("create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(offered), check=False)
        verdicts[pod["metadata"]["name"]] = "" if proc.returncode == 0 else proc.stderr.strip()
    return verdicts


def process_users(*markers: str) -> dict[int, int]:
    """PID -> real user id of every process on this node (the test bed is one node) whose
    command line holds each of ``markers``: the kernel's own word on who a container runs as
    (``/proc/<pid>/status``), not the pod spec's."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            status = (proc / "status").read_text()
        except OSError:
            continue  # gone meanwhile
        text = [a.decode(errors="replace") for a in args]
        if all(any(m in a for a in text) for m in markers):
            uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
            found[int(proc.name)] = int(uid_line.split()[1])
    return found
