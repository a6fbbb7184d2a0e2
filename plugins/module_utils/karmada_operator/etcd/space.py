"""etcd's space: its quota, a warning before the quota is reached, and recovery from NOSPACE
(a day-2 operation, plan/operations.py; docs/etcd.md#space).

etcd refuses every write once a member's database file reaches ``--quota-backend-bytes`` and
raises the cluster-wide ``NOSPACE`` alarm, which stays until someone disarms it: karmada-apiserver
then answers every create, update and delete with "etcdserver: mvcc: database space exceeded".
etcd's own runbook (https://etcd.io/docs/v3.6/op-guide/maintenance/#space-quota) is: compact
the history, defragment every member, disarm the alarm. This operation does exactly that, in the
pass, right after the etcd step:

* ``spec.etcd.local.quotaBackendBytes`` is the flag; by default half the member's claim, at most
  4Gi (half the default 8Gi claim: a defragmentation writes a new file of the data in use beside
  the old one), and etcd's own 2Gi on an emptyDir or a host path; a quota set above half the
  claim is refused;
* ``EtcdSpaceLow`` is True when a member's database is at or above LOW_PERCENT of the quota
  (the automatic defragmentation, etcd/defragmentation.py, usually keeps it well below), and
  while the data in use itself is above it (then only a larger quota helps);
* on ``NOSPACE``: compact to the current revision, defragment every member one at a time
  (followers first, the leader last), disarm the alarm, check etcd is healthy; Events say what
  was done (``EtcdSpaceExhausted``, then ``EtcdSpaceRecovered`` or ``EtcdSpaceRecoveryFailed``).

Its step follows the etcd step (before the defragmentation's). A member under NOSPACE still
counts as healthy for etcd's gates (etcd/health.py: it serves reads and has a leader), so the
etcd step's quorum gate and a rollout (a raised quota rolls the members) do not wait on it.

The fast path (runtime/converged_task.py) asks etcd for its alarms and sizes on every reconcile
(:func:`probe`): an alarm, or a database newly over LOW_PERCENT, starts a full pass; while one is
over it, the operator comes back every LOW_RECHECK_SECONDS instead of the reconcile period.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from karmada_operator.etcd import defragmentation
from karmada_operator.etcd.client_secret import etcd_client
from karmada_operator.etcd.gateway import EtcdClient, EtcdError
from karmada_operator.etcd.health import cluster_health

NAME = "etcdSpace"  # its status field and operation name
CONDITION = "EtcdSpaceLow"
FIELD = "spec.etcd.local.quotaBackendBytes"
DEFAULT_QUOTA = "4Gi"  # at most, on a claim (half of it); etcd's own default elsewhere
ETCD_DEFAULT_QUOTA = "2Gi"
MIN_QUOTA, MAX_QUOTA = 16 * 2**20, 8 * 2**30  # etcd suggests at most 8 GiB
LOW_PERCENT = 80
LOW_RECHECK_SECONDS = 30
NOSPACE = "NOSPACE"


class QuotaError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(f"{FIELD}: {message}")
        self.field = FIELD
        self.message = message


def settings(local: Mapping[str, Any], storage: Mapping[str, Any]) -> dict[str, Any]:
    """plan.etcd.space from spec.etcd.local: the quota as written (or its default, module
    docstring) and in bytes. A quota set above half a claim's size is refused: a defragmentation
    needs room for a second copy of the data."""
    from kubernetes.utils.quantity import parse_quantity

    claim = storage.get("type") == "PersistentVolumeClaim"
    size = int(parse_quantity(str(storage.get("size") or "8Gi"))) if claim else 0
    given = local.get("quotaBackendBytes")
    if given in (None, ""):
        if not claim:
            return {"quota": ETCD_DEFAULT_QUOTA, "quotaBytes": 2 * 2**30, "lowPercent": LOW_PERCENT}
        half = min(size // 2, int(parse_quantity(DEFAULT_QUOTA)))
        quota = DEFAULT_QUOTA if half == int(parse_quantity(DEFAULT_QUOTA)) else f"{half // 2**20}Mi"
        return {"quota": quota, "quotaBytes": half // 2**20 * 2**20 or half, "lowPercent": LOW_PERCENT}
    quota = str(given)
    try:
        quota_bytes = int(parse_quantity(quota))
    except ValueError as exc:
        raise QuotaError(f"{quota!r} is not a quantity ({exc})") from None
    if not MIN_QUOTA <= quota_bytes <= MAX_QUOTA:
        raise QuotaError(f"{quota} is not between 16Mi and 8Gi")
    if claim and quota_bytes * 2 > size:
        raise QuotaError(f"{quota} is more than half of spec.etcd.local.storage.size ({storage.get('size')}): "
                         "a defragmentation writes a copy of the data beside the database file")
    return {"quota": quota, "quotaBytes": quota_bytes, "lowPercent": LOW_PERCENT}


def percent(size: int, quota: int) -> int:
    return size * 100 // quota if quota else 0


def _bucket(value: int) -> int:
    """A percentage rounded down to 5: what status says, so it does not move with every write."""
    return value - value % 5


def probe(client: EtcdClient, endpoints: Sequence[str]) -> dict[str, Any]:
    """What the fast path needs from etcd: the alarms and each reachable member's database size."""
    sizes = {}
    for url in endpoints:
        try:
            st = client.status(url)
        except EtcdError:
            continue
        sizes[url] = (st.db_size, st.db_size_in_use)
    alarms = client.alarms() if sizes else []
    return {"alarms": sorted({a["alarm"] for a in alarms}), "sizes": sizes}


