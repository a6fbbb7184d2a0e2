"""EtcdRestore logic: which snapshot, what to seed, the Jobs that do it, the gate and the check.

Plain Python, no Ansible and no API calls (``etcd_restore_controller`` makes those):

- :func:`resolve_source` turns ``spec.source`` (an EtcdBackup and a snapshot name or
  ``latest``, or an explicit ``pvc://``/``s3://`` location) into a store spec and a name;
- :func:`restore_plan` checks the target KarmadaDeployment (local etcd on
  PersistentVolumeClaims: the volumes can be filled before any etcd pod exists) and plans one
  ``etcdutl snapshot restore`` per member, with the member names, peer URLs and cluster token
  the target's StatefulSet uses, ``--bump-revision`` and ``--mark-compacted``;
- :func:`pvc_manifest` / :func:`job_manifest`: the members' volumes, named as the StatefulSet's
  volumeClaimTemplate would name them (it adopts them), and one Job per member;
- :func:`restore_gate`: whether a KarmadaDeployment must wait for a restore before it does
  anything (no PKI, no etcd): the KarmadaDeployment role asks it at the start of a run;
- :func:`verification`: the restored plane against the snapshot.

See docs/backup-restore.md, "How a restore runs".
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from karmada_operator.backup import plan as eb_plan
from karmada_operator.backup import runner as eb_runner
from karmada_operator.backup.restore_plan import RestorePlanError, plan_restore
from karmada_operator.etcd import run_as
from karmada_operator.kube import ownership, pod_security
from karmada_operator.kube.client import KubeError, owner_reference
from karmada_operator.plan import plan as karmada_plan

API_VERSION = "operator.karmada.io/v1alpha1"
KIND = "EtcdRestore"
PLAN_FORMAT = 1
LABEL_RESTORE = "operator.karmada.io/etcd-restore"
CONTAINER = "restore"  # the Jobs' one container (its log and termination message hold the result)
ANN_SEEDED = "operator.karmada.io/etcd-restored-from"  # on the target KarmadaDeployment
# On the target too, when a restore it waits for fails: the annotation change starts its reconcile
# (watchAnnotationsChanges), so its Ready message names the failure instead of "Running".
ANN_FAILED = "operator.karmada.io/etcd-restore-failed"
MEMBER_ROOT = "/var/lib/etcd-restore"  # each Job mounts its member's volume at MEMBER_ROOT/<member>
STAGING_DIR = "/var/run/etcd-restore"
RESTORE_PROGRAM = eb_plan.job_program("karmada_operator.backup.restore_job")
POINT_PROGRAM = eb_plan.job_program("karmada_operator.backup.point_restore")
DATA_SUBDIR = "data"  # the StatefulSet runs etcd with --data-dir=/var/lib/etcd/data on the volume
PKI_KEYS = ("ca.crt", "ca.key", "sa.key", "sa.pub")
# carried when the Secret has it: the key karmada-apiserver encrypted Secrets with (pki/encryption.py);
# without it the restored karmada-apiserver cannot read them (docs/backup-restore.md)
PKI_OPTIONAL_KEYS = ("encryption-config.json",)
DEFAULT_BUMP = 1_000_000_000


class RestoreError(ValueError):
    """The EtcdRestore cannot proceed; ``reason`` goes into its conditions as is."""

    def __init__(self, field: str, message: str, reason: str = "InvalidSpec") -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
        self.reason = reason


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


# --------------------------------------------------------------------------- source


def resolve_source(restore: Mapping[str, Any], backup: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"storage": <EtcdBackup-style storage spec>, "snapshot": name, "sha256": expected or ""}``.

    ``backup`` is the EtcdBackup named by ``spec.source.backupRef`` (None when absent or not
    referenced). ``latest`` is the newest snapshot in the backup's status; a named snapshot
    need not be listed there (it is looked up in the store by the Job)."""
    source = (restore.get("spec") or {}).get("source") or {}
    at_revision, at_time = int(source.get("revision") or 0), source.get("time") or ""
    time_ms = 0
    if at_time:
        parsed = eb_plan.parse_rfc3339(at_time)
        time_ms = int(parsed.timestamp() * 1000) if parsed else 0
    asked = f"revision {at_revision}" if at_revision else f"time {at_time}" if at_time else "latest"
    if (at_revision or at_time) and not (source.get("backupRef") or source.get("backupName")):
        raise RestoreError("spec.source", "a point (revision or time) is restored from a continuous backup: set "
                           "backupRef, or location and backupName")
    if source.get("backupRef"):
        ref = source["backupRef"].get("name") or ""
        if backup is None or _meta(backup).get("name") != ref:
            raise RestoreError("spec.source.backupRef.name", f"EtcdBackup {ref!r} not found in this namespace",
                               "BackupNotFound")
        continuous = (backup.get("spec") or {}).get("continuous") is not None
        if (at_revision or at_time) and not continuous:
            raise RestoreError("spec.source", f"EtcdBackup {ref} is not continuous: it holds snapshots, not the "
                               "changes between them; restore a snapshot, or back up with spec.continuous")
        if continuous and (source.get("snapshot") or "latest") == "latest":
            # the point becomes one snapshot first (point_restore.prepare, the restore's first Job)
            return _point(restore, dict((backup.get("spec") or {}).get("storage") or {}), ref, at_revision,
                          time_ms, asked)
        want = source.get("snapshot") or "latest"
        snaps = (backup.get("status") or {}).get("snapshots") or []
        if want == "latest":
            if not snaps:
                raise RestoreError("spec.source.snapshot", f"EtcdBackup {ref} has no snapshot yet (status.snapshots "
                                   "is empty): wait for a backup to succeed, or name one", "NoSnapshot")
            chosen = max(snaps, key=lambda s: (s.get("takenAt", ""), s.get("name", "")))
        else:
            chosen = next((s for s in snaps if s.get("name") == want), {"name": want})
        return {"storage": dict((backup.get("spec") or {}).get("storage") or {}), "snapshot": chosen["name"],
                "sha256": chosen.get("sha256", ""), "location": chosen.get("location", "")}
    location = source.get("location") or ""
    if not location:
        raise RestoreError("spec.source", "set backupRef or location")
    parts = urlsplit(location)
    path = parts.path.lstrip("/").rstrip("/") if source.get("backupName") else parts.path.lstrip("/")
    # with backupName the location is the directory of a continuous backup's chains
    directory, name = (path, "") if source.get("backupName") else posixpath.split(path)
    if not name and not source.get("backupName"):
        raise RestoreError("spec.source.location", f"{location!r} does not name a snapshot file")
    if parts.scheme == "pvc":
        storage: dict[str, Any] = {"pvc": {"claimName": parts.netloc, **({"subPath": directory} if directory else {})}}
    else:
        conn = source.get("s3") or {}
        if not conn.get("endpoint") or not (conn.get("credentialsSecretRef") or {}).get("name"):
            raise RestoreError("spec.source.s3", "an s3:// location needs spec.source.s3 with endpoint and "
                               "credentialsSecretRef", "InvalidSpec")
        storage = {"s3": {**conn, "bucket": parts.netloc,
                          **({"prefix": directory} if directory else {})}}
    if source.get("backupName"):
        return _point(restore, storage, str(source["backupName"]), at_revision, time_ms, asked)
    return {"storage": storage, "snapshot": name, "sha256": "", "location": location}


