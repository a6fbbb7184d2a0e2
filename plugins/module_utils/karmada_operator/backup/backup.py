"""EtcdBackup logic: the plan of one run, the schedule, the lock, the run, and the status after.

Plain Python, no Ansible and no Kubernetes API calls: a thin playbook/module reads the objects
and Secrets, calls these functions, and writes what they return. The pieces:

- :func:`backup_plan` turns an EtcdBackup and its KarmadaDeployment into everything one run
  needs (store spec and the Secrets to mount, etcd endpoints and the TLS Secret keys, the
  snapshot name, source metadata, retention, the lock). It is JSON, handed to the Job.
- :func:`next_run` / :func:`due` evaluate ``spec.schedule`` (5-field cron or an @macro) in
  ``spec.timeZone``; missed ticks run once.
- :func:`lease_name`, :func:`lease_decision`, :func:`lease_spec` are the lock: one Kubernetes
  Lease per etcd, so two backups of one etcd never run at once.
- :func:`run_backup` streams a snapshot from the best member straight into the store (no
  local copy), verifies it (etcd's sha256 trailer, the bbolt revision within the member's
  revisions before and after, the store's sha256), commits it with its metadata and applies
  retention.
- :func:`status_after` is the EtcdBackup status after a run (or after a failure).

See docs/backup-restore.md, "How a backup runs".
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from karmada_operator.backup import store as store_lib
from karmada_operator.etcd.gateway import EtcdClient, EtcdError, Status
from karmada_operator.etcd.snapshots import (
    HASH_SIZE,
    EtcdctlFollow,
    EtcdSnapshotError,
    StreamedSnapshot,
    snapshot_revision,
    stream_snapshot,
)
from karmada_operator.kube import conditions as k8s_conditions
from karmada_operator.plan import plan as karmada_plan

DEFAULT_MAX_BACKUPS = 7  # the CRD's default for spec.retention.maxBackups
DEFAULT_JOB_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}}  # spec.jobResources unset
PLAN_FORMAT = 1

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

LEASE_DURATION_SECONDS = 3600  # how long a run may hold the lock before others may take it
LEASE_PREFIX = "etcd-backup-"

# Karmada's objects a restore is checked against: name -> (apiVersion, kind, etcd key prefix
# under karmada-apiserver's --etcd-prefix /registry; the aggregated apiserver stores Clusters).
KARMADA_RESOURCES: dict[str, tuple[str, str, str]] = {
    "clusters": ("cluster.karmada.io/v1alpha1", "Cluster", "/registry/cluster.karmada.io/clusters/"),
    "propagationpolicies": ("policy.karmada.io/v1alpha1", "PropagationPolicy",
                            "/registry/policy.karmada.io/propagationpolicies/"),
    "clusterpropagationpolicies": ("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy",
                                   "/registry/policy.karmada.io/clusterpropagationpolicies/"),
    "overridepolicies": ("policy.karmada.io/v1alpha1", "OverridePolicy",
                         "/registry/policy.karmada.io/overridepolicies/"),
    "resourcebindings": ("work.karmada.io/v1alpha2", "ResourceBinding", "/registry/work.karmada.io/resourcebindings/"),
    "works": ("work.karmada.io/v1alpha1", "Work", "/registry/work.karmada.io/works/"),
    "namespaces": ("v1", "Namespace", "/registry/namespaces/"),
}

CONDITION_READY = "Ready"
CONDITION_RETENTION = "RetentionApplied"


# --------------------------------------------------------------------------- errors


class BackupPlanError(ValueError):
    """The EtcdBackup (or what it refers to) cannot be acted on. ``field`` names the spec path,
    ``reason`` goes into the Ready condition as is."""

    def __init__(self, field: str, message: str, reason: str = "InvalidSpec") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.reason = reason


class BackupFailed(Exception):
    """A run failed; ``reason`` is a condition reason, the message says what to do next."""

    def __init__(self, message: str, reason: str = "BackupFailed") -> None:
        super().__init__(message)
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
                     "scheduledTime": _rfc3339(when)},
        "retention": {"maxBackups": max_backups},
        "schedule": {"cron": schedule, "timeZone": time_zone, "suspend": bool(spec.get("suspend", False))},
        "lock": lease_name(kplan),
        "jobName": job_name(name, when, seconds=scheduled_time is None),
        "jobResources": copy.deepcopy(spec.get("jobResources") or DEFAULT_JOB_RESOURCES),
    }
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


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str | None) -> datetime | None:
    if not text:
        return None
    value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone")
    return value.astimezone(UTC)


# --------------------------------------------------------------------------- schedule
# A compact cron evaluator for exactly the grammar the CRD admits (5 fields or an @macro;
# *, values, a-b, N/step, lists; month and weekday names). Semantics as Kubernetes CronJob
# (robfig/cron): day-of-month and day-of-week are ORed when both are restricted (a field
# counts as unrestricted only when it is "*", without a step); "N/step" means N-max/step.

MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_FIELDS = (("minute", 0, 59, None), ("hour", 0, 23, None), ("day of month", 1, 31, None),
           ("month", 1, 12, ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]),
           ("day of week", 0, 6, ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]))
TIME_ZONE_PATTERN = r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*"  # the CRD's spec.timeZone, anchored there


@dataclass(frozen=True)
class Schedule:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_star: bool
    weekdays_star: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow


def _value(text: str, low: int, high: int, names: list[str] | None, what: str) -> int:
    if names and text.upper() in names:
        return names.index(text.upper()) + low
    if not re.fullmatch(r"[0-9]{1,2}", text):
        raise ValueError(f"{what} {text!r} is not a number{' or a name' if names else ''}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is outside {low}-{high}")
    return value


def _field(text: str, low: int, high: int, names: list[str] | None, what: str) -> tuple[set[int], bool]:
    values: set[int] = set()
    star = False
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not re.fullmatch(r"[1-9][0-9]?", step_text):
                raise ValueError(f"{what} step {step_text!r} must be 1-99")
            step = int(step_text)
        if base == "*":
            start, end = low, high
            star = star or step == 1
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = _value(a, low, high, names, what), _value(b, low, high, names, what)
            if start > end:
                raise ValueError(f"{what} range {base!r} runs backwards")
        else:
            start = _value(base, low, high, names, what)
            end = high if step_text else start  # N/step: from N to the end
        values.update(range(start, end + 1, step))
    return values, star


def parse_schedule(text: str) -> Schedule:
    """Parse ``spec.schedule``; ValueError naming the bad field otherwise."""
    expr = MACROS.get(text.strip().lower(), text.strip()) if text.strip().startswith("@") else text.strip()
    if expr.startswith("@"):
        raise ValueError(f"unknown schedule macro {text!r}; use one of {', '.join(MACROS)}")
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError(f"schedule {text!r} must have 5 fields (minute hour day-of-month month day-of-week)")
    parsed = [_field(p, low, high, names, what) for p, (what, low, high, names) in zip(parts, _FIELDS, strict=True)]
    return Schedule(tuple(sorted(parsed[0][0])), tuple(sorted(parsed[1][0])), frozenset(parsed[2][0]),
                    frozenset(parsed[3][0]), frozenset(parsed[4][0]), parsed[2][1], parsed[4][1])


def zone(name: str | None) -> ZoneInfo:
    """The IANA zone ``name`` (UTC when empty); ValueError when unknown."""
    if not name:
        return ZoneInfo("UTC")
    if not re.fullmatch(TIME_ZONE_PATTERN, name) or len(name) > 64:
        raise ValueError(f"time zone {name!r} is not an IANA name such as Europe/Berlin or UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"time zone {name!r} is not in the time zone database") from exc


def _exists(naive: datetime, tz: ZoneInfo) -> datetime | None:
    """``naive`` wall time in ``tz`` (first occurrence when it repeats), None in a DST gap."""
    aware = naive.replace(tzinfo=tz, fold=0)
    back = aware.astimezone(UTC).astimezone(tz)
    if back.replace(tzinfo=None) != naive:
        return None  # skipped by a spring-forward change
    return aware


def next_run(schedule: str | Schedule, time_zone: str | None, after: datetime) -> datetime | None:
    """The first tick strictly after ``after`` (aware), in UTC; None if the schedule never fires
    (e.g. ``0 0 30 2 *``).

    Ticks are wall-clock times in ``time_zone``. A wall time that does not exist (the hour
    skipped when clocks go forward) is skipped, as CronJob does; a wall time that occurs
    twice (clocks going back) fires once, at its first occurrence (CronJob would fire twice:
    two backups of the same data).
    """
    if after.tzinfo is None:
        raise ValueError("next_run needs an aware datetime")
    sched = schedule if isinstance(schedule, Schedule) else parse_schedule(schedule)
    tz = zone(time_zone)
    local = after.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    day = local.date()
    # Feb 29 on a given weekday can be 28 years away; plain Feb 29 at most 8.
    last = date(min(day.year + 29, 9999), 12, 31)
    while day <= last:
        if sched.day_matches(day):
            for hour in sched.hours:
                if day == local.date() and hour < local.hour:
                    continue
                for minute in sched.minutes:
                    naive = datetime.combine(day, dtime(hour, minute))
                    if naive < local:
                        continue
                    aware = _exists(naive, tz)
                    if aware is not None and aware > after:
                        return aware.astimezone(UTC)
        day = _next_day(day, sched)
    return None


def _next_day(day: date, sched: Schedule) -> date:
    """The next day worth looking at: skips whole months that the schedule excludes."""
    nxt = day + timedelta(days=1)
    for _ in range(13):
        if nxt.month in sched.months:
            return nxt
        year, month = (nxt.year + 1, 1) if nxt.month == 12 else (nxt.year, nxt.month + 1)
        if year > 9999:
            return date.max
        nxt = date(year, month, 1)
    return nxt


@dataclass(frozen=True)
class Due:
    """What the schedule says at ``now``.

    ``run``: start a backup now, for tick ``scheduled_time`` (the most recent tick <= now);
    ``missed``: ticks before it that were not run (they are not made up: one run covers
    them); ``next_time``: the first tick after now (requeue then). ``too_late``: the most
    recent tick is older than the starting deadline, so it is skipped."""

    run: bool
    scheduled_time: datetime | None
    next_time: datetime | None
    missed: int = 0
    too_late: bool = False


def _last_tick(sched: Schedule, tz_name: str | None, since: datetime, now: datetime) -> tuple[datetime | None, int]:
    """The most recent tick in (since, now] and how many ticks of that interval precede it
    (counted up to 1000). Searches back from now in growing windows, so a schedule that
    ticks every minute after a week of downtime costs 60 steps, not 10,000."""
    for window in (timedelta(hours=1), timedelta(days=1), timedelta(days=32), timedelta(days=367),
                   timedelta(days=366 * 30)):
        start = max(since, now - window)
        tick = next_run(sched, tz_name, start)
        if tick is None or tick > now:
            if start == since:
                return None, 0
            continue
        last = tick
        while True:
            nxt = next_run(sched, tz_name, last)
            if nxt is None or nxt > now:
                break
            last = nxt
        # ticks between `since` and the window start were missed too
        missed, probe = 0, next_run(sched, tz_name, since)
        while probe is not None and probe < last and missed < 1000:
            missed += 1
            probe = next_run(sched, tz_name, probe)
        return last, missed
    return None, 0


def due(schedule: str, time_zone: str | None, last_schedule_time: datetime | None, now: datetime,
        created: datetime | None = None, suspend: bool = False,
        starting_deadline: timedelta | None = None) -> Due:
    """Whether a scheduled EtcdBackup should start a run at ``now``.

    Ticks count from ``last_schedule_time`` (status.lastScheduleTime), or from ``created``
    (metadata.creationTimestamp) before the first run: a new schedule waits for its first
    tick. After downtime, missed ticks run once (the most recent of them), like CronJob. With
    ``starting_deadline``, a tick older than that is not started late (CronJob's
    startingDeadlineSeconds); the next tick is waited for instead. ``suspend``: never run,
    but ``next_time`` still says when it would.
    """
    if now.tzinfo is None:
        raise ValueError("due needs an aware now")
    sched = parse_schedule(schedule)
    since = last_schedule_time or created or now
    tick, missed = _last_tick(sched, time_zone, since, now)
    nxt = next_run(sched, time_zone, now)
    if tick is None:
        return Due(False, None, nxt)
    if suspend:
        return Due(False, tick, nxt, missed)
    if starting_deadline is not None and now - tick > starting_deadline:
        return Due(False, tick, nxt, missed, too_late=True)
    return Due(True, tick, nxt, missed)


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


# --------------------------------------------------------------------------- run


@dataclass(frozen=True)
class BackupResult:
    snapshot: store_lib.SnapshotInfo
    deleted: list[store_lib.SnapshotInfo]
    kept: list[store_lib.SnapshotInfo]  # this backup's snapshots in the store after retention, newest first
    endpoint: str
    duration_seconds: float
    retention_error: str = ""
    retention_reason: str = ""
    member_revisions: tuple[int, int] = (0, 0)  # the member's revision before and after the stream
    # seconds per phase: "snapshot" (etcdctl into the staging file), "store" (checked copy into
    # the store, counts, metadata), "retention"
    phases: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The Job's result line (no secrets)."""
        return {
            "ok": True,
            "snapshot": {**self.snapshot.status_item(), "durationSeconds": self.duration_seconds,
                         "endpoint": self.endpoint},
            "phases": dict(self.phases),
            "deleted": [s.name for s in self.deleted],
            "kept": [s.status_item() for s in self.kept],
            "retentionError": self.retention_error,
            "retentionReason": self.retention_reason,
        }


