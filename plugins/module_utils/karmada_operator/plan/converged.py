"""Has anything changed since the last full pass? The fast path of a no-op reconcile.

A full pass of a KarmadaDeployment re-renders, re-applies and re-gates every object (about 140
tasks). Most reconciles change nothing: the periodic one, and the ones a dependent object's
status starts (a pod restarting updates its Deployment). At the end of a full pass that left
everything Ready, the operator records in ``status.converged`` a fingerprint of what it
converged: the KarmadaDeployment's generation, spec and ``operator.karmada.io/`` annotations,
the operator's own build (its roles, playbooks and plugins), and every object it owns on the
host cluster by what would show an edit (a workload's generation, a Service's spec, a Secret's
or ConfigMap's data) and uid (a deleted object comes back with another). The next reconcile
compares; it ends at once, writing nothing, only when:

* the fingerprint is the same (no spec change, no object edited, deleted or added);
* status says Ready at this generation;
* every Deployment and StatefulSet has all its replicas ready on its current generation;
* no day-2 operation is under way or due (plan/operations.py: a CA rotation asked for or not
  ``Done``, an etcd defragmentation round ``InProgress``, a certificate in its renewal window
  (``renewAt``, the soonest one, recorded here), a scheduled defragmentation's tick): each of
  their steps is a full pass;
* the last full pass is younger than ``recheck_after`` (objects inside karmada-apiserver,
  such as CRDs and APIServices, and what the operator does not own, are checked only by a
  full pass);
* with members: MembersReady, and every member's Cluster Ready (read through karmada-apiserver).

When all but the last hold (a member not Ready yet: a join being retried), the control plane is
as the last full pass left it (``control_plane``): the run skips the control-plane steps and
goes to the member task. Anything else runs the full pass, which repairs and reports. The
annotation ``operator.karmada.io/full-pass`` (any new value, e.g. the time) asks for a full pass
now: annotation changes start a reconcile, and the check compares its value with the one the
last full pass recorded (``fullPass``). It is kept out of the fingerprint, so the full pass it
asks for reports no change when it finds none.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karmada_operator.plan import operations

# What the operator owns on the host cluster, listed by its labels.
OWNED_KINDS = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
)
ANNOTATION_PREFIX = "operator.karmada.io/"
FULL_PASS_ANNOTATION = "operator.karmada.io/full-pass"
# The operator's build: what a new operator version changes.
BUILD_PARTS = ("roles", "playbooks", "plugins", "watches.yaml")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def object_mark(obj: Mapping[str, Any]) -> list[str]:
    """What identifies this incarnation of an owned object and shows an edit to it."""
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind") or "")
    if kind in ("Deployment", "StatefulSet"):
        content = str(meta.get("generation") or 0)
    elif kind == "Service":
        content = _digest(obj.get("spec") or {})
    else:  # Secret, ConfigMap
        content = _digest([obj.get("type") or "", obj.get("data") or {}, obj.get("binaryData") or {}])
    return [kind, str(meta.get("name") or ""), str(meta.get("uid") or ""), content]


def fingerprint(cr: Mapping[str, Any], objects: Iterable[Mapping[str, Any]], build: str) -> str:
    meta = cr.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k.startswith(ANNOTATION_PREFIX) and k != FULL_PASS_ANNOTATION}
    marks = sorted(object_mark(o) for o in objects)
    return _digest({"generation": meta.get("generation"), "spec": cr.get("spec") or {},
                    "annotations": annotations, "build": build, "objects": marks})


def build_id(root: str) -> str:
    """A digest of the operator's code under ``root`` (the directory holding roles/ and plugins/)."""
    h = hashlib.sha256()
    for part in BUILD_PARTS:
        top = os.path.join(root, part)
        paths = [top] if os.path.isfile(top) else sorted(
            os.path.join(d, f) for d, dirs, files in os.walk(top) for f in files
            if "__pycache__" not in d and not f.endswith(".pyc"))
        for path in paths:
            h.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as data:
                h.update(data.read())
            h.update(b"\0")
    return h.hexdigest()