def _point(restore: Mapping[str, Any], storage: dict[str, Any], backup_name: str, revision: int, time_ms: int,
           asked: str) -> dict[str, Any]:
    """A point of the continuous backup ``backup_name`` whose chains are in ``storage``."""
    return {"storage": storage, "snapshot": point_snapshot_name(_meta(restore).get("name") or ""), "sha256": "",
            "location": "", "point": {"prefix": eb_plan.snapshot_prefix(backup_name), "revision": revision,
                                      "timeMs": time_ms, "asked": asked}}


# --------------------------------------------------------------------------- plan


def restore_plan(restore: Mapping[str, Any], target: Mapping[str, Any] | None,
                 source: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the restore needs: the target's etcd members and volumes, one Job plan each.

    Raises RestoreError when the target cannot be seeded (missing, being deleted, external
    etcd, storage other than PersistentVolumeClaim) or the spec is inconsistent."""
    meta = _meta(restore)
    name, ns = meta.get("name") or "", meta.get("namespace") or ""
    spec = restore.get("spec") or {}
    ref = ((spec.get("target") or {}).get("karmadaDeploymentRef") or {}).get("name") or ""
    tmeta = _meta(target)
    if not target or tmeta.get("name") != ref:
        raise RestoreError("spec.target.karmadaDeploymentRef.name",
                           f"KarmadaDeployment {ns}/{ref} not found; create it (its etcd is made from the "
                           "snapshot)", "TargetNotFound")
    if tmeta.get("deletionTimestamp"):
        raise RestoreError("spec.target.karmadaDeploymentRef.name", f"KarmadaDeployment {ns}/{ref} is being deleted",
                           "TargetDeleting")
    try:
        kplan = karmada_plan.build_plan(dict(target))
    except karmada_plan.PlanError as exc:
        raise RestoreError(f"KarmadaDeployment {ref} {exc.field}", exc.message, "InvalidTarget") from exc
    etcd = kplan["etcd"]
    if etcd["mode"] != "local":
        raise RestoreError("spec.target", f"KarmadaDeployment {ref} uses an external etcd; restore into it with "
                           "the tools of whoever runs that etcd", "UnsupportedTarget")
    if etcd["storage"]["type"] != "PersistentVolumeClaim":
        raise RestoreError("spec.target", f"KarmadaDeployment {ref} keeps etcd on {etcd['storage']['type']}; a "
                           "restore fills the members' volumes before etcd starts, which needs "
                           "spec.etcd.local.storage.type PersistentVolumeClaim", "UnsupportedTarget")
    bump = spec.get("bumpRevision", DEFAULT_BUMP)
    if isinstance(bump, bool) or not isinstance(bump, int) or bump < 0:
        raise RestoreError("spec.bumpRevision", f"must be a non-negative integer, not {bump!r}")
    storage = eb_plan.storage_plan(source["storage"])
    peers = dict(item.split("=", 1) for item in etcd["initialCluster"].split(","))
    members = [{"name": m, "peer_url": peers[m], "client_url": client,
                "data_dir": f"{MEMBER_ROOT}/{m}/{DATA_SUBDIR}"}
               for m, client in zip(etcd["members"], etcd["memberEndpoints"], strict=True)]
    snapshot_path = f"{STAGING_DIR}/{source['snapshot']}"
    try:
        rplan = plan_restore(snapshot_path, members, MEMBER_ROOT,
                             cluster_token=f"{kplan['name']}-{tmeta.get('uid', '')}",  # the StatefulSet's token
                             bump_revision=bump, mark_compacted=bump > 0)
    except RestorePlanError as exc:
        raise RestoreError(f"spec ({exc.field})", str(exc)) from exc
    labels = {**kplan["labels"], "app.kubernetes.io/name": "etcd", "app.kubernetes.io/component": "etcd"}
    out_members = []
    for i, planned in enumerate(rplan.members):
        out_members.append({
            "index": i, "name": planned.name, "pvc": f"data-{kplan['names']['etcd']}-{i}",
            "mountPath": f"{MEMBER_ROOT}/{planned.name}", "dataDir": planned.data_dir,
            "argv": planned.restore_argv, "job": job_name(name, i),
        })
    return {
        "format": PLAN_FORMAT,
        "restore": {"namespace": ns, "name": name, "uid": meta.get("uid") or ""},
        "target": {"name": kplan["name"], "uid": tmeta.get("uid") or "", "statefulSet": kplan["names"]["etcd"],
                   "pkiSecret": kplan["names"]["pkiSecret"], "labels": labels,
                   "storage": etcd["storage"], "replicas": etcd["replicas"], "runAs": etcd["runAs"]},
        "snapshot": {"name": source["snapshot"], "sha256": source.get("sha256") or "",
                     "location": source.get("location") or "", "path": snapshot_path},
        **({"point": dict(source["point"]), "pointJob": point_job_name(name)} if source.get("point") else {}),
        "storage": storage,
        "bumpRevision": bump,
        "clusterToken": rplan.cluster_token,
        "members": out_members,
    }


def with_users(kube: Any, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan with the users its Jobs run as (``runAs``: ``members`` and ``point``, each a user
    and a reason). A member's Job writes the new etcd member's volume and reads the store: 65532
    when etcd will run as 65532 on that volume (etcd/run_as.py, as the StatefulSet will decide)
    and the store, if a volume, takes fsGroup too; else root. The point's Job writes only the
    store. What cannot be read leaves root, which can write either (the files become etcd's group
    when a non-root etcd starts: fsGroupChangePolicy Always)."""
    try:
        store = (run_as.claim_decision(kube, plan["restore"]["namespace"], plan["storage"]["claimName"])
                 if plan["storage"]["type"] == "pvc" else None)
        target = run_as.decide(kube, {"runAs": plan["target"].get("runAs"), "storage": plan["target"]["storage"]})
    except (run_as.RunAsError, KubeError) as exc:
        unknown = {"user": pod_security.ROOT, "reason": f"whether the volumes take fsGroup could not be read: {exc}"}
        return {**plan, "runAs": {"members": unknown, "point": unknown}}
    store_text = f"; the store: {store.reason}" if store else ""
    if target.user == pod_security.ROOT:
        members = {"user": pod_security.ROOT, "reason": f"etcd's volumes: {target.reason}"}
    elif store and store.user == pod_security.ROOT:
        members = {"user": pod_security.ROOT, "reason": f"the store: {store.reason}"}
    else:
        members = {"user": pod_security.NON_ROOT, "reason": f"etcd's volumes: {target.reason}{store_text}"}
    point = ({"user": store.user, "reason": f"the store: {store.reason}"} if store else
             {"user": pod_security.NON_ROOT, "reason": "an S3 store: the Job writes only its staging emptyDir"})
    return {**plan, "runAs": {"members": members, "point": point}}


def point_snapshot_name(restore_name: str) -> str:
    """The snapshot a restore to a point is prepared as, in the backup's store."""
    return f"{restore_name}-point.db"


def point_job_name(restore_name: str) -> str:
    return eb_plan.suffixed_name(restore_name, "point")


def job_name(restore_name: str, index: int) -> str:
    name = f"{restore_name}-restore-{index}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(restore_name.encode()).hexdigest()[:8]
    return f"{restore_name[:40].rstrip('-.')}-{digest}-restore-{index}"


def pvc_manifest(plan: Mapping[str, Any], member: Mapping[str, Any]) -> dict[str, Any]:
    """The member's volume, as the StatefulSet's volumeClaimTemplate ``data`` would make it."""
    storage = plan["target"]["storage"]
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage["size"]}}}
    if storage.get("storageClassName"):
        spec["storageClassName"] = storage["storageClassName"]
    labels = {**plan["target"]["labels"], LABEL_RESTORE: plan["restore"]["name"]}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": member["pvc"], "namespace": plan["restore"]["namespace"], "labels": labels},
            "spec": spec}


