"""Where etcd snapshots are kept: one store interface, a volume store and an S3 store.

Plain Python, no Ansible API (imported as ``ansible.module_utils.etcd_backup_store`` by
modules and as ``etcd_backup_store`` by tests and benchmarks). The design follows
etcd-backup-restore's ``snapstore`` (save, fetch, list, delete behind one interface), plus
what it lacks: a metadata sidecar per snapshot, a sha256 computed while the bytes stream by
and checked on every fetch, and errors whose ``reason`` goes straight into a condition.

Layout, in a directory (volume) or under a key prefix (S3)::

    <name>              the snapshot, exactly the bytes etcd sent
    <name>.meta.json    its sidecar: size, sha256, revision, versions, source, time

The sidecar is written last, so a snapshot is listed only once it is complete: the volume
store writes to a hidden temporary file, fsyncs and renames it; the S3 store completes a
multipart upload (atomic on the server) before it puts the sidecar. Deleting removes the
sidecar first. Nothing here holds a whole snapshot in memory: writes and reads stream in
chunks (S3 parts of ``part_size`` bytes, a bounded number in flight).
"""

from __future__ import annotations

import abc
import base64
import contextlib
import hashlib
import json
import os
import re
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, BinaryIO

SIDECAR_SUFFIX = ".meta.json"
# A continuous backup's deltas after snapshot <name>: <name>.delta.<first revision>-<last revision>
DELTA_INFIX = ".delta."
SIDECAR_KIND = "EtcdSnapshotMetadata"
SIDECAR_FORMAT = 1
CHUNK_SIZE = 1024 * 1024  # bytes read or written per step when streaming
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")  # as EtcdRestore's spec.source.snapshot


# --------------------------------------------------------------------------- errors


class StoreError(Exception):
    """A store operation failed. ``reason`` is a Kubernetes condition reason (CamelCase);
    the message names the store and never carries credentials."""

    reason = "StoreFailed"

    def __init__(self, message: str, store: str = ""):
        super().__init__(message)
        self.store = store


class StoreUnreachable(StoreError):
    """The endpoint does not answer, the volume is not mounted, or a timeout passed."""

    reason = "StoreUnreachable"


class StoreTLSFailed(StoreUnreachable):
    """The endpoint's certificate is not trusted (set a CA bundle) or TLS failed."""

    reason = "StoreTLSFailed"


class StoreAccessDenied(StoreError):
    """Credentials are wrong or lack a permission (or the volume is not writable)."""

    reason = "StoreAccessDenied"


class BucketNotFound(StoreError):
    reason = "BucketNotFound"


class SnapshotNotFound(StoreError):
    reason = "SnapshotNotFound"


class IntegrityCheckFailed(StoreError):
    """The bytes read back do not have the sha256 (or size) recorded when they were saved."""

    reason = "IntegrityCheckFailed"

    def __init__(self, message: str, store: str = "", snapshot: str = "", expected: str = "", actual: str = ""):
        super().__init__(message, store)
        self.snapshot = snapshot
        self.expected = expected
        self.actual = actual


class StoreWriteFailed(StoreError):
    """A write did not complete (disk full, I/O error, upload refused); nothing was listed."""

    reason = "StoreWriteFailed"


class SnapshotAlreadyExists(StoreWriteFailed):
    reason = "SnapshotAlreadyExists"


class InvalidStoreConfig(StoreError):
    """The store spec, a snapshot name or a metadata field is not acceptable."""

    reason = "InvalidStoreConfig"


# --------------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class SnapshotSource:
    """The KarmadaDeployment whose etcd the snapshot was taken from."""

    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True)
class SnapshotMeta:
    """What the caller knows about a snapshot's content; the store adds name, size, sha256."""

    revision: int
    etcd_version: str
    karmada_version: str
    source: SnapshotSource
    taken_at: datetime | None = None  # when the snapshot was started; default: when the write began
    # Live keys and objects per Karmada resource at ``revision`` (what a restore is checked against).
    keys: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.revision, bool) or not isinstance(self.revision, int) or self.revision < 0:
            raise InvalidStoreConfig(f"snapshot revision must be a non-negative integer, not {self.revision!r}")
        for attr in ("etcd_version", "karmada_version"):
            if not isinstance(getattr(self, attr), str):
                raise InvalidStoreConfig(f"snapshot {attr} must be a string")
        if not isinstance(self.source, SnapshotSource):
            raise InvalidStoreConfig("snapshot source must be a SnapshotSource")


@dataclass(frozen=True)
class SnapshotInfo:
    """A stored, complete snapshot as its sidecar describes it."""

    name: str
    size: int
    sha256: str
    revision: int
    etcd_version: str
    karmada_version: str
    source: SnapshotSource
    taken_at: datetime
    location: str = field(default="", compare=False)
    keys: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)

    def to_sidecar(self) -> dict[str, Any]:
        """The sidecar document (camelCase like the CRDs; no location: it depends on the mount)."""
        return {
            "kind": SIDECAR_KIND,
            "format": SIDECAR_FORMAT,
            "name": self.name,
            "sizeBytes": self.size,
            "sha256": self.sha256,
            "revision": self.revision,
            "etcdVersion": self.etcd_version,
            "karmadaVersion": self.karmada_version,
            "source": {"namespace": self.source.namespace, "name": self.source.name, "uid": self.source.uid},
            "takenAt": format_time(self.taken_at),
            **({"keys": self.keys} if self.keys is not None else {}),
            **({"counts": dict(sorted(self.counts.items()))} if self.counts else {}),
        }

    @classmethod
    def from_sidecar(cls, doc: Mapping[str, Any], location: str = "") -> SnapshotInfo:
        """Parse a sidecar; ValueError (with what is wrong) when it is not one of ours."""
        if doc.get("kind") != SIDECAR_KIND:
            raise ValueError(f"not a snapshot sidecar (kind {doc.get('kind')!r})")
        if doc.get("format") != SIDECAR_FORMAT:
            raise ValueError(f"unknown sidecar format {doc.get('format')!r}")
        try:
            src = doc.get("source") or {}
            sha = str(doc["sha256"])
            if not re.fullmatch(r"[0-9a-f]{64}", sha):
                raise ValueError(f"bad sha256 {sha!r}")
            return cls(
                name=str(doc["name"]),
                size=int(doc["sizeBytes"]),
                sha256=sha,
                revision=int(doc["revision"]),
                etcd_version=str(doc.get("etcdVersion", "")),
                karmada_version=str(doc.get("karmadaVersion", "")),
                source=SnapshotSource(str(src.get("namespace", "")), str(src.get("name", "")),
                                      str(src.get("uid", ""))),
                taken_at=parse_time(str(doc["takenAt"])),
                location=location,
                keys=int(doc["keys"]) if doc.get("keys") is not None else None,
                counts={str(k): int(v) for k, v in (doc.get("counts") or {}).items()},
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"sidecar lacks or mistypes {exc}") from exc

    def status_item(self) -> dict[str, Any]:
        """The entry for EtcdBackup ``status.snapshots`` (the CRD's snapshot item plus name)."""
        return {
            "name": self.name,
            "location": self.location,
            "sizeBytes": self.size,
            "sha256": self.sha256,
            "revision": self.revision,
            "etcdVersion": self.etcd_version,
            "karmadaVersion": self.karmada_version,
            "takenAt": self.taken_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }


