"""etcd membership changes: add a member as a learner, promote it, remove one safely.

Plain Python, no Ansible API; backs the ``etcd_member`` module. Removing a voter is refused
when the voters left could not form a quorum (health from ``etcd_cluster_health``); a
leader hands over leadership first. The transport is ``etcd_gateway``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from karmada_operator.etcd import gateway as gw
from karmada_operator.etcd.health import cluster_health, quorum


class EtcdMemberError(gw.EtcdError):
    """A membership change was refused by our own checks (quorum, name taken...); nothing changed."""


def initial_cluster(members: Iterable[gw.Member], extra: Mapping[str, Sequence[str]] | None = None) -> str:
    """``--initial-cluster`` value for a joining member: started members plus ``extra``."""
    parts = [f"{m.name}={u}" for m in members if m.name for u in m.peer_urls]
    for name, urls in (extra or {}).items():
        parts += [f"{name}={u}" for u in urls]
    return ",".join(parts)


def _wait(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise gw.EtcdTimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def ensure_member_present(
    client: gw.EtcdClient,
    name: str,
    peer_urls: Sequence[str],
    promote: bool = True,
    wait_timeout: float = 120.0,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Make ``name`` a voting member (or a learner when ``promote`` is false).

    Adds it as a learner when missing (its process must then be started with
    ``--initial-cluster-state existing`` and the returned ``initial_cluster``); promotes a
    learner once it has caught up with the leader, waiting at most ``wait_timeout`` seconds.
    """
    if not name:
        raise EtcdMemberError("member name is empty; give the etcd --name of the member")
    if not peer_urls:
        raise EtcdMemberError(f"member {name}: peer_urls is empty; give its --initial-advertise-peer-urls")
    for url in peer_urls:
        gw.validate_endpoint(url)
    wanted = set(peer_urls)
    members = client.member_list()
    mine = [m for m in members if set(m.peer_urls) & wanted]
    same_name = [m for m in members if m.name == name and m not in mine]
    if same_name:
        raise EtcdMemberError(
            f"member name {name!r} is already taken by member {same_name[0].hex_id} with peer URLs "
            f"{', '.join(same_name[0].peer_urls)}; pick another name or remove that member first"
        )
    if len(mine) > 1:
        raise EtcdMemberError(
            f"peer URLs {', '.join(peer_urls)} are split across several members "
            f"({', '.join(m.hex_id for m in mine)}); remove the stale ones first"
        )
    if mine and mine[0].name and mine[0].name != name:
        raise EtcdMemberError(
            f"peer URLs {', '.join(peer_urls)} belong to member {mine[0].name!r} "
            f"({mine[0].hex_id}); remove it first or use its name"
        )
    result: dict[str, Any] = {"changed": False, "added": False, "promoted": False, "name": name}
    member = mine[0] if mine else None
    if member is None:
        result.update(changed=True, added=True)
        if check_mode:
            result.update(
                member_id="", learner=True, initial_cluster=initial_cluster(members, {name: list(peer_urls)})
            )
            return result
        member = _add_learner(client, list(peer_urls), wait_timeout)
        members = client.member_list()
    elif set(member.peer_urls) != wanted:
        raise EtcdMemberError(
            f"member {member.hex_id} has peer URLs {', '.join(member.peer_urls)}, not "
            f"{', '.join(peer_urls)}; updating peer URLs is not supported here: "
            "remove and re-add the member"
        )
    result["initial_cluster"] = initial_cluster(
        [m for m in members if m.id != member.id], {name: list(member.peer_urls)}
    )
    if member.is_learner and promote:
        result["changed"] = True
        if not check_mode:
            promote_when_ready(client, member.id, wait_timeout)
            result["promoted"] = True
    members = client.member_list()
    final = next((m for m in members if m.id == member.id), member)
    result.update(
        member_id=final.hex_id,
        learner=final.is_learner if not check_mode else member.is_learner,
        members=[m.as_dict() for m in members],
    )
    return result


def _add_learner(client: gw.EtcdClient, peer_urls: list[str], wait_timeout: float) -> gw.Member:
    """member/add, retried while etcd refuses it as "unhealthy cluster" (peers connected < 5s)."""
    try:
        return _retry_unavailable(lambda: client.member_add(peer_urls, learner=True), wait_timeout)
    except gw.EtcdAPIError as exc:
        if exc.code != gw.GRPC_ALREADY_EXISTS:
            raise
        # an earlier attempt that timed out was applied after all
        found = [m for m in client.member_list() if set(m.peer_urls) & set(peer_urls)]
        if not found:
            raise
        return found[0]