def point_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """What the point's Job needs (JSON, no secret values)."""
    return {"format": PLAN_FORMAT, "storage": plan["storage"], "point": plan["point"],
            "snapshot": {"name": plan["snapshot"]["name"]}, "workDir": f"{STAGING_DIR}/point"}


def with_prepared(plan: Mapping[str, Any], prepared: Mapping[str, Any]) -> dict[str, Any]:
    """The plan once the point is a snapshot: the members check its sha256 before they restore it."""
    snap = prepared.get("snapshot") or {}
    return {**plan, "snapshot": {**plan["snapshot"], "sha256": snap.get("sha256", ""),
                                 "location": snap.get("location", "")}}


def point_job_manifest(plan: Mapping[str, Any], image: str, owner: Mapping[str, Any] | None = None,
                       pull_policy: str = "IfNotPresent") -> dict[str, Any]:
    """The Job that turns the point into one snapshot (point_restore): the store (written: the
    snapshot goes there), a staging emptyDir for the throw-away etcd; no member volume."""
    job = job_manifest(plan, {"job": plan["pointJob"], "pvc": "", "mountPath": ""}, image, owner, pull_policy,
                       program=POINT_PROGRAM, job_plan=point_plan(plan), writes_store=True, user="point")
    return job


def member_plan(plan: Mapping[str, Any], member: Mapping[str, Any]) -> dict[str, Any]:
    """What one Job needs (JSON, no secret values)."""
    return {"format": PLAN_FORMAT, "storage": plan["storage"], "snapshot": plan["snapshot"],
            "member": {k: member[k] for k in ("name", "dataDir", "argv", "mountPath")}}


