"""The etcd lock: one Kubernetes Lease per etcd, so two backups of one etcd never run at once,
and a defragmentation never runs while a backup streams a snapshot (:func:`lease_name`,
:func:`lease_decision`, :func:`lease_spec`; :func:`take` and :func:`release` write it)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from karmada_operator.kube import ownership
from karmada_operator.kube.client import Kube, KubeError

LEASE_DURATION_SECONDS = 3600  # how long a run may hold the lock before others may take it
LEASE_PREFIX = "etcd-backup-"
# --------------------------------------------------------------------------- lock


def lease_name(kplan: Mapping[str, Any]) -> dict[str, str]:
    """The Lease that serialises backups of one etcd: ``{namespace, name}``.

    Local etcd: ``<karmada>-etcd-backup`` in the KarmadaDeployment's namespace (every
    EtcdBackup of that Karmada lives there). External etcd: named after its endpoints
    (sorted, normalised), so two KarmadaDeployments sharing one external etcd in the same
    namespace share the lock. The lead may pass another namespace (e.g. the operator's) to
    serialise across namespaces.
    """
    ns = kplan["namespace"]
    etcd = kplan["etcd"]
    if etcd["mode"] == "external":
        ident = ",".join(sorted(e.rstrip("/").lower() for e in etcd["endpoints"]))
        return {"namespace": ns, "name": LEASE_PREFIX + hashlib.sha256(ident.encode()).hexdigest()[:16]}
    name = f"{kplan['name']}-etcd-backup"
    if len(name) > 253:
        name = f"{kplan['name'][:200]}-{hashlib.sha256(kplan['name'].encode()).hexdigest()[:8]}-etcd-backup"
    return {"namespace": ns, "name": name}


def lease_holder(plan: Mapping[str, Any]) -> str:
    """Who holds the lock during a run: ``<namespace>/<EtcdBackup>/<Job>``."""
    return f"{plan['backup']['namespace']}/{plan['backup']['name']}/{plan['jobName']}"


def _lease_time(text: Any) -> datetime | None:
    if not text:
        return None
    if isinstance(text, datetime):
        return text.astimezone(UTC)
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).astimezone(UTC)


@dataclass(frozen=True)
class LeaseDecision:
    """``action``: ``create`` (no Lease), ``take`` (free or expired: update it), ``renew``
    (ours), or ``wait`` (another run holds it until ``expires``)."""

    action: str
    holder: str = ""
    expires: datetime | None = None

    @property
    def acquired(self) -> bool:
        return self.action != "wait"


def lease_decision(lease: Mapping[str, Any] | None, holder: str, now: datetime) -> LeaseDecision:
    """Whether ``holder`` may run, given the current Lease object (None if absent).

    A Lease with no holder, or whose renewTime (or acquireTime) + leaseDurationSeconds has
    passed, is free. The write that takes it must carry the Lease's resourceVersion, so two
    controllers racing for it cannot both win (the API server refuses the second update).
    """
    if not lease:
        return LeaseDecision("create")
    spec = lease.get("spec") or {}
    current = spec.get("holderIdentity") or ""
    if not current:
        return LeaseDecision("take")
    if current == holder:
        return LeaseDecision("renew", current)
    renewed = _lease_time(spec.get("renewTime")) or _lease_time(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or LEASE_DURATION_SECONDS)
    if renewed is None:
        return LeaseDecision("take", current)
    expires = renewed + timedelta(seconds=duration)
    if now >= expires:
        return LeaseDecision("take", current, expires)
    return LeaseDecision("wait", current, expires)


def _micro(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # Lease times are MicroTime


def lease_spec(holder: str, now: datetime, duration_seconds: int = LEASE_DURATION_SECONDS,
               previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Lease ``spec`` to write when taking or renewing it (transitions counted)."""
    prev = (previous or {}).get("spec") or {}
    taking = prev.get("holderIdentity") != holder
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": int(duration_seconds),
        "acquireTime": _micro(now) if taking or not prev.get("acquireTime") else prev["acquireTime"],
        "renewTime": _micro(now),
        "leaseTransitions": int(prev.get("leaseTransitions") or 0) + (1 if taking and prev.get("holderIdentity")
                                                                       else 0),
    }


def lease_release(lease: Mapping[str, Any] | None, holder: str) -> dict[str, Any] | None:
    """The spec that frees the Lease when ``holder`` holds it (None: not ours, leave it)."""
    spec = (lease or {}).get("spec") or {}
    if spec.get("holderIdentity") != holder:
        return None
    return {**spec, "holderIdentity": None, "renewTime": None}




LEASE_API = "coordination.k8s.io/v1"


def take(kube: Kube, lock: Mapping[str, str], holder: str, now: datetime,
         duration_seconds: int = LEASE_DURATION_SECONDS,
         ours: Callable[[str], bool] = lambda held_by: False) -> LeaseDecision:
    """Take (or renew) the Lease ``lock`` (``{namespace, name}``) for ``holder``; the decision
    says whether it is ours now (``wait``: another holds it). ``ours(held_by)``: a holder left
    over by an earlier run of the same owner, ours to take."""
    lease = kube.get(LEASE_API, "Lease", lock["name"], lock["namespace"])
    decision = lease_decision(lease, holder, now)
    held_by = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
    if not decision.acquired and ours(held_by):
        decision = LeaseDecision("take")
    if not decision.acquired:
        return decision
    body = {"apiVersion": LEASE_API, "kind": "Lease",
            "metadata": {"name": lock["name"], "namespace": lock["namespace"],
                         "labels": {ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY}},
            "spec": lease_spec(holder, now, duration_seconds, previous=lease)}
    try:
        if lease is None:
            kube.create(body)
        else:
            body["metadata"] = {**lease["metadata"]}
            kube.replace(body)
    except KubeError as exc:
        if exc.status == 409:  # another took it between our read and write
            return LeaseDecision("wait", holder="another holder", expires=None)
        raise
    return decision


def release(kube: Kube, lock: Mapping[str, str], holder: str) -> None:
    """Free the Lease when ``holder`` holds it (a Lease taken over or gone meanwhile is left)."""
    lease = kube.get(LEASE_API, "Lease", lock["name"], lock["namespace"])
    spec = lease_release(lease, holder)
    if lease is None or spec is None:
        return
    try:
        kube.replace({**lease, "spec": spec})
    except KubeError as exc:
        if exc.status not in (404, 409):
            raise
