"""etcd snapshots: stream one from a member to a file, verify a file, read its revision.

Plain Python, no Ansible API; the transport is ``etcd_gateway``. The snapshot RPC streams
JSON lines with base64 ``blob`` chunks, and etcd sends the sha256 of the database as the last
32 bytes; a file is checked against that trailer the way ``etcdutl snapshot restore`` does.
"""

from __future__ import annotations

import array
import base64
import contextlib
import hashlib
import json
import mmap
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import requests
import urllib3

from karmada_operator.etcd.gateway import EtcdClient, EtcdError, api_error, validate_endpoint

HASH_SIZE = hashlib.sha256().digest_size  # etcd appends sha256(db) to a snapshot stream


class EtcdSnapshotError(EtcdError):
    """A snapshot is truncated, altered or not an etcd database; do not restore from it."""


@dataclass(frozen=True)
class SnapshotResult:
    path: str
    size: int
    sha256: str
    revision: int
    etcd_version: str
    storage_version: str
    endpoint: str
    duration_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- stream


@dataclass(frozen=True)
class StreamedSnapshot:
    """What :func:`stream_snapshot` sent on: the bytes as etcd sent them (database + trailer)."""

    size: int
    sha256: str
    revision: int
    storage_version: str
    endpoint: str
    duration_seconds: float


def stream_snapshot(
    client: EtcdClient,
    write: Callable[[bytes], Any],
    endpoint: str | None = None,
    chunk_timeout: float = 60.0,
) -> StreamedSnapshot:
    """Stream a snapshot from one member into ``write`` (a file's or a store writer's), checking
    etcd's sha256 trailer and reading the database's revision on the way, with no local copy.

    ``write`` receives every byte etcd sent, trailer included (what ``etcdutl snapshot
    restore`` reads). Raises EtcdSnapshotError when the stream breaks or the trailer does
    not match; the caller then discards what ``write`` got (a store writer aborts).
    """
    target = validate_endpoint(endpoint) if endpoint else client.first_reachable()
    started = time.monotonic()
    resp = client.stream(target, "maintenance/snapshot", chunk_timeout)
    digest = hashlib.sha256()  # of the database: must equal the trailer
    whole = hashlib.sha256()  # of the bytes as sent, returned to the caller
    pages = RevisionReader()  # the revision, from the bbolt pages as they pass
    tail = b""  # the last HASH_SIZE bytes seen, not yet hashed
    size = 0
    storage_version = ""
    try:
        for line in _json_lines(resp):
            blob = _fast_blob(line)
            if blob is None:  # not the common shape: parse it properly
                msg = json.loads(line)
                if "error" in msg:
                    err = msg["error"] if isinstance(msg["error"], dict) else {"message": msg["error"]}
                    raise api_error(target, "/v3/maintenance/snapshot", err.get("http_code", 500), err)
                result = msg.get("result", msg)
                storage_version = result.get("version", storage_version)
                blob = base64.b64decode(result.get("blob", ""))
            elif size == 0:  # the first message also says the storage version (etcd >= 3.6)
                storage_version = json.loads(line).get("result", {}).get("version", "")
            write(blob)
            whole.update(blob)
            size += len(blob)
            if len(blob) >= HASH_SIZE:
                digest.update(tail)
                db_part = memoryview(blob)[:-HASH_SIZE]
                digest.update(db_part)
                pages.feed(tail)
                pages.feed(db_part)
                tail = blob[-HASH_SIZE:]
            else:
                buf = tail + blob
                digest.update(buf[:-HASH_SIZE])
                pages.feed(buf[:-HASH_SIZE])
                tail = buf[-HASH_SIZE:]
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as exc:
        raise EtcdSnapshotError(
            f"snapshot stream from {target} broke after {size} bytes ({exc}); "
            "retry the backup, preferably from another member"
        ) from exc
    finally:
        resp.close()
    if size <= HASH_SIZE or digest.digest() != tail:
        raise EtcdSnapshotError(
            f"snapshot from {target} failed its sha256 check ({size} bytes "
            "received); the stream was cut or corrupted: retry the backup"
        )
    return StreamedSnapshot(size, whole.hexdigest(), pages.revision(), storage_version, target,
                            round(time.monotonic() - started, 3))


