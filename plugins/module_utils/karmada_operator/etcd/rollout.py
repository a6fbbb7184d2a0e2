"""Roll the local etcd one member at a time, the leader last, each member gated on etcd's health.

The etcd StatefulSet uses ``updateStrategy: OnDelete``: Kubernetes makes a pod of the new
template (``status.updateRevision``) only when the old pod is deleted, and this module decides
which pod goes and when. Plain Python, no Ansible API; backs the ``etcd_rollout`` module.

One pass (:func:`roll`) repeats: read the StatefulSet, its pods and etcd's own view of the
members (``etcd_cluster_health``), then :func:`decide`:

* the **gate**: the StatefulSet controller has seen the current spec; every member's pod exists,
  is not terminating and is Ready; etcd has quorum, lists exactly those members, every one of
  them healthy, none a learner, each within ``max_lag`` raft entries of the leader. Until the
  gate holds nothing is deleted; the pass waits;
* then, while a pod runs an older revision: the outdated **followers first, highest ordinal
  first**, the **leader last**. Before the leader's pod is deleted, leadership moves to an
  updated healthy voter (``etcd_membership.move_leadership``), so the cluster does not sit
  through an election timeout. A pod is deleted only when the voters left without it still
  form a quorum (a single member cannot: its restart is a short outage by nature);
* after each deletion the gate is waited for again: the pod back on the new revision, Ready,
  and etcd healthy with every member, before the next member;
* one exception to the gate: a single member that is down on an older revision while the others
  are up and keep a quorum without it is replaced at once. That is how a rollout stopped by a
  broken template (an image that does not exist) goes on once the spec is fixed.

A gate that does not hold within ``timeout`` seconds, or pods stuck for ``stuck_after`` seconds
in a state waiting does not clear (image pull failure, crash loop, unschedulable), stops the
pass with :class:`EtcdRolloutStopped`, which names the member and the cause. The members rolled
so far keep the new revision; the others keep the old one and etcd keeps its quorum.

On a first install every pod is created at the current revision: the pass only waits for the
gate and deletes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from karmada_operator.etcd import gateway as gw
from karmada_operator.etcd.health import cluster_health, quorum
from karmada_operator.etcd.membership import move_leadership
from karmada_operator.kube.client import KubeError
from karmada_operator.kube.observed import image_tag, pod_problems

# The label the StatefulSet controller puts on each pod: the revision of the template it runs.
REVISION_LABEL = "controller-revision-hash"
# A member counts as caught up when its raft index is this close to the leader's.
DEFAULT_MAX_LAG = 1000


@dataclass(frozen=True)
class MemberPod:
    """What the rollout needs of one etcd pod."""

    name: str
    ordinal: int
    uid: str
    revision: str
    ready: bool
    terminating: bool
    ip: str = ""
    image: str = ""


@dataclass(frozen=True)
class Decision:
    """What to do next: ``done``, ``wait`` (``reason`` says for what) or ``delete`` ``pod``
    (``leader``: it leads now; ``successor``: the member to hand leadership to first)."""

    action: str
    reason: str
    pod: str = ""
    uid: str = ""
    leader: bool = False
    successor: str = ""


@dataclass
class MemberRolled:
    """One member replaced by a pod of the new revision and passed the gate again."""

    name: str
    was_leader: bool
    revision: str
    started: str
    finished: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RollResult:
    """A pass that ended with every member on ``revision`` and etcd healthy."""

    revision: str
    members: list[MemberRolled] = field(default_factory=list)
    version: str = ""
    started: str = ""
    finished: str = ""
    seconds: float = 0.0
    pods: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.members)

    def step(self) -> dict[str, Any]:
        """The pass as a rollout step (the shape ``karmada_rollout`` reports, for status.upgrade)."""
        return {"name": "etcd", "changed": self.changed, "version": self.version, "started": self.started,
                "finished": self.finished, "seconds": self.seconds, "pods": list(self.pods)}


class EtcdRolloutStopped(Exception):
    """The pass stopped: ``member`` is the pod it was waiting for (empty before the first
    deletion), ``reason`` RolloutTimeout or PodsNotReady, ``done`` the members rolled before."""

    def __init__(self, member: str, reason: str, message: str, done: list[MemberRolled]):
        super().__init__(message)
        self.member, self.reason, self.done = member, reason, done


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ordinal(statefulset: str, name: str) -> int:
    tail = name[len(statefulset) + 1:] if name.startswith(statefulset + "-") else ""
    return int(tail) if tail.isdigit() else -1


def member_pods(statefulset: str, pods: Sequence[Mapping[str, Any]], container: str = "etcd") -> dict[str, MemberPod]:
    """The StatefulSet's pods by name (pods of other owners are left out)."""
    out: dict[str, MemberPod] = {}
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        name = str(meta.get("name") or "")
        ordinal = _ordinal(statefulset, name)
        if ordinal < 0:
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        image = next((str(c.get("image") or "") for c in status.get("containerStatuses") or []
                      if c.get("name") == container), "")
        out[name] = MemberPod(name=name, ordinal=ordinal, uid=str(meta.get("uid") or ""),
                              revision=str((meta.get("labels") or {}).get(REVISION_LABEL) or ""),
                              ready=ready, terminating=bool(meta.get("deletionTimestamp")),
                              ip=str(status.get("podIP") or ""), image=image)
    return out


