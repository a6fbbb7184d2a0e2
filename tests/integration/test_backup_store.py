"""The snapshot store contract against a real S3 server (versitygw) and a real directory.

Every contract test runs for both stores (``store`` is parametrized); the S3-only tests
cover what only a network store can do wrong: credentials, reachability, buckets and TLS.
The S3 server needs ``hack/testenv/build-bins.sh versitygw``.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from karmada_operator.backup import store as store_lib
from karmada_operator.backup.store import (
    BucketNotFound,
    IntegrityCheckFailed,
    S3Credentials,
    S3Store,
    SnapshotAlreadyExists,
    SnapshotMeta,
    SnapshotNotFound,
    SnapshotSource,
    SnapshotStore,
    StoreAccessDenied,
    StoreTLSFailed,
    StoreUnreachable,
    VolumeStore,
)
from support.etcd_cluster import free_port
from support.s3_server import S3Server

MiB = 1024 * 1024
PART = 5 * MiB  # the S3 minimum: multipart uploads with little data
T0 = datetime(2026, 3, 1, tzinfo=UTC)
SOURCE = SnapshotSource("site-a", "karmada", "6f1c2d1e-0000-4000-8000-000000000001")


def meta(revision: int = 7, taken_at: datetime | None = None) -> SnapshotMeta:
    return SnapshotMeta(revision=revision, etcd_version="3.6.6", karmada_version="v1.18.2", source=SOURCE,
                        taken_at=taken_at)


@dataclass
class StoreUnderTest:
    """A store plus a way to reach the bytes behind it, to damage them or look for leftovers."""

    store: SnapshotStore
    kind: str
    server: S3Server | None = None
    root: Path | None = None

    def data_path(self, name: str) -> Path:
        if isinstance(self.store, S3Store):
            assert self.server is not None
            return self.server.object_path(self.store.bucket, self.store.key(name))
        assert isinstance(self.store, VolumeStore)
        return self.store.dir / name

    def raw_names(self) -> list[str]:
        """Every object or file in the store, finished or not."""
        if isinstance(self.store, S3Store):
            assert self.server is not None
            resp = self.server.client().list_objects_v2(Bucket=self.store.bucket)
            return sorted(o["Key"] for o in resp.get("Contents", []))
        assert isinstance(self.store, VolumeStore)
        return sorted(os.listdir(self.store.dir)) if self.store.dir.exists() else []


def s3_store(server: S3Server, bucket: str | None = None, **kwargs) -> S3Store:
    kwargs.setdefault("part_size", PART)
    kwargs.setdefault("ca_bundle", server.ca_pem if server.tls else None)
    return S3Store(endpoint=server.endpoint, bucket=bucket or server.create_bucket(),
                   credentials=S3Credentials(server.access_key, server.secret_key),
                   prefix="karmada/etcd", region="us-east-1", **kwargs)


@pytest.fixture(params=["volume", "s3"])
def under_test(request, tmp_path) -> Iterator[StoreUnderTest]:
    if request.param == "volume":
        root = tmp_path / "pvc"
        root.mkdir()
        yield StoreUnderTest(VolumeStore(root, "etcd/backups", claim_name="backups"), "volume", root=root)
        return
    server: S3Server = request.getfixturevalue("s3_server")
    with s3_store(server) as store:
        yield StoreUnderTest(store, "s3", server=server)


def random_chunks(total: int, chunk: int = MiB, seed: bytes = b"") -> Iterator[bytes]:
    """Deterministic pseudo-random bytes, produced chunk by chunk (never all in memory)."""
    block = hashlib.sha256(seed or secrets.token_bytes(8)).digest() * (chunk // 32 + 1)
    sent = 0
    counter = 0
    while sent < total:
        n = min(chunk, total - sent)
        counter += 1
        yield counter.to_bytes(8, "big") + block[: n - 8] if n > 8 else block[:n]
        sent += n


def digest_of(chunks: Iterator[bytes]) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    for c in chunks:
        h.update(c)
        size += len(c)
    return h.hexdigest(), size


# --------------------------------------------------------------------------- the contract, both stores


def test_save_list_fetch_delete_round_trip(under_test):
    store = under_test.store
    store.check()
    small = os.urandom(1000)
    big_sha, big_size = digest_of(random_chunks(12 * MiB + 3, seed=b"big"))  # three S3 parts
    a = store.save("karmada-a.db", [small], meta(10, T0))
    b = store.save("karmada-b.db", random_chunks(12 * MiB + 3, seed=b"big"), meta(20, T0 + timedelta(minutes=1)))
    assert (a.size, a.sha256) == (1000, hashlib.sha256(small).hexdigest())
    assert (b.size, b.sha256) == (big_size, big_sha)

    listed = store.list()
    assert [s.name for s in listed] == ["karmada-a.db", "karmada-b.db"]
    assert listed[1] == b and listed[1].revision == 20 and listed[1].source == SOURCE
    assert listed[1].etcd_version == "3.6.6" and listed[1].karmada_version == "v1.18.2"
    assert listed[1].location.endswith("/karmada-b.db")
    assert store.latest().name == "karmada-b.db"
    # the bytes behind the store are exactly what was saved
    assert hashlib.sha256(under_test.data_path("karmada-b.db").read_bytes()).hexdigest() == big_sha

    with store.fetch("karmada-b.db") as reader:
        assert digest_of(iter(reader)) == (big_sha, big_size)
    out = under_test.root or Path(os.environ.get("TMPDIR", "/tmp"))
    target = out / f"restore-{secrets.token_hex(3)}" / "snapshot.db"
    assert store.fetch_to_file("karmada-a.db", target) == a
    assert target.read_bytes() == small
    target.unlink()

    store.delete("karmada-a.db")
    assert [s.name for s in store.list()] == ["karmada-b.db"]
    with pytest.raises(SnapshotNotFound) as err:
        store.fetch("karmada-a.db")
    assert err.value.reason == "SnapshotNotFound" and str(store) in str(err.value)
    store.delete("karmada-a.db")  # deleting twice is fine
    assert not any("karmada-a" in n for n in under_test.raw_names())  # data and sidecar are gone


def test_flipped_byte_fails_the_integrity_check(under_test, tmp_path):
    store = under_test.store
    saved = store.save("flip.db", random_chunks(6 * MiB, seed=b"flip"), meta())
    path = under_test.data_path("flip.db")
    with open(path, "r+b") as f:  # flip one bit in the middle, behind the store's back
        f.seek(3 * MiB)
        byte = f.read(1)
        f.seek(3 * MiB)
        f.write(bytes([byte[0] ^ 0x01]))

    with pytest.raises(IntegrityCheckFailed) as err:
        store.verify("flip.db")
    exc = err.value
    assert exc.reason == "IntegrityCheckFailed" and exc.snapshot == "flip.db"
    assert exc.expected == saved.sha256 and exc.actual != saved.sha256 and len(exc.actual) == 64
    assert "'flip.db'" in str(exc) and saved.sha256 in str(exc) and exc.actual in str(exc) and str(store) in str(exc)

    target = tmp_path / "out" / "snapshot.db"
    with pytest.raises(IntegrityCheckFailed):
        store.fetch_to_file("flip.db", target)
    assert not target.exists() and os.listdir(target.parent) == []  # no file, not even a partial one


def test_truncated_snapshot_fails_the_integrity_check(under_test):
    store = under_test.store
    store.save("short.db", [b"x" * 4096], meta())
    os.truncate(under_test.data_path("short.db"), 4000)
    with pytest.raises(IntegrityCheckFailed, match="4000 bytes instead of the recorded 4096"):
        store.verify("short.db")


class Broken(Exception):
    pass


def failing_source(total: int, fail_after: int) -> Iterator[bytes]:
    """Like a snapshot stream that breaks: some chunks, then an error."""
    sent = 0
    for chunk in random_chunks(total, seed=b"broken"):
        if sent >= fail_after:
            raise Broken(f"stream broke after {sent} bytes")
        sent += len(chunk)
        yield chunk


def test_interrupted_save_leaves_nothing_listed(under_test):
    store = under_test.store
    with pytest.raises(Broken):
        store.save("broken.db", failing_source(20 * MiB, fail_after=12 * MiB), meta())  # two S3 parts went up
    assert store.list() == []
    assert under_test.raw_names() == []  # no data object, no sidecar, no temp file
    if isinstance(store, S3Store):
        assert store.incomplete_uploads() == []  # the multipart upload was aborted
    else:
        assert store.incomplete_files() == []
    # and the name can be used by the next attempt
    assert store.save("broken.db", [b"ok"], meta()).size == 2


def test_data_without_a_sidecar_is_not_a_snapshot(under_test):
    store = under_test.store
    store.save("whole.db", [b"done"], meta())
    with store.writer("half.db") as w:  # data written and committed by the raw writer, sidecar never
        w.write(b"half")
        w._raw.commit()
    assert [s.name for s in store.list()] == ["whole.db"]
    with pytest.raises(SnapshotNotFound):
        store.fetch("half.db")


def test_an_existing_snapshot_is_never_overwritten(under_test):
    store = under_test.store
    first = store.save("once.db", [b"first"], meta())
    with pytest.raises(SnapshotAlreadyExists) as err:
        store.save("once.db", [b"second"], meta())
    assert str(store) in str(err.value)
    assert store.verify("once.db") == first


def test_retention_deletes_the_oldest(under_test):
    store = under_test.store
    for i in range(5):
        store.save(f"k-{i}.db", [f"snapshot {i}".encode()], meta(i, T0 + timedelta(minutes=i)))
    deleted = store.apply_retention(2)
    assert [s.name for s in deleted] == ["k-0.db", "k-1.db", "k-2.db"]
    assert [s.name for s in store.list()] == ["k-3.db", "k-4.db"]
    assert not any(n.startswith(("k-0", "k-1", "k-2")) or "/k-0" in n or "/k-1" in n or "/k-2" in n
                   for n in under_test.raw_names())


def test_save_and_fetch_stream_without_holding_the_snapshot(under_test):
    """40 MiB through the store with a bounded memory peak: it streams."""
    store = under_test.store
    if isinstance(store, S3Store):
        store.concurrency = 2  # peak about part_size x (concurrency + 2)
    total = 40 * MiB
    tracemalloc.start()
    try:
        saved = store.save("big.db", random_chunks(total, seed=b"stream"), meta())
        _, save_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        with store.fetch("big.db") as reader:
            got = digest_of(iter(reader))
        _, fetch_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == (saved.sha256, total)
    assert save_peak < 28 * MiB, f"save held {save_peak / MiB:.1f} MiB"
    assert fetch_peak < 8 * MiB, f"fetch held {fetch_peak / MiB:.1f} MiB"


def staged_file(tmp_path: Path, total: int, seed: bytes) -> Path:
    path = tmp_path / f"staged-{seed.decode()}.db"
    with open(path, "wb") as f:
        for chunk in random_chunks(total, seed=seed):
            f.write(chunk)
    return path


def note_file(writer, path: Path) -> None:
    with open(path, "rb") as f:
        while chunk := f.read(MiB):
            writer.note(chunk)


def test_a_staged_file_noted_then_handed_over_whole_is_the_snapshot(under_test, tmp_path):
    """note() hashes the bytes as they land, from_file() hands the finished file to the store.
    S3 takes it in one PUT (its ETag is a plain md5, not the '-<parts>' of a multipart upload);
    the volume copies it into place."""
    store = under_test.store
    path = staged_file(tmp_path, 12 * MiB, b"whole")  # more than two S3 parts
    with store.writer("whole.db") as w:
        note_file(w, path)
        w.from_file(path)
        info = w.commit(meta())
    assert (info.sha256, info.size) == (hashlib.sha256(path.read_bytes()).hexdigest(), 12 * MiB)
    assert store.verify("whole.db") == info  # read back from the store: the same bytes
    assert hashlib.sha256(under_test.data_path("whole.db").read_bytes()).hexdigest() == info.sha256
    if isinstance(store, S3Store):
        etag = under_test.server.client().head_object(Bucket=store.bucket, Key=store.key("whole.db"))["ETag"]
        assert etag.strip('"') == hashlib.md5(path.read_bytes()).hexdigest()  # noqa: S324 - S3's ETag
        assert store.incomplete_uploads() == []


def test_a_staged_file_larger_than_one_put_goes_up_in_parts(s3_server, tmp_path):
    with s3_store(s3_server, single_put_max=8 * MiB) as store:
        path = staged_file(tmp_path, 12 * MiB, b"parts")
        with store.writer("parts.db") as w:
            note_file(w, path)
            w.from_file(path)
            info = w.commit(meta())
        etag = s3_server.client().head_object(Bucket=store.bucket, Key=store.key("parts.db"))["ETag"]
        assert etag.strip('"').endswith("-3")  # 5 + 5 + 2 MiB: a multipart upload
        assert store.verify("parts.db") == info


def test_a_staged_file_that_differs_from_what_was_checked_is_refused(under_test, tmp_path):
    store = under_test.store
    path = staged_file(tmp_path, 6 * MiB, b"short")
    with store.writer("short.db") as w:
        note_file(w, path)
        w.note(b"one byte more than the file")
        with pytest.raises(store_lib.StoreWriteFailed, match="staged file"):
            w.from_file(path)
    assert store.list() == [] and under_test.raw_names() == []


def test_a_staged_file_changed_after_it_was_checked_is_refused(under_test, tmp_path):
    """Same size, one byte flipped between note() and from_file(): S3 refuses the PUT (its
    CRC-32 is the checked bytes'), the volume compares the CRC-32 as it copies; nothing listed."""
    store = under_test.store
    path = staged_file(tmp_path, 6 * MiB, b"flipped")
    with store.writer("flipped.db") as w:
        note_file(w, path)
        with open(path, "r+b") as f:
            f.seek(3 * MiB)
            byte = f.read(1)
            f.seek(3 * MiB)
            f.write(bytes([byte[0] ^ 1]))
        with pytest.raises(store_lib.StoreError) as err:
            w.from_file(path)
    assert ("BadDigest" in str(err.value) or "CRC" in str(err.value)), err.value
    assert store.list() == [] and under_test.raw_names() == []


def test_a_whole_file_handed_over_but_never_committed_leaves_nothing(under_test, tmp_path):
    """The object is in the store after the PUT; leaving the writer without commit (a later
    check failed) removes it, as an aborted multipart upload would."""
    store = under_test.store
    path = staged_file(tmp_path, 6 * MiB, b"abort")
    with store.writer("abort.db") as w:
        note_file(w, path)
        w.from_file(path)
    assert store.list() == [] and under_test.raw_names() == []
    if isinstance(store, VolumeStore):
        assert store.incomplete_files() == []


def test_note_and_write_do_not_mix(under_test):
    with under_test.store.writer("mixed.db") as w:
        w.write(b"bytes")
        with pytest.raises(store_lib.StoreWriteFailed, match="do not mix"):
            w.note(b"more")
    with under_test.store.writer("mixed2.db") as w:
        w.note(b"bytes")
        with pytest.raises(store_lib.StoreWriteFailed, match="do not mix"):
            w.write(b"more")


# --------------------------------------------------------------------------- S3 only


def test_wrong_credentials_are_access_denied_without_leaking(s3_server):
    bucket = s3_server.create_bucket()
    wrong_secret = "wrong-" + secrets.token_urlsafe(20)
    store = S3Store(s3_server.endpoint, bucket, S3Credentials(s3_server.access_key, wrong_secret),
                    prefix="etcd", max_attempts=1)
    for action in (store.check, store.list, lambda: store.save("k.db", [b"x"], meta())):
        with pytest.raises(StoreAccessDenied) as err:
            action()
        text = str(err.value)
        assert err.value.reason == "StoreAccessDenied"
        assert f"s3://{bucket}/etcd at {s3_server.endpoint}" in text, text
        assert wrong_secret not in text and s3_server.secret_key not in text and s3_server.access_key not in text
        assert "credentials Secret" in text
        assert err.value.__cause__ is None  # botocore's error (with StringToSign, key id) is not chained
    unknown_key = S3Store(s3_server.endpoint, bucket, S3Credentials("AKUNKNOWN0000", wrong_secret), max_attempts=1)
    with pytest.raises(StoreAccessDenied) as err:
        unknown_key.list()
    assert "AKUNKNOWN0000" not in str(err.value) and wrong_secret not in str(err.value)


def test_unreachable_endpoint_fails_fast():
    port = free_port()  # nothing listens here
    store = S3Store(f"http://127.0.0.1:{port}", "bucket", S3Credentials("ak", "sk"), connect_timeout=1,
                    max_attempts=1)
    started = time.monotonic()
    with pytest.raises(StoreUnreachable) as err:
        store.list()
    assert time.monotonic() - started < 5
    assert err.value.reason == "StoreUnreachable"
    assert f"s3://bucket at http://127.0.0.1:{port}" in str(err.value)


def test_silent_endpoint_times_out_as_configured():
    """A server that accepts connections and never answers: the read timeout bounds the wait."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        store = S3Store(f"http://127.0.0.1:{port}", "bucket", S3Credentials("ak", "sk"), connect_timeout=1,
                        read_timeout=1, max_attempts=2)
        started = time.monotonic()
        with pytest.raises(StoreUnreachable, match="unreachable"):
            store.check()
        assert time.monotonic() - started < 6


def test_missing_bucket_is_bucket_not_found(s3_server):
    store = s3_store(s3_server, bucket="no-such-bucket-" + secrets.token_hex(3))
    for action in (store.check, store.list, lambda: store.save("k.db", [b"x"], meta()),
                   lambda: store.save("k2.db", random_chunks(6 * MiB), meta()), lambda: store.fetch("k.db")):
        with pytest.raises(BucketNotFound) as err:
            action()
        assert err.value.reason == "BucketNotFound" and store.bucket in str(err.value)


def test_tls_with_the_ca_bundle_works_as_pem_text_and_as_a_file(s3_server_tls):
    bucket = s3_server_tls.create_bucket()
    assert s3_server_tls.endpoint.startswith("https://")
    with s3_store(s3_server_tls, bucket, ca_bundle=s3_server_tls.ca_pem) as by_text:
        saved = by_text.save("tls.db", random_chunks(7 * MiB, seed=b"tls"), meta())
    with s3_store(s3_server_tls, bucket, ca_bundle=s3_server_tls.ca_file) as by_file:
        assert by_file.verify("tls.db") == saved


def test_tls_without_the_ca_bundle_says_so(s3_server_tls):
    bucket = s3_server_tls.create_bucket()
    store = S3Store(s3_server_tls.endpoint, bucket, S3Credentials(s3_server_tls.access_key, s3_server_tls.secret_key),
                    max_attempts=1)
    with pytest.raises(StoreTLSFailed) as err:
        store.check()
    assert isinstance(err.value, StoreUnreachable) and err.value.reason == "StoreTLSFailed"
    text = str(err.value)
    assert "certificate verify failed" in text and "CA bundle" in text and s3_server_tls.endpoint in text


def test_factory_spec_reaches_the_server(s3_server):
    bucket = s3_server.create_bucket()
    spec = {"s3": {"endpoint": s3_server.endpoint, "bucket": bucket, "prefix": "site-a", "forcePathStyle": True,
                   "credentialsSecretRef": {"name": "s3-credentials"}}}
    creds = S3Credentials(s3_server.access_key, s3_server.secret_key)
    with store_lib.store_from_spec(spec, credentials=creds, max_attempts=1) as store:
        store.save("k.db", [b"spec"], meta())
    keys = sorted(o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == ["site-a/k.db", "site-a/k.db.meta.json"]
