"""The pod a backup runs in (a backup Job's, the continuous backup's follower's): the one home
of its container, volumes and labels. Controller side."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from karmada_operator.backup import plan as eb_plan
from karmada_operator.etcd import run_as
from karmada_operator.kube import ownership, pod_security
from karmada_operator.kube.client import KubeError

API_VERSION = "operator.karmada.io/v1alpha1"
KIND = "EtcdBackup"
LABEL_BACKUP = "operator.karmada.io/etcd-backup"
CONTAINER = "backup"
STAGING_DIR = "/var/run/etcd-backup"


def _secret_volume(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": name, "secret": {"secretName": spec["secretName"], "items": spec["items"], "defaultMode": 0o400}}


def pod_parts(plan: Mapping[str, Any], image: str, pull_policy: str, program: Mapping[str, Any],
              env: list[dict[str, str]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The container and volumes of a pod that runs ``program`` on ``plan`` (a backup Job, the
    continuous backup's follower).

    It mounts exactly what the run reads: three keys of the etcd client Secret, the S3
    credentials (and CA) or the PVC, and an emptyDir where etcdctl stages the snapshot. Its
    user: :func:`security_contexts`.
    """
    volumes = [_secret_volume("etcd-tls", plan["etcd"]["tls"]), {"name": "staging", "emptyDir": {}}]
    mounts = [{"name": "etcd-tls", "mountPath": plan["etcd"]["tls"]["mountPath"], "readOnly": True},
              {"name": "staging", "mountPath": STAGING_DIR}]
    storage = plan["storage"]
    if storage["type"] == "pvc":
        volumes.append({"name": "store", "persistentVolumeClaim": {"claimName": storage["claimName"]}})
        mounts.append({"name": "store", "mountPath": storage["mountPath"]})
    else:
        volumes.append(_secret_volume("s3-credentials", storage["credentials"]))
        mounts.append({"name": "s3-credentials", "mountPath": storage["credentials"]["mountPath"], "readOnly": True})
        if storage.get("caBundle"):
            volumes.append(_secret_volume("s3-ca", storage["caBundle"]))
            mounts.append({"name": "s3-ca", "mountPath": storage["caBundle"]["mountPath"], "readOnly": True})
    container = {
        "name": CONTAINER, "image": image, "imagePullPolicy": pull_policy,
        "command": program["command"],
        "env": [*program["env"], {"name": "ETCD_BACKUP_PLAN", "value": json.dumps(plan, sort_keys=True)},
                {"name": "ETCD_BACKUP_STAGING_DIR", "value": STAGING_DIR}, *env,
                {"name": "HOME", "value": STAGING_DIR}],
        "volumeMounts": mounts,
        "securityContext": security_contexts(plan)[1],
        "resources": plan.get("jobResources") or eb_plan.DEFAULT_JOB_RESOURCES,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return container, volumes


def pod_labels(plan: Mapping[str, Any]) -> dict[str, str]:
    return {LABEL_BACKUP: plan["backup"]["name"], "app.kubernetes.io/name": "etcd-backup",
            ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY, "app.kubernetes.io/instance": plan["source"]["name"]}


def last_json_line(log: str, key: str) -> dict[str, Any] | None:
    """The last line of a pod's log that is a JSON object with ``key`` (a Job's result: ``ok``;
    the follower's report: ``event``)."""
    for line in reversed((log or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and key in doc:
                return doc
    return None


def with_user(kube: Any, plan: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The plan with the user its pods run as when they write a volume (``storage.runAs``: user
    and reason): 65532 where the claim's volume takes fsGroup, root where it does not
    (etcd/run_as.py ``claim_decision``), and root where that cannot be read (the reason says so,
    as a restore's Jobs do: backup/restore.py ``with_users``). To S3 nothing is written but the
    staging emptyDir: always 65532, the plan unchanged."""
    if plan["storage"]["type"] != "pvc":
        return dict(plan)
    try:
        decided = run_as.claim_decision(kube, namespace, plan["storage"]["claimName"])
        user = {"user": decided.user, "reason": decided.reason}
    except (run_as.RunAsError, KubeError) as exc:
        user = {"user": pod_security.ROOT, "reason": f"whether the volume takes fsGroup could not be read: {exc}"}
    return {**plan, "storage": {**plan["storage"], "runAs": user}}


def security_contexts(plan: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod's and the container's securityContext of a backup pod (a Job, the follower).

    To S3 the pod writes nothing but its staging emptyDir and reads Secrets: Pod Security
    "restricted", user 65532, the volumes given to its group (fsGroup). To a volume (a PVC the
    user made) as :func:`with_user` decided: 65532 with the volume's group where the volume takes
    fsGroup, else root with every capability dropped and the rest of "restricted" (a host
    directory, an NFS export: only its owner, root, can write it; docs/security.md)."""
    storage = plan["storage"]
    if storage["type"] != "pvc":
        return pod_security.pod(), pod_security.container()
    return pod_security.volume_writer((storage.get("runAs") or {}).get("user") == pod_security.NON_ROOT)


def pod_annotations(plan: Mapping[str, Any]) -> dict[str, str]:
    """The user a pod that writes a volume runs as, and why (as on etcd's pods)."""
    return pod_security.run_as_annotations(plan["storage"].get("runAs"))