def _gate(statefulset: Mapping[str, Any] | None, name: str, pods: Mapping[str, MemberPod],
          health: Mapping[str, Any], replicas: int, max_lag: int) -> str:
    """Why the gate does not hold yet ("" when it does)."""
    if not statefulset:
        return f"StatefulSet {name} not found"
    meta, status = statefulset.get("metadata") or {}, statefulset.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return f"StatefulSet {name} has not observed its new spec yet"
    if not status.get("updateRevision"):
        return f"StatefulSet {name} reports no update revision yet"
    expected = [f"{name}-{i}" for i in range(replicas)]
    extra = sorted(p for p, pod in pods.items() if pod.ordinal >= replicas)
    if extra:
        return f"pods beyond {replicas} members still exist: {', '.join(extra)}"
    for pod_name in expected:
        pod = pods.get(pod_name)
        if pod is None:
            return f"{pod_name} has no pod yet"
        if pod.terminating:
            return f"{pod_name} is terminating"
        if not pod.ready:
            return f"{pod_name} is not Ready"
    members = {str(m.get("name") or m.get("id")): m for m in health.get("members") or []}
    if not health.get("has_quorum"):
        errors = [f"{n}: {m.get('error')}" for n, m in members.items() if m.get("error")]
        errors += list(health.get("errors") or [])
        return "etcd has no quorum" + (f" ({'; '.join(errors)})" if errors else "")
    unknown = sorted(set(members) - set(expected))
    if unknown:
        return f"etcd lists members that have no pod: {', '.join(unknown)}"
    for pod_name in expected:
        member = members.get(pod_name)
        if member is None:
            return f"{pod_name} is not an etcd member (yet)"
        if member.get("learner"):
            return f"{pod_name} is still a learner"
        if not member.get("healthy"):
            return f"etcd member {pod_name} is not healthy: {member.get('error') or 'no answer'}"
    leaders = [n for n, m in members.items() if m.get("leader")]
    if len(leaders) != 1 or not health.get("leader_id"):
        return "the members do not agree on one leader yet"
    top = int(members[leaders[0]].get("raft_index") or 0)
    for pod_name in expected:
        index = int(members[pod_name].get("raft_index") or 0)
        if top - index > max_lag:
            return f"{pod_name} is catching up with the leader (raft index {index} of {top})"
    return ""


def _broken_outdated(statefulset: Mapping[str, Any] | None, name: str, pods: Mapping[str, MemberPod],
                     health: Mapping[str, Any], replicas: int) -> MemberPod | None:
    """The one member that is down (pod not Ready, or etcd calls it unhealthy) on an older
    revision while every other member is up, when the others keep a quorum without it: replacing
    it costs nothing and is how a rollout stopped by a broken template recovers once the spec is
    fixed (the broken pod would otherwise never be Ready, and the gate never hold)."""
    status = (statefulset or {}).get("status") or {}
    meta = (statefulset or {}).get("metadata") or {}
    update = status.get("updateRevision")
    if not update or int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return None
    expected = [pods.get(f"{name}-{i}") for i in range(replicas)]
    if any(p is None or p.terminating for p in expected) or len(pods) != replicas:
        return None
    if replicas == 1:  # etcd cannot even list its member when the only one is down
        alone = expected[0]
        return alone if alone is not None and not alone.ready and alone.revision != update else None
    members = {str(m.get("name")): m for m in health.get("members") or []}
    if sorted(members) != sorted(p.name for p in expected if p is not None):
        return None
    down = [p for p in expected if p is not None and (not p.ready or not members[p.name].get("healthy"))]
    if len(down) != 1 or down[0].revision == update or members[down[0].name].get("leader"):
        return None
    if (len(members) > 1 and not health.get("has_quorum")) or quorum_without(health, down[0].name):
        return None
    return down[0]


