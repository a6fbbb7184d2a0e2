"""etcd cluster health: per member (reachable, leader known, serves reads, no alarm) and quorum.

Plain Python, no Ansible API; backs the ``etcd_health`` module and the quorum check before
a member is removed (``etcd_membership``). The transport is ``etcd_gateway``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karmada_operator.etcd.gateway import EtcdClient, EtcdError, Member


def quorum(voters: int) -> int:
    return voters // 2 + 1


def cluster_health(client: EtcdClient, extra_endpoints: Sequence[str] = ()) -> dict[str, Any]:
    """Per-member and cluster health, for the ``etcd_health`` module and for our own checks.

    A member is healthy when its status answers, it knows a leader, a serializable read works
    and no alarm is raised for it. The cluster has quorum when a majority of voting members
    (learners do not vote) is healthy.
    """
    members: list[Member] = []
    list_error = ""
    for linearizable in (True, False):
        try:
            members = client.member_list(linearizable=linearizable)
            break
        except EtcdError as exc:
            list_error = str(exc)
    try:
        alarms = client.alarms()
    except EtcdError:
        alarms = []
    reports = []
    seen_urls: set[str] = set()
    for member in members:
        urls = list(member.client_urls)
        seen_urls.update(urls)
        reports.append(_member_health(client, member, urls, alarms))
    for url in list(client.endpoints) + list(extra_endpoints):
        if url not in seen_urls and not members:
            reports.append(_member_health(client, None, [url], alarms))
    voters = [r for r in reports if not r["learner"]]
    healthy_voters = [r for r in voters if r["healthy"]]
    leaders = {r["leader_id"] for r in reports if r["reachable"] and r["leader_id"]}
    has_quorum = bool(voters) and len(healthy_voters) >= quorum(len(voters))
    return {
        "healthy": has_quorum and all(r["healthy"] for r in reports),
        "has_quorum": has_quorum,
        "healthy_count": sum(1 for r in reports if r["healthy"]),
        "member_count": len(reports),
        "voting_count": len(voters),
        "quorum_size": quorum(len(voters)) if voters else 0,
        "leader_id": next(iter(leaders)) if len(leaders) == 1 else "",
        "cluster_id": next((r["cluster_id"] for r in reports if r["cluster_id"]), ""),
        "alarms": alarms,
        "members": reports,
        "errors": [list_error] if list_error and not members else [],
    }


def _member_health(
    client: EtcdClient, member: Member | None, urls: Sequence[str], alarms: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "id": member.hex_id if member else "",
        "name": member.name if member else "",
        "client_urls": list(urls),
        "peer_urls": list(member.peer_urls) if member else [],
        "started": member.started if member else True,
        "reachable": False,
        "healthy": False,
        "leader": False,
        "leader_id": "",
        "learner": member.is_learner if member else False,
        "version": "",
        "db_size": 0,
        "db_size_in_use": 0,
        "raft_index": 0,
        "raft_term": 0,
        "revision": 0,
        "cluster_id": "",
        "alarms": [],
        "error": "",
        "endpoint": "",
    }
    if member is not None:
        report["alarms"] = [a["alarm"] for a in alarms if a["member_id"] == member.hex_id]
    if not urls:
        report["error"] = "member has not started yet (no client URLs); start its etcd process"
        return report
    errors = []
    for url in urls:
        try:
            st = client.status(url)
        except EtcdError as exc:
            errors.append(str(exc))
            continue
        report.update(
            reachable=True,
            endpoint=url,
            leader=st.is_leader,
            leader_id=format(st.leader, "x") if st.leader else "",
            learner=st.is_learner,
            version=st.version,
            db_size=st.db_size,
            db_size_in_use=st.db_size_in_use,
            raft_index=st.raft_index,
            raft_term=st.raft_term,
            revision=st.revision,
            cluster_id=format(st.cluster_id, "x"),
        )
        if not report["id"]:
            report["id"] = format(st.member_id, "x")
        try:
            if not st.is_learner:  # learners refuse even serializable range in some versions
                client.health_read(url)
        except EtcdError as exc:
            errors.append(str(exc))
            break
        if not st.leader:
            errors.append(f"{url}: member has no leader (election in progress or quorum lost)")
        elif [e for e in st.errors if "alarm:NOSPACE" not in e]:  # NOSPACE: below
            errors.extend(e for e in st.errors if "alarm:NOSPACE" not in e)
        elif not [a for a in report["alarms"] if a != "NOSPACE"]:
            # NOSPACE: the member serves reads and has a leader; only writes wait, and the
            # etcd-space step clears it (etcd/space.py). CORRUPT makes a member unhealthy.
            report["healthy"] = True
        break
    report["error"] = "; ".join(errors) if not report["healthy"] else ""
    if report["alarms"] and not report["error"]:
        report["error"] = f"alarms raised: {', '.join(report['alarms'])}"
    return report