def _time(value: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def renew_at(certificates: Iterable[Mapping[str, Any]], renew_before: dt.timedelta) -> dt.datetime | None:
    """When the soonest certificate enters its renewal window (None: no certificates listed)."""
    ends = [t for t in (_time(c.get("notAfter") or "") for c in certificates) if t]
    return min(ends) - renew_before if ends else None


def not_ready_workloads(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """Deployments and StatefulSets without every replica ready on their current generation."""
    out = []
    for obj in objects:
        if obj.get("kind") not in ("Deployment", "StatefulSet"):
            continue
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        want = int(spec.get("replicas", 1) or 0)
        if (int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0)
                or int(status.get("readyReplicas") or 0) != want or int(status.get("replicas") or 0) != want):
            out.append(f"{obj['kind']} {meta.get('name')}")
    return sorted(out)


def _condition(cr: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for cond in (cr.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return {}


def member_names(cr: Mapping[str, Any]) -> list[str]:
    return sorted(str(m.get("name")) for m in (cr.get("spec") or {}).get("members") or [] if m.get("name"))


def full_pass_asked(cr: Mapping[str, Any]) -> str:
    return str(((cr.get("metadata") or {}).get("annotations") or {}).get(FULL_PASS_ANNOTATION) or "")


@dataclass(frozen=True)
class Decision:
    converged: bool
    reason: str
    # The control plane is as the last full pass left it; only the members need work (a run
    # retrying a member that is not Ready yet goes straight to the member task).
    control_plane: bool = False


def decide(cr: Mapping[str, Any], objects: list[Mapping[str, Any]], build: str, now: dt.datetime,
           recheck_after: float) -> Decision:
    """May this run end now (everything as the last full pass left it)? Members are checked
    apart (``unready_members``), since reading them needs karmada-apiserver."""
    status = cr.get("status") or {}
    record = status.get("converged") or {}
    generation = int((cr.get("metadata") or {}).get("generation") or 0)
    if not record.get("fingerprint"):
        return Decision(False, "no full pass recorded yet")
    if int(status.get("observedGeneration") or 0) != generation or int(record.get("generation") or 0) != generation:
        return Decision(False, f"generation {generation} not reconciled yet")
    ready = _condition(cr, "Ready")
    if ready.get("status") != "True":
        return Decision(False, f"Ready is {ready.get('status') or 'not set'} ({ready.get('reason') or 'no reason'})")
    at = _time(record.get("at") or "")
    if at is None or (now - at).total_seconds() >= recheck_after:
        return Decision(False, f"the last full pass is older than {recheck_after:.0f} s")
    # a certificate due for renewal (pki/renewal.py), a scheduled round's tick, an operation under way
    operating = operations.under_way(cr, now)
    if operating:
        return Decision(False, operating)
    asked = full_pass_asked(cr)
    if asked != str(record.get("fullPass") or ""):
        return Decision(False, f"a full pass was asked for ({FULL_PASS_ANNOTATION}={asked})")
    if fingerprint(cr, objects, build) != record["fingerprint"]:
        return Decision(False, "the spec, the operator or an object it owns changed since the last full pass")
    waiting = not_ready_workloads(objects)
    if waiting:
        return Decision(False, f"not every replica ready: {', '.join(waiting)}")
    if member_names(cr) and _condition(cr, "MembersReady").get("status") != "True":
        return Decision(False, "MembersReady is not True", control_plane=True)
    return Decision(True, f"nothing changed since the full pass at {record.get('at')}", control_plane=True)


def unready_members(cr: Mapping[str, Any], clusters: Iterable[Mapping[str, Any]]) -> list[str]:
    """Members of the spec whose Cluster in karmada-apiserver is missing or not Ready."""
    ready = {(c.get("metadata") or {}).get("name") for c in clusters
             if any(x.get("type") == "Ready" and x.get("status") == "True"
                    for x in (c.get("status") or {}).get("conditions") or [])}
    return [m for m in member_names(cr) if m not in ready]


def record(cr: Mapping[str, Any], objects: list[Mapping[str, Any]], build: str, now: dt.datetime,
           certificates: Iterable[Mapping[str, Any]], renew_before: dt.timedelta, server: str,
           tls_server_name: str) -> dict[str, Any]:
    """``status.converged`` for a full pass that ended with everything Ready."""
    due = renew_at(certificates, renew_before)
    out = {"fingerprint": fingerprint(cr, objects, build), "generation": int((cr.get("metadata") or {}).get(
        "generation") or 0), "at": iso(now), "server": server, "tlsServerName": tls_server_name,
           "fullPass": full_pass_asked(cr)}
    if due is not None:
        out["renewAt"] = iso(due)
    return out
