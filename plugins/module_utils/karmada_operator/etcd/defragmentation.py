"""etcd defragmentation, automatic: a day-2 operation (plan/operations.py), one member per pass.

etcd never gives back the pages a deleted or compacted revision freed: its database file only
grows, and a Karmada rewrites Works and bindings all the time. Defragmenting a member rewrites
its file without the free pages; it blocks that member's reads and writes while it runs, so it
is done one member at a time. The rules (docs/etcd.md; the thresholds are OpenShift's
cluster-etcd-operator's defrag controller: 45 % on a database of at least 100 MB):

* a member is **due** when its database is at least ``minDbSize`` and at least
  ``fragmentationPercent`` of it is free pages: ``(dbSize - dbSizeInUse) * 100 >= percent * dbSize``;
* nothing is done while a member is unhealthy or a learner, while etcd has another member count
  than the plan's (a scale under way), while another day-2 operation (an upgrade, a CA
  rotation) has this pass (pass_plan leaves this step out then), or while a backup holds the
  etcd lock (etcd/lease.py; the defragmentation takes the same Lease for the member it works on,
  so a backup never streams from a member being rewritten);
* a **round** is the members due when it starts, each defragmented once, followers first (by
  name), the leader last; one member per pass, never two; ``status.etcdDefragmentation``
  records the round, and while it is ``InProgress`` the fast path is off, so the status write
  that ends the pass starts the one for the next member;
* a member that fails (an error, or not healthy again within the step's timeout) ends the round
  as ``Failed`` with a Warning Event; the next full pass starts a new round if still due;
* with a ``schedule`` (cron, in ``timeZone``), each tick starts a round of **every** member
  whatever its fragmentation (etcd-druid's defragmentation schedule), in the same order and with
  the same holds, whatever ``policy`` says; ticks count from when the operator first saw the
  schedule (status.etcdDefragmentation.schedule), a tick missed while the operator was down runs
  once. The operator comes back at the next tick (:meth:`Defragmentation.wake_at`).

The decision (:func:`decide`) is pure; :class:`Defragmentation` runs it against etcd.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from karmada_operator.etcd import lease as etcd_lease
from karmada_operator.etcd.client_secret import etcd_client
from karmada_operator.etcd.gateway import EtcdClient, EtcdError
from karmada_operator.etcd.health import cluster_health
from karmada_operator.etcd.rollout import read_health
from karmada_operator.kube import schedule as cron

NAME = "etcdDefragmentation"  # its status field and operation name
CONDITION = "EtcdDefragmented"
FIELD = "spec.etcd.local.defragmentation"
DEFAULTS = {"policy": "Auto", "fragmentationPercent": 45, "minDbSize": "100Mi", "schedule": "", "timeZone": ""}
POLICIES = ("Auto", "Off")


class PolicyError(ValueError):
    """A defragmentation setting the schema let through but the operator cannot use."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def policy(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """plan.etcd.defragmentation from spec.etcd.local.defragmentation (defaults filled in, the
    size in bytes beside the quantity as written)."""
    from kubernetes.utils.quantity import parse_quantity

    given = {**DEFAULTS, **{k: v for k, v in (spec or {}).items() if v is not None}}
    if given["policy"] not in POLICIES:
        raise PolicyError(f"{FIELD}.policy", f"{given['policy']!r} is not one of {', '.join(POLICIES)}")
    percent = int(given["fragmentationPercent"])
    if not 1 <= percent <= 99:
        raise PolicyError(f"{FIELD}.fragmentationPercent", f"{percent} is not between 1 and 99")
    try:
        size = int(parse_quantity(given["minDbSize"]))
    except ValueError as exc:
        raise PolicyError(f"{FIELD}.minDbSize", f"{given['minDbSize']!r} is not a quantity ({exc})") from None
    schedule, time_zone = str(given["schedule"] or ""), str(given["timeZone"] or "")
    if schedule:
        try:
            cron.parse_schedule(schedule)
        except ValueError as exc:
            raise PolicyError(f"{FIELD}.schedule", str(exc)) from None
    if time_zone:
        try:
            cron.zone(time_zone)
        except ValueError as exc:
            raise PolicyError(f"{FIELD}.timeZone", str(exc)) from None
    return {"policy": given["policy"], "fragmentationPercent": percent, "minDbSize": str(given["minDbSize"]),
            "minDbSizeBytes": max(size, 0), "schedule": schedule, "timeZone": time_zone}


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def fragmentation(member: Mapping[str, Any]) -> int:
    """Percent of the member's database that is free pages (0 for an empty or unread one)."""
    size, used = int(member.get("db_size") or 0), int(member.get("db_size_in_use") or 0)
    return max(0, (size - used) * 100 // size) if size else 0


def is_due(member: Mapping[str, Any], pol: Mapping[str, Any]) -> bool:
    size, used = int(member.get("db_size") or 0), int(member.get("db_size_in_use") or 0)
    return bool(size) and size >= pol["minDbSizeBytes"] and (size - used) * 100 >= pol["fragmentationPercent"] * size


def order(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Member names, followers first (by name, shortest first: etcd-2 before etcd-10), the leader last."""
    return [m["name"] for m in sorted(members, key=lambda m: (bool(m.get("leader")), len(m["name"]), m["name"]))]


# A database size in status moves only when it changed by this much since it was written (or
# its member was just defragmented): etcd's sizes move with every write, and a full pass that
# changes nothing must write nothing (a status write starts another reconcile).
SIZE_STEP_PERCENT, SIZE_STEP_MIN = 10, 8 * 2**20


def _moved(old: Any, new: int) -> bool:
    if not isinstance(old, int):
        return True
    return abs(new - old) >= max(old * SIZE_STEP_PERCENT // 100, SIZE_STEP_MIN)


def sizes(health: Mapping[str, Any], written: Sequence[Mapping[str, Any]] = (),
          fresh: Sequence[str] = ()) -> list[dict[str, Any]]:
    """status.etcd.members' sizes as etcd reported them (the members it could read), each kept as
    ``written`` (status.etcd.members) unless it moved by SIZE_STEP or its member is ``fresh``."""
    before = {m.get("name"): m for m in written}
    out = []
    for m in health.get("members") or []:
        if not (m.get("name") and m.get("reachable")):
            continue
        now = {"dbSize": int(m.get("db_size") or 0), "dbSizeInUse": int(m.get("db_size_in_use") or 0)}
        old = before.get(m["name"]) or {}
        if m["name"] not in fresh and not any(_moved(old.get(k), v) for k, v in now.items()):
            now = {k: old[k] for k in now}
        out.append({"name": m["name"], **now})
    return out


@dataclass
class Decision:
    """``action``: ``defragment`` (``member``), or ``report`` (``record`` says why not)."""

    action: str
    record: dict[str, Any]
    member: str = ""


def _iso(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rule(pol: Mapping[str, Any]) -> str:
    return f"{pol['fragmentationPercent']} % fragmentation on a database of at least {pol['minDbSize']}"


def blockers(health: Mapping[str, Any], replicas: int) -> list[str]:
    """Why no member may be defragmented now (etcd's side; the lock is checked when taking it)."""
    out = []
    members = health.get("members") or []
    if len(members) != replicas:
        out.append(f"etcd has {len(members)} members, the plan {replicas} (a scale under way)")
    out += [f"{m.get('name') or m.get('id')} is a learner" for m in members if m.get("learner")]
    out += [f"{m.get('name') or m.get('id')} is not healthy ({m.get('error') or 'no answer'})"
            for m in members if not m.get("healthy")]
    return out


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def schedule_record(pol: Mapping[str, Any], record: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """status.etcdDefragmentation.schedule for ``pol``'s schedule ({} without one): kept while the
    schedule is the one recorded, started afresh (ticks counted from ``now``) when it changed."""
    if not pol.get("schedule"):
        return {}
    sched = dict(record.get("schedule") or {})
    if (sched.get("cron"), sched.get("timeZone", "")) != (pol["schedule"], pol.get("timeZone", "")) \
            or _time(sched.get("since")) is None:
        sched = {"cron": pol["schedule"], "timeZone": pol.get("timeZone", ""), "since": _iso(now)}
    since = _time(sched.get("lastTick")) or _time(sched["since"])
    nxt = cron.next_run(pol["schedule"], pol.get("timeZone") or None, since) if since else None
    if nxt is not None:
        sched["nextTick"] = _iso(nxt)
    return sched


def tick_due(sched: Mapping[str, Any], now: datetime) -> bool:
    """A tick of the recorded schedule has come and no round was started for it yet."""
    nxt = _time(sched.get("nextTick")) if sched else None
    return nxt is not None and nxt <= now


def decide(pol: Mapping[str, Any], health: Mapping[str, Any], record: Mapping[str, Any], replicas: int,
           now: datetime) -> Decision:
    """What this pass does (module docstring). ``record``: status.etcdDefragmentation as the pass
    started; the Decision's record is the one to write when nothing is defragmented, or the round
    being worked on when a member is."""
    sched = schedule_record(pol, record, now)
    keep = {k: v for k, v in (("lastRound", record.get("lastRound")), ("schedule", sched)) if v}
    members = list(health.get("members") or [])
    round_ = dict(record.get("round") or {}) if record.get("phase") in ("InProgress", "Waiting") else {}
    if not round_ and tick_due(sched, now):
        # a tick: every member, whatever its fragmentation; the tick is used once this round starts
        tick = sched["nextTick"]
        sched = schedule_record(pol, {"schedule": {**sched, "lastTick": tick}}, now)
        keep["schedule"] = sched
        round_ = {"startedAt": _iso(now), "trigger": "Schedule", "members": order(members), "done": []}
    if pol["policy"] == "Off" and round_.get("trigger") != "Schedule":
        nxt = f"; scheduled rounds at {sched['cron']} (next {sched.get('nextTick')})" if sched else ""
        return Decision("report", {**keep, "phase": "Disabled", "message": f"{FIELD}.policy is Off{nxt}"})
    done = {d["name"] for d in round_.get("done") or []}
    if round_.get("trigger") == "Schedule":
        left = [name for name in order(members) if name in (round_.get("members") or []) and name not in done]
        rule = f"the schedule's tick ({sched.get('lastTick') or round_.get('startedAt')})"
    else:
        due = [name for name in order(members) if is_due(next(m for m in members if m["name"] == name), pol)]
        rule = _rule(pol)
        if round_:
            left = [name for name in due if name in (round_.get("members") or []) and name not in done]
        else:
            left = due
            round_ = {"startedAt": _iso(now), "trigger": "Threshold", "members": due, "done": []}
    if not left:
        idle: dict[str, Any] = {**keep, "phase": "Idle", "message": _idle_message(members, pol, sched)}
        if round_.get("done"):
            idle["lastRound"] = {**round_, "finishedAt": _iso(now)}
        return Decision("report", idle)
    why = blockers(health, replicas)
    if why:
        return Decision("report", {**keep, "phase": "Waiting", "round": round_,
                                   "message": f"{', '.join(left)} due ({rule}); waiting: {'; '.join(why)}"})
    return Decision("defragment", {**keep, "phase": "InProgress", "round": round_}, member=left[0])


def _idle_message(members: Sequence[Mapping[str, Any]], pol: Mapping[str, Any],
                  sched: Mapping[str, Any] | None = None) -> str:
    # no figures: they move with every write, and the same pass must write the same status
    nxt = f"; next scheduled round at {sched.get('nextTick')}" if sched and sched.get("nextTick") else ""
    if pol["policy"] == "Off":
        return f"{FIELD}.policy is Off{nxt}"
    return (f"no member at or above {_rule(pol)} (sizes: status.etcd.members){nxt}" if members
            else f"no member read{nxt}")


def after_member(decision: Decision, done: Mapping[str, Any], health: Mapping[str, Any],
                 pol: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The record once ``done`` (name, sizes before and after) is defragmented: InProgress with
    the members of the round still due, else Idle with the round as lastRound."""
    round_ = {**decision.record["round"], "done": [*decision.record["round"].get("done", []), dict(done)]}
    record = {**decision.record, "round": round_}
    nxt = decide(pol, health, record, len(health.get("members") or []), now)
    if nxt.action == "defragment":
        return {**record, "phase": "InProgress",
                "message": f"{done['name']} defragmented; next: {nxt.member} (one member per pass)"}
    return nxt.record


def condition(record: Mapping[str, Any]) -> dict[str, Any]:
    phase = record.get("phase")
    status, reason = {"Idle": ("True", "NotNeeded"), "Disabled": ("True", "Disabled"),
                      "InProgress": ("False", "InProgress"), "Waiting": ("False", "Waiting"),
                      "Failed": ("False", "DefragmentationFailed")}[str(phase)]
    return {"type": CONDITION, "status": status, "reason": reason, "message": str(record.get("message") or "")}


def report(record: Mapping[str, Any], health: Mapping[str, Any], written: Sequence[Mapping[str, Any]] = (),
           fresh: Sequence[str] = ()) -> dict[str, Any]:
    """What the status step merges: the record, the members' sizes (:func:`sizes`), the condition."""
    return {"fields": {NAME: dict(record), "etcd": {"members": sizes(health, written, fresh)}},
            "conditions": [condition(record)], "changed": False}


class Defragmentation:
    """The operation: its step after etcd's, on a local etcd, in a pass no other operation has."""

    name = NAME
    after = "etcd-quorum"

    def admit(self, cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        return dict((cr.get("status") or {}).get(NAME) or {})

    def steps(self, plan: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        if plan["etcd"]["mode"] != "local" or any(records.get(other) for other in ("upgrade", "caRotation")):
            return []
        return [{"name": "etcd-defragmentation", "file": "operation", "operation": NAME,
                 "reason": "EtcdDefragmentationFailed", "condition": CONDITION}]

    def under_way(self, cr: Mapping[str, Any]) -> str:
        record = (cr.get("status") or {}).get(NAME) or {}
        if record.get("phase") != "InProgress":
            return ""
        return f"etcd defragmentation under way ({record.get('message') or 'next member'})"

    def wake_at(self, cr: Mapping[str, Any]) -> tuple[datetime, str] | None:
        """The next tick of the schedule (as the last full pass recorded it), and why."""
        sched = ((cr.get("status") or {}).get(NAME) or {}).get("schedule") or {}
        at = _time(sched.get("nextTick")) if sched.get("nextTick") else None
        return (at, f"a scheduled etcd defragmentation is due since {sched['nextTick']}") if at else None

    def run(self, ctx: Any) -> dict[str, Any]:
        """Defragment at most one member (module docstring); the report for the status step."""
        plan, owner = ctx.plan, ctx.owner
        etcd = plan["etcd"]
        pol = etcd["defragmentation"]
        record = dict((owner.get("status") or {}).get(NAME) or {})
        written = ((owner.get("status") or {}).get("etcd") or {}).get("members") or []
        with etcd_client(ctx.live, etcd, prefix="etcd-defrag-") as client:
            health = cluster_health(client)
            decision = decide(pol, health, record, etcd["replicas"], ctx.now())
            if decision.action != "defragment":
                return report(decision.record, health, written)
            lock = etcd_lease.lease_name(plan)
            holder = f"{plan['namespace']}/{plan['name']}/{NAME}"
            taken = etcd_lease.take(ctx.live, lock, holder, ctx.now(), duration_seconds=int(ctx.timeout) + 60)
            if not taken.acquired:
                waiting = {**decision.record, "phase": "Waiting",
                           "message": f"{decision.member} due; waiting for the etcd lock (Lease {lock['name']}, "
                                      f"held by {taken.holder}: a backup)"}
                return report(waiting, health, written)
            try:
                return self._one(ctx, client, health, decision, pol, written)
            finally:
                etcd_lease.release(ctx.live, lock, holder)

    def _one(self, ctx: Any, client: EtcdClient, health: Mapping[str, Any], decision: Decision,
             pol: Mapping[str, Any], written: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        member = next(m for m in health["members"] if m["name"] == decision.member)
        role = "the leader" if member.get("leader") else "a follower"
        before, before_used = int(member["db_size"]), int(member["db_size_in_use"])
        started = time.monotonic()
        try:
            client.defragment(member["endpoint"], timeout=float(ctx.timeout))
            healthy = _wait_healthy(client, member["name"], float(ctx.timeout), float(ctx.poll))
        except EtcdError as exc:
            healthy, error = {}, str(exc)
        else:
            error = "" if healthy else f"not healthy again within {float(ctx.timeout):.0f} s"
        seconds = round(time.monotonic() - started, 1)
        now = ctx.now()
        if error:
            failed = {**decision.record, "phase": "Failed",
                      "message": f"defragmenting {member['name']} ({role}) failed after {seconds} s: {error}"}
            ctx.event({"type": "Warning", "reason": "EtcdDefragmentationFailed", "message": failed["message"]})
            return report(failed, cluster_health(client), written)
        after_size, after_used = int(healthy["db_size"]), int(healthy["db_size_in_use"])
        ctx.event({"type": "Normal", "reason": "EtcdMemberDefragmented",
                   "message": f"etcd member {member['name']} ({role}) defragmented in {seconds} s: database "
                              f"{mib(before)} -> {mib(after_size)} ({fragmentation(member)} % -> "
                              f"{fragmentation(healthy)} % free pages; {mib(after_used)} in use)"})
        done = {"name": member["name"], "leader": bool(member.get("leader")), "at": _iso(now), "seconds": seconds,
                "dbSizeBefore": before, "dbSizeInUseBefore": before_used, "dbSizeAfter": after_size}
        fresh = cluster_health(client)
        out = report(after_member(decision, done, fresh, pol, now), fresh, written, [member["name"]])
        out["changed"] = True
        return out


def _wait_healthy(client: EtcdClient, name: str, timeout: float, poll: float) -> dict[str, Any]:
    """The member's health entry once it answers healthy again ({} if not within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        entry = next((m for m in read_health(client)["members"] if m["name"] == name), {})
        if entry.get("healthy"):
            return entry
        if time.monotonic() >= deadline:
            return {}
        time.sleep(max(poll, 0.2))


__all__ = ["CONDITION", "NAME", "Decision", "Defragmentation", "PolicyError", "after_member", "blockers",
           "condition", "decide", "fragmentation", "is_due", "order", "policy", "report", "sizes"]
