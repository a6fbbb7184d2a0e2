"""One backup run, as the Job does it (Job side: it imports no controller code).

:func:`run_backup` streams a snapshot from the best member straight into the store (no local
copy), verifies it (etcd's sha256 trailer, the bbolt revision within the member's revisions
before and after, the store's sha256), commits it with its metadata and applies retention.
``PLAN_FORMAT`` is the format of the plan it reads (``backup.plan.backup_plan`` writes it)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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

PLAN_FORMAT = 1

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

class BackupFailed(Exception):
    """A run failed; ``reason`` is a condition reason, the message says what to do next."""

    def __init__(self, message: str, reason: str = "BackupFailed") -> None:
        super().__init__(message)
        self.reason = reason


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