def choose_member(statuses: Sequence[Status | Exception]) -> Status:
    """The member to take the snapshot from: among those that answered, are voting members
    and report no error (no leader, NOSPACE/CORRUPT alarms), the one with the highest applied
    raft index (the most recent data); on a tie a follower, to spare the leader."""
    good = [s for s in statuses if isinstance(s, Status) and not s.is_learner and not s.errors and s.leader]
    if not good:
        reasons = [str(s) if isinstance(s, Exception) else f"{s.endpoint}: {', '.join(s.errors) or 'learner'}"
                   for s in statuses]
        raise BackupFailed("no healthy etcd member to take a snapshot from: " + "; ".join(reasons),
                           "EtcdUnavailable")
    return max(good, key=lambda s: (s.raft_applied_index, s.member_id != s.leader))


def _statuses(client: EtcdClient) -> list[Status | Exception]:
    out: list[Status | Exception] = []
    for endpoint in client.endpoints:
        try:
            out.append(client.status(endpoint))
        except EtcdError as exc:
            out.append(exc)
    return out


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def count_at(client: EtcdClient, endpoint: str, revision: int) -> tuple[int | None, dict[str, int]]:
    """Live keys and Karmada objects per resource at ``revision`` (count-only ranges: no values
    travel), recorded with the snapshot so a restore can be checked against them. Unknown
    (None, {}) when etcd cannot answer, e.g. the revision was compacted meanwhile."""
    try:
        keys = client.range(b"\0", b"\0", revision=revision, count_only=True, endpoint=endpoint)["count"]
        counts = {}
        for name, (_, _, prefix) in KARMADA_RESOURCES.items():
            raw = prefix.encode()
            counts[name] = client.range(raw, _prefix_end(raw), revision=revision, count_only=True,
                                        endpoint=endpoint)["count"]
        return keys, counts
    except EtcdError:
        return None, {}


