"""Continuous backup's deltas: every change etcd made after a full snapshot, in order, no gap.

A full snapshot holds etcd at revision F. Its deltas hold each revision after it, F+1, F+2, …,
as etcd's watch delivers them: the events of one revision (one etcd transaction) together, with
the time the follower received them. etcd gives every write transaction exactly one revision
and every revision at least one event (a transaction that changes nothing, a lease grant or a
compaction takes none), so the revisions of a chain are consecutive: a missing one is a gap,
and a gap is never papered over. :func:`follow` raises :class:`Gap` when etcd has compacted a
revision the chain still needs; the caller starts a new full snapshot.

A delta is written when its oldest change has waited ``interval`` seconds or it holds
``max_bytes``, whichever comes first, so at most ``interval`` seconds of acknowledged writes
are only in etcd (the RPO). Format (gzip of JSON lines, the last line the sha256 of the lines
before it, so a delta is checked on its own): a header
``{"kind": "EtcdDelta", "format": 1, "firstRevision", "lastRevision", "events", "firstTime",
"lastTime"}``, then one line a revision ``{"r": revision, "t": unix ms, "e": [["p", key,
value, lease] | ["d", key], …]}`` (keys and values base64, as etcd's gateway speaks).

:func:`replay` applies a chain to a running etcd restored from its full snapshot, up to a
revision or a time. Keys written under a lease get a fresh lease of ``LEASED_TTL`` seconds per
original lease (the original TTL is not in the watch): what lived on a lease — Kubernetes
Events, apiserver endpoint leases — was short-lived in the source too.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from karmada_operator.backup import store as store_lib
from karmada_operator.etcd.gateway import EtcdClient, EtcdError, b64

KIND, FORMAT = "EtcdDelta", 1
PUT, DELETE = "p", "d"
# etcd sends a progress notification on an idle watch every 10 minutes by default; a stream
# silent for longer than this is dead and is reopened from the next revision.
WATCH_READ_TIMEOUT = 15 * 60.0
LEASED_TTL = 60
# Operations a replay transaction carries (etcd's default --max-txn-ops is 128).
REPLAY_TXN_OPS = 100


class Gap(Exception):
    """The chain cannot continue: etcd no longer has ``revision`` (compacted up to ``compacted``),
    or a delta does not start where the chain ends. Start a new full snapshot."""

    def __init__(self, message: str, revision: int, compacted: int = 0):
        super().__init__(message)
        self.revision, self.compacted = revision, compacted


class DeltaCorrupt(Exception):
    """A stored delta does not decode or its checksum does not match."""


@dataclass(frozen=True)
class Revision:
    """The events of one etcd revision: ``(PUT, key, value, lease)`` or ``(DELETE, key)``."""

    revision: int
    time_ms: int
    events: tuple[tuple, ...]

    def size(self) -> int:
        return 16 + sum(len(e[1]) + (len(e[2]) if e[0] == PUT else 0) for e in self.events)


@dataclass(frozen=True)
class Delta:
    revisions: tuple[Revision, ...]

    @property
    def first(self) -> int:
        return self.revisions[0].revision

    @property
    def last(self) -> int:
        return self.revisions[-1].revision

    @property
    def events(self) -> int:
        return sum(len(r.events) for r in self.revisions)

    def header(self) -> dict[str, Any]:
        return {
            "kind": KIND, "format": FORMAT, "firstRevision": self.first, "lastRevision": self.last,
            "events": self.events, "firstTime": self.revisions[0].time_ms, "lastTime": self.revisions[-1].time_ms,
        }


def encode(delta: Delta) -> bytes:
    """The stored bytes of ``delta`` (gzip, deterministic: no timestamp in the gzip header)."""
    lines = [json.dumps(delta.header(), separators=(",", ":"))]
    for rev in delta.revisions:
        events = [[PUT, b64(e[1]), b64(e[2]), e[3]] if e[0] == PUT else [DELETE, b64(e[1])] for e in rev.events]
        lines.append(json.dumps({"r": rev.revision, "t": rev.time_ms, "e": events}, separators=(",", ":")))
    body = ("\n".join(lines) + "\n").encode()
    body += json.dumps({"sha256": hashlib.sha256(body).hexdigest()}).encode() + b"\n"
    return gzip.compress(body, mtime=0)


def decode(data: bytes) -> Delta:
    """Parse stored bytes; :class:`DeltaCorrupt` naming what is wrong."""
    try:
        body = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise DeltaCorrupt(f"not a gzip stream: {exc}") from exc
    content, _, trailer = body.rstrip(b"\n").rpartition(b"\n")
    content += b"\n"
    try:
        expected = json.loads(trailer)["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DeltaCorrupt("no checksum line at the end (a truncated delta)") from exc
    actual = hashlib.sha256(content).hexdigest()
    if actual != expected:
        raise DeltaCorrupt(f"checksum mismatch: stored {expected}, content {actual}")
    head, *rows = content.decode().splitlines()
    header = json.loads(head)
    if header.get("kind") != KIND or header.get("format") != FORMAT:
        raise DeltaCorrupt(f"not a delta of format {FORMAT}: {header.get('kind')!r} {header.get('format')!r}")
    revisions = []
    for row in rows:
        doc = json.loads(row)
        events = tuple(
            (PUT, base64.b64decode(e[1]), base64.b64decode(e[2]), int(e[3])) if e[0] == PUT
            else (DELETE, base64.b64decode(e[1]))
            for e in doc["e"]
        )
        revisions.append(Revision(int(doc["r"]), int(doc["t"]), events))
    delta = Delta(tuple(revisions))
    if not revisions or (delta.first, delta.last) != (header["firstRevision"], header["lastRevision"]):
        raise DeltaCorrupt(f"header says {header.get('firstRevision')}..{header.get('lastRevision')}, "
                           f"content holds {len(revisions)} revisions")
    check_consecutive(delta.first - 1, [delta])
    return delta


def check_consecutive(after: int, deltas: Sequence[Delta]) -> int:
    """The last revision of ``deltas`` when they continue ``after`` with no revision missing;
    :class:`Gap` naming the first missing one otherwise."""
    expected = after + 1
    for delta in deltas:
        for rev in delta.revisions:
            if rev.revision != expected:
                raise Gap(f"revision {expected} is missing: the chain goes on at {rev.revision}", expected)
            expected += 1
    return expected - 1


# --------------------------------------------------------------------------- writing


@dataclass
class Buffer:
    """Revisions received and not yet written; due after ``interval`` s or at ``max_bytes``."""

    after: int
    interval: float
    max_bytes: int
    revisions: list[Revision] = field(default_factory=list)
    size: int = 0
    oldest: float | None = None  # monotonic time the oldest pending revision arrived

    def add(self, rev: Revision, now: float) -> None:
        expected = (self.revisions[-1].revision if self.revisions else self.after) + 1
        if rev.revision != expected:
            raise Gap(f"the watch skipped from {expected - 1} to {rev.revision}", expected)
        self.revisions.append(rev)
        self.size += rev.size()
        if self.oldest is None:
            self.oldest = now

    def wait(self, now: float) -> float | None:
        """Seconds until due (0: due now); None when nothing is pending."""
        if self.oldest is None:
            return None
        if self.size >= self.max_bytes:
            return 0.0
        return max(0.0, self.oldest + self.interval - now)

    def take(self) -> Delta:
        delta = Delta(tuple(self.revisions))
        self.after, self.revisions, self.size, self.oldest = delta.last, [], 0, None
        return delta


def watch_body(start_revision: int) -> dict[str, Any]:
    """A watch of every key from ``start_revision``, with progress notifications."""
    return {"create_request": {"key": b64(b"\0"), "range_end": b64(b"\0"),
                               "start_revision": str(start_revision), "progress_notify": True}}


def parse_watch(line: bytes, now_ms: int) -> tuple[list[Revision], int]:
    """The revisions in one watch response line and its header revision.
    :class:`Gap` when etcd cancelled the watch because the start revision is compacted."""
    doc = json.loads(line)
    if "error" in doc:
        raise EtcdError(f"watch failed: {doc['error']}")
    result = doc.get("result") or {}
    header_rev = int(result.get("header", {}).get("revision", 0))
    compacted = int(result.get("compact_revision") or 0)
    if compacted:
        raise Gap(f"etcd compacted its history up to revision {compacted}", compacted, compacted)
    if result.get("canceled"):
        raise EtcdError(f"etcd cancelled the watch: {result.get('cancel_reason') or 'no reason given'}")
    grouped: dict[int, list[tuple]] = {}
    for event in result.get("events") or []:
        kv = event.get("kv") or {}
        rev = int(kv.get("mod_revision", 0))
        key = base64.b64decode(kv.get("key", ""))
        if event.get("type") == "DELETE":
            grouped.setdefault(rev, []).append((DELETE, key))
        else:
            grouped.setdefault(rev, []).append((PUT, key, base64.b64decode(kv.get("value", "")),
                                                int(kv.get("lease") or 0)))
    return [Revision(r, now_ms, tuple(events)) for r, events in sorted(grouped.items())], header_rev


@dataclass
class Progress:
    """What :func:`follow` has written, for status: last written revision, when, and totals."""

    written_revision: int
    received_revision: int
    deltas: int = 0
    bytes: int = 0
    last_written: float | None = None  # wall time


def follow(
    client: EtcdClient,
    after: int,
    write: Callable[[Delta, bytes], None],
    interval: float,
    max_bytes: int,
    stop: threading.Event,
    on_progress: Callable[[Progress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Progress:
    """Watch etcd from ``after + 1`` and hand each due delta (and its stored bytes) to ``write``
    until ``stop`` is set; then write what is pending and return.

    A broken stream (a member restarting, a connection lost) is reopened from the next
    revision on any endpoint: no gap as long as etcd still has that revision. :class:`Gap`
    when it does not. ``write`` raising stops the follow (nothing is acknowledged twice: the
    buffer is kept, the caller decides)."""
    buf = Buffer(after, interval, max_bytes)
    progress = Progress(after, after)
    events: queue.Queue = queue.Queue()
    reader: _Reader | None = None
    try:
        while True:
            if reader is None or not reader.alive():
                # the old stream is over: take what it delivered, then reopen after it
                _drain(events, buf, progress, clock)
                reader = _Reader(client, progress.received_revision + 1, events)
            wait = buf.wait(clock())
            try:
                item = events.get(timeout=0.2 if wait is None else min(wait, 0.2))
            except queue.Empty:
                item = None
            if isinstance(item, Revision):
                buf.add(item, clock())
                progress.received_revision = item.revision
            elif isinstance(item, Gap):
                raise item
            if stop.is_set():
                _drain(events, buf, progress, clock)
                if buf.revisions:
                    _write(buf, write, progress, on_progress)
                return progress
            if buf.wait(clock()) == 0.0:
                _write(buf, write, progress, on_progress)
    finally:
        if reader is not None:
            reader.close()


def _drain(events: queue.Queue, buf: Buffer, progress: Progress, clock: Callable[[], float]) -> None:
    while True:
        try:
            item = events.get_nowait()
        except queue.Empty:
            return
        if isinstance(item, Gap):
            raise item
        buf.add(item, clock())
        progress.received_revision = item.revision


def _write(buf: Buffer, write: Callable[[Delta, bytes], None], progress: Progress,
           on_progress: Callable[[Progress], None] | None) -> None:
    delta = Delta(tuple(buf.revisions))
    data = encode(delta)
    write(delta, data)
    buf.take()
    progress.written_revision, progress.deltas = delta.last, progress.deltas + 1
    progress.bytes += len(data)
    progress.last_written = time.time()
    if on_progress:
        on_progress(progress)


class _Reader:
    """One watch stream read in a thread; revisions go to ``out`` in order. A Gap goes to
    ``out`` too; any other end leaves ``error`` set and the thread finished."""

    def __init__(self, client: EtcdClient, start: int, out: queue.Queue):
        self.client, self.start, self.out = client, start, out
        self.error: Exception | None = None
        self.resp = None
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"etcd-watch-{start}")
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def _run(self) -> None:
        errors = []
        for endpoint in self.client.endpoints:
            try:
                # the next member picks up after what this stream delivered
                self.resp = self.client.stream(endpoint, "watch", WATCH_READ_TIMEOUT, watch_body(self.start))
                for line in self.resp.iter_lines():
                    if self.closed:
                        return
                    if not line:
                        continue
                    revisions, _ = parse_watch(line, int(time.time() * 1000))
                    for rev in revisions:
                        self.out.put(rev)
                        self.start = rev.revision + 1
                return
            except Gap as exc:
                self.error = exc
                self.out.put(exc)
                return
            except Exception as exc:  # noqa: BLE001 - any broken stream: try the next member, then reopen
                errors.append(f"{endpoint}: {exc}")
                if self.closed:
                    return
                continue
            finally:
                if self.resp is not None:
                    self.resp.close()
        self.error = EtcdError("no member served the watch: " + "; ".join(errors))
        time.sleep(1.0)  # the caller reopens when this thread ends: not in a tight loop

    def close(self) -> None:
        """End the stream: shut its socket down (closing it here would wait on the TLS lock the
        reading thread holds); the thread closes the response itself."""
        self.closed = True
        sock = getattr(getattr(getattr(self.resp, "raw", None), "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


# --------------------------------------------------------------------------- replay


def select(deltas: Iterable[Delta], after: int, up_to_revision: int = 0, up_to_time_ms: int = 0) -> list[Revision]:
    """The revisions to replay on a full snapshot at ``after``: every one of the chain, or up
    to a revision, or up to a time (every revision received at or before it)."""
    deltas = sorted(deltas, key=lambda d: d.first)
    deltas = [d for d in deltas if d.last > after]
    trimmed = [Delta(tuple(r for r in d.revisions if r.revision > after)) for d in deltas]
    check_consecutive(after, trimmed)
    chosen = []
    for delta in trimmed:
        for rev in delta.revisions:
            if up_to_revision and rev.revision > up_to_revision:
                return chosen
            if up_to_time_ms and rev.time_ms > up_to_time_ms:
                return chosen
            chosen.append(rev)
    if up_to_revision and (chosen[-1].revision if chosen else after) < up_to_revision:
        raise Gap(f"the chain ends at {chosen[-1].revision if chosen else after}, "
                  f"before the asked revision {up_to_revision}", up_to_revision)
    return chosen


def replay(client: EtcdClient, revisions: Sequence[Revision]) -> dict[str, int]:
    """Apply ``revisions`` in order to ``client``'s etcd (restored from the chain's full).
    Returns counts: revisions, puts, deletes, leases granted."""
    leases: dict[int, int] = {}
    puts = deletes = 0
    for rev in revisions:
        ops = []
        for event in rev.events:
            if event[0] == DELETE:
                ops.append({"request_delete_range": {"key": b64(event[1])}})
                deletes += 1
                continue
            put: dict[str, Any] = {"key": b64(event[1]), "value": b64(event[2])}
            if event[3]:
                if event[3] not in leases:
                    granted = client.call("lease/grant", {"TTL": str(LEASED_TTL)})
                    leases[event[3]] = int(granted["ID"])
                put["lease"] = str(leases[event[3]])
            ops.append({"request_put": put})
            puts += 1
        for chunk in _chunks(ops, REPLAY_TXN_OPS):
            client.call("kv/txn", {"success": chunk}, timeout=max(client.timeout, 60))
    return {"revisions": len(revisions), "puts": puts, "deletes": deletes, "leases": len(leases)}


def _chunks(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


# --------------------------------------------------------------------------- chains in a store


def delta_name(full: str, delta: Delta) -> str:
    """``<full>.delta.<first>-<last>``, revisions zero-padded: names sort in chain order."""
    return f"{full}{store_lib.DELTA_INFIX}{delta.first:020d}-{delta.last:020d}"


def load_chain(store: store_lib.SnapshotStore, full: store_lib.SnapshotInfo) -> list[Delta]:
    """The deltas stored after snapshot ``full``, decoded (each checks its own sha256)."""
    out = []
    for name in store.object_names(full.name + store_lib.DELTA_INFIX):
        try:
            out.append(decode(store.get_object(name)))
        except DeltaCorrupt as exc:
            raise DeltaCorrupt(f"{store}: {name}: {exc}") from exc
    return out


@dataclass(frozen=True)
class Point:
    """What a restore to a point replays: a full snapshot and the revisions after it."""

    full: store_lib.SnapshotInfo
    revisions: tuple[Revision, ...]

    @property
    def revision(self) -> int:
        return self.revisions[-1].revision if self.revisions else self.full.revision

    @property
    def time_ms(self) -> int:
        """When the last change included was received (the full's time without deltas)."""
        if self.revisions:
            return self.revisions[-1].time_ms
        return int(self.full.taken_at.timestamp() * 1000)


def choose_point(snapshots: Sequence[store_lib.SnapshotInfo], chain_of: Callable[[store_lib.SnapshotInfo], list[Delta]],
                 revision: int = 0, time_ms: int = 0) -> Point:
    """The point to restore: the newest full at or before the asked revision or time (the
    newest of all for neither: ``latest``) and its chain up to it. :class:`Gap` when no full
    is early enough, or the chain of the one chosen does not reach the asked revision."""
    fulls = sorted(snapshots, key=lambda s: (s.revision, s.taken_at))
    if revision:
        fulls = [s for s in fulls if s.revision <= revision]
    if time_ms:
        fulls = [s for s in fulls if s.taken_at.timestamp() * 1000 <= time_ms]
    if not fulls:
        what = f"revision {revision}" if revision else f"time {time_ms} ms" if time_ms else "latest"
        raise Gap(f"no full snapshot at or before {what}", revision)
    full = fulls[-1]
    return Point(full, tuple(select(chain_of(full), full.revision, up_to_revision=revision, up_to_time_ms=time_ms)))