@dataclass(frozen=True)
class CheckedFile:
    """What :func:`read_checked` found after the last chunk: size and sha256 of the bytes as
    read, and whether etcd's trailer matched the database."""

    size: int
    sha256: str
    trailer_ok: bool


class _CheckedReader:
    def __init__(self, chunks: Iterable[bytes], whole_hash: bool) -> None:
        self.chunks, self.whole_hash = chunks, whole_hash
        self.result: CheckedFile | None = None

    def __iter__(self) -> Iterator[bytes]:
        whole, digest = (hashlib.sha256() if self.whole_hash else None), hashlib.sha256()
        tail, size = b"", 0
        for blob in self.chunks:
            if not blob:
                continue
            yield blob
            if whole is not None:
                whole.update(blob)
            size += len(blob)
            buf = tail + blob if len(blob) < HASH_SIZE else None
            if buf is None:
                digest.update(tail)
                digest.update(memoryview(blob)[:-HASH_SIZE])
                tail = blob[-HASH_SIZE:]
            else:
                digest.update(buf[:-HASH_SIZE])
                tail = buf[-HASH_SIZE:]
        ok = size > HASH_SIZE and size % 512 == HASH_SIZE and digest.digest() == tail
        self.result = CheckedFile(size, whole.hexdigest() if whole is not None else "", ok)


def _file_chunks(path: Path, chunk: int) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while blob := handle.read(chunk):
            yield blob


def read_checked(path: str | os.PathLike[str], chunk: int = 8 << 20, whole_hash: bool = True) -> _CheckedReader:
    """Iterate over a snapshot file's bytes (to hand them to a store) while checking etcd's
    sha256 trailer in the same pass; ``.result`` (CheckedFile) is set after the last chunk.
    One read of the file instead of a verify pass and an upload pass. ``whole_hash=False``
    leaves the sha256 of the whole file to the caller (a store writer computes it anyway)."""
    return _CheckedReader(_file_chunks(Path(path), chunk), whole_hash)


def _etcdctl_argv(etcdctl: str, target: str, path: str | os.PathLike[str], cacert: str, cert: str, key: str,
                  timeout: float) -> list[str]:
    return [etcdctl, f"--endpoints={target}", f"--cacert={cacert}", f"--cert={cert}", f"--key={key}",
            "--dial-timeout=10s", f"--command-timeout={int(timeout)}s", "snapshot", "save", str(path)]


def _etcdctl_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ETCDCTL_API": "3"}


def _last_line(*texts: str) -> str:
    for text in texts:
        lines = (text or "").strip().splitlines()
        if lines:
            return lines[-1]
    return "no output"


