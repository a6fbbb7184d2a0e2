"""EtcdBackup's plan: everything one run needs, from the EtcdBackup and its KarmadaDeployment
(store spec and the Secrets to mount, etcd endpoints and the TLS Secret keys, the snapshot name,
source metadata, retention, the lock). It is JSON, handed to the Job (``backup.job``), which
reads it with ``backup.runner``. Controller side. docs/backup-restore.md, "How a backup runs"."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from karmada_operator.backup import store as store_lib
from karmada_operator.backup.runner import PLAN_FORMAT
from karmada_operator.etcd.lease import lease_name
from karmada_operator.kube.schedule import parse_schedule, zone
from karmada_operator.plan import plan as karmada_plan

DEFAULT_MAX_BACKUPS = 7  # the CRD's default for spec.retention.maxBackups
DEFAULT_JOB_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}}  # spec.jobResources unset

# Where the backup Job mounts what it reads (the lead's Job template uses these paths).
MOUNT_ROOT = "/etc/etcd-backup"
ETCD_TLS_DIR = f"{MOUNT_ROOT}/etcd"  # ca.crt, tls.crt, tls.key
S3_CREDENTIALS_DIR = f"{MOUNT_ROOT}/s3"  # accessKeyID, secretAccessKey
S3_CA_DIR = f"{MOUNT_ROOT}/s3-ca"  # ca.crt
VOLUME_MOUNT = "/var/lib/etcd-backup"  # the PVC
# Where the operator image keeps our Python package (HOME of the ansible-operator image is
# /opt/ansible): the backup and restore Jobs run its programs (``python3 -m``) from there.
OPERATOR_PYTHONPATH = "/opt/ansible/plugins/module_utils"


def job_program(module: str) -> dict[str, Any]:
    """The container fields that run ``python3 -m <module>`` from the operator image."""
    return {"command": ["python3", "-m", module], "env": [{"name": "PYTHONPATH", "value": OPERATOR_PYTHONPATH}]}

# spec.continuous defaults (the CRD states the same; a unit test checks they agree)
CONTINUOUS_DEFAULTS = {"deltaInterval": "20s", "deltaMaxBytes": 10 * 1024 * 1024, "fullAfterDeltas": 1000,
                       "fullAfterBytes": 1024 * 1024 * 1024}
DELTA_INTERVAL_RANGE = (1, 600)  # seconds


def parse_duration(text: str) -> float:
    """``20s``, ``1m``, ``1m30s``, ``500ms`` (the forms the CRD admits) in seconds."""
    parts = re.findall(r"([0-9]+)(ms|s|m|h)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        raise ValueError(f"{text!r} is not a duration like 20s, 1m or 1m30s")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * scale[u] for n, u in parts)


def continuous_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec.continuous`` with its defaults, as the follower reads it (plan.continuous)."""
    c = {**CONTINUOUS_DEFAULTS, **{k: v for k, v in (spec or {}).items() if v is not None}}
    try:
        interval = parse_duration(c["deltaInterval"])
    except ValueError as exc:
        raise BackupPlanError("spec.continuous.deltaInterval", str(exc)) from exc
    low, high = DELTA_INTERVAL_RANGE
    if not low <= interval <= high:
        raise BackupPlanError("spec.continuous.deltaInterval", f"must be between {low}s and {high // 60}m")
    return {"deltaIntervalSeconds": interval, "deltaMaxBytes": int(c["deltaMaxBytes"]),
            "fullAfterDeltas": int(c["fullAfterDeltas"]), "fullAfterBytes": int(c["fullAfterBytes"])}


class BackupPlanError(ValueError):
    """The EtcdBackup (or what it refers to) cannot be acted on. ``field`` names the spec path,
    ``reason`` goes into the Ready condition as is."""

    def __init__(self, field: str, message: str, reason: str = "InvalidSpec") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.reason = reason


