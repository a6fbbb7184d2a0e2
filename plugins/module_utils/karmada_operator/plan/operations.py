"""Day-2 operations behind one interface: a version change (``upgrade``), a CA rotation
(``caRotation``), leaf renewal's trigger (``leafRenewal``), etcd scaling and member replacement
(``etcdScaling``), etcd's space quota (``etcdSpace``), etcd's automatic defragmentation
(``etcdDefragmentation``) and encryption at
rest (``encryption``: the rewrite of the encrypted resources after a change of key or settings,
and the phases of a key rotation); the next ones join them here.

An operation is a state machine recorded in its own status field (its name). Each one says:

- ``admit(cr, plan, now)``: the record this pass works on ({} when there is nothing to do), or
  PassRefused with the reason status shows (an unsupported version change, a CA rotation the
  operator cannot do). The pass plan (pass_plan.plan_pass) admits every operation once per pass.
- ``report(record, transition, *facts)``: the status a transition writes, as the status writer
  takes it: ``{"fields": {name: record}, "conditions": [...], "event": {...} or {}}``.

The transitions: an upgrade ``stopped`` (a step failed: where, why) or ``finished`` (the plane
converged on the new version); a CA rotation ``doing`` (this pass does its phase) or
``advanced`` (the phase is done on the control plane; the next one when every member is Ready).
Each operation's logic stays in its module (plan/upgrade.py, pki/ca_rotation.py); this is the
one place the pass and the status step reach it through.

An operation that runs as a step of its own (etcd/defragmentation.py is the model) also says:

- ``after``: the control-plane step it follows; ``steps(plan, records)``: the steps it adds to
  this pass ([] to sit this one out), each run by the one generic step file
  (roles/karmada_deployment/tasks/operation.yml through the ``karmada_operation`` task);
- ``run(ctx)``: does this pass's share (a :class:`Context`: the plan, the custom resource, the
  API clients, the step's timeout, an Event poster) and returns its report for the status step
  (``{"fields", "conditions", "changed"}``, merged into the Running status);
- ``under_way(cr)``: why the fast path must not end a reconcile ("" when nothing is left), so
  the status write that ends one pass starts the next;
- optionally ``wake_at(cr)``: ``(when, why)`` a full pass is needed at a time of its own (a
  certificate's renewal window, a schedule's next tick), or None: the fast path takes the full
  pass from then on, and the runtime is asked to come back then.

A new operation of that kind is one module with its class and logic, its entry in
:data:`OPERATIONS` below, and its spec and status fields in the schema: no task file, filter or
plugin of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from karmada_operator.controlplane.encryption_rewrite import EncryptionRewrite
from karmada_operator.etcd.defragmentation import Defragmentation
from karmada_operator.etcd.scaling import EtcdScaling
from karmada_operator.etcd.space import EtcdSpace
from karmada_operator.kube.client import Kube
from karmada_operator.pki import ca_rotation
from karmada_operator.pki.renewal import LeafRenewal
from karmada_operator.plan import upgrade as karmada_upgrade


class PassRefused(Exception):
    """This pass cannot start: ``reason`` for status, ``field`` the spec path when one is at fault."""

    def __init__(self, message: str, reason: str, field: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field


def _report(name: str, record: Mapping[str, Any], condition: Mapping[str, Any],
            event: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"fields": {name: dict(record)}, "conditions": [dict(condition)] if condition else [],
            "event": dict(event or {})}


class Upgrade:
    """A change of spec.karmadaVersion (plan/upgrade.py): one minor up at a time, down only as a
    rollback or when allowed, on a healthy plane; status.upgrade and the Upgrading condition."""

    name = "upgrade"

    def admit(self, cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        refusal = karmada_upgrade.refusal(cr, plan["karmadaVersion"])
        if refusal:
            raise PassRefused(refusal["message"], refusal["reason"], "spec.karmadaVersion")
        return karmada_upgrade.started(cr, plan["karmadaVersion"], now)

    def under_way(self, cr: Mapping[str, Any]) -> str:
        return ""  # a version change is a spec change: the fingerprint already takes the full pass

    def report(self, record: Mapping[str, Any], transition: str, *facts: Any, now: datetime) -> dict[str, Any]:
        if transition == "stopped":
            rolled, component, message = facts
            after = karmada_upgrade.stopped(record, rolled, component, message, now)
            return _report(self.name, after, karmada_upgrade.condition(after))
        if transition == "finished":
            (rolled,) = facts
            after = karmada_upgrade.finished(record, rolled, now)
            cond = karmada_upgrade.condition(after)
            return _report(self.name, after, cond, {"reason": "UpgradeSucceeded", "message": cond["message"]})
        raise ValueError(f"upgrade has no transition {transition!r} (stopped, finished)")


class CaRotation:
    """A CA rotation with a trust transition (pki/ca_rotation.py): Trusting, Reissuing, Dropping,
    Done, each phase a full pass; status.caRotation and the CARotated condition."""

    name = "caRotation"

    def admit(self, cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        try:
            return ca_rotation.current(cr, now)
        except ca_rotation.CaRotationError as exc:
            raise PassRefused(str(exc), "InvalidSpec", exc.field) from None

    def under_way(self, cr: Mapping[str, Any]) -> str:
        return ca_rotation.under_way(cr)

    def report(self, record: Mapping[str, Any], transition: str, *facts: Any, now: datetime) -> dict[str, Any]:
        if transition == "doing":
            # ``record``: the phase as the certificates step did it (ca_rotation.in_progress)
            message = (f"{record.get('ca')} CA (serial {record.get('oldSerial') or '?'} -> "
                       f"{record.get('newSerial') or '?'}): {record.get('message', '')}")
            return _report(self.name, record, ca_rotation.condition(record),
                           {"type": "Normal", "reason": f"CARotation{record.get('phase')}", "message": message})
        if transition == "advanced":
            members_ready, members_message = facts
            after = ca_rotation.advance(record, bool(members_ready), str(members_message or ""), now)
            moved = after.get("phase") != record.get("phase")
            return _report(self.name, after, ca_rotation.condition(after),
                           {"type": "Normal" if moved else "Warning", "reason": f"CARotation{after.get('phase')}",
                            "message": str(after.get("message") or "")})
        raise ValueError(f"caRotation has no transition {transition!r} (doing, advanced)")


# The order of the steps added after one anchor: etcd scaled (and lost members replaced) before
# its space and fragmentation are looked at.
OPERATIONS: dict[str, Any] = {op.name: op for op in (Upgrade(), CaRotation(), LeafRenewal(), EtcdScaling(),
                                                     EtcdSpace(), Defragmentation(), EncryptionRewrite())}


def admit_all(cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, dict[str, Any]]:
    """Every operation's record for this pass, CA rotation first (the order only decides which
    refusal a spec with two gets)."""
    order = ("caRotation", "upgrade", *(name for name in OPERATIONS if name not in ("caRotation", "upgrade")))
    return {name: OPERATIONS[name].admit(cr, plan, now) for name in order}


def steps_after(anchor: str, plan: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    """The steps the operations add after the control-plane step ``anchor`` in this pass."""
    return [s for op in OPERATIONS.values() if getattr(op, "after", "") == anchor for s in op.steps(plan, records)]


def under_way(cr: Mapping[str, Any], now: datetime | None = None) -> str:
    """Why a reconcile must take a full pass for an operation ("" when none needs one): one under
    way, or one whose time has come (``wake_at``: a certificate to renew, a scheduled round)."""
    now = now or datetime.now(UTC)
    for op in OPERATIONS.values():
        why = op.under_way(cr)
        if why:
            return why
        wake = op.wake_at(cr) if hasattr(op, "wake_at") else None
        if wake is not None and wake[0] <= now:
            return wake[1]
    return ""


def wake_at(cr: Mapping[str, Any]) -> datetime | None:
    """The soonest time an operation needs a full pass (None: none asks): the runtime is asked to
    come back then when it is before the next periodic reconcile (plan/requeue.py)."""
    times = [w[0] for w in (op.wake_at(cr) for op in OPERATIONS.values() if hasattr(op, "wake_at")) if w]
    return min(times) if times else None


@dataclass
class Context:
    """What an operation's ``run`` works with: the plan, the custom resource as the pass started,
    the API server (``live``, for reads and locks), ``event`` to post an Event about the custom
    resource (``{type, reason, message}``), the step's timeout and poll interval in seconds, and
    how long a pod may sit in a state waiting does not clear (``stuck_after``) before a wait
    gives up."""

    plan: Mapping[str, Any]
    owner: Mapping[str, Any]
    live: Kube
    event: Callable[[Mapping[str, str]], None]
    timeout: float
    poll: float
    stuck_after: float = 60.0
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    # the operator's connection to karmada-apiserver (None before the apiserver step made it)
    karmada: Kube | None = None


def run(name: str, ctx: Context) -> dict[str, Any]:
    """Operation ``name``'s share of this pass (the generic step's task, tasks/karmada_operation.py)."""
    op = OPERATIONS.get(name)
    if op is None or not hasattr(op, "run"):
        raise ValueError(f"no day-2 operation {name!r} runs as a step "
                         f"({', '.join(n for n, o in OPERATIONS.items() if hasattr(o, 'run'))})")
    return op.run(ctx)


def report(record: Mapping[str, Any], name: str, transition: str, *facts: Any,
           now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> dict[str, Any]:
    """The status ``transition`` of operation ``name`` writes (the roles' one day-2 filter)."""
    if not hasattr(OPERATIONS.get(name), "report"):
        raise ValueError(f"no day-2 operation {name!r} ({', '.join(OPERATIONS)})")
    return OPERATIONS[name].report(record, transition, *facts, now=now())