class EtcdctlFollow:
    """``etcdctl snapshot save`` (gRPC, etcd's own client: about 2.7x the JSON gateway's
    throughput) into ``path`` while its bytes are read as they land.

    etcdctl writes ``<path>.part`` (and renames it to ``path`` when the stream ended); iterating
    yields that file's bytes as it grows, so a store can take them while the snapshot is still
    coming (the two overlap instead of adding up). The iteration ends once etcdctl has exited
    and the file is read to its end; it raises EtcdSnapshotError when etcdctl failed (nothing
    read may then be kept). ``seconds`` is etcdctl's run time. Closing the iterator early stops
    etcdctl. The bytes are not checked here: the backup checks etcd's trailer as it stores them
    (``etcd_backup._stream_into``).
    """

    def __init__(self, etcdctl: str, endpoint: str, path: str | os.PathLike[str], *, cacert: str, cert: str,
                 key: str, timeout: float = 3600.0, chunk: int = 8 << 20, poll: float = 0.02) -> None:
        self.target = validate_endpoint(endpoint)
        self.path, self.part = Path(path), Path(f"{path}.part")
        self.argv = _etcdctl_argv(etcdctl, self.target, path, cacert, cert, key, timeout)
        self.timeout, self.chunk, self.poll = timeout, chunk, poll
        self.seconds: float | None = None

    def _failed(self, errors: Any) -> EtcdSnapshotError:
        errors.seek(0)
        text = errors.read().decode(errors="replace")
        return EtcdSnapshotError(f"etcdctl snapshot save from {self.target} failed: {_last_line(text)}")

    def __iter__(self) -> Iterator[bytes]:
        import subprocess
        import tempfile

        for stale in (self.path, self.part):
            stale.unlink(missing_ok=True)
        started = time.monotonic()
        deadline = started + self.timeout + 30
        with tempfile.TemporaryFile(dir=self.path.parent) as errors:
            try:
                proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=errors, env=_etcdctl_env())
            except OSError as exc:
                raise EtcdSnapshotError(f"etcdctl snapshot save from {self.target} did not run: {exc}") from exc
            handle = None
            try:
                while handle is None:  # the .part file, or the final one if etcdctl was that quick
                    exited = proc.poll() is not None
                    for candidate in (self.part, self.path):
                        with contextlib.suppress(FileNotFoundError):
                            handle = open(candidate, "rb")  # noqa: SIM115 - closed in finally
                            break
                    if handle is None:
                        if exited:
                            raise self._failed(errors) if proc.returncode else EtcdSnapshotError(
                                f"etcdctl snapshot save from {self.target} wrote no file")
                        if time.monotonic() > deadline:
                            raise EtcdSnapshotError(f"etcdctl snapshot save from {self.target} timed out")
                        time.sleep(self.poll)
                while True:
                    exited = proc.poll() is not None  # before the read: a final empty read is then the end
                    blob = handle.read(self.chunk)
                    if blob:
                        yield blob
                    elif exited:
                        break
                    elif time.monotonic() > deadline:
                        raise EtcdSnapshotError(f"etcdctl snapshot save from {self.target} timed out")
                    else:
                        time.sleep(self.poll)
                if proc.returncode != 0:
                    raise self._failed(errors)
                self.seconds = round(time.monotonic() - started, 3)
            finally:
                if handle is not None:
                    handle.close()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                self.part.unlink(missing_ok=True)


def save_snapshot(
    client: EtcdClient, path: str | os.PathLike[str], endpoint: str | None = None, chunk_timeout: float = 60.0
) -> SnapshotResult:
    """Stream a snapshot from one member into ``path``, verifying etcd's sha256 trailer.

    Written to ``<path>.part`` first and renamed only once the trailer matches, so a
    half-written or corrupted file never takes the final name.
    """
    target = validate_endpoint(endpoint) if endpoint else client.first_reachable()
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + ".part")
    try:
        with open(part, "wb") as out:
            streamed = stream_snapshot(client, out.write, target, chunk_timeout)
        revision = snapshot_revision(part)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, final)
    status_version = ""
    with contextlib.suppress(EtcdError):  # the file is good; the version is informational
        status_version = client.status(target).version
    return SnapshotResult(
        str(final),
        streamed.size,
        streamed.sha256,
        revision,
        status_version,
        streamed.storage_version,
        target,
        streamed.duration_seconds,
    )


_BLOB_PREFIX = b'{"result":{"blob":"'


def _fast_blob(line: bytes) -> bytes | None:
    """The blob of a ``{"result":{"blob":"<base64>",...}}`` line without building a JSON tree.

    Base64 never contains '"' or '\\', so the first quote after the prefix ends it. Any other
    shape (errors, a reordered object) returns None and goes through json.loads.
    """
    if not line.startswith(_BLOB_PREFIX):
        return None
    end = line.find(b'"', len(_BLOB_PREFIX))
    if end < 0:
        return None
    return base64.b64decode(line[len(_BLOB_PREFIX) : end], validate=True)


