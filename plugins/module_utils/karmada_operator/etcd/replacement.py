"""Which local etcd member lost its data, and whose volume holds a removed member's data.

Plain Python, no Ansible API; the decisions behind the replacement of a lost member in
``etcd_scaling.scale`` (see "Replace a lost member" in docs/etcd.md). Two signals, each one that
slowness or a restart cannot produce:

* **The volume is new.** The operator records, for every member it sees healthy, its etcd
  member ID and the UID of the volume its data lives on (the claim ``data-<pod>``, or the pod
  itself with ``storage.type: EmptyDir``). A member that etcd still lists under that ID, that
  is unhealthy, and whose claim now has another UID lost its data with the old claim: a claim
  UID never changes while the claim lives, and a restart or a slow disk keeps it.
* **etcd says its data is unusable.** The member is unhealthy, its pod is not Ready, its etcd
  container has exited with an error at least twice (crash-looping: a single exit may be a
  restart), and the log of the last exit carries one of etcd's own messages for lost or corrupt
  data (:data:`DATA_ERRORS`; e.g. ``tocommit(208) is out of range [lastIndex(0)]. Was the raft log
  corrupted, truncated, or lost?``, what a member whose data dir was emptied logs).

A pod whose member is not (or no longer) a voter in etcd holds **stale** data when its volume
is the one recorded when the member was removed (or an unknown one, for a member missing
between others), or when its etcd exits because "the member has been permanently removed":
such a volume is reset before the member is added back.

The records live in an annotation of the bootstrap ConfigMap (:data:`RECORDS_ANNOTATION`),
``{"<pod>": {"id": "<hex member id>", "volume": "<uid>"}}``; a member being replaced has
``id: ""``, ``volume`` the UID of the volume it left, ``why`` and ``since``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

RECORDS_ANNOTATION = "operator.karmada.io/etcd-member-volumes"
LAST_REPLACEMENT_ANNOTATION = "operator.karmada.io/etcd-last-replacement"

# etcd's own words, in the log of a member that exits on data it cannot use
DATA_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"tocommit\(\d+\) is out of range \[lastIndex\(\d+\)\]"),
     "its raft log is lost or truncated (an emptied data dir)"),
    (re.compile(r"\b(?:wal|walpb|snap|snappb): crc mismatch"), "its write-ahead log or snapshot is corrupt"),
    (re.compile(r"failed to find database snapshot file|failed to recover v3 backend from snapshot"),
     "its database does not match its write-ahead log"),
    (re.compile(r"failed to open database|invalid database|file size too small"), "its database file is corrupt"),
)
REMOVED = re.compile(r"the member has been permanently removed from the cluster")
# exits in a row before a data error counts (one exit may be a restart)
MIN_RESTARTS = 2


@dataclass(frozen=True)
class Volume:
    """Where a member's data lives: the claim's UID (the pod's with EmptyDir)."""

    uid: str
    terminating: bool = False


def ordinal(statefulset: str, name: str) -> int:
    tail = name[len(statefulset) + 1:] if name.startswith(statefulset + "-") else ""
    return int(tail) if tail.isdigit() else -1


def member_volumes(statefulset: str, storage_type: str, pods: Mapping[str, Mapping[str, Any]],
                   claims: Mapping[str, Volume]) -> dict[str, Volume]:
    """Each member's volume by pod name: its claim ``data-<pod>`` (``claims`` by claim name), or
    the pod itself with EmptyDir. HostPath has none the operator can tell apart."""
    if storage_type == "PersistentVolumeClaim":
        prefix = "data-"
        return {c[len(prefix):]: v for c, v in claims.items()
                if c.startswith(prefix) and ordinal(statefulset, c[len(prefix):]) >= 0}
    if storage_type == "EmptyDir":
        return {n: Volume(str((p.get("metadata") or {}).get("uid") or ""),
                          bool((p.get("metadata") or {}).get("deletionTimestamp")))
                for n, p in pods.items() if ordinal(statefulset, n) >= 0}
    return {}


def parse_records(text: str | None) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in data.items() if isinstance(v, dict)} \
        if isinstance(data, dict) else {}


def dump_records(records: Mapping[str, Mapping[str, str]]) -> str:
    return json.dumps({k: dict(v) for k, v in sorted(records.items())}, sort_keys=True, separators=(",", ":"))


def crash_loop(pod: Mapping[str, Any] | None, container: str = "etcd") -> tuple[int, int]:
    """(restarts, exit code of the last exit) of the container; (0, 0) when it never exited."""
    for c in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == container:
            last = ((c.get("lastState") or {}).get("terminated") or {})
            return int(c.get("restartCount") or 0), int(last.get("exitCode") or 0)
    return 0, 0