def format_time(when: datetime) -> str:
    """RFC 3339 in UTC with microseconds (sorting two backups a second apart must still work)."""
    if when.tzinfo is None:
        raise InvalidStoreConfig("snapshot times must be timezone-aware")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone")
    return value.astimezone(UTC)


def check_name(name: str) -> str:
    """A snapshot name is one path segment of letters, digits, '.', '_', '-' (at most 253),
    not hidden and not a sidecar's name; InvalidStoreConfig otherwise."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or name.endswith(SIDECAR_SUFFIX):
        raise InvalidStoreConfig(
            f"snapshot name {name!r} is not allowed: use 1-253 letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit, not ending in {SIDECAR_SUFFIX!r}"
        )
    return name


def snapshot_name(prefix: str, when: datetime | None = None) -> str:
    """``<prefix>-<UTC time to the second>.db``, e.g. ``karmada-20260101T020000Z.db``."""
    when = (when or datetime.now(UTC)).astimezone(UTC)
    return check_name(f"{prefix}-{when:%Y%m%dT%H%M%SZ}.db")


def select_for_deletion(snapshots: Iterable[SnapshotInfo], max_backups: int) -> list[SnapshotInfo]:
    """Which snapshots retention removes: all but the newest ``max_backups``, oldest first
    (by ``taken_at``, then name, so the choice is stable)."""
    if isinstance(max_backups, bool) or not isinstance(max_backups, int) or max_backups < 1:
        raise InvalidStoreConfig(f"maxBackups must be an integer >= 1, not {max_backups!r}")
    ordered = sorted(snapshots, key=lambda s: (s.taken_at, s.name))
    return ordered[: max(0, len(ordered) - max_backups)]


def check_sub_path(sub_path: str) -> str:
    """A relative directory inside a volume: no absolute path, no '..' segment."""
    if not isinstance(sub_path, str):
        raise InvalidStoreConfig("subPath must be a string")
    if sub_path.startswith("/") or (len(sub_path) > 1 and sub_path[1] == ":"):
        raise InvalidStoreConfig(f"subPath {sub_path!r} must be relative to the volume")
    parts = [p for p in sub_path.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidStoreConfig(f"subPath {sub_path!r} must not contain '..': it must stay inside the volume")
    if "\x00" in sub_path:
        raise InvalidStoreConfig("subPath must not contain NUL")
    return "/".join(parts)


# --------------------------------------------------------------------------- streams


class PipelinedDigest:
    """sha256 computed on a thread of its own, fed in order: the reader hands each chunk over and
    goes on reading (hashlib releases the GIL on large buffers), so hashing a download overlaps
    the download instead of following each chunk. ``hexdigest`` waits for the chunks handed over."""

    _END = b""

    def __init__(self, depth: int = 16) -> None:
        import queue
        import threading

        self._digest = hashlib.sha256()
        self._chunks: Any = queue.Queue(maxsize=depth)
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()
        self._result: str | None = None

    def _run(self) -> None:
        while chunk := self._chunks.get():
            self._digest.update(chunk)

    def update(self, data: bytes) -> None:
        if data:
            self._chunks.put(bytes(data))

    def hexdigest(self) -> str:
        if self._result is None:
            self._chunks.put(self._END)
            self._thread.join()
            self._result = self._digest.hexdigest()
        return self._result


class SnapshotReader:
    """A snapshot's bytes as a binary stream that checks size and sha256 as it is read.

    When the last byte has been read (``read`` returns b""), the digest is compared with the
    sidecar's and IntegrityCheckFailed is raised on a difference. Read to the end before
    trusting the data; ``fetch_to_file`` does this for you."""

    def __init__(self, raw: Any, info: SnapshotInfo, store: str, on_close: Callable[[], None] | None = None,
                 digest: Any = None):
        self._raw = raw
        self.info = info
        self._store = store
        self._digest = digest or hashlib.sha256()
        self._size = 0
        self._done = False
        self._on_close = on_close

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._done:
            return b""
        if n is None or n < 0:
            chunks = []
            while chunk := self.read(CHUNK_SIZE):
                chunks.append(chunk)
            return b"".join(chunks)
        data = self._raw_read(n)
        if data:
            self._digest.update(data)
            self._size += len(data)
            if self._size > self.info.size:
                self._fail(f"more than the recorded {self.info.size} bytes")
            return data
        self._done = True
        if self._size != self.info.size:
            self._fail(f"{self._size} bytes instead of the recorded {self.info.size}")
        actual = self._digest.hexdigest()
        if actual != self.info.sha256:
            self._fail("sha256 differs", actual)
        return b""

    def _raw_read(self, n: int) -> bytes:
        try:
            return self._raw.read(n)
        except OSError as exc:
            raise StoreUnreachable(f"{self._store}: reading snapshot {self.info.name!r} failed: {exc}",
                                   self._store) from exc

    def _fail(self, what: str, actual: str | None = None) -> None:
        actual = actual or self._digest.hexdigest()
        self._done = True
        raise IntegrityCheckFailed(
            f"{self._store}: snapshot {self.info.name!r} failed its integrity check ({what}): "
            f"expected sha256 {self.info.sha256}, got {actual}; do not restore from it",
            self._store, self.info.name, self.info.sha256, actual,
        )

    def __iter__(self) -> Iterator[bytes]:
        while chunk := self.read(CHUNK_SIZE):
            yield chunk

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._raw.close()
        if self._on_close:
            self._on_close()

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RawWriter(abc.ABC):
    """A store's half of a write: bytes in, then commit (visible, durable) or abort (gone)."""

    @abc.abstractmethod
    def write(self, data: bytes | memoryview) -> None: ...

    @abc.abstractmethod
    def commit(self) -> None: ...

    @abc.abstractmethod
    def abort(self) -> None: ...

    def put_file(self, path: str | os.PathLike[str], size: int, crc32: int) -> None:
        """Take the whole snapshot from the local file ``path`` (``size`` bytes, CRC-32 ``crc32``
        as checked while it was noted) before commit. By default its bytes go through ``write``;
        a store with a cheaper way (S3: one PUT instead of parts the server joins, the server
        checking the CRC) overrides this."""
        seen, sent = 0, 0
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK_SIZE):
                seen = zlib.crc32(chunk, seen)
                sent += len(chunk)
                self.write(chunk)
        if (sent, seen) != (size, crc32):
            raise StoreWriteFailed(f"{path}: the staged file changed after it was checked "
                                   f"({sent} bytes, CRC-32 {seen:08x}; checked {size}, {crc32:08x})")


