"""Plan a restore of an etcd snapshot into a **new** cluster (pure function, no I/O).

For N members: names, peer/client URLs, ``--initial-cluster``, a fresh cluster token (so
the new cluster can never be mistaken for, or join, the old one), data dirs and one
``etcdutl snapshot restore`` argv per member with ``--bump-revision`` and
``--mark-compacted`` (watchers and caches of the old cluster see revisions move forward and
must re-list instead of silently missing events). Plain Python, no Ansible imports.
"""

from __future__ import annotations

import posixpath
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

DEFAULT_BUMP_REVISION = 1_000_000_000  # etcd's restore guide: more than the writes since the backup
MAX_MEMBERS = 9
_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")
_TOKEN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class RestorePlanError(ValueError):
    """Bad input; ``field`` names the option to fix. Nothing was planned."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class PlannedMember:
    name: str
    peer_url: str
    client_url: str
    data_dir: str
    wal_dir: str
    restore_argv: list[str]
    etcd_args: list[str]


@dataclass(frozen=True)
class RestorePlan:
    snapshot: str
    cluster_token: str
    initial_cluster: str
    bump_revision: int
    mark_compacted: bool
    members: list[PlannedMember]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _url(value: Any, field: str) -> str:
    text = str(value or "")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RestorePlanError(field, f"{text!r} is not an http(s)://HOST:PORT URL")
    if parts.port is None:
        raise RestorePlanError(field, f"{text!r} has no port; etcd URLs need one (2380 peer, 2379 client)")
    if parts.path not in ("", "/"):
        raise RestorePlanError(field, f"{text!r} must not have a path")
    return text.rstrip("/")


def _template(template: str, field: str, name: str, index: int) -> str:
    try:
        return template.format(name=name, index=index)
    except (KeyError, IndexError, ValueError) as exc:
        raise RestorePlanError(
            field, f"template {template!r} may only use {{name}} and {{index}}: {exc}"
        ) from exc


def expand_members(
    replicas: int, name_prefix: str, peer_url_template: str, client_url_template: str
) -> list[dict[str, str]]:
    """Members ``<prefix>0..N-1`` with URLs from templates using ``{name}`` and ``{index}``.

    Example: ``https://{name}.karmada-etcd.karmada-system.svc:2380`` for a StatefulSet.
    """
    if not isinstance(replicas, int) or isinstance(replicas, bool) or not 1 <= replicas <= MAX_MEMBERS:
        raise RestorePlanError("replicas", f"must be an integer from 1 to {MAX_MEMBERS}, got {replicas!r}")
    out = []
    for i in range(replicas):
        name = f"{name_prefix}{i}"
        out.append(
            {
                "name": name,
                "peer_url": _template(peer_url_template, "peer_url_template", name, i),
                "client_url": _template(client_url_template, "client_url_template", name, i),
            }
        )
    return out


def plan_restore(
    snapshot: str,
    members: Sequence[Mapping[str, Any]],
    data_dir_root: str,
    cluster_token: str | None = None,
    bump_revision: int = DEFAULT_BUMP_REVISION,
    mark_compacted: bool = True,
    etcdutl: str = "etcdutl",
    wal_dir_root: str | None = None,
    skip_hash_check: bool = False,
) -> RestorePlan:
    """Compute the restore of ``snapshot`` into the new cluster ``members``.

    ``members``: ``[{"name", "peer_url", "client_url", "data_dir"?}]``; a member's data dir
    defaults to ``<data_dir_root>/<name>``. ``cluster_token`` defaults to a fresh random one.
    Raises :class:`RestorePlanError` on bad input.
    """
    if not snapshot or not str(snapshot).strip():
        raise RestorePlanError("snapshot", "path of the snapshot file is empty")
    if not members:
        raise RestorePlanError("members", "at least one member is needed")
    if len(members) > MAX_MEMBERS:
        raise RestorePlanError("members", f"{len(members)} members; etcd supports at most {MAX_MEMBERS}")
    if not data_dir_root and any(not m.get("data_dir") for m in members):
        raise RestorePlanError("data_dir_root", "empty; give a root for the members' data dirs")
    if isinstance(bump_revision, bool) or not isinstance(bump_revision, int) or bump_revision < 0:
        raise RestorePlanError("bump_revision", f"must be a non-negative integer, got {bump_revision!r}")
    if mark_compacted and bump_revision == 0:
        raise RestorePlanError(
            "mark_compacted", "etcdutl allows --mark-compacted only with --bump-revision > 0"
        )
    if bump_revision > 0 and not mark_compacted:
        raise RestorePlanError("mark_compacted", "etcdutl requires --mark-compacted with --bump-revision > 0")
    token = cluster_token or f"etcd-restore-{secrets.token_hex(8)}"
    if not _TOKEN.match(token):
        raise RestorePlanError("cluster_token", f"{token!r} must be 1-128 characters of A-Z a-z 0-9 . _ -")

    normalized = []
    seen: dict[str, set[str]] = {"name": set(), "peer_url": set(), "client_url": set(), "data_dir": set()}
    for i, raw in enumerate(members):
        where = f"members[{i}]"
        name = str(raw.get("name") or "")
        if not _NAME.match(name):
            raise RestorePlanError(f"{where}.name", f"{name!r} must be a lowercase DNS name (a-z 0-9 . -)")
        peer = _url(raw.get("peer_url"), f"{where}.peer_url")
        client = _url(raw.get("client_url"), f"{where}.client_url")
        data_dir = str(raw.get("data_dir") or posixpath.join(data_dir_root, name))
        if not posixpath.isabs(data_dir):
            raise RestorePlanError(f"{where}.data_dir", f"{data_dir!r} must be an absolute path")
        data_dir = posixpath.normpath(data_dir)
        for key, value in (
            ("name", name),
            ("peer_url", peer),
            ("client_url", client),
            ("data_dir", data_dir),
        ):
            if value in seen[key]:
                raise RestorePlanError(
                    f"{where}.{key}", f"{value!r} is used by another member; each must differ"
                )
            seen[key].add(value)
        if peer == client:
            raise RestorePlanError(f"{where}.client_url", "must differ from the peer URL")
        wal = posixpath.join(wal_dir_root, name) if wal_dir_root else ""
        normalized.append((name, peer, client, data_dir, wal))

    initial = ",".join(f"{name}={peer}" for name, peer, _, _, _ in normalized)
    planned = []
    for name, peer, client, data_dir, wal in normalized:
        argv = [
            etcdutl,
            "snapshot",
            "restore",
            snapshot,
            "--name",
            name,
            "--initial-cluster",
            initial,
            "--initial-cluster-token",
            token,
            "--initial-advertise-peer-urls",
            peer,
            "--data-dir",
            data_dir,
        ]
        if wal:
            argv += ["--wal-dir", wal]
        if bump_revision:
            argv += ["--bump-revision", str(bump_revision)]
        if mark_compacted:
            argv += ["--mark-compacted"]
        if skip_hash_check:
            argv += ["--skip-hash-check"]
        # Start flags: --initial-cluster* are ignored once the restored data dir exists, kept for clarity.
        etcd_args = [
            "--name",
            name,
            "--data-dir",
            data_dir,
            "--initial-advertise-peer-urls",
            peer,
            "--advertise-client-urls",
            client,
            "--initial-cluster",
            initial,
            "--initial-cluster-token",
            token,
            "--initial-cluster-state",
            "new",
        ]
        if wal:
            etcd_args += ["--wal-dir", wal]
        planned.append(PlannedMember(name, peer, client, data_dir, wal, argv, etcd_args))
    return RestorePlan(snapshot, token, initial, bump_revision, mark_compacted, planned)
