"""Which user etcd runs as: 65532 (Pod Security "restricted") wherever its volume can be handed
to that user, root only where it cannot (docs/security.md, "etcd").

etcd writes its data directory, so the user it runs as must own (or share the group of) the
volume. The kubelet hands a volume to a non-root user through the pod's ``fsGroup`` (it changes
the group of every file and gives the group read and write access) for the volume types that
support it: an emptyDir, and a CSI volume whose driver says so (``CSIDriver.spec.fsGroupPolicy``
``File``, or ``ReadWriteOnceWithFSType`` when the volume has a file system type). A host
directory (``storage.type: HostPath``, or a claim whose PersistentVolume is a hostPath, as the
in-tree host-path provisioner and local-path provisioners make them) is never handed over:
only root could write it.

``spec.etcd.local.runAs``: ``Auto`` (the default) decides by those rules, reading the
StorageClass and its CSIDriver; ``NonRoot`` or ``Root`` say it outright (``NonRoot`` for
storage the rules cannot see, e.g. static local PersistentVolumes, which do take fsGroup).
With ``fsGroupChangePolicy: Always`` the kubelet applies the group at every start, so data a
root process wrote (a member of an earlier operator, a restore Job) becomes etcd's too: a change
to ``NonRoot`` is an ordinary etcd roll, one member at a time.

The decision and its reason go on etcd's pod template (``operator.karmada.io/run-as``), so
status.etcd.runAs reads them from the pods that run (pod_security.run_as_observed). An error
reading the StorageClass or the CSIDriver never changes the user: the StatefulSet keeps the one
it has (a first install fails the step, naming what could not be read; the next pass retries).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karmada_operator.kube import pod_security
from karmada_operator.kube.client import KubeError

AUTO = "Auto"
NON_ROOT, ROOT, ANNOTATION = pod_security.NON_ROOT, pod_security.ROOT, pod_security.RUN_AS_ANNOTATION
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
FSTYPE_PARAMETERS = ("csi.storage.k8s.io/fstype", "fsType", "fstype")
# a PersistentVolume's spec fields that are not its volume source
PV_SPEC_FIELDS = frozenset({"accessModes", "capacity", "claimRef", "mountOptions", "nodeAffinity",
                            "persistentVolumeReclaimPolicy", "storageClassName", "volumeAttributesClassName",
                            "volumeMode"})
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class RunAsError(Exception):
    """What could not be read to decide (the step fails with it; nothing changes)."""


@dataclass(frozen=True)
class Decision:
    user: str  # NonRoot or Root
    reason: str

    @property
    def security_context(self) -> dict[str, Any]:
        return pod_security.etcd_pod(non_root=self.user == NON_ROOT)

    @property
    def annotation(self) -> str:
        return pod_security.run_as_annotations({"user": self.user, "reason": self.reason})[ANNOTATION]

    def as_fact(self) -> dict[str, Any]:
        """What the etcd StatefulSet's template takes (``karmada_deployment_etcd_run_as``)."""
        return {"user": self.user, "reason": self.reason, "annotation": self.annotation,
                "securityContext": self.security_context}


def decide(kube: Any, etcd: Mapping[str, Any], claims: Sequence[Mapping[str, Any]] = (),
           current: Mapping[str, Any] | None = None) -> Decision:
    """The user for a plan's local etcd (``plan["etcd"]``: ``runAs`` and ``storage``).

    ``claims``: the existing StatefulSet's claim templates (their class is the one its volumes
    have); ``current``: the existing StatefulSet, whose pod template's decision stands when the
    storage cannot be read."""
    wanted = etcd.get("runAs") or AUTO
    if wanted == NON_ROOT:
        return Decision(NON_ROOT, "spec.etcd.local.runAs is NonRoot")
    if wanted == ROOT:
        return Decision(ROOT, "spec.etcd.local.runAs is Root")
    storage = etcd["storage"]
    if storage["type"] == "EmptyDir":
        return Decision(NON_ROOT, "an emptyDir volume, which the kubelet gives to group 65532 (fsGroup)")
    if storage["type"] == "HostPath":
        return Decision(ROOT, "storage.type HostPath: the kubelet does not hand a host directory to another user "
                              "(spec.etcd.local.runAs: NonRoot once the directories belong to 65532)")
    try:
        return _claim_decision(kube, storage, claims)
    except KubeError as exc:
        kept = _current(current)
        if kept is not None:
            return kept
        raise RunAsError(f"cannot tell whether etcd's volumes take fsGroup: {exc.status} {exc.reason}: "
                         f"{exc.message} (or set spec.etcd.local.runAs)") from exc