class SnapshotWriter:
    """Write a snapshot in chunks; ``commit(meta)`` makes it a listed snapshot.

    Use as a context manager: leaving it without commit (or with an exception) aborts, and
    nothing is listed. ``size`` and ``sha256`` are computed here as bytes go by."""

    def __init__(self, store: SnapshotStore, name: str, raw: RawWriter):
        self._store = store
        self.name = name
        self._raw = raw
        self._digest = hashlib.sha256()
        self.size = 0
        self.started = datetime.now(UTC)
        self._state = "open"
        self._data_committed = False
        self._noted = self._raw_written = False
        self._crc32 = 0  # of the noted bytes: what the store checks a whole-file upload against

    @property
    def sha256(self) -> str:
        """sha256 (hex) of the bytes written so far."""
        return self._digest.hexdigest()

    def sha256_digest(self) -> bytes:
        """sha256 (raw) of the bytes written so far: a writer that holds back etcd's 32-byte
        trailer checks it against this, with no second hash over the data."""
        return self._digest.copy().digest()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._state != "open":
            raise StoreWriteFailed(f"{self._store}: snapshot {self.name!r} writer is {self._state}", str(self._store))
        if not data:
            return 0
        if self._noted:
            raise StoreWriteFailed(f"{self._store}: snapshot {self.name!r}: note and write do not mix",
                                   str(self._store))
        self._digest.update(data)
        self.size += len(data)
        self._raw_written = True
        try:
            self._raw.write(data)
        except BaseException:
            self.abort()
            raise
        return len(data)

    def note(self, data: bytes | bytearray | memoryview) -> int:
        """Hash and count bytes the store will get later, all at once, from a local file
        (``from_file``): a snapshot staged on disk as it is taken is checked on the way and
        handed over whole, where a store pays for taking it in pieces (S3's part join)."""
        if self._state != "open" or self._raw_written:
            raise StoreWriteFailed(f"{self._store}: snapshot {self.name!r} writer is {self._state} "
                                   "(note and write do not mix)", str(self._store))
        self._digest.update(data)
        self._crc32 = zlib.crc32(data, self._crc32)
        self.size += len(data)
        self._noted = True
        return len(data)

    def from_file(self, path: str | os.PathLike[str]) -> None:
        """Hand the store the local file whose bytes were all given to ``note``, in one go."""
        if self._state != "open" or not self._noted:
            raise StoreWriteFailed(f"{self._store}: snapshot {self.name!r} writer is {self._state} "
                                   "(from_file needs the bytes noted first)", str(self._store))
        actual = os.path.getsize(path)
        if actual != self.size:
            self.abort()
            raise StoreWriteFailed(f"{self._store}: staged file for {self.name!r} has {actual} bytes, "
                                   f"{self.size} were checked", str(self._store))
        try:
            self._raw.put_file(path, self.size, self._crc32)
        except BaseException:
            self.abort()
            raise

    def commit(self, meta: SnapshotMeta) -> SnapshotInfo:
        if self._state != "open":
            raise StoreWriteFailed(f"{self._store}: snapshot {self.name!r} writer is {self._state}", str(self._store))
        if not isinstance(meta, SnapshotMeta):
            raise InvalidStoreConfig("commit needs a SnapshotMeta")
        info = SnapshotInfo(
            name=self.name, size=self.size, sha256=self._digest.hexdigest(), revision=meta.revision,
            etcd_version=meta.etcd_version, karmada_version=meta.karmada_version, source=meta.source,
            taken_at=(meta.taken_at or self.started).astimezone(UTC), location=self._store.location(self.name),
            keys=meta.keys, counts=dict(meta.counts),
        )
        sidecar = (json.dumps(info.to_sidecar(), indent=2, sort_keys=True) + "\n").encode()
        try:
            self._raw.commit()
            self._data_committed = True
            self._store._put_sidecar(self.name, sidecar)
        except BaseException:
            self.abort()
            raise
        self._state = "committed"
        return info

    def abort(self) -> None:
        if self._state == "open":
            self._state = "aborted"
            with contextlib.suppress(Exception):  # the first error is the one to report
                self._raw.abort()
            if self._data_committed:  # the data is in place but its sidecar is not: remove it
                with contextlib.suppress(Exception):
                    self._store._delete_data(self.name)

    def __enter__(self) -> SnapshotWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()  # no-op after commit


def _chunks(source: str | os.PathLike[str] | IO[bytes] | Iterable[bytes]) -> Iterator[bytes]:
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            yield from _chunks(f)
        return
    read = getattr(source, "read", None)
    if read is not None:
        while chunk := read(CHUNK_SIZE):
            yield chunk
        return
    yield from source  # an iterable of chunks, e.g. a snapshot stream


# --------------------------------------------------------------------------- interface


