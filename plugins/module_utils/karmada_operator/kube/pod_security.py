"""The security settings of every pod the operator creates: Pod Security "restricted"
(docs/security.md), one home for all of them (the control plane's templates, etcd, the agents it
runs, the backup and restore Jobs).

An unprivileged user (65532, the distroless images' "nonroot"), the runtime's seccomp profile,
no capability, no privilege escalation, a read-only root file system with a writable emptyDir at
/tmp. ``fsGroup`` makes the 0400 files of a Secret volume readable by that user: the kubelet
gives the volume's group read access.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

NONROOT_ID = 65532
# The user etcd runs as and why, on its pod template (etcd/run_as.py decides it).
NON_ROOT, ROOT, RUN_AS_ANNOTATION = "NonRoot", "Root", "operator.karmada.io/run-as"

_POD: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": NONROOT_ID, "runAsGroup": NONROOT_ID,
                        "fsGroup": NONROOT_ID, "seccompProfile": {"type": "RuntimeDefault"}}
_CONTAINER: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                              "readOnlyRootFilesystem": True}
# etcd runs as 65532 where its volume can be handed to that user (etcd/run_as.py): the kubelet
# applies fsGroup at every start (Always: files a root process wrote, an earlier member's or a
# restore Job's, become the group's too). Where it cannot (host directories), root, with the
# rest of "restricted" (the container's settings; root owns its files and needs no capability).
_ETCD_NON_ROOT_POD: dict[str, Any] = {**_POD, "fsGroupChangePolicy": "Always"}
_ETCD_ROOT_POD: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}

# The writable /tmp beside a read-only root file system.
TMP_VOLUME: dict[str, Any] = {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}
TMP_MOUNT: dict[str, Any] = {"name": "tmp", "mountPath": "/tmp"}


def pod() -> dict[str, Any]:
    """A pod's securityContext."""
    return copy.deepcopy(_POD)


def container() -> dict[str, Any]:
    """A container's securityContext."""
    return copy.deepcopy(_CONTAINER)


def etcd_pod(non_root: bool = False) -> dict[str, Any]:
    """etcd's pod securityContext: 65532 with the volume's group, or root (see above)."""
    return copy.deepcopy(_ETCD_NON_ROOT_POD if non_root else _ETCD_ROOT_POD)


def volume_writer(non_root: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod's and the container's securityContext of a pod that writes a volume someone must
    hand to it (backup Jobs and the follower to a volume, restore Jobs): as etcd, 65532 with the
    volume's group where the volume takes fsGroup (etcd/run_as.py decides), else root with the
    rest of "restricted" (every capability dropped: root owns its files and needs none)."""
    if non_root:
        return etcd_pod(non_root=True), container()
    return etcd_pod(non_root=False), {"runAsUser": 0, "runAsNonRoot": False, **container()}


def run_as_annotations(decided: Mapping[str, Any] | None) -> dict[str, str]:
    """The pod template's annotation saying which user a pod runs as and why (``decided``: user
    and reason), read back by :func:`run_as_observed`; none without a decision."""
    if not decided:
        return {}
    return {RUN_AS_ANNOTATION: f"{decided['user']}: {decided['reason']}"}


def run_as_observed(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """status.etcd.runAs from etcd's pods as they run: ``user`` NonRoot when every pod runs with
    runAsNonRoot, Root when none does, Mixed while a change rolls; ``reason`` from their
    annotation (etcd/run_as.py)."""
    users = set()
    reasons = []
    for pod in pods:
        ctx = (pod.get("spec") or {}).get("securityContext") or {}
        users.add(NON_ROOT if ctx.get("runAsNonRoot") and ctx.get("runAsUser") != 0 else ROOT)
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(RUN_AS_ANNOTATION) or ""
        reasons.append(text.partition(": ")[2])
    if not users:
        return {}
    user = users.pop() if len(users) == 1 else "Mixed"
    reason = next((r for r in reasons if r), "")
    return {"user": user, "reason": reason} if reason else {"user": user}