def _claim_decision(kube: Any, storage: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> Decision:
    named = next((c.get("spec", {}).get("storageClassName") for c in claims
                  if c.get("spec", {}).get("storageClassName")), "") or storage.get("storageClassName") or ""
    if named:
        sc = kube.get("storage.k8s.io/v1", "StorageClass", named)
        if sc is None:
            return Decision(ROOT, f"StorageClass {named} not found: whether its volumes take fsGroup is unknown")
    else:
        defaults = [c for c in kube.list("storage.k8s.io/v1", "StorageClass")
                    if (c.get("metadata", {}).get("annotations") or {}).get(DEFAULT_CLASS) == "true"]
        if not defaults:
            return Decision(ROOT, "no storageClassName and no default StorageClass: whether the volumes take "
                                  "fsGroup is unknown")
        sc = defaults[0]
        named = sc["metadata"]["name"]
    provisioner = sc.get("provisioner") or ""
    fstype = next((v for k in FSTYPE_PARAMETERS if (v := (sc.get("parameters") or {}).get(k))), "")
    return _driver_decision(kube, f"StorageClass {named} ({provisioner})", provisioner, fstype, "the class")


def _driver_decision(kube: Any, where: str, name: str, fstype: str, what: str) -> Decision:
    """By the CSI driver's fsGroupPolicy (``what`` names where the file system type would be)."""
    # a CSIDriver's name is a DNS subdomain: an in-tree provisioner (kubernetes.io/host-path) has
    # none, and its name in a URL would read as a subresource
    driver = kube.get("storage.k8s.io/v1", "CSIDriver", name) if DNS_SUBDOMAIN.fullmatch(name) else None
    if driver is None:
        return Decision(ROOT, f"{where} is served by no CSI driver: its volumes (host directories for the "
                              "host-path and local-path provisioners) do not take fsGroup")
    policy = (driver.get("spec") or {}).get("fsGroupPolicy") or "ReadWriteOnceWithFSType"
    if policy == "File":
        return Decision(NON_ROOT, f"{where}: CSIDriver fsGroupPolicy File, the kubelet gives the volume to "
                                  "group 65532 (fsGroup)")
    if policy == "ReadWriteOnceWithFSType":
        if fstype:
            return Decision(NON_ROOT, f"{where}: CSIDriver fsGroupPolicy ReadWriteOnceWithFSType and file system "
                                      f"{fstype}, the kubelet gives the volume to group 65532 (fsGroup)")
        return Decision(ROOT, f"{where}: CSIDriver fsGroupPolicy ReadWriteOnceWithFSType, and {what} names no "
                              "file system type: the kubelet may not apply fsGroup")
    return Decision(ROOT, f"{where}: CSIDriver fsGroupPolicy {policy}: the kubelet does not apply fsGroup")


def claim_decision(kube: Any, namespace: str, claim: str) -> Decision:
    """Whether a claim someone else made (a backup store) can be handed to 65532: by the
    PersistentVolume it is bound to (a ``local`` volume takes fsGroup, a host directory or an NFS
    export does not, a CSI volume as its driver says), by its StorageClass before it is bound.
    The pods that write it (backup Jobs, the follower, restore Jobs) run as that user."""
    pvc = kube.get("v1", "PersistentVolumeClaim", claim, namespace)
    if pvc is None:
        return Decision(ROOT, f"PersistentVolumeClaim {claim} not found")
    spec = pvc.get("spec") or {}
    pv = kube.get("v1", "PersistentVolume", spec["volumeName"]) if spec.get("volumeName") else None
    if pv is None:
        if spec.get("storageClassName") == "":
            return Decision(ROOT, f"PersistentVolumeClaim {claim} is not bound and names no class: whether its "
                                  "volume takes fsGroup is unknown")
        return _claim_decision(kube, {}, [pvc])
    pv_spec = pv.get("spec") or {}
    where = f"PersistentVolume {pv['metadata']['name']}"
    if pv_spec.get("local"):
        return Decision(NON_ROOT, f"{where} is a local volume, which the kubelet gives to group 65532 (fsGroup)")
    if pv_spec.get("csi"):
        csi = pv_spec["csi"]
        return _driver_decision(kube, f"{where} ({csi.get('driver') or ''})", csi.get("driver") or "",
                                csi.get("fsType") or "", "the volume")
    kind = next((k for k in sorted(pv_spec) if k not in PV_SPEC_FIELDS), "unknown")
    return Decision(ROOT, f"{where} is a {kind} volume, which the kubelet does not hand to another user")


def _current(sts: Mapping[str, Any] | None) -> Decision | None:
    """The decision an existing StatefulSet's pod template carries."""
    template = (((sts or {}).get("spec") or {}).get("template") or {})
    text = ((template.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION) or ""
    user, _, reason = text.partition(": ")
    return Decision(user, reason) if user in (NON_ROOT, ROOT) else None