def promote_when_ready(client: gw.EtcdClient, member_id: int, wait_timeout: float) -> None:
    """Promote a learner, retrying while etcd says it has not caught up (bounded by ``wait_timeout``)."""
    deadline = time.monotonic() + wait_timeout
    last = ""
    while True:
        try:
            client.member_promote(member_id)
            return
        except gw.EtcdAPIError as exc:
            text = exc.etcd_message
            not_ready = (
                "in sync" in text
                or "not started" in text
                or "not ready" in text
                or isinstance(exc, gw.EtcdUnavailableError)
            )
            if not not_ready:
                if "not a learner" in text:
                    return  # promoted by an earlier, interrupted run
                raise
            last = text
        except (gw.EtcdTimeoutError, gw.EtcdUnreachableError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise gw.EtcdTimeoutError(
                f"learner {member_id:x} did not catch up within {wait_timeout}s ({last}); check its etcd "
                "process is running with --initial-cluster-state existing and can reach the peers, then "
                "rerun (or raise wait_timeout for a large database)"
            )
        time.sleep(1.0)


def find_member(
    members: Sequence[gw.Member],
    name: str | None = None,
    member_id: int | str | None = None,
    peer_url: str | None = None,
) -> gw.Member | None:
    for m in members:
        if member_id is not None and m.id == gw.parse_member_id(member_id):
            return m
        if name and m.name == name:
            return m
        if peer_url and peer_url in m.peer_urls:
            return m
    return None


def ensure_member_absent(
    client: gw.EtcdClient,
    name: str | None = None,
    member_id: int | str | None = None,
    peer_url: str | None = None,
    force: bool = False,
    wait_timeout: float = 60.0,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Remove a member, refusing when the voters left could not form a quorum (unless ``force``).

    When the member leads, leadership is handed to a healthy voter first so the cluster does
    not sit through an election timeout. A member given by ``member_id`` that does not exist
    is an error; by name or peer URL it is "already absent" (idempotent).
    """
    if name is None and member_id is None and peer_url is None:
        raise EtcdMemberError("say which member to remove: name, member_id or peer_url")
    members = client.member_list()
    target = find_member(members, name, member_id, peer_url)
    result: dict[str, Any] = {"changed": False, "moved_leader": False, "name": name or ""}
    if target is None:
        if member_id is not None:
            raise gw.EtcdNotFoundError(
                f"member {gw.parse_member_id(member_id):x} is not in the cluster; nothing "
                f"was removed. Current members: {', '.join(m.hex_id for m in members)}"
            )
        result.update(member_id="", members=[m.as_dict() for m in members])
        return result
    result.update(member_id=target.hex_id, name=target.name or name or "")
    health = cluster_health(client)
    by_id = {r["id"]: r for r in health["members"]}
    if not target.is_learner:
        voters = [m for m in members if not m.is_learner]
        remaining = [m for m in voters if m.id != target.id]
        healthy_left = [m for m in remaining if by_id.get(m.hex_id, {}).get("healthy")]
        if not remaining:
            raise EtcdMemberError(
                f"member {target.hex_id} is the last voting member; removing it would "
                "destroy the cluster. Delete the cluster instead"
            )
        if len(healthy_left) < quorum(len(remaining)) and not force:
            raise EtcdMemberError(
                f"removing {target.name or target.hex_id} would leave {len(remaining)} voting members of "
                f"which only {len(healthy_left)} are healthy, below the quorum of {quorum(len(remaining))}: "
                "the cluster would stop accepting writes. Bring the unhealthy members back (or replace them) "
                "first, or set force=true if you accept the outage"
            )
        if by_id.get(target.hex_id, {}).get("leader") and not check_mode:
            successor = next((m for m in healthy_left if not m.is_learner), None)
            if successor is not None:
                move_leadership(client, target, successor, wait_timeout)
                result["moved_leader"] = True
    result["changed"] = True
    if check_mode:
        result["members"] = [m.as_dict() for m in members if m.id != target.id]
        return result
    # Never send the removal through the member being removed: it shuts down right after.
    others = [u for m in members if m.id != target.id for u in m.client_urls]
    remover = client.with_endpoints([u for u in client.endpoints if u not in target.client_urls] or others)
    members = _retry_unavailable(lambda: remover.member_remove(target.id), wait_timeout)
    result["members"] = [m.as_dict() for m in members]
    return result


def move_leadership(client: gw.EtcdClient, leader: gw.Member, successor: gw.Member, wait_timeout: float) -> None:
    """Hand leadership from ``leader`` to ``successor`` (a healthy voter) and wait until the
    successor reports itself leader, at most ``wait_timeout`` seconds."""
    endpoint = leader.client_urls[0]
    _retry_unavailable(lambda: client.move_leader(successor.id, endpoint), wait_timeout)

    def moved() -> bool:
        try:
            return client.status(successor.client_urls[0]).leader == successor.id
        except gw.EtcdError:
            return False

    _wait(f"leadership to move to {successor.name or successor.hex_id}", moved, wait_timeout)


def _retry_unavailable(call: Callable[[], Any], timeout: float) -> Any:
    """Retry an etcd call that failed because the cluster was briefly unavailable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except (gw.EtcdUnavailableError, gw.EtcdUnreachableError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