def _json_lines(resp: requests.Response, chunk: int = 1 << 20) -> Iterator[bytes]:
    """Non-empty lines of a streamed response, read in large chunks (cheaper than iter_lines)."""
    pending = b""
    for data in resp.raw.stream(chunk, decode_content=True):
        pending += data
        lines = pending.split(b"\n")
        pending = lines.pop()
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


# --------------------------------------------------------------------------- files


def verify_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check a snapshot file before anything restores from it; return size, sha256, revision.

    Same rule as ``etcdutl snapshot restore``: a snapshot taken over the wire is the bbolt
    file (a whole number of 512-byte sectors) plus 32 bytes of sha256 over the rest.
    """
    p = Path(path)
    if not p.is_file():
        raise EtcdSnapshotError(f"snapshot {p} does not exist; check the path or fetch it from the store")
    size = p.stat().st_size
    if size <= HASH_SIZE or size % 512 != HASH_SIZE:
        raise EtcdSnapshotError(
            f"snapshot {p} is {size} bytes, not a database plus its 32-byte sha256 trailer: it is truncated "
            "or not a snapshot from `etcdctl snapshot save`/etcd_snapshot; use another backup"
        )
    whole = hashlib.sha256()
    digest = hashlib.sha256()
    with open(p, "rb") as handle:
        remaining = size - HASH_SIZE
        while remaining:
            chunk = handle.read(min(1 << 20, remaining))
            if not chunk:
                raise EtcdSnapshotError(f"snapshot {p} shrank while reading; retry")
            digest.update(chunk)
            whole.update(chunk)
            remaining -= len(chunk)
        trailer = handle.read(HASH_SIZE)
        whole.update(trailer)
    if digest.digest() != trailer:
        raise EtcdSnapshotError(
            f"snapshot {p} fails its sha256 check: the file was altered or corrupted; "
            "do not restore it, use another backup"
        )
    return {"path": str(p), "size": size, "sha256": whole.hexdigest(), "revision": snapshot_revision(p)}


# --------------------------------------------------------------------------- bbolt revision
# Not `etcdutl snapshot status`: that walks every key (1.1 s, 320 MB RSS for a 276 MB db); this reads a few pages.

BOLT_MAGIC = 0xED0CDAED


def snapshot_revision(path: str | os.PathLike[str]) -> int:
    """Latest revision stored in an etcd db/snapshot: the last key of its bbolt ``key`` bucket.

    The same number ``etcdutl snapshot status`` prints; read directly from the bbolt pages.
    """
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            return _bolt_last_revision(data)
        except (struct.error, IndexError, ValueError) as exc:
            raise EtcdSnapshotError(
                f"{path} is not a readable etcd database ({exc}); use another backup"
            ) from exc


# bbolt page layout: a 16-byte header (id u64, flags u16, count u16, overflow u32), then
# `count` element headers of 16 bytes; keys and values follow, addressed relative to their element.
_BRANCH, _LEAF, _META = 0x01, 0x02, 0x04
_BUCKET_ELEMENT = 0x01
_MAX_SPAN = 128 << 20  # a page claiming more (with its overflow) is not taken for one
_SCAN_LIMIT = 256  # elements scanned for the "key" bucket on a leaf of short keys


class RevisionReader:
    """The revision of an etcd database read from its bbolt pages while they stream past.

    :func:`snapshot_revision` follows page pointers in a file; a stream cannot seek back, so
    this records, for every page as it passes, the little the pointer walk needs: the last
    child of each branch page, the child towards ``b"key"`` of branch pages of short keys
    (the root bucket), the revision of the last key of each leaf page, and where a ``key``
    bucket element points. ``revision()`` then walks from the newest meta page through
    these records. Memory: 8 bytes per leaf page plus a small entry per branch page, and
    the bytes of the page being read (with its overflow); stale (freed) pages are recorded
    too but are never reached from the meta page.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._offset = 0  # stream offset of _buf[0]
        self._page_size = 0
        self._error = ""
        self._metas: list[tuple[int, int]] = []  # (txid, root bucket pgid)
        self._last_child: dict[int, int] = {}
        self._key_child: dict[int, int] = {}
        self._key_bucket: dict[int, tuple[str, int]] = {}  # leaf -> ("page", root) | ("rev", revision)
        self._last_rev = array.array("q")  # leaf pgid -> revision of its last key; -1: not a leaf

    def feed(self, data: bytes | memoryview) -> None:
        if self._error or not data:
            return
        self._buf += data
        try:
            self._drain()
        except (struct.error, IndexError, ValueError) as exc:
            self._error = f"unreadable bbolt page near byte {self._offset} ({exc})"
            self._buf = bytearray()

    def _drain(self) -> None:
        buf = self._buf
        if not self._page_size:
            if len(buf) < 28:
                return
            magic, _version, size = struct.unpack_from("<III", buf, 16)
            if magic != BOLT_MAGIC or size < 512 or size & (size - 1):
                self._error = "not a bbolt database (no meta page at its start)"
                return
            self._page_size = size
        ps = self._page_size
        pos = 0
        with memoryview(buf) as view:
            while len(buf) - pos >= ps:
                pgid = (self._offset + pos) // ps
                _id, flags, count, overflow = struct.unpack_from("<QHHI", buf, pos)
                span = (overflow + 1) * ps
                if _id == pgid and flags & (_BRANCH | _LEAF | _META) and span <= _MAX_SPAN:
                    if len(buf) - pos < span:
                        break  # wait for the rest of this page
                    with view[pos : pos + span] as page:
                        self._page(pgid, flags, count, page)
                pos += ps  # one page at a time: a stale header's overflow may cover live pages
        if pos:
            del buf[:pos]
            self._offset += pos

    def _page(self, pgid: int, flags: int, count: int, page: memoryview) -> None:
        if flags & _META:
            if pgid in (0, 1):
                magic, _ver, _ps, _flags, root, _seq, _free, _hwm, txid = struct.unpack_from("<IIII5Q", page, 16)
                if magic == BOLT_MAGIC:
                    self._metas.append((txid, root))
            return
        if flags & _BRANCH:
            if count == 0:
                return
            last = 16 + 16 * (count - 1)
            self._last_child[pgid] = struct.unpack_from("<Q", page, last + 8)[0]
            if count <= _SCAN_LIMIT and struct.unpack_from("<I", page, 16 + 4)[0] not in (17, 18):
                child = None
                for i in range(count):
                    e = 16 + 16 * i
                    pos, ksize, cid = struct.unpack_from("<IIQ", page, e)
                    if child is None or bytes(page[e + pos : e + pos + ksize]) <= b"key":
                        child = cid
                    else:
                        break
                if child is not None:
                    self._key_child[pgid] = child
            return
        # leaf
        revs = self._last_rev
        if pgid >= len(revs):
            revs.extend(array.array("q", [-1]) * (pgid + 1 - len(revs)))
        if count == 0:
            revs[pgid] = 0
            return
        last = 16 + 16 * (count - 1)
        _f, pos, ksize, _v = struct.unpack_from("<IIII", page, last)
        if ksize >= 8:
            revs[pgid] = struct.unpack_from(">Q", page, last + pos)[0] & 0x7FFFFFFFFFFFFFFF
        if count <= _SCAN_LIMIT and struct.unpack_from("<I", page, 16 + 8)[0] not in (17, 18):
            for i in range(count):
                e = 16 + 16 * i
                eflags, pos, ksize, vsize = struct.unpack_from("<IIII", page, e)
                if eflags & _BUCKET_ELEMENT and ksize == 3 and bytes(page[e + pos : e + pos + 3]) == b"key":
                    value = bytes(page[e + pos + 3 : e + pos + 3 + vsize])
                    root = struct.unpack_from("<Q", value, 0)[0]
                    if root:
                        self._key_bucket[pgid] = ("page", root)
                    else:  # an inline bucket: its one leaf page follows the bucket header
                        self._key_bucket[pgid] = ("rev", _inline_last_revision(value))

    def revision(self) -> int:
        """The revision of the last key of the live ``key`` bucket; EtcdSnapshotError if unreadable."""
        if self._error:
            raise EtcdSnapshotError(f"snapshot revision: {self._error}")
        if not self._metas:
            raise EtcdSnapshotError("snapshot revision: no valid bbolt meta page")
        _, pgid = max(self._metas)
        for _ in range(64):  # tree depth; a loop means a broken file
            if pgid not in self._key_child:
                break
            pgid = self._key_child[pgid]
        entry = self._key_bucket.get(pgid)
        if entry is None:
            raise EtcdSnapshotError("snapshot revision: no 'key' bucket: not an etcd database")
        kind, value = entry
        if kind == "rev":
            return value
        pgid = value
        for _ in range(64):
            if pgid not in self._last_child:
                break
            pgid = self._last_child[pgid]
        if pgid >= len(self._last_rev) or self._last_rev[pgid] < 0:
            raise EtcdSnapshotError(f"snapshot revision: leaf page {pgid} of the 'key' bucket was not in the stream")
        return self._last_rev[pgid]