# --------------------------------------------------------------------------- plan


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def backup_plan(backup_cr: Mapping[str, Any], karmada_cr: Mapping[str, Any] | None,
                scheduled_time: datetime | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Everything one run of ``backup_cr`` needs, as JSON-ready data (no secret values).

    ``karmada_cr`` is the KarmadaDeployment named by ``spec.karmadaDeploymentRef`` as the API
    returned it (defaults filled in), or None when it does not exist. ``scheduled_time`` is
    the tick being run (names the snapshot); an on-demand run uses ``now``.
    Raises BackupPlanError (``field``, ``reason``) on bad input.
    """
    meta = _meta(backup_cr)
    name, ns = meta.get("name") or "", meta.get("namespace") or ""
    if not name or not ns:
        raise BackupPlanError("metadata", "the EtcdBackup needs a name and a namespace")
    spec = (backup_cr or {}).get("spec") or {}
    ref = (spec.get("karmadaDeploymentRef") or {}).get("name") or ""
    if not ref:
        raise BackupPlanError("spec.karmadaDeploymentRef.name", "must name a KarmadaDeployment")
    kmeta = _meta(karmada_cr)
    if not karmada_cr or kmeta.get("name") != ref or (kmeta.get("namespace") or ns) != ns:
        raise BackupPlanError("spec.karmadaDeploymentRef.name",
                              f"KarmadaDeployment {ns}/{ref} not found; create it or fix the reference",
                              "KarmadaDeploymentNotFound")
    if kmeta.get("deletionTimestamp"):
        raise BackupPlanError("spec.karmadaDeploymentRef.name",
                              f"KarmadaDeployment {ns}/{ref} is being deleted", "KarmadaDeploymentDeleting")
    try:
        kplan = karmada_plan.build_plan(dict(karmada_cr))
    except karmada_plan.PlanError as exc:
        raise BackupPlanError(f"KarmadaDeployment {ns}/{ref} {exc.field}", exc.message,
                              "InvalidKarmadaDeployment") from exc

    schedule = spec.get("schedule") or ""
    time_zone = spec.get("timeZone") or ""
    if schedule:
        try:
            parse_schedule(schedule)
        except ValueError as exc:
            raise BackupPlanError("spec.schedule", str(exc), "InvalidSchedule") from exc
    if time_zone:
        try:
            zone(time_zone)
        except ValueError as exc:
            raise BackupPlanError("spec.timeZone", str(exc), "InvalidTimeZone") from exc

    retention = spec.get("retention") or {}
    max_backups = retention.get("maxBackups", DEFAULT_MAX_BACKUPS)
    if isinstance(max_backups, bool) or not isinstance(max_backups, int) or max_backups < 1:
        raise BackupPlanError("spec.retention.maxBackups", f"must be an integer >= 1, not {max_backups!r}")

    when = (scheduled_time or now or datetime.now(UTC)).astimezone(UTC)
    prefix = snapshot_prefix(name)
    kstatus = (karmada_cr or {}).get("status") or {}
    plan = {
        "format": PLAN_FORMAT,
        "backup": {"namespace": ns, "name": name, "uid": meta.get("uid") or "",
                   "generation": meta.get("generation")},
        "source": {"namespace": ns, "name": ref, "uid": kmeta.get("uid") or "",
                   # the version running, else the one asked for
                   "karmadaVersion": kstatus.get("karmadaVersion") or kplan["karmadaVersion"]},
        "etcd": _etcd_plan(kplan),
        "storage": storage_plan(spec.get("storage") or {}),
        "snapshot": {"name": store_lib.snapshot_name(prefix, when), "prefix": prefix,
                     "scheduledTime": rfc3339(when)},
        "retention": {"maxBackups": max_backups},
        "schedule": {"cron": schedule, "timeZone": time_zone, "suspend": bool(spec.get("suspend", False))},
        "lock": lease_name(kplan),
        "jobName": job_name(name, when, seconds=scheduled_time is None),
        "jobResources": copy.deepcopy(spec.get("jobResources") or DEFAULT_JOB_RESOURCES),
    }
    if spec.get("continuous") is not None:
        if schedule:
            raise BackupPlanError("spec.schedule", "spec.continuous takes its own full snapshots: leave "
                                                   "spec.schedule empty")
        plan["continuous"] = continuous_settings(spec["continuous"])
    return plan


def snapshot_prefix(backup_name: str) -> str:
    """Snapshot names are ``<EtcdBackup name>-<UTC time>.db``; retention only touches these."""
    return backup_name


def _etcd_plan(kplan: Mapping[str, Any]) -> dict[str, Any]:
    """Endpoints to dial and the Secret keys holding a client certificate etcd accepts.

    Local etcd: each member's own URL (a snapshot is taken from one chosen member; the
    client Service would balance over them) and, from ``<name>-etcd-pki``, the etcd CA and
    ``etcd/healthcheck-client`` (a client certificate of the etcd CA, like
    ``apiserver-etcd-client``, but living in the etcd Secret: the Job mounts three keys of one
    Secret and never the Karmada PKI with its CA and service-account keys). External etcd:
    its endpoints and ``spec.etcd.external.tlsSecretRef`` (ca.crt, tls.crt, tls.key).
    """
    etcd = kplan["etcd"]
    if etcd["mode"] == "external":
        endpoints = list(etcd["endpoints"])
        secret = etcd["tlsSecret"]
        items = {"ca.crt": "ca.crt", "tls.crt": "tls.crt", "tls.key": "tls.key"}
    else:
        endpoints = list(etcd["memberEndpoints"])
        secret = kplan["names"]["etcdPkiSecret"]
        items = {"ca.crt": "ca.crt", "healthcheck-client.crt": "tls.crt", "healthcheck-client.key": "tls.key"}
    return {
        "mode": etcd["mode"],
        "endpoints": endpoints,
        "tls": {
            "secretName": secret,
            # Secret key -> file name under mountPath (a Secret volume's ``items``)
            "items": [{"key": k, "path": v} for k, v in items.items()],
            "mountPath": ETCD_TLS_DIR,
            "ca": f"{ETCD_TLS_DIR}/ca.crt",
            "cert": f"{ETCD_TLS_DIR}/tls.crt",
            "key": f"{ETCD_TLS_DIR}/tls.key",
        },
    }


def storage_plan(storage: Mapping[str, Any]) -> dict[str, Any]:
    """The store of ``spec.storage`` for a Job: the spec, and the PVC or the Secrets to mount."""
    pvc, s3 = storage.get("pvc"), storage.get("s3")
    if bool(pvc) == bool(s3):
        raise BackupPlanError("spec.storage", "exactly one of storage.pvc or storage.s3 must be set")
    if pvc:
        if not pvc.get("claimName"):
            raise BackupPlanError("spec.storage.pvc.claimName", "must be set")
        try:
            sub_path = store_lib.check_sub_path(pvc.get("subPath") or "")
        except store_lib.InvalidStoreConfig as exc:
            raise BackupPlanError("spec.storage.pvc.subPath", str(exc), "InvalidStoreConfig") from exc
        return {"type": "pvc", "spec": {"pvc": {"claimName": pvc["claimName"], "subPath": sub_path}},
                "claimName": pvc["claimName"], "mountPath": VOLUME_MOUNT}
    creds = (s3.get("credentialsSecretRef") or {}).get("name") or ""
    if not creds:
        raise BackupPlanError("spec.storage.s3.credentialsSecretRef.name", "must name the credentials Secret")
    for key in ("endpoint", "bucket"):
        if not s3.get(key):
            raise BackupPlanError(f"spec.storage.s3.{key}", "must be set")
    out: dict[str, Any] = {
        "type": "s3",
        "spec": {"s3": {k: s3[k] for k in ("endpoint", "bucket", "prefix", "region", "forcePathStyle") if k in s3}},
        "credentials": {"secretName": creds, "items": [{"key": "accessKeyID", "path": "accessKeyID"},
                                                       {"key": "secretAccessKey", "path": "secretAccessKey"}],
                        "mountPath": S3_CREDENTIALS_DIR},
    }
    ca_ref = s3.get("caSecretRef") or {}
    if ca_ref.get("name"):
        out["caBundle"] = {"secretName": ca_ref["name"],
                           "items": [{"key": ca_ref.get("key") or "ca.crt", "path": "ca.crt"}],
                           "mountPath": S3_CA_DIR, "file": f"{S3_CA_DIR}/ca.crt"}
    return out


def job_name(backup_name: str, when: datetime, seconds: bool = False) -> str:
    """``<backup>-<UTC minute>``: one Job per tick (a second create of the same tick fails
    with AlreadyExists instead of running twice); ``seconds`` for on-demand runs, whose retries
    may come within one minute; shortened with a hash to stay <= 63."""
    stamp = when.astimezone(UTC).strftime("%Y%m%d%H%M%S" if seconds else "%Y%m%d%H%M")
    name = f"{backup_name}-{stamp}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(backup_name.encode()).hexdigest()[:8]
    return f"{backup_name[: 63 - len(stamp) - len(digest) - 2].rstrip('-.')}-{digest}-{stamp}"


def suffixed_name(base: str, suffix: str) -> str:
    """``<base>-<suffix>``, shortened with a hash of ``base`` to stay a valid object name (<= 63)."""
    name = f"{base}-{suffix}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    return f"{base[:63 - len(suffix) - 10].rstrip('-.')}-{digest}-{suffix}"


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str | None) -> datetime | None:
    if not text:
        return None
    value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone")
    return value.astimezone(UTC)


