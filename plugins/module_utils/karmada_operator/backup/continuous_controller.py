"""EtcdBackup with ``spec.continuous``: the follower's Deployment and what status says of it.
Controller side (the follower itself is ``backup.continuous``).

A pass makes sure one Deployment ``<EtcdBackup>-continuous`` (one replica, ``Recreate``: a
new pod only once the old one is gone, so never two writers) runs the follower with the
EtcdBackup's plan; a spec change rolls it (the plan's hash in an annotation), ``suspend``
scales it to zero. Status comes from the follower's own report, the last JSON line of its
pod's log: the full snapshot its chain starts from, the last delta written (revision, time),
the lag, totals, and what went wrong (a store refusing writes, a full that failed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from karmada_operator.backup import plan as eb_plan
from karmada_operator.backup import pod as eb_pod
from karmada_operator.kube import conditions as k8s_conditions
from karmada_operator.kube.client import owner_reference

PROGRAM = eb_plan.job_program("karmada_operator.backup.continuous")
ANN_PLAN_HASH = "operator.karmada.io/plan-hash"
# Events the follower prints that say something is wrong (backup.continuous).
TROUBLE = {"storeError": "StoreWriteFailing", "fullFailed": "FullSnapshotFailing", "invalid": "InvalidPlan"}


def deployment_name(backup_name: str) -> str:
    return eb_plan.suffixed_name(backup_name, "continuous")


def follower_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan the follower runs: a backup plan without what names one run (the follower
    names each full itself), so it changes only when the spec or the Karmada does."""
    out = json.loads(json.dumps(plan))
    out.pop("jobName", None)
    out["snapshot"] = {"prefix": plan["snapshot"]["prefix"]}
    return out


def deployment_manifest(plan: Mapping[str, Any], image: str, owner: Mapping[str, Any] | None,
                        pull_policy: str, suspend: bool) -> dict[str, Any]:
    backup = plan["backup"]
    labels = eb_pod.pod_labels(plan)
    labels["app.kubernetes.io/component"] = "continuous-backup"
    container, volumes = eb_pod.pod_parts(plan, image, pull_policy, PROGRAM, [])
    digest = hashlib.sha256(json.dumps([plan, image, pull_policy], sort_keys=True).encode()).hexdigest()[:16]
    meta: dict[str, Any] = {"name": deployment_name(backup["name"]), "namespace": backup["namespace"],
                            "labels": labels, "annotations": {ANN_PLAN_HASH: digest}}
    if owner:
        meta["ownerReferences"] = [owner_reference(
            {"apiVersion": eb_pod.API_VERSION, "kind": eb_pod.KIND, **owner}, block_owner_deletion=False)]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {
            "replicas": 0 if suspend else 1,
            "strategy": {"type": "Recreate"},  # the new pod starts once the old one is gone: one writer
            "selector": {"matchLabels": {eb_pod.LABEL_BACKUP: backup["name"],
                                         "app.kubernetes.io/component": "continuous-backup"}},
            "template": {
                "metadata": {"labels": labels, "annotations": {ANN_PLAN_HASH: digest, **eb_pod.pod_annotations(plan)}},
                "spec": {"automountServiceAccountToken": False, "enableServiceLinks": False,
                         "terminationGracePeriodSeconds": 60,  # SIGTERM: the follower writes what it holds
                         "containers": [container], "volumes": volumes,
                         "securityContext": eb_pod.security_contexts(plan)[0]},
            },
        },
    }


def last_report(log: str) -> dict[str, Any] | None:
    """The follower's last JSON line with an ``event``."""
    return eb_pod.last_json_line(log, "event")


def status_fields(report: Mapping[str, Any] | None, pod_phase: str, now: datetime) -> tuple[dict[str, Any], dict]:
    """``status.continuous`` and the Ready condition from the follower's last report."""
    if report is None:
        state = {"phase": "Starting"}
        why = f"the follower's pod is {pod_phase or 'not created yet'}; no report yet"
        return state, {"type": "Ready", "status": "False", "reason": "FollowerStarting", "message": why}
    keys = ("full", "fullRevision", "fullTime", "deltaRevision", "deltas", "bytes", "gaps", "fulls")
    state: dict[str, Any] = {k: report[k] for k in keys if report.get(k) is not None}
    if report.get("deltaTime"):
        state["deltaTime"] = eb_plan.rfc3339(datetime.fromtimestamp(report["deltaTime"] / 1000, now.tzinfo))
    event = report.get("event", "")
    if event in TROUBLE:
        state["phase"] = "Failing"
        return state, {"type": "Ready", "status": "False", "reason": report.get("reason") or TROUBLE[event],
                       "message": f"{TROUBLE[event]}: {report.get('message', '')}"}
    if not state.get("full"):
        state["phase"] = "Starting"
        return state, {"type": "Ready", "status": "False", "reason": "FollowerStarting",
                       "message": "taking the first full snapshot"}
    state["phase"] = "Following"
    since = f", the last delta up to revision {state['deltaRevision']} at {state['deltaTime']}" \
        if state.get("deltaTime") else ", no change since"
    return state, {"type": "Ready", "status": "True", "reason": "ContinuousBackup",
                   "message": f"following etcd from full snapshot {state['full']} (revision "
                              f"{state.get('fullRevision')}){since}"}


def merge_status(status: Mapping[str, Any], state: Mapping[str, Any], ready: Mapping[str, Any],
                 generation: int | None, now: datetime) -> dict[str, Any]:
    out = dict(status)
    out["continuous"] = dict(state)
    out["phase"] = "Running" if state.get("phase") == "Following" else "Pending" \
        if state.get("phase") == "Starting" else "Failed"
    out.pop("activeJob", None)
    out.pop("nextScheduleTime", None)
    if generation is not None:
        out["observedGeneration"] = int(generation)
    out["conditions"] = k8s_conditions.merge(out.get("conditions"), [dict(ready)], generation, eb_plan.rfc3339(now))
    return out