class SnapshotStore(abc.ABC):
    """One place where snapshots live. Subclasses supply the storage primitives below;
    hashing, metadata, verification and retention are shared."""

    # Largest snapshot the store would rather take whole from a staged file (``note`` then
    # ``from_file``) than as bytes as they come; 0: always as they come (a volume: the bytes
    # land in their final file either way, so taking them early overlaps the snapshot).
    whole_file_max = 0

    # ----- public interface

    def writer(self, name: str) -> SnapshotWriter:
        """Start writing snapshot ``name`` (refused if it exists); see SnapshotWriter."""
        check_name(name)
        if self._data_exists(name) or self._sidecar_exists(name):
            raise SnapshotAlreadyExists(f"{self}: snapshot {name!r} already exists", str(self))
        return SnapshotWriter(self, name, self._raw_writer(name))

    def save(self, name: str, source: str | os.PathLike[str] | IO[bytes] | Iterable[bytes],
             meta: SnapshotMeta) -> SnapshotInfo:
        """Stream ``source`` (a path, a binary file object or an iterable of byte chunks)
        into the store as ``name`` and return what was recorded."""
        with self.writer(name) as w:
            for chunk in _chunks(source):
                w.write(chunk)
            return w.commit(meta)

    def list(self) -> list[SnapshotInfo]:
        """Complete snapshots (those with a readable sidecar), oldest first."""
        found = []
        for name in self._sidecar_names():
            try:
                found.append(self.get(name))
            except (SnapshotNotFound, IntegrityCheckFailed):  # removed meanwhile, or a foreign file
                continue
        return sorted(found, key=lambda s: (s.taken_at, s.name))

    def get(self, name: str) -> SnapshotInfo:
        """The metadata of one snapshot; SnapshotNotFound if it is not (completely) there."""
        check_name(name)
        raw = self._get_sidecar(name)
        try:
            info = SnapshotInfo.from_sidecar(json.loads(raw), self.location(name))
        except ValueError as exc:  # includes JSON errors
            raise IntegrityCheckFailed(f"{self}: sidecar of snapshot {name!r} is unreadable: {exc}",
                                       str(self), name) from exc
        if info.name != name:
            raise IntegrityCheckFailed(f"{self}: sidecar of {name!r} describes {info.name!r}", str(self), name)
        return info

    def latest(self) -> SnapshotInfo:
        snapshots = self.list()
        if not snapshots:
            raise SnapshotNotFound(f"{self}: no snapshot in the store", str(self))
        return snapshots[-1]

    def fetch(self, name: str) -> SnapshotReader:
        """A verifying stream of the snapshot's bytes (see SnapshotReader)."""
        info = self.get(name)
        return SnapshotReader(self._open_data(name), info, str(self))

    def fetch_to_file(self, name: str, path: str | os.PathLike[str]) -> SnapshotInfo:
        """Download into ``path``, verified: the file appears under ``path`` only when its
        sha256 matched; IntegrityCheckFailed (and no file) otherwise. The sha256 is computed
        beside the download (:class:`PipelinedDigest`). A staging copy: not synced to disk (a
        crash loses it and the download starts again)."""
        final = Path(path)
        final.parent.mkdir(parents=True, exist_ok=True)
        info = self.get(name)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".part", dir=final.parent)
        digest = PipelinedDigest()
        try:
            with os.fdopen(fd, "wb") as out, SnapshotReader(self._open_data(name), info, str(self),
                                                            digest=digest) as reader:
                for chunk in reader:
                    out.write(chunk)
            os.replace(tmp, final)
        except BaseException:
            digest.hexdigest()  # ends its thread
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return reader.info

    def verify(self, name: str) -> SnapshotInfo:
        """Read the whole snapshot and check it; returns its info or raises IntegrityCheckFailed."""
        with self.fetch(name) as reader:
            for _ in reader:
                pass
        return reader.info

    def delete(self, name: str) -> None:
        """Remove a snapshot with the continuous backup's deltas that follow it (newest first:
        what is left is always a chain without a gap); then the sidecar (it stops being
        listed), then the data. Deleting a snapshot that is not there is not an error."""
        check_name(name)
        for delta in sorted(self.object_names(name + DELTA_INFIX), reverse=True):
            self._delete_data(delta)
        self._delete_sidecar(name)
        self._delete_data(name)

    # ----- small objects without a sidecar (continuous backup's deltas: each checks itself)

    def put_object(self, name: str, data: bytes) -> str:
        """Write ``data`` as ``name`` in one piece (visible whole or not at all); refused if it
        exists. Returns its location."""
        check_name(name)
        if self._data_exists(name):
            raise SnapshotAlreadyExists(f"{self}: {name!r} already exists", str(self))
        raw = self._raw_writer(name)
        try:
            raw.write(data)
            raw.commit()
        except BaseException:
            raw.abort()
            raise
        return self.location(name)

    def get_object(self, name: str) -> bytes:
        check_name(name)
        out = bytearray()
        with contextlib.closing(self._open_data(name)) as f:
            while chunk := f.read(CHUNK_SIZE):
                out += chunk
        return bytes(out)

    def object_names(self, prefix: str) -> list[str]:
        """Names of the objects that start with ``prefix`` (sidecars and temporary files not
        included), sorted."""
        return sorted(n for n in self._data_names(prefix)
                      if not n.endswith(SIDECAR_SUFFIX) and NAME_PATTERN.match(n))

    def apply_retention(self, max_backups: int) -> list[SnapshotInfo]:
        """Delete all but the newest ``max_backups`` snapshots; returns the deleted ones."""
        doomed = select_for_deletion(self.list(), max_backups)
        for snap in doomed:
            self.delete(snap.name)
        return doomed

    @abc.abstractmethod
    def check(self) -> None:
        """Raise the StoreError a write would meet (unreachable, access denied, no bucket)."""

    @abc.abstractmethod
    def location(self, name: str) -> str:
        """Where a snapshot is, as a URL for status: pvc://claim/path or s3://bucket/key."""

    @abc.abstractmethod
    def __str__(self) -> str:
        """The store, for messages: no credentials."""

    def close(self) -> None:  # noqa: B027 - most stores hold nothing
        """Release what the store holds (temporary files, connections)."""

    def __enter__(self) -> SnapshotStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- primitives

    @abc.abstractmethod
    def _raw_writer(self, name: str) -> RawWriter: ...

    @abc.abstractmethod
    def _open_data(self, name: str) -> BinaryIO: ...

    @abc.abstractmethod
    def _data_exists(self, name: str) -> bool: ...

    @abc.abstractmethod
    def _delete_data(self, name: str) -> None: ...

    @abc.abstractmethod
    def _put_sidecar(self, name: str, body: bytes) -> None: ...

    @abc.abstractmethod
    def _get_sidecar(self, name: str) -> bytes: ...

    @abc.abstractmethod
    def _sidecar_exists(self, name: str) -> bool: ...

    @abc.abstractmethod
    def _delete_sidecar(self, name: str) -> None: ...

    @abc.abstractmethod
    def _sidecar_names(self) -> list[str]:
        """Names of snapshots that have a sidecar."""

    @abc.abstractmethod
    def _data_names(self, prefix: str) -> list[str]:
        """Names of the objects (files) whose name starts with ``prefix``."""


