"""What a Karmada's running pods are, read from the pods themselves: each pod's UID and the
version its binary reports (``<binary> version`` for Karmada's programs, ``--version`` for
kube-apiserver, kube-controller-manager and etcd), run in the pod's own container, so the
answer comes from the program that runs there, not from an image tag or the operator's status."""

from __future__ import annotations

import re
from dataclasses import dataclass

from support.testenv import HostCluster

_PATTERNS = (r'GitVersion:"([^"]+)"', r"Kubernetes (v\S+)", r"etcd Version: (\S+)")


@dataclass(frozen=True)
class Pod:
    app: str
    name: str
    uid: str
    version: str


def binary_version(host: HostCluster, namespace: str, pod: dict) -> str:
    """The version the main container's binary reports."""
    container = pod["spec"]["containers"][0]
    binary = (container.get("command") or [""])[0] or container["name"]
    args = [binary, "version"] if binary.rsplit("/", 1)[-1].startswith("karmada-") else [binary, "--version"]
    out = host.kubectl("exec", "-n", namespace, pod["metadata"]["name"], "-c", container["name"], "--", *args,
                       check=False)
    text = out.stdout + out.stderr
    for pattern in _PATTERNS:
        found = re.search(pattern, text)
        if found:
            return found.group(1)
    raise AssertionError(f"{pod['metadata']['name']}: `{' '.join(args)}` printed no version: {text[:300]!r}")


def running_pods(host: HostCluster, namespace: str, selector: str) -> list[dict]:
    """Pods of ``selector`` that are running and not being deleted, not run by a Job (a backup's)."""
    pods = host.get("pods", "-n", namespace, "-l", selector)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and p.get("status", {}).get("phase") == "Running"
            and not any(r.get("kind") == "Job" for r in p["metadata"].get("ownerReferences") or [])]


def plane(host: HostCluster, namespace: str, instance: str, extra_selectors: tuple[str, ...] = ()) -> list[Pod]:
    """Every control-plane pod of one KarmadaDeployment (label app.kubernetes.io/instance) and
    of ``extra_selectors`` (a Pull member's agent next to it), with its binary's version."""
    out = []
    for selector in (f"app.kubernetes.io/instance={instance}", *extra_selectors):
        for pod in running_pods(host, namespace, selector):
            app = pod["metadata"]["labels"].get("app.kubernetes.io/name") or pod["metadata"]["labels"].get("app", "?")
            out.append(Pod(app, pod["metadata"]["name"], pod["metadata"]["uid"],
                           binary_version(host, namespace, pod)))
    return sorted(out, key=lambda p: (p.app, p.name))


def versions(pods: list[Pod]) -> dict[str, set[str]]:
    """app -> the versions its pods' binaries report."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        out.setdefault(pod.app, set()).add(pod.version)
    return out


def uids(pods: list[Pod], *skip: str) -> dict[str, set[str]]:
    """app -> its pods' UIDs (apps in ``skip`` left out)."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        if pod.app not in skip:
            out.setdefault(pod.app, set()).add(pod.uid)
    return out
