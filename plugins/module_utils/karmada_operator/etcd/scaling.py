"""etcd scale out and in, one member at a time: the next step towards the wanted member count.

Plain Python, no Ansible API (see "Scale" in docs/etcd.md): :func:`next_step` is the decision,
:func:`apply_step` carries a step out on etcd with ``etcd_membership``, :func:`scale` repeats both
and moves the StatefulSet side (its replicas, the bootstrap values its pods read from a
ConfigMap, the claims of removed members) through a :class:`ScaleSource`; :func:`prepare` gives
the replicas to apply the StatefulSet with (the etcd step's ``etcd_scale`` task, before and after
it applies the StatefulSet). :class:`EtcdScaling` is the day-2 operation (plan/operations.py):
the step after etcd's that scales and replaces members and records ``status.etcdScaling``.

Members are the StatefulSet's pods ``<sts>-0`` .. ``<sts>-<n-1>``: a member's name is its pod's.

* **Out**: a joiner is added as a **learner** (it receives the log but does not vote, so a slow
  joiner never changes the quorum), its pod is started with ``--initial-cluster-state existing``
  and an ``--initial-cluster`` of exactly the members plus itself (:func:`bootstrap`), and it is
  **promoted** once it has caught up; only then is the next one added.
* **In**: the member with the highest ordinal is removed first (leadership handed over first if
  it leads), then its pod goes (the StatefulSet scaled down by one). Refused while any other
  member is unhealthy, or when the voters left would not keep a quorum.

Every step starts from the gate: quorum, and every member healthy except the one the step is
about (a joiner still starting, a learner catching up).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from karmada_operator.etcd import gateway as gw
from karmada_operator.etcd.client_secret import step_client_tls
from karmada_operator.etcd.health import quorum
from karmada_operator.etcd.membership import ensure_member_absent, ensure_member_present
from karmada_operator.etcd.replacement import (
    LAST_REPLACEMENT_ANNOTATION,
    RECORDS_ANNOTATION,
    Volume,
    assess,
    dump_records,
    member_volumes,
    parse_records,
    updated_records,
)
from karmada_operator.etcd.rollout import MemberPod, member_pods, read_health, resolve_map
from karmada_operator.kube.client import KubeError, owner_reference
from karmada_operator.kube.observed import pod_problems
from karmada_operator.task import ModuleFailed

SIZES = (1, 3, 5, 7)


@dataclass(frozen=True)
class ScaleStep:
    """``action``: done, wait, refuse, add (a learner), promote, remove, replicas (only set the
    StatefulSet's replicas), replace (remove a member that lost its data and reset its volume),
    reset (only reset a volume that holds a removed member's data). ``replicas``: what the
    StatefulSet should have once the step is done; ``bootstrap``: for ``add``, what the joiner's
    pod must start with (ETCD_INITIAL_CLUSTER_STATE, ETCD_INITIAL_CLUSTER); ``in_flight``: the
    step finishes one begun before, or repairs (a replacement); ``refusal``: the condition reason
    of a refusal."""

    action: str
    reason: str
    member: str = ""
    peer_url: str = ""
    replicas: int = 0
    bootstrap: dict[str, str] = field(default_factory=dict)
    in_flight: bool = False
    refusal: str = "EtcdScaleRefused"


def ordinal(statefulset: str, name: str) -> int:
    tail = name[len(statefulset) + 1:] if name.startswith(statefulset + "-") else ""
    return int(tail) if tail.isdigit() else -1


def bootstrap(members: Sequence[tuple[str, str]], state: str) -> dict[str, str]:
    """The environment a member's etcd starts with (etcd reads ETCD_<FLAG> for each flag):
    ``members`` as (name, peer URL) in ordinal order; ``state`` new (the first members of a new
    cluster) or existing (a joiner: exactly the members at that moment, itself included).
    A member that already has data ignores both."""
    return {"ETCD_INITIAL_CLUSTER_STATE": state,
            "ETCD_INITIAL_CLUSTER": ",".join(f"{name}={url}" for name, url in members)}


def next_step(statefulset: str, desired: int, replicas: int, health: Mapping[str, Any],
              peer_url: Callable[[str], str], lost: Mapping[str, str] | None = None,
              stale: Mapping[str, str] | None = None) -> ScaleStep:
    """The next step from ``replicas`` pods (the StatefulSet's now) and etcd's ``health``
    (``etcd_cluster_health.cluster_health``) towards ``desired`` members.

    ``lost``: members that lost their data, ``stale``: pods whose volume holds a removed
    member's data (``etcd_replacement.assess``), each with why. A lost member is replaced
    before anything else, one at a time, the lowest ordinal first: removed from etcd, its volume
    reset, added back as a learner under its own name and promoted (the cluster keeps its size).

    ``in_flight`` marks a step that finishes what an earlier step began (a joiner to start or
    promote, a StatefulSet whose replicas do not match the members) or repairs (a replacement):
    a caller that must not start a new change (the pass before the rollout) still carries these
    out."""
    if desired not in SIZES:
        return ScaleStep("refuse", f"{desired} members: etcd runs with 1, 3, 5 or 7")
    reports = list(health.get("members") or [])
    if not health.get("has_quorum"):
        return ScaleStep("wait", "etcd has no quorum")
    lost, stale = dict(lost or {}), dict(stale or {})
    # an added member that has not started has no name yet: it is the joiner of the last step
    named = {str(r.get("name") or ""): r for r in reports if r.get("name")}
    unstarted = [r for r in reports if not r.get("name")]
    learners = [n for n, r in named.items() if r.get("learner")]
    voters = sorted((n for n in named if n not in learners), key=lambda n: ordinal(statefulset, n))
    # the joiner: the next ordinal when scaling out, the member being replaced when one is missing
    taken = {ordinal(statefulset, n) for n in voters}
    joiner_name = f"{statefulset}-{next(i for i in range(len(voters) + 1) if i not in taken)}"
    joiner_at = ordinal(statefulset, joiner_name)
    if unstarted or learners:
        stray = len(unstarted) + len(learners) > 1 or (learners and learners[0] != joiner_name) or any(
            r.get("peer_urls") and peer_url(joiner_name) not in r["peer_urls"] for r in unstarted)
        if stray:
            return ScaleStep("wait", f"more than one joiner, or a learner that is not the newest pod: "
                                     f"{', '.join(learners) or 'unstarted members'}; remove the stray ones",
                             in_flight=True)
        report = named.get(joiner_name) or unstarted[0]
        joining = sorted([*voters, joiner_name], key=lambda n: ordinal(statefulset, n))
        if replicas <= joiner_at:
            # added in etcd, but the pass stopped before the StatefulSet was asked for its pod
            return ScaleStep("add", f"{joiner_name} was added as a learner but has no pod yet",
                             member=joiner_name, peer_url=peer_url(joiner_name), replicas=joiner_at + 1,
                             bootstrap=bootstrap([(n, peer_url(n)) for n in joining], "existing"),
                             in_flight=True)
        if joiner_name in stale and not report.get("reachable"):
            return ScaleStep("reset", f"{joiner_name} was added as a learner but cannot start: {stale[joiner_name]}",
                             member=joiner_name, replicas=replicas, in_flight=True)
        if not report.get("name") or not report.get("reachable"):
            return ScaleStep("wait", f"{joiner_name} is starting", member=joiner_name, replicas=replicas,
                             in_flight=True)
        return ScaleStep("promote", f"{joiner_name} joined as a learner; promote it once it has caught up",
                         member=joiner_name, peer_url=peer_url(joiner_name), replicas=replicas, in_flight=True)
    names = voters
    expected = [f"{statefulset}-{i}" for i in range(len(names))]
    if names != expected:
        if joiner_at < len(names) and sorted(taken | {joiner_at}) == list(range(len(names) + 1)):
            # one member missing between the others: removed to be replaced (or by hand); it
            # comes back empty under its own name, a learner first
            if replicas != len(names) + 1:
                return ScaleStep("wait", f"{joiner_name} is not an etcd member and the StatefulSet has {replicas} "
                                         f"pods for {len(names) + 1} members")
            if joiner_name in stale:
                return ScaleStep("reset", f"{joiner_name} is to rejoin empty: {stale[joiner_name]}",
                                 member=joiner_name, replicas=replicas, in_flight=True)
            joining = sorted([*names, joiner_name], key=lambda n: ordinal(statefulset, n))
            return ScaleStep("add", f"{joiner_name} is not an etcd member (removed to be replaced): add it back "
                                    "as a learner", member=joiner_name, peer_url=peer_url(joiner_name),
                             replicas=replicas, bootstrap=bootstrap([(n, peer_url(n)) for n in joining], "existing"),
                             in_flight=True)
        return ScaleStep("wait", f"members {', '.join(names)} are not {statefulset}-0 to -{len(names) - 1}")
    if replicas != len(names):
        # more pods than members: a removed member's pod (the pass stopped before the StatefulSet
        # was scaled down); fewer: someone scaled the StatefulSet. The members decide.
        return ScaleStep("replicas", f"the StatefulSet has {replicas} pods for {len(names)} members",
                         replicas=len(names), in_flight=True)
    sick = [n for n in names if not named[n].get("healthy")]
    gone = sorted((n for n in lost if n in named and n in sick), key=lambda n: ordinal(statefulset, n))
    if gone:
        target, left = gone[0], len(names) - 1
        healthy_left = [n for n in names if n != target and named[n].get("healthy")]
        if not left or len(healthy_left) < quorum(left):
            return ScaleStep("refuse", f"not replacing {target} ({lost[target]}): removing it would leave "
                                       f"{len(healthy_left)} of {left} members healthy, below the quorum of "
                                       f"{quorum(left) if left else 1}; bring the others back first "
                                       "(a single member cannot be replaced: restore it from a backup)",
                             member=target, refusal="EtcdReplaceRefused")
        return ScaleStep("replace", f"{target} lost its data: {lost[target]}", member=target,
                         peer_url=peer_url(target), replicas=replicas, in_flight=True)
    if len(names) < desired:
        if sick:
            return ScaleStep("wait", f"not adding a member while {', '.join(sick)} is unhealthy")
        new = f"{statefulset}-{len(names)}"
        return ScaleStep("add", f"{len(names)} of {desired} members: add {new} as a learner", member=new,
                         peer_url=peer_url(new), replicas=len(names) + 1,
                         bootstrap=bootstrap([(n, peer_url(n)) for n in [*names, new]], "existing"))
    if len(names) > desired:
        target = names[-1]
        others_sick = [n for n in sick if n != target]
        left = len(names) - 1
        if others_sick:
            # the members left must all be healthy: stricter than their quorum, which a second
            # failure during the removal could then take away
            healthy_left = left - len(others_sick)
            return ScaleStep("refuse", f"not removing {target} while {', '.join(others_sick)} is unhealthy "
                                       f"({healthy_left} of {left} members left healthy, quorum {quorum(left)}): "
                                       "bring it back (or replace it) first")
        return ScaleStep("remove", f"{len(names)} members, {desired} wanted: remove {target}", member=target,
                         peer_url=peer_url(target), replicas=left)
    # nothing to scale; the members' health is the rollout's and the quorum gate's to wait for
    return ScaleStep("done", f"{desired} members, every one healthy" if not sick
                     else f"{desired} members ({', '.join(sick)} unhealthy)", replicas=desired)


def apply_step(client: gw.EtcdClient, step: ScaleStep, wait_timeout: float = 120.0) -> dict[str, Any]:
    """Carry ``step`` out on etcd: add the learner, promote it, or remove the member (a leader
    hands over first). The StatefulSet follows: scaled up after an add, down after a remove."""
    if step.action == "add":
        return ensure_member_present(client, step.member, [step.peer_url], promote=False, wait_timeout=wait_timeout)
    if step.action == "promote":
        return ensure_member_present(client, step.member, [step.peer_url], promote=True, wait_timeout=wait_timeout)
    if step.action == "remove":
        return ensure_member_absent(client, name=step.member, wait_timeout=wait_timeout)
    return {"changed": False}


def storage_refusal(step: ScaleStep, storage_type: str) -> str:
    """Why ``step`` is refused for the storage type ("" when it is not): a HostPath member's
    directory stays on its node when the member is removed, and a later member at that ordinal
    would start from the removed member's data, which etcd refuses (the operator cannot clear a
    node's directory); for the same reason a lost HostPath member is not replaced."""
    if storage_type == "HostPath" and step.action in ("replace", "reset"):
        return (f"{step.reason}: the operator cannot reset a HostPath member's directory on its node; replace "
                "it by hand (docs/etcd.md, \"Replace a member by hand\")")
    if storage_type == "HostPath" and step.action in ("add", "remove") and not step.in_flight:
        return (f"{step.reason}: scaling is not supported with storage.type HostPath (a removed member's "
                "directory stays on its node and would be reused by a later member); use PersistentVolumeClaim")
    return ""


class ScaleSource(Protocol):
    """The StatefulSet side of scaling (the API server itself, not a cache)."""

    def statefulset(self) -> dict[str, Any] | None: ...

    def pods(self) -> list[dict[str, Any]]: ...

    def set_replicas(self, replicas: int) -> None: ...

    def write_bootstrap(self, data: Mapping[str, str], only_if_missing: bool = False) -> bool: ...

    def claims(self, terminating: bool = False) -> list[str]: ...

    def claim_volumes(self) -> dict[str, Volume]:
        """The members' claims by name (terminating ones too) with their UIDs."""
        ...

    def delete_claim(self, name: str) -> None: ...

    def delete_pod(self, name: str, uid: str) -> None: ...

    def last_log(self, pod: str) -> str:
        """The log of the etcd container's last exit in ``pod`` ("" when there is none)."""
        ...

    def records(self) -> dict[str, dict[str, str]]:
        """The member records (``etcd_replacement``) and, under "", the last replacement."""
        ...

    def write_records(self, records: Mapping[str, Mapping[str, str]], last: str = "") -> None: ...


class EtcdScaleStopped(Exception):
    """The pass stopped: ``reason`` EtcdScaleRefused or EtcdReplaceRefused (nothing was changed
    by this step) or EtcdNotReady (a wait that did not end in time); ``done`` the steps carried
    out before."""

    def __init__(self, reason: str, message: str, done: list[dict[str, Any]]):
        super().__init__(message)
        self.reason, self.done = reason, done


@dataclass
class ScaleResult:
    members: list[str]
    replicas: int
    steps: list[dict[str, Any]] = field(default_factory=list)
    deferred: str = ""
    bootstrap_changed: bool = False
    replaced: list[dict[str, Any]] = field(default_factory=list)
    last_replacement: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.steps) or self.bootstrap_changed

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": self.changed}


def claim_name(statefulset: str, ordinal_: int, template: str = "data") -> str:
    """The PersistentVolumeClaim the StatefulSet makes for a member (``<template>-<pod>``)."""
    return f"{template}-{statefulset}-{ordinal_}"


def _utc(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scale(source: ScaleSource, etcd_for: Callable[[dict[str, MemberPod]], gw.EtcdClient], *, statefulset: str,
          desired: int, peer_url: Callable[[str], str], timeout: float, start: bool = True,
          storage_type: str = "PersistentVolumeClaim", delete_claims: bool = True, poll: float = 2.0,
          stuck_after: float = 60.0, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep, wall: Callable[[], float] = time.time,
          on_step: Callable[[ScaleStep], None] | None = None,
          on_replaced: Callable[[str, str], None] | None = None) -> ScaleResult:
    """Move the local etcd to ``desired`` members one step at a time (:func:`next_step`),
    replacing a member that lost its data first (``etcd_replacement``).

    ``start`` false: only finish a step begun before (a joiner, replicas that do not match the
    members) or repair (a replacement) and return at the first step that would begin a change or
    wait for health (the pass before the rollout, which must not be blocked by a scale it cannot
    finish, and whose gate a lost member would hold up). Each step:

    * add: a leftover claim of that ordinal is deleted first (a removed member's data must never
      rejoin), the bootstrap values written, the learner added, the StatefulSet raised by one
      (a member added back after its replacement keeps the StatefulSet as it is);
    * promote: once the learner has caught up (waits within ``timeout``); a replaced member's
      promotion ends its replacement (``on_replaced(member, message)``);
    * remove: the member leaves etcd first (a leader hands over), the bootstrap values are
      rewritten, then the StatefulSet is lowered by one; once its pod is gone, its claim is
      deleted when ``delete_claims`` (deletionPolicy Delete) and kept otherwise;
    * replace: the record says a replacement began (and of which volume), the member leaves etcd
      through a healthy member, then its volume is reset (below); the next steps add it back;
    * reset: the claim and the pod are deleted (the pod only, with EmptyDir), and the step waits
      until the old volume is gone; the StatefulSet makes the pod again with a new, empty claim;
    * replicas: the StatefulSet is set to the member count.

    Every look at etcd updates the records of the healthy members (their member IDs and volume
    UIDs). When nothing is left to do, the bootstrap values become ``existing`` and the members.
    Raises :class:`EtcdScaleStopped`."""
    done: list[dict[str, Any]] = []
    replaced: list[dict[str, Any]] = []
    deadline = clock() + timeout
    stuck_since: float | None = None
    bootstrap_changed = False
    while True:
        sts = source.statefulset()
        if not sts:
            raise EtcdScaleStopped("EtcdNotReady", f"StatefulSet {statefulset} not found", done)
        replicas = int((sts.get("spec") or {}).get("replicas") or 0)
        raw_pods = source.pods()
        pods = member_pods(statefulset, raw_pods)
        by_name = {str((p.get("metadata") or {}).get("name") or ""): p for p in raw_pods}
        health = read_health(etcd_for(pods))
        claims = source.claim_volumes() if storage_type == "PersistentVolumeClaim" else {}
        volumes = member_volumes(statefulset, storage_type, by_name, claims)
        stored = source.records()
        last_replacement = str((stored.pop("", None) or {}).get("message") or "")
        records = updated_records(statefulset, health, volumes, stored)
        if records != stored:
            source.write_records(records)
        lost, stale = assess(statefulset, health, by_name, volumes, records, source.last_log)
        step = next_step(statefulset, desired, replicas, health, peer_url, lost=lost, stale=stale)
        leftover = sorted(p.name for p in pods.values() if p.ordinal >= replicas)
        if step.action == "done" and leftover:
            # the pods of removed members still stop: done once they are gone (and their claims)
            step = ScaleStep("wait", f"the pod of the removed {', '.join(leftover)} is stopping", in_flight=True)
        refusal = step.reason if step.action == "refuse" else storage_refusal(step, storage_type)
        if refusal:
            reason = step.refusal if step.action == "refuse" else (
                "EtcdReplaceRefused" if step.action in ("replace", "reset") else "EtcdScaleRefused")
            what = "etcd member replacement" if reason == "EtcdReplaceRefused" else f"etcd scaling to {desired} members"
            raise EtcdScaleStopped(reason, f"{what} refused: {refusal}", done)
        members = sorted((str(m.get("name")) for m in health.get("members") or [] if m.get("name")),
                         key=lambda n: ordinal(statefulset, n))
        # the claims of members removed before, once their pods are gone
        if delete_claims and storage_type == "PersistentVolumeClaim":
            for claim in source.claims():
                n = ordinal(statefulset, claim[len("data-"):]) if claim.startswith("data-") else -1
                if n >= replicas and n >= len(members) and not any(p.ordinal == n for p in pods.values()):
                    source.delete_claim(claim)
                    done.append({"action": "delete-claim", "member": f"{statefulset}-{n}", "reason": claim})
        if step.action == "done":
            if health.get("has_quorum"):
                bootstrap_changed = source.write_bootstrap(
                    bootstrap([(n, peer_url(n)) for n in members], "existing"))
            return ScaleResult(members, replicas, done, bootstrap_changed=bootstrap_changed, replaced=replaced,
                               last_replacement=last_replacement)
        if step.action == "wait" or (not start and not step.in_flight):
            if not start and not step.in_flight:
                return ScaleResult(members, replicas, done, deferred=step.reason, replaced=replaced,
                                   last_replacement=last_replacement)
            problems = pod_problems(raw_pods)
            stuck_since = (stuck_since or clock()) if problems else None
            if problems and clock() - (stuck_since or clock()) >= stuck_after:
                raise EtcdScaleStopped("EtcdNotReady", f"etcd scaling stopped ({step.reason}): {'; '.join(problems)}",
                                       done)
            if clock() >= deadline:
                raise EtcdScaleStopped("EtcdNotReady", f"etcd scaling stopped: {step.reason} for {timeout:.0f} s",
                                       done)
            sleep(poll)
            continue
        if on_step is not None:
            on_step(step)
        client = etcd_for(pods)
        if step.action == "add":
            old = claim_name(statefulset, ordinal(statefulset, step.member))
            # only before a fresh add, and never under a pod: once the learner is in etcd (a step
            # finished again) a claim at its ordinal is the joiner's own
            has_pod = any(p.ordinal == ordinal(statefulset, step.member) for p in pods.values())
            if (storage_type == "PersistentVolumeClaim" and not step.in_flight and not has_pod
                    and old in source.claims(terminating=True)):
                source.delete_claim(old)  # a removed member's data never rejoins
                while old in source.claims(terminating=True):
                    if clock() >= deadline:
                        raise EtcdScaleStopped("EtcdNotReady", f"the old claim {old} of {step.member} was not "
                                               f"deleted within {timeout:.0f} s", done)
                    sleep(poll)
            source.write_bootstrap(step.bootstrap)
            apply_step(client, step, wait_timeout=max(1.0, deadline - clock()))
            source.set_replicas(step.replicas)
        elif step.action == "promote":
            apply_step(client, step, wait_timeout=max(1.0, deadline - clock()))
            record = records.get(step.member) or {}
            if record.get("id") == "" and record.get("why"):
                began = float(record.get("since") or wall())
                message = (f"etcd member {step.member} replaced: {record['why']}; it was removed from etcd, its "
                           f"volume reset, and it rejoined empty as a learner, promoted at {_utc(wall())} "
                           f"({wall() - began:.0f} s after the replacement began)")
                replaced.append({"member": step.member, "why": record["why"], "finished": _utc(wall())})
                last_replacement = message
                source.write_records(records, last=message)
                if on_replaced is not None:
                    on_replaced(step.member, message)
        elif step.action in ("replace", "reset"):
            volume = volumes.get(step.member)
            record = dict(records.get(step.member) or {})
            if step.action == "replace" or record.get("id") != "":
                record = {"why": step.reason.split(": ", 1)[-1], "since": str(int(wall()))}
            records[step.member] = {**record, "id": "", "volume": volume.uid if volume else ""}
            source.write_records(records)  # a pass that stops here resumes from the record
            if step.action == "replace":
                apply_step(client, ScaleStep("remove", step.reason, member=step.member, peer_url=step.peer_url),
                           wait_timeout=max(1.0, deadline - clock()))
            _reset(source, step.member, volume, storage_type, pods, deadline, clock, sleep, poll, done)
        elif step.action == "remove":
            apply_step(client, step, wait_timeout=max(1.0, deadline - clock()))
            left = [n for n in members if n != step.member]
            source.write_bootstrap(bootstrap([(n, peer_url(n)) for n in left], "existing"))
            source.set_replicas(step.replicas)
        elif step.action == "replicas":
            source.set_replicas(step.replicas)
        done.append({"action": step.action, "member": step.member, "reason": step.reason})
        deadline, stuck_since = clock() + timeout, None
        if step.action in ("add", "remove", "replicas"):
            # the next decision must see this write: a read through a cache (ansible-operator's
            # proxy, when the operator runs outside the cluster) can lag behind it
            while int(((source.statefulset() or {}).get("spec") or {}).get("replicas") or 0) != step.replicas:
                if clock() >= deadline:
                    raise EtcdScaleStopped("EtcdNotReady", f"the StatefulSet does not show {step.replicas} replicas "
                                           f"within {timeout:.0f} s", done)
                sleep(poll)


def _reset(source: ScaleSource, member: str, volume: Volume | None, storage_type: str,
           pods: Mapping[str, MemberPod], deadline: float, clock: Callable[[], float],
           sleep: Callable[[float], None], poll: float, done: list[dict[str, Any]]) -> None:
    """Give ``member`` an empty volume: delete its claim (it goes once no pod uses it) and its pod
    (the pod only, with EmptyDir); wait until the old volume is gone. The StatefulSet makes the
    pod again, with a new claim; a pod made while the old claim was still going is deleted again
    (it would wait for that claim)."""
    claim = f"data-{member}"
    if storage_type == "PersistentVolumeClaim" and volume is not None:
        source.delete_claim(claim)
    pod = pods.get(member)
    if pod is not None and not pod.terminating:
        source.delete_pod(member, pod.uid)

    def old_volume_left() -> bool:
        if volume is None:
            return False
        if storage_type == "PersistentVolumeClaim":
            current = source.claim_volumes().get(claim)
            return current is not None and current.uid == volume.uid
        return any(str((p.get("metadata") or {}).get("uid")) == volume.uid for p in source.pods())

    while old_volume_left():
        if clock() >= deadline:
            raise EtcdScaleStopped("EtcdNotReady", f"the old volume of {member} (uid {volume.uid if volume else ''}) "
                                   "was not deleted in time", done)
        if storage_type == "PersistentVolumeClaim":
            again = member_pods(member.rsplit("-", 1)[0], source.pods()).get(member)
            if again is not None and not again.terminating and (pod is None or again.uid != pod.uid):
                source.delete_pod(member, again.uid)
                pod = again
        sleep(poll)


def prepare(source: ScaleSource, *, statefulset: str, desired: int, peer_url: Callable[[str], str]) -> int:
    """Before the StatefulSet is applied: the replicas to apply it with, and the bootstrap values
    in place. A new StatefulSet starts ``desired`` members as a new cluster; an existing one keeps
    its replicas (only :func:`scale` moves them), and an install made before the bootstrap values
    existed gets ``existing`` and its members (they have data and ignore them)."""
    sts = source.statefulset()
    if not sts:
        members = [f"{statefulset}-{i}" for i in range(desired)]
        source.write_bootstrap(bootstrap([(n, peer_url(n)) for n in members], "new"))
        return desired
    replicas = int((sts.get("spec") or {}).get("replicas") or 0)
    members = [f"{statefulset}-{i}" for i in range(replicas)]
    source.write_bootstrap(bootstrap([(n, peer_url(n)) for n in members], "existing"), only_if_missing=True)
    return replicas


def claim_templates(sts: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """An existing StatefulSet's volumeClaimTemplates as it was created, the fields the operator
    renders (name, labels, access modes, storage class, requests): applied back unchanged, since
    the API server refuses any change to them. Fields the API server defaulted (volumeMode) are
    left out: applying them would take their ownership, a change in every first pass. A new spec
    (a spec.globals label, another storage size) does not reach existing claims; [] when there is
    no StatefulSet yet."""
    out = []
    for template in ((sts or {}).get("spec") or {}).get("volumeClaimTemplates") or []:
        meta, spec = template.get("metadata") or {}, template.get("spec") or {}
        kept = {k: spec[k] for k in ("accessModes", "storageClassName") if spec.get(k)}
        requests = (spec.get("resources") or {}).get("requests")
        if requests:
            kept["resources"] = {"requests": dict(requests)}
        out.append({"metadata": {k: meta[k] for k in ("name", "labels") if meta.get(k)}, "spec": kept})
    return out


class KubeScaleSource:
    """:class:`ScaleSource` over a ``karmada_kube.Kube`` (the API server itself, not a cache)."""

    def __init__(self, kube: Any, namespace: str, statefulset: str, selector: str, configmap: str,
                 labels: Mapping[str, str] | None = None, owner: Mapping[str, Any] | None = None):
        self.kube, self.namespace, self.name, self.selector = kube, namespace, statefulset, selector
        self.configmap, self.labels, self.owner = configmap, dict(labels or {}), owner
        self.wrote = False

    def statefulset(self) -> dict[str, Any] | None:
        return self.kube.get("apps/v1", "StatefulSet", self.name, self.namespace)

    def pods(self) -> list[dict[str, Any]]:
        return self.kube.list("v1", "Pod", self.namespace, label_selector=self.selector)

    def set_replicas(self, replicas: int) -> None:
        self.kube.merge_patch("apps/v1", "StatefulSet", self.name, {"spec": {"replicas": replicas}}, self.namespace)

    def write_bootstrap(self, data: Mapping[str, str], only_if_missing: bool = False) -> bool:
        current = self.kube.get("v1", "ConfigMap", self.configmap, self.namespace)
        if current is not None and (only_if_missing or (current.get("data") or {}) == dict(data)):
            return False
        meta: dict[str, Any] = {"name": self.configmap, "namespace": self.namespace, "labels": self.labels}
        if self.owner:
            meta["ownerReferences"] = [owner_reference(dict(self.owner), block_owner_deletion=True)]
        self.kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)})
        self.wrote = True
        return True

    def claims(self, terminating: bool = False) -> list[str]:
        """The members' claims (``terminating``: those being deleted too)."""
        prefix = f"data-{self.name}-"
        return sorted(c["metadata"]["name"] for c in self.kube.list("v1", "PersistentVolumeClaim", self.namespace,
                                                                     label_selector=self.selector)
                      if c["metadata"]["name"].startswith(prefix)
                      and (terminating or not c["metadata"].get("deletionTimestamp")))

    def claim_volumes(self) -> dict[str, Volume]:
        prefix = f"data-{self.name}-"
        return {c["metadata"]["name"]: Volume(str(c["metadata"].get("uid") or ""),
                                              bool(c["metadata"].get("deletionTimestamp")))
                for c in self.kube.list("v1", "PersistentVolumeClaim", self.namespace, label_selector=self.selector)
                if c["metadata"]["name"].startswith(prefix)}

    def delete_claim(self, name: str) -> None:
        self.kube.delete("v1", "PersistentVolumeClaim", name, self.namespace)

    def delete_pod(self, name: str, uid: str) -> None:
        try:
            self.kube.delete("v1", "Pod", name, self.namespace, uid=uid)
        except KubeError as exc:
            if exc.status != 409:  # another incarnation of the pod: not the one meant
                raise

    def last_log(self, pod: str) -> str:
        try:
            return self.kube.pod_log(pod, self.namespace, container="etcd", tail_lines=200, previous=True)
        except KubeError:
            return ""  # no previous container (yet), or the log is gone with its node

    def records(self) -> dict[str, dict[str, str]]:
        cm = self.kube.get("v1", "ConfigMap", self.configmap, self.namespace) or {}
        notes = (cm.get("metadata") or {}).get("annotations") or {}
        out = parse_records(notes.get(RECORDS_ANNOTATION))
        if notes.get(LAST_REPLACEMENT_ANNOTATION):
            out[""] = {"message": str(notes[LAST_REPLACEMENT_ANNOTATION])}
        return out

    def write_records(self, records: Mapping[str, Mapping[str, str]], last: str = "") -> None:
        notes = {RECORDS_ANNOTATION: dump_records({k: v for k, v in records.items() if k})}
        if last:
            notes[LAST_REPLACEMENT_ANNOTATION] = last
        self.kube.merge_patch("v1", "ConfigMap", self.configmap, {"metadata": {"annotations": notes}}, self.namespace)


NAME = "etcdScaling"  # its status field and operation name
EVENT_REASONS = {"add": "EtcdMemberAdded", "promote": "EtcdMemberPromoted", "remove": "EtcdMemberRemoved",
                 "replicas": "EtcdReplicasCorrected", "replace": "EtcdMemberReplacing",
                 "reset": "EtcdMemberReplacing"}


def record(result: ScaleResult, desired: int, before: int, previous: Mapping[str, Any],
           now: datetime) -> dict[str, Any]:
    """status.etcdScaling after a pass: the member count, the last change (kept from
    ``previous`` when this pass did none, so an idle pass writes the same record) and the last
    replacement."""
    out: dict[str, Any] = {"members": len(result.members), "replicas": desired}
    steps = [s for s in result.steps if s.get("action") != "delete-claim"]
    if steps:
        out["lastChange"] = {"at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "from": before, "to": len(result.members),
                             "steps": [{k: str(s.get(k) or "") for k in ("action", "member", "reason")}
                                       for s in steps]}
    elif previous.get("lastChange"):
        out["lastChange"] = dict(previous["lastChange"])
    last = result.last_replacement or str(previous.get("lastReplacement") or "")
    if last:
        out["lastReplacement"] = last
    return out


class EtcdScaling:
    """The operation: the step after etcd's on a local etcd, every full pass. It moves etcd to
    spec.etcd.local.replicas one member at a time and replaces a member that lost its data
    (:func:`scale`). A refusal or a wait that does not end stops the pass: ModuleFailed with the
    reason status shows (``step_reason``: EtcdScaleRefused, EtcdReplaceRefused, EtcdNotReady), the
    steps done before it and a Warning Event."""

    name = NAME
    after = "etcd"

    def admit(self, cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        return {}  # decided against etcd itself when the step runs; nothing to refuse before

    def steps(self, plan: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        if plan["etcd"]["mode"] != "local":
            return []
        return [{"name": "etcd-scaling", "file": "operation", "operation": NAME, "reason": "EtcdNotReady",
                 "condition": "EtcdReady"}]

    def under_way(self, cr: Mapping[str, Any]) -> str:
        return ""  # a scale is a spec change and ends within its pass; a lost member: the next full pass

    def run(self, ctx: Any) -> dict[str, Any]:
        plan = ctx.plan
        etcd = plan["etcd"]
        source = KubeScaleSource(ctx.live, etcd["namespace"], etcd["statefulset"], etcd["selector"],
                                 etcd["bootstrapConfigMap"], etcd["labels"], ctx.owner)
        before = int(((source.statefulset() or {}).get("spec") or {}).get("replicas") or 0)
        result = scale_step(ctx.live, etcd, source, ctx.event, start=True, timeout=float(ctx.timeout),
                            poll=float(ctx.poll), stuck_after=float(ctx.stuck_after),
                            delete_claims=plan["deletionPolicy"] == "Delete")
        previous = (ctx.owner.get("status") or {}).get(NAME) or {}
        return {"fields": {NAME: record(result, int(etcd["replicas"]), before, previous, ctx.now())},
                "conditions": [], "changed": result.changed}


def scale_step(live: Any, etcd: Mapping[str, Any], source: ScaleSource, event: Callable[[Mapping[str, str]], None],
               *, start: bool, timeout: float, poll: float, stuck_after: float, delete_claims: bool) -> ScaleResult:
    """:func:`scale` for the plan's etcd slice (``start`` False: the etcd step's settling, True:
    the operation's scale), dialling the members at their pod addresses with the client pair of
    the slice's Secret; each step, each replacement and a stop posted through ``event``. A stop
    is ModuleFailed with the reason status shows (``step_reason``) and the steps done before."""
    domain, statefulset, desired = etcd["memberDomain"], etcd["statefulset"], int(etcd["replicas"])

    def peer_url(name: str) -> str:
        return f"https://{name}.{domain}:2380"

    with gw.tls_files(step_client_tls(live, etcd), prefix="etcd-scale-") as files:
        def etcd_for(pods: dict[str, MemberPod]) -> gw.EtcdClient:
            names = sorted(n for n, pod in pods.items() if pod.ip and not pod.terminating) or [f"{statefulset}-0"]
            return gw.EtcdClient([f"https://{n}.{domain}:2379" for n in names], cert=files["cert"], key=files["key"],
                                 ca=files["ca"], timeout=5.0, resolve=resolve_map(pods, domain))

        def tell(step: ScaleStep) -> None:
            what = (f"etcd member {step.member}" if step.action in ("replace", "reset")
                    else f"etcd scaling to {desired} members")
            event({"type": "Normal", "reason": EVENT_REASONS[step.action], "message": f"{what}: {step.reason}"})

        def replaced(member: str, message: str) -> None:
            event({"type": "Normal", "reason": "EtcdMemberReplaced", "message": message})

        try:
            return scale(source, etcd_for, statefulset=statefulset, desired=desired, peer_url=peer_url,
                         timeout=timeout, start=start, storage_type=etcd["storage"]["type"],
                         delete_claims=delete_claims, poll=poll, stuck_after=stuck_after, on_step=tell,
                         on_replaced=replaced)
        except EtcdScaleStopped as exc:
            event({"type": "Warning", "reason": exc.reason, "message": str(exc)})
            raise ModuleFailed(str(exc), reason=exc.reason, step_reason=exc.reason, steps=exc.done,
                               changed=bool(exc.done)) from exc
        except (KubeError, gw.EtcdError) as exc:
            raise ModuleFailed(f"etcd scaling stopped: {exc}", reason="EtcdNotReady") from exc