def _ours(plan: Mapping[str, Any], snapshots: Sequence[store_lib.SnapshotInfo]) -> list[store_lib.SnapshotInfo]:
    pattern = re.compile(re.escape(plan["snapshot"]["prefix"]) + r"-[0-9]{8}T[0-9]{6}Z\.db")
    return [s for s in snapshots if pattern.fullmatch(s.name)]


def _stream_into(writer: store_lib.SnapshotWriter, client: EtcdClient, member: Status,
                 follow: EtcdctlFollow | None, chunk_timeout: float, whole: bool = False,
                 phases: dict[str, float] | None = None) -> StreamedSnapshot:
    """Put the snapshot into ``writer``: etcdctl's file as it is written (checked on the way), or
    the gateway stream. ``whole`` (with etcdctl): the bytes are checked as they land and the
    finished file goes to the store in one piece (``phases["upload"]``: how long that took)."""
    if follow is None:
        try:
            return stream_snapshot(client, writer.write, member.endpoint, chunk_timeout)
        except EtcdSnapshotError as exc:
            raise BackupFailed(str(exc), "SnapshotCorrupted") from exc
        except EtcdError as exc:
            raise BackupFailed(f"snapshot from {member.endpoint} failed: {exc}", "EtcdUnavailable") from exc
    t0 = time.monotonic()
    # One sha256 over the data, the writer's: etcd's trailer (the last 32 bytes) is held back
    # until the end and checked against the writer's hash of everything before it.
    tail, size = b"", 0
    take = writer.note if whole else writer.write
    try:
        for blob in follow:
            size += len(blob)
            if len(blob) >= HASH_SIZE:
                take(tail)
                take(memoryview(blob)[:-HASH_SIZE])
                tail = bytes(blob[-HASH_SIZE:])
            else:
                buf = tail + blob
                take(buf[:-HASH_SIZE])
                tail = buf[-HASH_SIZE:]
    except EtcdSnapshotError as exc:  # etcdctl failed: what was written is aborted with the writer
        raise BackupFailed(str(exc), "EtcdUnavailable") from exc
    if not (size > HASH_SIZE and size % 512 == HASH_SIZE and writer.sha256_digest() == tail):
        raise BackupFailed(f"snapshot from {member.endpoint} failed its sha256 check (etcd's trailer): the "
                           "file was cut or corrupted; not keeping it", "SnapshotCorrupted")
    take(tail)
    if whole:
        t_up = time.monotonic()
        writer.from_file(follow.path)  # the bytes just checked: the size is compared first
        if phases is not None:
            phases["upload"] = round(time.monotonic() - t_up, 3)
    try:
        revision = snapshot_revision(follow.path)
    except EtcdSnapshotError as exc:
        raise BackupFailed(str(exc), "SnapshotCorrupted") from exc
    return StreamedSnapshot(size, writer.sha256, revision, "", member.endpoint,
                            round(time.monotonic() - t0, 3))