def job_manifest(plan: Mapping[str, Any], member: Mapping[str, Any], image: str,
                 owner: Mapping[str, Any] | None = None, pull_policy: str = "IfNotPresent",
                 program: Mapping[str, Any] | None = None, job_plan: Mapping[str, Any] | None = None,
                 writes_store: bool = False, user: str = "members") -> dict[str, Any]:
    """One member's restore Job: its volume, the store, a staging emptyDir; as the user
    :func:`with_users` decided (``plan["runAs"][user]``; root when the plan has none), every
    capability dropped, no token. (The point's Job is the same pod without a member volume,
    writing to the store.)"""
    ns = plan["restore"]["namespace"]
    labels = {LABEL_RESTORE: plan["restore"]["name"], "app.kubernetes.io/name": "etcd-restore",
              ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY, "app.kubernetes.io/instance": plan["target"]["name"]}
    volumes: list[dict[str, Any]] = [{"name": "staging", "emptyDir": {}}]
    mounts: list[dict[str, Any]] = [{"name": "staging", "mountPath": STAGING_DIR}]
    if member["pvc"]:
        volumes.insert(0, {"name": "member", "persistentVolumeClaim": {"claimName": member["pvc"]}})
        mounts.insert(0, {"name": "member", "mountPath": member["mountPath"]})
    storage = plan["storage"]
    if storage["type"] == "pvc":
        volumes.append({"name": "store", "persistentVolumeClaim": {"claimName": storage["claimName"],
                                                                   **({} if writes_store else {"readOnly": True})}})
        mounts.append({"name": "store", "mountPath": storage["mountPath"],
                       **({} if writes_store else {"readOnly": True})})
    else:
        for vol, key in (("s3-credentials", "credentials"), ("s3-ca", "caBundle")):
            if storage.get(key):
                volumes.append({"name": vol, "secret": {"secretName": storage[key]["secretName"],
                                                        "items": storage[key]["items"], "defaultMode": 0o400}})
                mounts.append({"name": vol, "mountPath": storage[key]["mountPath"], "readOnly": True})
    decided = (plan.get("runAs") or {}).get(user) or {}
    pod_ctx, container_ctx = pod_security.volume_writer(decided.get("user") == pod_security.NON_ROOT)
    template_meta: dict[str, Any] = {"labels": labels}
    if decided:
        template_meta["annotations"] = pod_security.run_as_annotations(decided)
    meta: dict[str, Any] = {"name": member["job"], "namespace": ns, "labels": labels}
    if owner:
        meta["ownerReferences"] = [owner_reference({"apiVersion": API_VERSION, "kind": KIND, **owner},
                                                   block_owner_deletion=False)]
    container = {
        "name": CONTAINER, "image": image, "imagePullPolicy": pull_policy,
        "command": (program or RESTORE_PROGRAM)["command"],
        "env": [*(program or RESTORE_PROGRAM)["env"],
                {"name": "ETCD_RESTORE_PLAN", "value": json.dumps(
                    job_plan if job_plan is not None else member_plan(plan, member), sort_keys=True)},
                {"name": "ETCD_RESTORE_RESULT_FILE", "value": "/dev/termination-log"},
                {"name": "HOME", "value": STAGING_DIR}],
        "volumeMounts": mounts,
        "securityContext": container_ctx,
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 86400,
                     "template": {"metadata": template_meta,
                                  "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                                           "enableServiceLinks": False, "containers": [container],
                                           "volumes": volumes, "securityContext": pod_ctx}}}}


