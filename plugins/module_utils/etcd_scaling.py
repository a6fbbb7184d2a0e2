"""etcd scale out and in, one member at a time: the next step towards the wanted member count.

Plain Python, no Ansible API. Not wired into the role yet (see "Scaling" in docs/etcd.md for the
plan): :func:`next_step` is the decision, :func:`apply_step` carries a step out on etcd with
``etcd_membership``; the StatefulSet side (its replicas, the bootstrap values its pods read) is
the caller's.

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:  # as Ansible ships it to a module
    from ansible.module_utils import etcd_gateway as gw
    from ansible.module_utils.etcd_cluster_health import quorum
    from ansible.module_utils.etcd_membership import ensure_member_absent, ensure_member_present
except ImportError:  # as plain Python (tests)
    import etcd_gateway as gw  # type: ignore[no-redef]
    from etcd_cluster_health import quorum  # type: ignore[no-redef]
    from etcd_membership import ensure_member_absent, ensure_member_present  # type: ignore[no-redef]

SIZES = (1, 3, 5, 7)


@dataclass(frozen=True)
class ScaleStep:
    """``action``: done, wait, refuse, add (a learner), promote, remove. ``replicas``: what the
    StatefulSet should have once the step is done; ``bootstrap``: for ``add``, what the joiner's
    pod must start with (ETCD_INITIAL_CLUSTER_STATE, ETCD_INITIAL_CLUSTER)."""

    action: str
    reason: str
    member: str = ""
    peer_url: str = ""
    replicas: int = 0
    bootstrap: dict[str, str] = field(default_factory=dict)


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
              peer_url: Callable[[str], str]) -> ScaleStep:
    """The next step from ``replicas`` pods (the StatefulSet's now) and etcd's ``health``
    (``etcd_cluster_health.cluster_health``) towards ``desired`` members."""
    if desired not in SIZES:
        return ScaleStep("refuse", f"{desired} members: etcd runs with 1, 3, 5 or 7")
    reports = list(health.get("members") or [])
    if not health.get("has_quorum"):
        return ScaleStep("wait", "etcd has no quorum")
    # an added member that has not started has no name yet: it is the joiner of the last step
    named = {str(r.get("name") or ""): r for r in reports}
    joiner_name = f"{statefulset}-{replicas - 1}" if replicas else ""
    unstarted = [r for r in reports if not r.get("name")]
    learners = [n for n, r in named.items() if n and r.get("learner")]
    if unstarted or learners:
        who = learners[0] if learners else joiner_name
        if len(unstarted) + len(learners) > 1 or (learners and learners[0] != joiner_name):
            return ScaleStep("wait", f"more than one joiner, or a learner that is not the newest pod: "
                                     f"{', '.join(learners) or 'unstarted members'}; remove the stray ones")
        report = named.get(who) or (unstarted[0] if unstarted else {})
        if not report.get("name") or not report.get("reachable"):
            return ScaleStep("wait", f"{who} is starting", member=who, replicas=replicas)
        return ScaleStep("promote", f"{who} joined as a learner; promote it once it has caught up",
                         member=who, peer_url=peer_url(who), replicas=replicas)
    names = sorted((n for n in named if n), key=lambda n: ordinal(statefulset, n))
    expected = [f"{statefulset}-{i}" for i in range(len(names))]
    if names != expected:
        return ScaleStep("wait", f"members {', '.join(names)} are not {statefulset}-0 to -{len(names) - 1}")
    sick = [n for n in names if not named[n].get("healthy")]
    if len(names) < desired:
        if sick:
            return ScaleStep("wait", f"not adding a member while {', '.join(sick)} is unhealthy")
        if replicas != len(names):
            return ScaleStep("wait", f"the StatefulSet has {replicas} pods for {len(names)} members")
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
        return ScaleStep("remove", f"{len(names)} of {desired} members: remove {target}", member=target,
                         peer_url=peer_url(target), replicas=left)
    if replicas != desired:
        return ScaleStep("wait", f"the StatefulSet has {replicas} pods for {desired} members")
    if sick:
        return ScaleStep("wait", f"{', '.join(sick)} unhealthy")
    return ScaleStep("done", f"{desired} members, every one healthy", replicas=desired)


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