# --------------------------------------------------------------------------- volume


class VolumeStore(SnapshotStore):
    """Snapshots in a directory of a mounted volume (a PVC: CephFS, NFS, any filesystem).

    ``root_dir`` is the mount point, ``sub_path`` a relative directory inside it (created on
    the first save). ``claim_name`` only names the store in locations and messages."""

    def __init__(self, root_dir: str | os.PathLike[str], sub_path: str = "", claim_name: str = ""):
        self.root = Path(root_dir)
        self.sub_path = check_sub_path(sub_path)
        self.claim_name = claim_name
        self.dir = self.root / self.sub_path if self.sub_path else self.root
        # a symlink inside the volume must not lead the store out of it
        real_root = os.path.realpath(self.root)
        real_dir = os.path.realpath(self.dir)
        if real_dir != real_root and not real_dir.startswith(real_root.rstrip(os.sep) + os.sep):
            raise InvalidStoreConfig(f"subPath {sub_path!r} leads outside the volume at {self.root}")

    def __str__(self) -> str:
        if not self.claim_name:
            return f"volume {self.dir}"
        return f"pvc://{self.claim_name}/{self.sub_path}".rstrip("/") + f" (mounted at {self.root})"

    def location(self, name: str) -> str:
        if self.claim_name:
            return "/".join(p for p in (f"pvc://{self.claim_name}", self.sub_path, name) if p)
        return str(self.dir / name)

    def check(self) -> None:
        if not self.root.is_dir():
            raise StoreUnreachable(f"{self}: {self.root} is not a mounted directory", str(self))
        self._mkdir()
        if not os.access(self.dir, os.W_OK | os.X_OK):
            raise StoreAccessDenied(f"{self}: {self.dir} is not writable", str(self))

    def _mkdir(self) -> None:
        if not self.root.is_dir():
            raise StoreUnreachable(f"{self}: {self.root} is not a mounted directory", str(self))
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except PermissionError as exc:
            raise StoreAccessDenied(f"{self}: cannot create {self.dir}: {exc.strerror}", str(self)) from exc
        except OSError as exc:
            raise StoreWriteFailed(f"{self}: cannot create {self.dir}: {exc.strerror}", str(self)) from exc

    def _os_error(self, exc: OSError, doing: str, name: str, write: bool = False) -> StoreError:
        what = f"{self}: {doing} {name!r} failed: {exc.strerror or exc}"
        if isinstance(exc, FileNotFoundError) and not write:
            return SnapshotNotFound(f"{self}: snapshot {name!r} not found", str(self))
        if isinstance(exc, PermissionError):
            return StoreAccessDenied(what, str(self))
        return StoreWriteFailed(what, str(self)) if write else StoreError(what, str(self))

    def _fsync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _atomic_file(self, name: str) -> _VolumeWriter:
        self._mkdir()
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.dir)
        except OSError as exc:
            raise self._os_error(exc, "creating a temporary file for", name, write=True) from exc
        return _VolumeWriter(self, name, os.fdopen(fd, "wb", buffering=0), Path(tmp))

    def _raw_writer(self, name: str) -> RawWriter:
        return self._atomic_file(name)

    def _open_data(self, name: str) -> BinaryIO:
        try:
            return open(self.dir / name, "rb")  # noqa: SIM115 - handed to SnapshotReader, closed there
        except OSError as exc:
            raise self._os_error(exc, "opening snapshot", name) from exc

    def _data_exists(self, name: str) -> bool:
        return (self.dir / name).exists()

    def _delete_data(self, name: str) -> None:
        self._unlink(self.dir / name, name)

    def _unlink(self, path: Path, name: str) -> None:
        try:
            path.unlink(missing_ok=True)
            self._fsync_dir()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._os_error(exc, "deleting", name, write=True) from exc

    def _put_sidecar(self, name: str, body: bytes) -> None:
        w = self._atomic_file(name + SIDECAR_SUFFIX)
        try:
            w.write(body)
            w.commit()
        except BaseException:
            w.abort()
            raise

    def _get_sidecar(self, name: str) -> bytes:
        try:
            return (self.dir / (name + SIDECAR_SUFFIX)).read_bytes()
        except OSError as exc:
            raise self._os_error(exc, "reading the sidecar of", name) from exc

    def _sidecar_exists(self, name: str) -> bool:
        return (self.dir / (name + SIDECAR_SUFFIX)).exists()

    def _delete_sidecar(self, name: str) -> None:
        self._unlink(self.dir / (name + SIDECAR_SUFFIX), name)

    def _sidecar_names(self) -> list[str]:
        if not self.root.is_dir():
            raise StoreUnreachable(f"{self}: {self.root} is not a mounted directory", str(self))
        try:
            entries = os.listdir(self.dir)
        except FileNotFoundError:
            return []  # nothing saved yet
        except OSError as exc:
            raise self._os_error(exc, "listing", str(self.dir)) from exc
        names = []
        for entry in entries:
            if entry.endswith(SIDECAR_SUFFIX) and not entry.startswith("."):
                name = entry[: -len(SIDECAR_SUFFIX)]
                if NAME_PATTERN.match(name) and (self.dir / name).is_file():
                    names.append(name)
        return names

    def _data_names(self, prefix: str) -> list[str]:
        try:
            return [e for e in os.listdir(self.dir) if e.startswith(prefix) and not e.startswith(".")]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self._os_error(exc, "listing", str(self.dir)) from exc

    def incomplete_files(self) -> list[Path]:
        """Temporary files left by writers that were killed (safe to delete when no backup runs)."""
        try:
            return sorted(p for p in self.dir.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp"))
        except FileNotFoundError:
            return []


class _VolumeWriter(RawWriter):
    """A hidden temporary file in the target directory, renamed over the final name on commit."""

    def __init__(self, store: VolumeStore, name: str, file: IO[bytes], tmp: Path):
        self.store, self.name, self.file, self.tmp = store, name, file, tmp

    def write(self, data: bytes | memoryview) -> None:
        try:
            view = memoryview(data)
            while view:  # unbuffered: a short write is possible
                written = self.file.write(view)
                view = view[written:]
        except OSError as exc:
            raise self.store._os_error(exc, "writing", self.name, write=True) from exc

    def commit(self) -> None:
        try:
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp, self.store.dir / self.name)
            self.store._fsync_dir()
        except OSError as exc:
            raise self.store._os_error(exc, "committing", self.name, write=True) from exc

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink(missing_ok=True)


# --------------------------------------------------------------------------- S3


