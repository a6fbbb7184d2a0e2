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
from typing import Any

NONROOT_ID = 65532

_POD: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": NONROOT_ID, "runAsGroup": NONROOT_ID,
                        "fsGroup": NONROOT_ID, "seccompProfile": {"type": "RuntimeDefault"}}
_CONTAINER: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                              "readOnlyRootFilesystem": True}
# etcd keeps running as root until its data can change owner (docs/security.md, "etcd"): the
# members' existing files are root's, and hostPath volumes get no fsGroup. The rest of
# "restricted" applies (the container's settings; root owns its files and needs no capability).
_ETCD_POD: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}

# The writable /tmp beside a read-only root file system.
TMP_VOLUME: dict[str, Any] = {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}
TMP_MOUNT: dict[str, Any] = {"name": "tmp", "mountPath": "/tmp"}


def pod() -> dict[str, Any]:
    """A pod's securityContext."""
    return copy.deepcopy(_POD)


def container() -> dict[str, Any]:
    """A container's securityContext."""
    return copy.deepcopy(_CONTAINER)


def etcd_pod() -> dict[str, Any]:
    """etcd's pod securityContext (root, for now: see above)."""
    return copy.deepcopy(_ETCD_POD)