def fast_path_verdict(space: Mapping[str, Any], found: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """Why the fast path must not end this run ("" when it may): a NOSPACE alarm, or a database
    over the low mark that status does not report yet."""
    if NOSPACE in found.get("alarms", []):
        return "etcd raised the NOSPACE alarm (karmada-apiserver refuses writes)"
    top = max((percent(s, space["quotaBytes"]) for s, _ in found.get("sizes", {}).values()), default=0)
    reported = next((c for c in status.get("conditions") or [] if c.get("type") == CONDITION), {})
    if top >= space["lowPercent"] and reported.get("status") != "True":
        return f"an etcd database is at {top} % of its quota ({space['quota']})"
    return ""


def low(space: Mapping[str, Any], found: Mapping[str, Any]) -> bool:
    return any(percent(s, space["quotaBytes"]) >= space["lowPercent"] for s, _ in found.get("sizes", {}).values())


def assess(space: Mapping[str, Any], health: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """The record (and so the condition) from a health report without a NOSPACE alarm."""
    quota = space["quotaBytes"]
    members = [m for m in health.get("members") or [] if m.get("reachable")]
    top = max(members, key=lambda m: int(m.get("db_size") or 0), default=None)
    out: dict[str, Any] = {k: record[k] for k in ("lastRecovery",) if record.get(k)}
    out["quota"] = space["quota"]
    if top is None:
        return {**out, "phase": "Unknown", "message": "no etcd member answered"}
    used, in_use = int(top.get("db_size") or 0), int(top.get("db_size_in_use") or 0)
    out["percentUsed"] = _bucket(percent(used, quota))
    if percent(in_use, quota) >= space["lowPercent"]:
        return {**out, "phase": "QuotaExceeded",
                "message": f"{top['name']} holds {_bucket(percent(in_use, quota))} % of the {space['quota']} quota in "
                           f"live data: defragmenting cannot help; raise {FIELD}"}
    if percent(used, quota) >= space["lowPercent"]:
        return {**out, "phase": "Low",
                "message": f"{top['name']}'s database is at {out['percentUsed']} % of the {space['quota']} quota "
                           f"({_bucket(percent(in_use, quota))} % in use): a defragmentation frees the rest "
                           f"(automatic at spec.etcd.local.defragmentation's threshold), or raise {FIELD}"}
    return {**out, "phase": "Ok",
            "message": f"every database below {space['lowPercent']} % of the {space['quota']} quota"}


def condition(record: Mapping[str, Any]) -> dict[str, Any]:
    status, reason = {"Ok": ("False", "SpaceOK"), "Low": ("True", "SpaceLow"),
                      "QuotaExceeded": ("True", "QuotaExceeded"), "Unknown": ("Unknown", "NotRead"),
                      "RecoveryFailed": ("True", "RecoveryFailed")}[str(record.get("phase"))]
    return {"type": CONDITION, "status": status, "reason": reason, "message": str(record.get("message") or "")}


def report(record: Mapping[str, Any], changed: bool = False) -> dict[str, Any]:
    return {"fields": {NAME: dict(record)}, "conditions": [condition(record)], "changed": changed}


def _iso(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _answering(client: EtcdClient, endpoint: str, timeout: float, poll: float) -> Any:
    """The member's status once it answers again after its defragmentation (it keeps the alarm
    until the disarm, so "healthy" is not what to wait for)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.status(endpoint)
        except EtcdError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(max(poll, 0.2))


def recover(client: EtcdClient, health: Mapping[str, Any], timeout: float, poll: float) -> dict[str, Any]:
    """etcd's NOSPACE runbook: compact to the current revision, defragment every member (followers
    first, the leader last), disarm every NOSPACE alarm. What was done; EtcdError when a step fails."""
    started = time.monotonic()
    members = [m for m in health.get("members") or [] if m.get("reachable")]
    revision = max(int(m.get("revision") or 0) for m in members)
    try:
        client.call("kv/compaction", {"revision": str(revision), "physical": True}, timeout=timeout)
    except EtcdError as exc:
        if "compacted" not in str(exc):  # already compacted to it: nothing to do
            raise
    done = []
    by_name = {m["name"]: m for m in members}
    for m in (by_name[name] for name in defragmentation.order(members)):  # followers first, the leader last
        client.defragment(m["endpoint"], timeout=timeout)
        after = _answering(client, m["endpoint"], timeout, poll)
        done.append({"name": m["name"], "leader": bool(m.get("leader")), "dbSizeBefore": int(m["db_size"]),
                     "dbSizeAfter": int(after.db_size)})
    for alarm in client.alarms():
        if alarm["alarm"] == NOSPACE:
            client.alarm_disarm(alarm["member_id"], NOSPACE)
    return {"compactedRevision": revision, "members": done, "seconds": round(time.monotonic() - started, 1)}


class EtcdSpace:
    """The operation: its step right after etcd's (before the defragmentation's), on a local etcd,
    in every full pass (also during an upgrade or a CA rotation: with NOSPACE nothing else can
    proceed)."""

    name = NAME
    after = "etcd-quorum"

    def admit(self, cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        return dict((cr.get("status") or {}).get(NAME) or {})

    def steps(self, plan: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        if plan["etcd"]["mode"] != "local":
            return []
        return [{"name": "etcd-space", "file": "operation", "operation": NAME,
                 "reason": "EtcdSpaceRecoveryFailed", "condition": CONDITION}]

    def under_way(self, cr: Mapping[str, Any]) -> str:
        return ""

    def run(self, ctx: Any) -> dict[str, Any]:
        plan, owner = ctx.plan, ctx.owner
        etcd = plan["etcd"]
        space = etcd["space"]
        record = dict((owner.get("status") or {}).get(NAME) or {})
        with etcd_client(ctx.live, etcd, prefix="etcd-space-") as client:
            health = cluster_health(client)
            if NOSPACE not in {a["alarm"] for a in health.get("alarms") or []}:
                return report(assess(space, health, record))
            return self._recover(ctx, client, health, space, record)

    def _recover(self, ctx: Any, client: EtcdClient, health: Mapping[str, Any], space: Mapping[str, Any],
                 record: Mapping[str, Any]) -> dict[str, Any]:
        # the alarm makes every member "unhealthy" in the health report: the quorum here is of
        # voters that answer, as compaction and defragmentation need
        voters = [m for m in health.get("members") or [] if not m.get("learner")]
        if sum(1 for m in voters if m.get("reachable")) * 2 <= len(voters):
            failed = {**record, "quota": space["quota"], "phase": "RecoveryFailed",
                      "message": "NOSPACE alarm, and etcd has no quorum: nothing can be compacted"}
            return report(failed)
        sizes = ", ".join(f"{m['name']} {_mib(int(m.get('db_size') or 0))}" for m in health["members"]
                          if m.get("reachable"))
        ctx.event({"type": "Warning", "reason": "EtcdSpaceExhausted",
                   "message": f"etcd raised NOSPACE (quota {space['quota']}; {sizes}): karmada-apiserver refuses "
                              "writes; compacting, defragmenting every member and disarming the alarm"})
        try:
            done = recover(client, health, float(ctx.timeout), float(ctx.poll))
        except EtcdError as exc:
            failed = {**record, "quota": space["quota"], "phase": "RecoveryFailed",
                      "message": f"recovering from NOSPACE failed: {exc}"}
            ctx.event({"type": "Warning", "reason": "EtcdSpaceRecoveryFailed", "message": failed["message"]})
            return report(failed, changed=True)
        now = ctx.now()
        moved = ", ".join(f"{m['name']}{' (the leader)' if m['leader'] else ''} {_mib(m['dbSizeBefore'])} -> "
                          f"{_mib(m['dbSizeAfter'])}" for m in done["members"])
        ctx.event({"type": "Normal", "reason": "EtcdSpaceRecovered",
                   "message": f"NOSPACE cleared in {done['seconds']} s: compacted to revision "
                              f"{done['compactedRevision']}, defragmented {moved}, alarm disarmed; writes accepted"})
        after = assess(space, cluster_health(client), {**record, "lastRecovery": {**done, "at": _iso(now)}})
        return report(after, changed=True)


__all__ = ["CONDITION", "DEFAULT_QUOTA", "LOW_PERCENT", "NAME", "EtcdSpace", "QuotaError", "assess", "condition",
           "fast_path_verdict", "low", "percent", "probe", "recover", "settings"]