def quorum_without(health: Mapping[str, Any], name: str) -> str:
    """Why stopping member ``name`` would cost etcd its quorum ("" when the voters left, healthy,
    still form one). A single member is the exception: it cannot restart without a pause."""
    members = {str(m.get("name")): m for m in health.get("members") or []}
    voters = [n for n, m in members.items() if not m.get("learner")]
    healthy_left = [n for n in voters if n != name and members[n].get("healthy")]
    if len(voters) > 1 and len(healthy_left) < quorum(len(voters)):
        return (f"deleting {name} would leave {len(healthy_left)} healthy voter(s) of {len(voters)}, "
                f"below the quorum of {quorum(len(voters))}")
    return ""


def decide(statefulset: Mapping[str, Any] | None, name: str, pods: Mapping[str, MemberPod],
           health: Mapping[str, Any], replicas: int, max_lag: int = DEFAULT_MAX_LAG) -> Decision:
    """The next step of the rollout (see the module docstring): wait for the gate, delete one
    outdated pod (followers from the highest ordinal, the leader last), or done."""
    why = _gate(statefulset, name, pods, health, replicas, max_lag)
    if why:
        broken = _broken_outdated(statefulset, name, pods, health, replicas)
        if broken is not None:
            return Decision("delete", f"{broken.name} is down on the old revision {broken.revision} ({why})",
                            pod=broken.name, uid=broken.uid)
        return Decision("wait", why)
    update = str(((statefulset or {}).get("status") or {}).get("updateRevision"))
    expected = [pods[f"{name}-{i}"] for i in range(replicas)]
    outdated = [p for p in expected if p.revision != update]
    if not outdated:
        return Decision("done", f"{replicas} member(s) on revision {update}, every one healthy")
    members = {str(m.get("name")): m for m in health.get("members") or []}
    leader = next(n for n, m in members.items() if m.get("leader"))
    voters = [n for n, m in members.items() if not m.get("learner")]
    followers = sorted((p for p in outdated if p.name != leader), key=lambda p: -p.ordinal)
    target = followers[0] if followers else next(p for p in outdated if p.name == leader)
    short = quorum_without(health, target.name)
    if short:
        return Decision("wait", short)
    if target.name != leader:
        return Decision("delete", f"{target.name} runs revision {target.revision}, not {update}",
                        pod=target.name, uid=target.uid)
    updated = sorted((p for p in expected if p.revision == update and p.name in voters), key=lambda p: -p.ordinal)
    return Decision("delete", f"{target.name} (the leader) runs revision {target.revision}, not {update}",
                    pod=target.name, uid=target.uid, leader=True,
                    successor=updated[0].name if updated else "")


class MemberSource(Protocol):
    """Where the rollout reads the StatefulSet and its pods and deletes a pod (the API server)."""

    def statefulset(self) -> dict[str, Any] | None: ...

    def pods(self) -> list[dict[str, Any]]: ...

    def delete(self, name: str, uid: str) -> None: ...


def read_health(client: gw.EtcdClient) -> dict[str, Any]:
    """``cluster_health``, or no quorum with the reason when etcd cannot be asked at all."""
    try:
        return cluster_health(client)
    except gw.EtcdError as exc:
        return {"has_quorum": False, "members": [], "errors": [str(exc)], "leader_id": ""}