def _inline_last_revision(bucket: bytes) -> int:
    _pid, _flags, count, _ov = struct.unpack_from("<QHHI", bucket, 16)
    if count == 0:
        return 0
    e = 16 + 16 + 16 * (count - 1)
    _f, pos, _ksize, _v = struct.unpack_from("<IIII", bucket, e)
    return struct.unpack_from(">Q", bucket, e + pos)[0]


def _bolt_last_revision(data: mmap.mmap | bytes) -> int:
    metas = []
    page_size = struct.unpack_from("<I", data, 16 + 8)[0]
    for pgid in (0, 1):
        base = pgid * page_size + 16
        magic, _ver, psize, _flags, root, _seq, _free, _hwm, txid = struct.unpack_from("<IIII5Q", data, base)
        if magic == BOLT_MAGIC and psize == page_size:
            metas.append((txid, root))
    if not metas:
        raise ValueError("no valid bbolt meta page")
    _, root = max(metas)

    def page(pgid: int) -> tuple[int, int, int]:
        off = pgid * page_size
        _pid, flags, count, _overflow = struct.unpack_from("<QHHI", data, off)
        return off, flags, count

    def find(buf: Any, off: int, flags: int, count: int, key: bytes, inline: bool) -> bytes | None:
        elems = off + 16
        if flags & 0x01:  # branch: follow the last element whose key <= target
            child = None
            for i in range(count):
                e = elems + 16 * i
                pos, ksize, pgid = struct.unpack_from("<IIQ", buf, e)
                if bytes(buf[e + pos : e + pos + ksize]) <= key or child is None:
                    child = pgid
                else:
                    break
            assert child is not None
            return find(data, *page(child), key, False)
        for i in range(count):
            e = elems + 16 * i
            eflags, pos, ksize, vsize = struct.unpack_from("<IIII", buf, e)
            if bytes(buf[e + pos : e + pos + ksize]) == key and eflags & 0x01:
                return bytes(buf[e + pos + ksize : e + pos + ksize + vsize])
        return None

    bucket = find(data, *page(root), b"key", False)
    if bucket is None:
        raise ValueError("no 'key' bucket: not an etcd database")
    broot = struct.unpack_from("<Q", bucket, 0)[0]
    if broot == 0:  # inline bucket: its single leaf page follows the bucket header
        buf, off = bucket, 16
        _pid, flags, count, _ov = struct.unpack_from("<QHHI", buf, off)
    else:
        buf = data
        off, flags, count = page(broot)
        while flags & 0x01:
            e = off + 16 + 16 * (count - 1)
            _pos, _ksize, child = struct.unpack_from("<IIQ", buf, e)
            off, flags, count = page(child)
    if count == 0:
        return 0
    e = off + 16 + 16 * (count - 1)
    _f, pos, ksize, _v = struct.unpack_from("<IIII", buf, e)
    return struct.unpack(">Q", bytes(buf[e + pos : e + pos + 8]))[0]