@dataclass(frozen=True)
class S3Credentials:
    """Access key pair read by the caller from the Secret named in the spec."""

    access_key_id: str
    secret_access_key: str = field(repr=False)

    def __repr__(self) -> str:  # never print the secret, not even in a traceback's locals
        return "S3Credentials(access_key_id=<hidden>, secret_access_key=<hidden>)"


_ACCESS_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
                 "ExpiredToken", "AllAccessDisabled", "AccountProblem", "403", "Forbidden",
                 "InvalidSecurity", "AuthorizationHeaderMalformed",
                 "XAdminUserNotFound"}  # versitygw's answer to an unknown access key (with a 404)
_MISSING_KEY_CODES = {"NoSuchKey", "404", "NotFound"}


class S3Store(SnapshotStore):
    """Snapshots as objects in an S3 bucket (AWS or compatible: Ceph RGW, versitygw, ...).

    Large snapshots go up as a multipart upload of ``part_size`` parts, at most
    ``concurrency`` in flight (memory: about part_size x (concurrency + 1)); the upload is
    aborted on any error. ``ca_bundle`` is PEM text or a file path for private CAs.
    ``connect_timeout``, ``read_timeout`` and ``max_attempts`` bound how long an unreachable
    endpoint takes to report."""

    def __init__(
        self,
        endpoint: str,
        bucket: str,
        credentials: S3Credentials,
        prefix: str = "",
        region: str = "",
        force_path_style: bool = True,
        ca_bundle: str | None = None,
        part_size: int = 8 * 1024 * 1024,
        concurrency: int = 6,
        single_put_max: int = 5 * 1024**3,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        max_attempts: int = 3,
    ):
        import boto3  # only the S3 store needs it
        from botocore.config import Config

        if not re.match(r"^https?://[^/\s]+", endpoint or ""):
            raise InvalidStoreConfig(f"S3 endpoint {endpoint!r} must be an http(s) URL")
        if not bucket:
            raise InvalidStoreConfig("S3 bucket must be set")
        if not isinstance(credentials, S3Credentials) or not credentials.access_key_id \
                or not credentials.secret_access_key:
            raise InvalidStoreConfig(f"S3 credentials for s3://{bucket} are missing")
        if part_size < 5 * 1024 * 1024:
            raise InvalidStoreConfig("S3 part_size must be at least 5 MiB (the S3 minimum)")
        self.endpoint = endpoint.rstrip("/")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.region = region or "us-east-1"
        self.part_size = part_size
        self.concurrency = max(1, concurrency)
        # A staged snapshot up to this size goes up as one PUT (S3's limit is 5 GiB): a multipart
        # upload costs a join on the server at the end (versitygw's posix backend copies every
        # part into the object: 4 s of a 1.1 GB backup on the test bed).
        self.whole_file_max = max(0, min(single_put_max, 5 * 1024**3))
        self._secrets = (credentials.access_key_id, credentials.secret_access_key)
        self._ca_file: str | None = None
        verify: bool | str = True
        if ca_bundle:
            if "-----BEGIN" in ca_bundle:
                fd, self._ca_file = tempfile.mkstemp(prefix="s3-ca-", suffix=".pem")
                with os.fdopen(fd, "w") as f:
                    f.write(ca_bundle)
                verify = self._ca_file
            elif os.path.isfile(ca_bundle):
                verify = ca_bundle
            else:
                raise InvalidStoreConfig(f"{self}: CA bundle is neither PEM text nor a readable file")
        config = Config(
            region_name=self.region,
            signature_version="s3v4",
            s3={"addressing_style": "path" if force_path_style else "virtual"},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"max_attempts": max(1, max_attempts), "mode": "standard"},
            max_pool_connections=self.concurrency + 2,
            # S3-compatible stores differ in the newer default checksums; our sha256 covers the data
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        def client(cfg: Config) -> Any:
            return boto3.session.Session().client(
                "s3",
                endpoint_url=self.endpoint,
                aws_access_key_id=credentials.access_key_id,
                aws_secret_access_key=credentials.secret_access_key,
                config=cfg,
                verify=verify,
            )

        self._client = client(config)
        # For whole-file PUTs: no sha256 of the payload for the signature (over http botocore
        # reads the file twice for it, and the server hashes it again); the CRC-32 computed as
        # the bytes were checked goes with the PUT instead and the server refuses other bytes
        # (BadDigest). Made on first use.
        self._bulk_config = config.merge(Config(s3={**config.s3, "payload_signing_enabled": False}))
        self._bulk: Any = None
        self._make_client = client

    def __str__(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"{where} at {self.endpoint}"

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def bulk_client(self) -> Any:
        """The client for whole-file PUTs (unsigned payload, CRC-32 checked by the server)."""
        if self._bulk is None:
            self._bulk = self._make_client(self._bulk_config)
        return self._bulk

    def location(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
        if self._bulk is not None:
            with contextlib.suppress(Exception):
                self._bulk.close()
        if self._ca_file:
            with contextlib.suppress(OSError):
                os.unlink(self._ca_file)
            self._ca_file = None

    # ----- errors

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "<redacted>")
        return text

    def error(self, exc: BaseException, doing: str, name: str = "", write: bool = False) -> StoreError:
        """Map a botocore/urllib3 error to a StoreError naming this store and the operation."""
        from botocore import exceptions as bx

        store = str(self)
        about = f" {name!r}" if name else ""
        if isinstance(exc, StoreError):
            return exc
        if isinstance(exc, bx.SSLError):
            return StoreTLSFailed(self._scrub(
                f"{store}: {doing}{about}: TLS failed: {_short(exc)}; if the endpoint uses a private CA, "
                "give its CA bundle"), store)
        if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError
                      | bx.ConnectionClosedError | bx.ConnectionError | bx.HTTPClientError):
            return StoreUnreachable(self._scrub(f"{store}: {doing}{about}: endpoint unreachable: {_short(exc)}"),
                                    store)
        if isinstance(exc, bx.ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            text = self._scrub(f"{store}: {doing}{about}: {code or status}: {err.get('Message') or ''}".rstrip(": "))
            if code == "NoSuchBucket":
                return BucketNotFound(f"{store}: bucket {self.bucket!r} does not exist ({doing}{about})", store)
            if code in _ACCESS_CODES or status == 403:
                return StoreAccessDenied(text + " (check the access key pair in the credentials Secret and its "
                                                "permissions on the bucket)", store)
            if (code in _MISSING_KEY_CODES or status == 404) and name:
                return SnapshotNotFound(f"{store}: snapshot {name!r} not found", store)
            if code in _MISSING_KEY_CODES or status == 404:
                return BucketNotFound(f"{store}: bucket {self.bucket!r} does not exist ({doing})", store)
            return StoreWriteFailed(text, store) if write else StoreError(text, store)
        if isinstance(exc, bx.BotoCoreError):
            text = self._scrub(f"{store}: {doing}{about}: {_short(exc)}")
            return StoreWriteFailed(text, store) if write else StoreError(text, store)
        if isinstance(exc, OSError):
            return StoreUnreachable(self._scrub(f"{store}: {doing}{about}: {_short(exc)}"), store)
        raise exc

    @contextlib.contextmanager
    def _mapped(self, doing: str, name: str = "", write: bool = False) -> Iterator[None]:
        from botocore import exceptions as bx

        try:
            yield
        except (bx.BotoCoreError, bx.ClientError, OSError) as exc:
            raise self.error(exc, doing, name, write) from None  # the cause could echo request details

    # ----- primitives

    def check(self) -> None:
        # a LIST, not HEAD: its error has a body, so a bad key is not taken for a missing bucket
        with self._mapped("checking bucket"):
            self._client.list_objects_v2(Bucket=self.bucket, Prefix=self.key(""), MaxKeys=1)

    def _exists(self, key: str, name: str) -> bool:
        # a HEAD has no body: a missing bucket is a bare 404 here too, and the upload that
        # follows reports it as NoSuchBucket
        try:
            with self._mapped("looking up", name):
                self._client.head_object(Bucket=self.bucket, Key=key)
        except SnapshotNotFound:
            return False
        return True

    def _data_exists(self, name: str) -> bool:
        return self._exists(self.key(name), name)

    def _sidecar_exists(self, name: str) -> bool:
        return self._exists(self.key(name) + SIDECAR_SUFFIX, name)

    def _raw_writer(self, name: str) -> RawWriter:
        return _S3Writer(self, name)

    def _open_data(self, name: str) -> BinaryIO:
        with self._mapped("reading snapshot", name):
            body = self._client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"]
        return _S3Body(self, body, name)  # type: ignore[return-value]

    def _delete_data(self, name: str) -> None:
        with self._mapped("deleting snapshot", name, write=True):
            self._client.delete_object(Bucket=self.bucket, Key=self.key(name))

    def _put_sidecar(self, name: str, body: bytes) -> None:
        with self._mapped("writing the sidecar of", name, write=True):
            self._client.put_object(Bucket=self.bucket, Key=self.key(name) + SIDECAR_SUFFIX, Body=body,
                                    ContentType="application/json")

    def _get_sidecar(self, name: str) -> bytes:
        try:
            with self._mapped("reading the sidecar of", name):
                return self._client.get_object(Bucket=self.bucket, Key=self.key(name) + SIDECAR_SUFFIX)["Body"].read()
        except SnapshotNotFound:
            raise SnapshotNotFound(f"{self}: snapshot {name!r} not found", str(self)) from None

    def _delete_sidecar(self, name: str) -> None:
        with self._mapped("deleting the sidecar of", name, write=True):
            self._client.delete_object(Bucket=self.bucket, Key=self.key(name) + SIDECAR_SUFFIX)

    def _sidecar_names(self) -> list[str]:
        start = f"{self.prefix}/" if self.prefix else ""
        names = []
        with self._mapped("listing"):
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start, Delimiter="/")
            for page in pages:
                for obj in page.get("Contents", []):
                    rest = obj["Key"][len(start):]
                    if rest.endswith(SIDECAR_SUFFIX):
                        name = rest[: -len(SIDECAR_SUFFIX)]
                        if NAME_PATTERN.match(name):
                            names.append(name)
        return names

    def _data_names(self, prefix: str) -> list[str]:
        start = f"{self.prefix}/" if self.prefix else ""
        names = []
        with self._mapped("listing"):
            for page in self._client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=start + prefix, Delimiter="/"):
                names.extend(obj["Key"][len(start):] for obj in page.get("Contents", []))
        return names

    def incomplete_uploads(self) -> list[dict[str, Any]]:
        """Multipart uploads never completed nor aborted (a writer was killed); a bucket
        lifecycle rule (AbortIncompleteMultipartUpload) removes them."""
        with self._mapped("listing multipart uploads"):
            resp = self._client.list_multipart_uploads(Bucket=self.bucket, Prefix=self.key(""))
        return [{"key": u["Key"], "uploadId": u["UploadId"]} for u in resp.get("Uploads", [])]


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) < 400 else text[:400] + "..."