def run_backup(plan: Mapping[str, Any], client: EtcdClient, store: store_lib.SnapshotStore,
               chunk_timeout: float = 60.0, readback: bool = False,
               clock: Callable[[], float] = time.monotonic, etcdctl: str = "",
               staging_dir: str = "") -> BackupResult:
    """Take one backup as ``plan`` says: snapshot -> store -> verify -> commit -> retention.

    ``client`` reaches the plan's etcd endpoints with its TLS; ``store`` is the plan's store.
    The snapshot streams from the chosen member into ``store.writer`` (no local copy). It
    is committed (listed) only when etcd's sha256 trailer matched, the revision read from
    the bbolt pages lies between the member's revision before and after the stream, and the
    store's sha256 equals the one computed on the stream; ``readback`` also reads it back
    from the store (doubles the traffic). Retention then deletes this EtcdBackup's oldest
    snapshots beyond maxBackups (snapshots of other names in the same place are left
    alone); a retention error does not fail the backup, it is returned.
    Raises BackupFailed (reason) or a StoreError (reason) and then nothing new is listed.

    With ``etcdctl`` (a path) the snapshot is taken by ``etcdctl snapshot save`` (gRPC) into
    ``staging_dir`` and its bytes are checked as they land (etcd's trailer, one sha256 pass);
    a volume takes them as they land (the snapshot and the write overlap), S3 takes the finished
    file in one PUT when it fits (``store.whole_file_max``; larger ones go up in parts as they
    land). Without it, through the JSON gateway with no local copy (slower, no binary needed).
    """
    started = clock()
    store.check()  # an unreachable store fails before etcd is asked for anything
    member = choose_member(_statuses(client))
    name = plan["snapshot"]["name"]
    taken_at = datetime.now(UTC)
    follow = None
    phases: dict[str, float] = {}
    mark = clock()
    if etcdctl:
        tls = plan["etcd"]["tls"]
        follow = EtcdctlFollow(etcdctl, member.endpoint, Path(staging_dir or ".") / f".{name}.staging",
                               cacert=tls["ca"], cert=tls["cert"], key=tls["key"])
    try:
        with store.writer(name) as writer:
            # S3: a snapshot that fits one PUT is staged, checked as it lands, then sent whole (a
            # multipart upload ends in a join of every part on the server); a volume takes the
            # bytes as they land
            whole = follow is not None and 0 < member.db_size <= store.whole_file_max
            streamed = _stream_into(writer, client, member, follow, chunk_timeout, whole, phases)
            if follow is not None and follow.seconds is not None:
                phases["snapshot"] = follow.seconds  # overlaps "store" unless staged whole ("upload" after it)
            phases["streamed"] = round(clock() - mark, 3)  # the last byte handed to the store
            after = None
            with contextlib.suppress(EtcdError):  # without it the upper bound is unknown; the trailer still holds
                after = client.status(member.endpoint)
            high = after.revision if after is not None else None
            if streamed.revision < member.revision or (high is not None and streamed.revision > high):
                raise BackupFailed(
                    f"snapshot revision {streamed.revision} read from the database is outside the member's "
                    f"revisions {member.revision}..{high if high is not None else '?'}; not keeping it",
                    "SnapshotCorrupted")
            t_count = clock()
            keys, counts = count_at(client, member.endpoint, streamed.revision)
            phases["count"] = round(clock() - t_count, 3)
            meta = store_lib.SnapshotMeta(
                revision=streamed.revision, etcd_version=member.version,
                karmada_version=str(plan["source"].get("karmadaVersion") or ""),
                source=store_lib.SnapshotSource(plan["source"]["namespace"], plan["source"]["name"],
                                                plan["source"].get("uid") or ""),
                taken_at=taken_at, keys=keys, counts=counts)
            t_commit = clock()
            info = writer.commit(meta)  # S3: completes the multipart upload (the server joins the parts)
            phases["commit"] = round(clock() - t_commit, 3)
    finally:
        if follow is not None:
            follow.path.unlink(missing_ok=True)
    if info.sha256 != streamed.sha256 or info.size != streamed.size:
        store.delete(name)
        raise BackupFailed(f"{store}: the store recorded other bytes ({info.size}, sha256 {info.sha256}) than "
                           f"etcd sent ({streamed.size}, {streamed.sha256}); deleted it", "SnapshotCorrupted")
    if readback:
        try:
            store.verify(name)
        except store_lib.StoreError:
            store.delete(name)
            raise
    phases["store"] = round(clock() - mark, 3)
    mark = clock()
    duration = round(clock() - started, 3)
    deleted: list[store_lib.SnapshotInfo] = []
    retention_error = retention_reason = ""
    kept: list[store_lib.SnapshotInfo] = []
    try:
        ours = _ours(plan, store.list())
        deleted = store_lib.select_for_deletion(ours, int(plan["retention"]["maxBackups"]))
        for snap in deleted:
            store.delete(snap.name)
        gone = {s.name for s in deleted}
        kept = [s for s in reversed(ours) if s.name not in gone]
    except store_lib.StoreError as exc:
        retention_error, retention_reason = str(exc), exc.reason
        kept = [info]
    phases["retention"] = round(clock() - mark, 3)
    return BackupResult(info, deleted, kept, member.endpoint, duration, retention_error, retention_reason,
                        (member.revision, high or 0), phases)