def _ready(pod: Mapping[str, Any] | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((pod or {}).get("status") or {}).get("conditions") or [])


def data_error(log: str) -> str:
    """Why etcd cannot use its data, from the log of an exit ("" when the log says nothing of it):
    the label and etcd's message."""
    for pattern, label in DATA_ERRORS:
        m = pattern.search(log or "")
        if m:
            line = next((ln for ln in log.splitlines() if pattern.search(ln)), m.group(0))
            said = m.group(0)
            msg = re.search(r'"msg":"([^"]*)"', line)
            if msg and pattern.search(msg.group(1)):
                said = msg.group(1)
            elif line.startswith("panic: "):
                said = line[len("panic: "):]
            return f"{label}: etcd exits with \"{said[:200]}\""
    return ""


def assess(statefulset: str, health: Mapping[str, Any], pods: Mapping[str, Mapping[str, Any]],
           volumes: Mapping[str, Volume], records: Mapping[str, Mapping[str, str]],
           log_of: Callable[[str], str], min_restarts: int = MIN_RESTARTS) -> tuple[dict[str, str], dict[str, str]]:
    """(lost, stale): members that lost their data and pods whose volume holds a removed member's
    data, each name with why (see the module docstring). ``pods`` are the raw pods by name,
    ``log_of(pod)`` the log of the etcd container's last exit (asked only of crash-looping pods)."""
    lost: dict[str, str] = {}
    stale: dict[str, str] = {}
    if not health.get("has_quorum"):
        return lost, stale  # nothing is decided without a quorum to decide it with
    reports = [r for r in health.get("members") or [] if r.get("name")]
    voters = {str(r["name"]): r for r in reports if not r.get("learner")}
    voter_ids = {str(r.get("id") or "") for r in voters.values()}
    for name, report in sorted(voters.items(), key=lambda kv: ordinal(statefulset, kv[0])):
        if report.get("healthy") or ordinal(statefulset, name) < 0:
            continue
        pod, volume, record = pods.get(name), volumes.get(name), records.get(name) or {}
        if (volume is not None and not volume.terminating and volume.uid and record.get("volume")
                and record.get("id") and record["id"] == str(report.get("id") or "")
                and record["volume"] != volume.uid):
            lost[name] = (f"its volume was replaced: member {record['id']} had its data on volume "
                          f"{record['volume']}, its pod now has {volume.uid}")
            continue
        restarts, code = crash_loop(pod)
        if pod is not None and restarts >= min_restarts and code != 0 and not _ready(pod):
            why = data_error(log_of(name))
            if why:
                lost[name] = why
    for name, pod in sorted(pods.items(), key=lambda kv: ordinal(statefulset, kv[0])):
        n = ordinal(statefulset, name)
        if n < 0 or name in voters or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        volume, record = volumes.get(name), records.get(name)
        if volume is not None and not volume.terminating and volume.uid:
            if record and record.get("volume") == volume.uid and record.get("id") not in voter_ids - {""}:
                stale[name] = (f"its volume {volume.uid} holds the data of the removed member "
                               f"{record.get('id') or 'it replaces'}")
                continue
            if record is None and n < len(voters):
                stale[name] = f"its volume {volume.uid} holds data the operator has no record of"
                continue
        restarts, code = crash_loop(pod)
        if restarts >= 1 and code != 0 and REMOVED.search(log_of(name) or ""):
            stale[name] = "etcd exits with \"the member has been permanently removed from the cluster\""
    return lost, stale


def updated_records(statefulset: str, health: Mapping[str, Any], volumes: Mapping[str, Volume],
                    records: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """The records after a look at etcd: every healthy voter's member ID and volume; an
    unhealthy voter keeps its record (the one a replaced volume is told from); a replacement in
    progress (``id`` "") is kept until its member is healthy again; the rest are dropped."""
    out: dict[str, dict[str, str]] = {}
    if not health.get("has_quorum"):
        return {k: dict(v) for k, v in records.items()}
    voters = {str(r["name"]): r for r in health.get("members") or [] if r.get("name") and not r.get("learner")}
    for name, report in voters.items():
        volume = volumes.get(name)
        if report.get("healthy") and report.get("id") and volume is not None and volume.uid \
                and not volume.terminating:
            out[name] = {"id": str(report["id"]), "volume": volume.uid}
        elif name in records:
            out[name] = dict(records[name])
    for name, record in records.items():
        if name not in out and record.get("id") == "" and ordinal(statefulset, name) >= 0:
            out[name] = dict(record)
    return out