class _S3Body:
    """get_object's body with read errors mapped to StoreErrors."""

    def __init__(self, store: S3Store, body: Any, name: str):
        self.store, self.body, self.name = store, body, name

    def read(self, n: int = -1) -> bytes:
        with self.store._mapped("reading snapshot", self.name):
            try:
                return self.body.read(n)
            except Exception as exc:  # urllib3 errors surface as botocore or urllib3 types
                from botocore import exceptions as bx

                if isinstance(exc, bx.BotoCoreError | bx.ClientError | OSError):
                    raise
                raise StoreUnreachable(
                    self.store._scrub(f"{self.store}: reading snapshot {self.name!r}: {_short(exc)}"),
                    str(self.store)) from None

    def close(self) -> None:
        self.body.close()


class _S3Writer(RawWriter):
    """Parts filled to ``part_size`` and uploaded by a small thread pool (at most
    ``concurrency`` in flight); a snapshot smaller than one part is a single PUT. The object
    appears only on CompleteMultipartUpload; any error aborts the upload."""

    def __init__(self, store: S3Store, name: str):
        self.store, self.name, self.key = store, name, store.key(name)
        self._part = bytearray(store.part_size)  # filled in place; handed to the upload as is
        self._filled = 0
        self._upload_id: str | None = None
        self._parts: list[tuple[int, Future[str]]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._put_whole = False  # the object is in place from put_file (one PUT)

    def _part_size(self) -> int:
        # S3 allows 10,000 parts: double the part size every 2,000 so no snapshot runs out
        return self.store.part_size << (len(self._parts) // 2000)

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        size = len(self._part)
        while view:
            n = min(len(view), size - self._filled)
            self._part[self._filled:self._filled + n] = view[:n]
            self._filled += n
            view = view[n:]
            if self._filled == size:
                full, self._filled = self._part, 0
                self._send(full)
                size = self._part_size()
                self._part = bytearray(size)

    def _send(self, part: bytes | bytearray) -> None:
        if self._upload_id is None:
            with self.store._mapped("starting the upload of", self.name, write=True):
                self._upload_id = self.store._client.create_multipart_upload(
                    Bucket=self.store.bucket, Key=self.key, ContentType="application/octet-stream")["UploadId"]
            self._pool = ThreadPoolExecutor(self.store.concurrency, thread_name_prefix="s3-part")
        in_flight = [f for _, f in self._parts if not f.done()]
        if len(in_flight) >= self.store.concurrency:  # bound memory: wait for the oldest part
            in_flight[0].result()
        for _, f in self._parts:  # fail fast on any finished part's error
            if f.done():
                f.result()
        number = len(self._parts) + 1
        assert self._pool is not None
        self._parts.append((number, self._pool.submit(self._upload_part, number, part)))

    def _upload_part(self, number: int, body: bytes | bytearray) -> str:
        with self.store._mapped(f"uploading part {number} of", self.name, write=True):
            return self.store._client.upload_part(Bucket=self.store.bucket, Key=self.key, UploadId=self._upload_id,
                                                  PartNumber=number, Body=body)["ETag"]

    def put_file(self, path: str | os.PathLike[str], size: int, crc32: int) -> None:
        if size > self.store.whole_file_max or self._upload_id is not None or self._filled:
            super().put_file(path, size, crc32)  # too large for one PUT: parts
            return
        with self.store._mapped("uploading", self.name, write=True), open(path, "rb") as body:
            self._put_whole = True  # from here on an abort deletes what the PUT may have left
            self.store.bulk_client().put_object(
                Bucket=self.store.bucket, Key=self.key, Body=body, ContentLength=size,
                ContentType="application/octet-stream",
                ChecksumCRC32=base64.b64encode(crc32.to_bytes(4, "big")).decode())

    def commit(self) -> None:
        if self._put_whole:
            return
        rest = bytes(memoryview(self._part)[: self._filled])
        self._part, self._filled = bytearray(), 0
        if self._upload_id is None:
            with self.store._mapped("uploading", self.name, write=True):
                self.store._client.put_object(Bucket=self.store.bucket, Key=self.key, Body=rest,
                                              ContentType="application/octet-stream")
            return
        if rest:
            self._send(rest)
        parts = [{"PartNumber": n, "ETag": f.result()} for n, f in self._parts]
        with self.store._mapped("completing the upload of", self.name, write=True):
            self.store._client.complete_multipart_upload(
                Bucket=self.store.bucket, Key=self.key, UploadId=self._upload_id,
                MultipartUpload={"Parts": parts})
        self._shutdown()

    def abort(self) -> None:
        self._part, self._filled = bytearray(), 0
        if self._put_whole:
            self._put_whole = False
            with contextlib.suppress(Exception):
                self.store._client.delete_object(Bucket=self.store.bucket, Key=self.key)
        self._shutdown(cancel=True)
        if self._upload_id is not None:
            with contextlib.suppress(Exception):
                self.store._client.abort_multipart_upload(Bucket=self.store.bucket, Key=self.key,
                                                          UploadId=self._upload_id)
            self._upload_id = None

    def _shutdown(self, cancel: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
            self._pool = None


# --------------------------------------------------------------------------- factory


def store_from_spec(
    storage: Mapping[str, Any],
    *,
    volume_root: str | os.PathLike[str] | None = None,
    credentials: S3Credentials | None = None,
    ca_bundle: str | None = None,
    **s3_tuning: Any,
) -> SnapshotStore:
    """The store an EtcdBackup's ``spec.storage`` names.

    ``storage`` is ``{"pvc": {"claimName", "subPath"}}`` or ``{"s3": {"endpoint", "bucket",
    "prefix", "region", "forcePathStyle", "credentialsSecretRef"}}``. What the spec only
    refers to is resolved by the caller and passed in: ``volume_root`` (where the claim is
    mounted), ``credentials`` (from the Secret), ``ca_bundle`` (PEM text or a path).
    ``s3_tuning`` goes to S3Store (part_size, concurrency, timeouts, max_attempts)."""
    if not isinstance(storage, Mapping):
        raise InvalidStoreConfig("storage must be an object with pvc or s3")
    pvc, s3 = storage.get("pvc"), storage.get("s3")
    if bool(pvc) == bool(s3):
        raise InvalidStoreConfig("exactly one of storage.pvc or storage.s3 must be set")
    if pvc:
        claim = pvc.get("claimName")
        if not claim:
            raise InvalidStoreConfig("storage.pvc.claimName must be set")
        if volume_root is None:
            raise InvalidStoreConfig(f"pvc://{claim}: the claim's mount path was not given")
        return VolumeStore(volume_root, pvc.get("subPath") or "", claim_name=claim)
    if credentials is None:
        raise InvalidStoreConfig(f"s3://{s3.get('bucket', '')}: credentials were not given")
    return S3Store(
        endpoint=str(s3.get("endpoint", "")),
        bucket=str(s3.get("bucket", "")),
        credentials=credentials,
        prefix=str(s3.get("prefix") or ""),
        region=str(s3.get("region") or ""),
        force_path_style=bool(s3.get("forcePathStyle", True)),
        ca_bundle=ca_bundle,
        **s3_tuning,
    )


def parse_location(location: str) -> tuple[str, str, str]:
    """``pvc://claim/path/name`` or ``s3://bucket/key`` -> (scheme, claim or bucket, path or key)."""
    m = re.fullmatch(r"(pvc|s3)://([^/]+)/(.+)", location or "")
    if not m:
        raise InvalidStoreConfig(f"location {location!r} is not pvc://claim/path or s3://bucket/key")
    scheme, where, rest = m.groups()
    check_sub_path(rest)
    check_name(rest.rsplit("/", 1)[-1])
    return scheme, where, rest


__all__: Sequence[str] = (
    "BucketNotFound", "IntegrityCheckFailed", "InvalidStoreConfig", "S3Credentials", "S3Store",
    "SnapshotAlreadyExists", "SnapshotInfo", "SnapshotMeta", "SnapshotNotFound", "SnapshotReader",
    "SnapshotSource", "SnapshotStore", "SnapshotWriter", "StoreAccessDenied", "StoreError", "StoreTLSFailed",
    "StoreUnreachable", "StoreWriteFailed", "VolumeStore", "check_name", "check_sub_path", "parse_location",
    "select_for_deletion", "snapshot_name", "store_from_spec",
)