# --------------------------------------------------------------------------- status


def _snapshot_item(item: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("name", "location", "sizeBytes", "sha256", "revision", "etcdVersion", "karmadaVersion", "takenAt",
            "durationSeconds")
    return {k: item[k] for k in keys if k in item and item[k] not in (None, "")}


def status_after(status: Mapping[str, Any] | None, result: Mapping[str, Any] | None, now: datetime, *,
                 generation: int | None = None, schedule: str = "", time_zone: str = "", suspend: bool = False,
                 scheduled_time: datetime | None = None, error: Exception | Mapping[str, Any] | None = None,
                 running: bool = False) -> dict[str, Any]:
    """The EtcdBackup status after a run.

    ``result`` is the Job's result line (:meth:`BackupResult.as_dict`) on success; ``error``
    an exception (BackupPlanError, BackupFailed, StoreError: anything with ``reason``) or the
    Job's failure line ``{"reason", "message"}``; ``running`` while the Job runs. Always sets
    nextScheduleTime from the schedule (None when there is none or it is suspended) and
    lastScheduleTime to ``scheduled_time`` when given.
    """
    out = dict(status or {})
    stamp = _rfc3339(now)
    conds: list[dict[str, Any]] = []
    if scheduled_time is not None:
        out["lastScheduleTime"] = _rfc3339(scheduled_time)
    if running:
        out["phase"] = "Running"
        tick = f" for {_rfc3339(scheduled_time)}" if scheduled_time is not None else ""
        conds.append({"type": CONDITION_READY, "status": "Unknown", "reason": "BackupRunning",
                      "message": f"a backup{tick} is running"})
    elif error is not None:
        reason, message = _reason_message(error)
        out["phase"] = "Failed"
        conds.append({"type": CONDITION_READY, "status": "False", "reason": reason, "message": message})
    elif result is not None:
        snap = _snapshot_item(result.get("snapshot") or {})
        out["phase"] = "Succeeded"
        out["lastSuccessfulTime"] = stamp
        out["lastSuccessfulBackup"] = {**snap, "endpoint": (result.get("snapshot") or {}).get("endpoint", "")}
        if not out["lastSuccessfulBackup"]["endpoint"]:
            del out["lastSuccessfulBackup"]["endpoint"]
        kept = [_snapshot_item(k) for k in result.get("kept") or []]
        for item in kept:  # the one just taken carries its duration
            if item.get("name") == snap.get("name") and "durationSeconds" in snap:
                item["durationSeconds"] = snap["durationSeconds"]
        kept.sort(key=lambda s: (s.get("takenAt", ""), s.get("name", "")), reverse=True)
        out["snapshots"] = kept
        msg = (f"snapshot {snap.get('name')} ({snap.get('sizeBytes')} bytes, revision {snap.get('revision')}) "
               f"stored at {snap.get('location')}")
        if result.get("deleted"):
            msg += f"; retention deleted {', '.join(result['deleted'])}"
        conds.append({"type": CONDITION_READY, "status": "True", "reason": "BackupSucceeded", "message": msg})
        if result.get("retentionError"):
            conds.append({"type": CONDITION_RETENTION, "status": "False",
                          "reason": result.get("retentionReason") or "RetentionFailed",
                          "message": str(result["retentionError"])})
        else:
            conds.append({"type": CONDITION_RETENTION, "status": "True", "reason": "RetentionApplied",
                          "message": f"{len(kept)} snapshot(s) kept"})
    if schedule and not suspend:
        try:
            nxt = next_run(schedule, time_zone or None, now)
        except ValueError:
            nxt = None
        if nxt is not None:
            out["nextScheduleTime"] = _rfc3339(nxt)
        else:
            out.pop("nextScheduleTime", None)
    else:
        out.pop("nextScheduleTime", None)
    if generation is not None:
        out["observedGeneration"] = int(generation)
    if conds:
        out["conditions"] = k8s_conditions.merge(out.get("conditions"), conds, generation, stamp)
    return out


def _reason_message(error: Exception | Mapping[str, Any]) -> tuple[str, str]:
    if isinstance(error, Mapping):
        return str(error.get("reason") or "BackupFailed"), str(error.get("message") or "backup failed")
    reason = getattr(error, "reason", "") or "BackupFailed"
    if isinstance(error, EtcdError) and not isinstance(error, EtcdSnapshotError):
        reason = "EtcdUnavailable"
    return reason, str(error)


__all__ = [
    "BackupFailed", "BackupPlanError", "BackupResult", "Due", "LeaseDecision", "Schedule", "backup_plan",
    "choose_member", "due", "job_name", "lease_decision", "lease_holder", "lease_name", "lease_release",
    "lease_spec", "next_run", "parse_schedule", "run_backup", "status_after", "zone",
]