# --------------------------------------------------------------------------- gate


def restore_gate(restores: Sequence[Mapping[str, Any]], karmada_name: str,
                 karmada_status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Whether KarmadaDeployment ``karmada_name`` must wait: an EtcdRestore targets it and has not
    seeded its etcd yet (not even a failed one: starting an empty etcd would make the restore
    impossible; delete the EtcdRestore to start empty instead). A Karmada that already reported
    on its etcd (``EtcdReady`` in ``karmada_status``) never waits: a restore cannot seed it and
    says so itself (TargetHasData). ``{"wait", "name", "message"}``."""
    if any(c.get("type") == "EtcdReady" for c in (karmada_status or {}).get("conditions") or []):
        return {"wait": False, "name": "", "message": ""}
    for item in sorted(restores or [], key=lambda r: _meta(r).get("name") or ""):
        target = (((item.get("spec") or {}).get("target") or {}).get("karmadaDeploymentRef") or {}).get("name")
        if target != karmada_name or _meta(item).get("deletionTimestamp"):
            continue
        conds = (item.get("status") or {}).get("conditions") or []
        seeded = next((c for c in conds if c.get("type") == "Seeded"), {})
        if seeded.get("status") == "True":
            continue
        name = _meta(item).get("name")
        phase = (item.get("status") or {}).get("phase") or "Pending"
        why = f": {seeded.get('reason')}: {seeded.get('message')}" if seeded.get("reason") else ""
        return {"wait": True, "name": name,
                "message": f"EtcdRestore {name} ({phase}{why}) seeds this Karmada's etcd; nothing is created before "
                           "it has (delete the EtcdRestore to start with an empty etcd)"}
    return {"wait": False, "name": "", "message": ""}


# --------------------------------------------------------------------------- verification


def _int_or_none(value: Any) -> int | None:
    """An integer read from a report, or None when it is not there (never 0 for "missing")."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def verification(snapshot: Mapping[str, Any], seeded: Sequence[Mapping[str, Any]], counts: Mapping[str, int],
                 bump: int, unread: Mapping[str, str] | None = None, keys_unread: str = "") -> dict[str, Any]:
    """Compare the restored plane with the snapshot.

    ``snapshot``: the store's metadata of the snapshot (``revision``, the live ``keys`` and the
    ``counts`` at that revision when the backup recorded them). ``seeded``: each member
    (``member``; ``restored``: the ``revision`` its restore Job read from the restored
    database, and ``liveKeys``, the live keys at that revision read from the member's etcd once
    it runs). ``counts``: objects per Karmada resource read through the restored
    karmada-apiserver; ``unread``: why a resource could not be counted (an API error, a kind
    the server does not serve, no credentials); ``keys_unread``: why the members' keys could
    not be read from etcd.

    What could not be read fails the check, it never compares as equal: a count missing on
    either side, a revision or key count missing from the snapshot or from a member, no member
    result at all. Each is in ``unreadable`` and, as "could not read ...", first in
    ``differences``: an empty ``differences`` means everything was read and matched."""
    unread = dict(unread or {})
    unreadable: list[str] = []
    diffs: list[str] = []
    rev = _int_or_none(snapshot.get("revision"))
    if rev is None:
        unreadable.append("the snapshot's revision (not in its metadata)")
    want_keys = _int_or_none(snapshot.get("keys"))
    if want_keys is None:
        unreadable.append("the snapshot's live key count (its metadata records none: the backup could not count "
                          "at its revision)")
    if not seeded:
        unreadable.append("the members' restore results (none recorded)")
    restored_revs: set[int] = set()
    live_keys: dict[str, int] = {}
    for i, result in enumerate(seeded):
        who = result.get("member") or f"member {i}"
        restored = result.get("restored") or {}
        number = _int_or_none(restored.get("revision"))
        if number is None:
            unreadable.append(f"{who}'s restored revision")
        else:
            restored_revs.add(number)
        keys = _int_or_none(restored.get("liveKeys"))
        if keys is None:
            unreadable.append(f"{who}'s live keys at the restored revision (from its etcd"
                              f"{': ' + keys_unread if keys_unread else ''})")
        else:
            live_keys[who] = keys
    if len(restored_revs) > 1:
        diffs.append(f"members were restored to different revisions {sorted(restored_revs)}")
    restored_rev = max(restored_revs) if restored_revs else None
    if rev is not None and restored_rev is not None and restored_rev < rev + bump:
        diffs.append(f"restored revision {restored_rev} is below the snapshot's {rev} plus the bump {bump}")
    # etcdutl's --bump-revision writes one empty entry at the bumped revision (etcdutl
    # v3_snapshot.go, unsafeBumpBucketsRevision); it is no live key: a count of every key at the
    # restored revision equals the count the backup took at the snapshot's.
    if want_keys is not None:
        for who, keys in live_keys.items():
            if keys != want_keys:
                diffs.append(f"{who} holds {keys} live keys at the restored revision, the snapshot {want_keys} at "
                             "its revision")
    expected = dict(snapshot.get("counts") or {})
    objects = {}
    not_recorded: list[str] = []
    not_served: dict[str, list[str]] = {}
    for resource in eb_runner.KARMADA_RESOURCES:
        want = _int_or_none(expected.get(resource))
        have = _int_or_none(counts.get(resource))
        objects[resource] = {"snapshot": want, "restored": have}
        if want is None:
            not_recorded.append(resource)
        if have is None:
            not_served.setdefault(unread.get(resource) or "no count was returned", []).append(resource)
        if want is not None and have is not None and want != have:
            diffs.append(f"{resource}: {want} in the snapshot, {have} served by the restored karmada-apiserver")
    if not_recorded:
        unreadable.append(f"the snapshot's count of {', '.join(not_recorded)} (its metadata records none: the "
                          "backup could not count at its revision)")
    for why, resources in not_served.items():
        unreadable.append(f"{', '.join(resources)} through the restored karmada-apiserver: {why}")
    report: dict[str, Any] = {
        "restoredKeys": next(iter(set(live_keys.values()))) if len(set(live_keys.values())) == 1 else None,
        "liveKeysAtSnapshot": want_keys,
        "objects": [{"resource": k, **{kk: vv for kk, vv in v.items() if vv is not None}} for k, v in objects.items()],
        "differences": [f"could not read {what}" for what in unreadable] + diffs,
        "unreadable": unreadable,
    }
    # not nullable in the CRD: left out when unknown (the differences say why)
    if rev is not None:
        report["snapshotRevision"] = rev
    if restored_rev is not None:
        report["restoredRevision"] = restored_rev
    return report