def roll(source: MemberSource, etcd_for: Callable[[dict[str, MemberPod]], gw.EtcdClient], *, statefulset: str,
         replicas: int, timeout: float, poll: float = 2.0, stuck_after: float = 60.0,
         max_lag: int = DEFAULT_MAX_LAG, container: str = "etcd", clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep, now: Callable[[], datetime] = lambda: datetime.now(UTC),
         on_member: Callable[[MemberRolled], None] | None = None) -> RollResult:
    """Bring every member to the StatefulSet's update revision, one at a time (see the module
    docstring). ``etcd_for(pods)`` makes a client that reaches the members as the pods are
    now (addresses change when a pod is recreated). Raises EtcdRolloutStopped."""
    started, t0 = now(), clock()
    done: list[MemberRolled] = []
    pending: tuple[Decision, datetime, float, str] | None = None  # deletion, when, clock, revision
    deadline = clock() + timeout
    stuck_since: float | None = None
    while True:
        sts = source.statefulset()
        raw_pods = source.pods()
        pods = member_pods(statefulset, raw_pods, container)
        client = etcd_for(pods)
        health = read_health(client)
        decision = decide(sts, statefulset, pods, health, replicas, max_lag)
        if decision.action != "wait" and pending is not None:
            gone, when, since, revision = pending
            rolled = MemberRolled(gone.pod, gone.leader, revision, _rfc3339(when), _rfc3339(now()),
                                  round(clock() - since, 3))
            done.append(rolled)
            pending = None
            if on_member is not None:
                on_member(rolled)
        if decision.action == "done":
            revision = str(((sts or {}).get("status") or {}).get("updateRevision"))
            return RollResult(revision, done, ",".join(sorted({image_tag(p.image) for p in pods.values() if p.image})),
                              _rfc3339(started), _rfc3339(now()), round(clock() - t0, 3), sorted(pods))
        if decision.action == "delete":
            if decision.successor:
                try:
                    by_name = {m.name: m for m in client.member_list()}
                    move_leadership(client, by_name[decision.pod], by_name[decision.successor], min(timeout, 60.0))
                except (gw.EtcdError, KeyError) as exc:
                    raise EtcdRolloutStopped(decision.pod, "LeaderNotMoved",
                                             f"etcd rollout stopped before {decision.pod}: could not hand leadership "
                                             f"to {decision.successor}: {exc}", done) from exc
            source.delete(decision.pod, decision.uid)
            update = str(((sts or {}).get("status") or {}).get("updateRevision"))
            pending = (decision, now(), clock(), update)
            deadline, stuck_since = clock() + timeout, None
            sleep(poll)
            continue
        problems = pod_problems(raw_pods)
        stuck_since = (stuck_since or clock()) if problems else None
        waiting_for = pending[0].pod if pending else ""
        where = f"etcd rollout stopped at {waiting_for}" if waiting_for else "etcd not ready"
        if problems and clock() - (stuck_since or clock()) >= stuck_after:
            raise EtcdRolloutStopped(waiting_for, "PodsNotReady", f"{where} ({decision.reason}): {'; '.join(problems)}",
                                     done)
        if clock() >= deadline:
            cause = f"; {'; '.join(problems)}" if problems else ""
            message = f"{where}: the gate did not hold within {timeout:.0f} s ({decision.reason}){cause}"
            raise EtcdRolloutStopped(waiting_for, "RolloutTimeout", message, done)
        sleep(poll)


class KubeMembers:
    """:class:`MemberSource` over a ``karmada_kube.Kube`` (the API server itself, not a cache)."""

    def __init__(self, kube: Any, namespace: str, statefulset: str, selector: str):
        self.kube, self.namespace, self.name, self.selector = kube, namespace, statefulset, selector

    def statefulset(self) -> dict[str, Any] | None:
        return self.kube.get("apps/v1", "StatefulSet", self.name, self.namespace)

    def pods(self) -> list[dict[str, Any]]:
        return self.kube.list("v1", "Pod", self.namespace, label_selector=self.selector)

    def delete(self, name: str, uid: str) -> None:
        try:
            self.kube.delete("v1", "Pod", name, self.namespace, uid=uid)
        except KubeError as exc:
            if exc.status != 409:  # 409: that pod was already replaced (its uid moved on)
                raise


def resolve_map(pods: Mapping[str, MemberPod], member_domain: str) -> dict[str, str]:
    """Member DNS name -> pod IP: members advertise in-cluster names, the operator may run outside."""
    return {f"{p.name}.{member_domain}": p.ip for p in pods.values() if p.ip and not p.terminating}
