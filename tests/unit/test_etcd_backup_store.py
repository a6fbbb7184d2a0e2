"""Pure logic of the snapshot store: names, sub paths, retention, sidecars, the spec factory,
and the volume store's files on a tmp directory (atomic write, sidecar last, no escape)."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from karmada_operator.backup import store as store_lib
from karmada_operator.backup.store import (
    IntegrityCheckFailed,
    InvalidStoreConfig,
    S3Credentials,
    SnapshotAlreadyExists,
    SnapshotInfo,
    SnapshotMeta,
    SnapshotNotFound,
    SnapshotSource,
    StoreUnreachable,
    VolumeStore,
)

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
SOURCE = SnapshotSource("karmada-system", "karmada", "0b7e5a4e-6c1f-4a43-9d43-2a8b9b1f1c11")


def meta(revision: int = 42, taken_at: datetime | None = None) -> SnapshotMeta:
    return SnapshotMeta(revision=revision, etcd_version="3.6.6", karmada_version="v1.18.2", source=SOURCE,
                        taken_at=taken_at)


def info(name: str, taken_at: datetime) -> SnapshotInfo:
    return SnapshotInfo(name=name, size=1, sha256="0" * 64, revision=1, etcd_version="3.6.6",
                        karmada_version="v1.18.2", source=SOURCE, taken_at=taken_at)


# --------------------------------------------------------------------------- names and paths


@pytest.mark.parametrize("name", ["karmada-20260101T020000Z.db", "a", "snap_1.db", "A.b-c_d"])
def test_good_names_pass(name):
    assert store_lib.check_name(name) == name


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "../x", "x y", "snap.meta.json", "a" * 254, "-x", "é"])
def test_bad_names_are_refused(name):
    with pytest.raises(InvalidStoreConfig) as err:
        store_lib.check_name(name)
    assert err.value.reason == "InvalidStoreConfig"


def test_snapshot_name_is_prefix_and_utc_time():
    local = T0.astimezone(timezone(timedelta(hours=2)))
    assert store_lib.snapshot_name("karmada", local) == "karmada-20260101T020000Z.db"


@pytest.mark.parametrize("sub_path,clean", [("", ""), ("backups", "backups"), ("a/b/", "a/b"),
                                            ("./a//b", "a/b"), ("a..b/c", "a..b/c")])
def test_sub_path_accepted(sub_path, clean):
    assert store_lib.check_sub_path(sub_path) == clean


@pytest.mark.parametrize("sub_path", ["/abs", "..", "a/../b", "a/..", "../", "a\\..\\b", "C:\\x"])
def test_sub_path_refused(sub_path):
    with pytest.raises(InvalidStoreConfig):
        store_lib.check_sub_path(sub_path)


def test_volume_store_refuses_a_symlink_out_of_the_volume(tmp_path):
    root = tmp_path / "pvc"
    root.mkdir()
    (root / "escape").symlink_to(tmp_path)
    with pytest.raises(InvalidStoreConfig, match="outside the volume"):
        VolumeStore(root, "escape/x")


def test_parse_location():
    assert store_lib.parse_location("s3://bucket/etcd/k-1.db") == ("s3", "bucket", "etcd/k-1.db")
    assert store_lib.parse_location("pvc://claim/k-1.db") == ("pvc", "claim", "k-1.db")
    for bad in ("s3://bucket/../x.db", "file:///x", "s3://bucket/", "pvc://c/a/.hidden"):
        with pytest.raises(InvalidStoreConfig):
            store_lib.parse_location(bad)


# --------------------------------------------------------------------------- retention


def test_retention_deletes_oldest_first():
    snaps = [info(f"s{i}", T0 + timedelta(minutes=i)) for i in (3, 0, 4, 1, 2)]
    doomed = store_lib.select_for_deletion(snaps, 2)
    assert [s.name for s in doomed] == ["s0", "s1", "s2"]


def test_retention_keeps_all_when_under_the_limit_and_breaks_ties_by_name():
    assert store_lib.select_for_deletion([info("a", T0)], 3) == []
    same = [info("b", T0), info("a", T0), info("c", T0)]
    assert [s.name for s in store_lib.select_for_deletion(same, 1)] == ["a", "b"]


@pytest.mark.parametrize("bad", [0, -1, True, "2", 1.5])
def test_retention_needs_a_positive_integer(bad):
    with pytest.raises(InvalidStoreConfig):
        store_lib.select_for_deletion([], bad)


# --------------------------------------------------------------------------- metadata


def test_sidecar_round_trip_keeps_every_field():
    original = info("k.db", T0 + timedelta(microseconds=123456))
    doc = json.loads(json.dumps(original.to_sidecar()))
    assert doc["takenAt"] == "2026-01-01T02:00:00.123456Z"
    assert doc["source"] == {"namespace": "karmada-system", "name": "karmada", "uid": SOURCE.uid}
    assert SnapshotInfo.from_sidecar(doc) == original


@pytest.mark.parametrize("change", [{"kind": "Other"}, {"format": 2}, {"sha256": "xyz"}, {"sizeBytes": None},
                                    {"takenAt": "2026-01-01T00:00:00"}])
def test_foreign_or_broken_sidecars_are_refused(change):
    doc = info("k.db", T0).to_sidecar() | change
    with pytest.raises(ValueError):
        SnapshotInfo.from_sidecar(doc)


def test_status_item_has_the_crd_fields():
    item = info("k.db", T0).status_item()
    assert set(item) >= {"location", "sizeBytes", "sha256", "revision", "etcdVersion", "takenAt"}
    assert item["takenAt"] == "2026-01-01T02:00:00Z"


@pytest.mark.parametrize("kwargs", [{"revision": -1}, {"revision": True}, {"etcd_version": 3},
                                    {"source": ("ns", "n")}])
def test_meta_is_validated(kwargs):
    base = {"revision": 1, "etcd_version": "3.6.6", "karmada_version": "v1.18.2", "source": SOURCE}
    with pytest.raises(InvalidStoreConfig):
        SnapshotMeta(**(base | kwargs))


def test_credentials_never_print_the_secret():
    creds = S3Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG")
    assert "wJalr" not in repr(creds) and "AKIDEXAMPLE" not in repr(creds)


# --------------------------------------------------------------------------- volume store on disk


def test_volume_store_metadata_round_trip(tmp_path):
    store = VolumeStore(tmp_path, "etcd/backups", claim_name="backups")
    data = os.urandom(3 * store_lib.CHUNK_SIZE + 17)
    saved = store.save("k-1.db", iter([data[:1000], data[1000:]]), meta(taken_at=T0))
    assert saved.size == len(data) and saved.sha256 == hashlib.sha256(data).hexdigest()
    assert saved.location == "pvc://backups/etcd/backups/k-1.db"
    assert (tmp_path / "etcd/backups/k-1.db").read_bytes() == data
    sidecar = json.loads((tmp_path / "etcd/backups/k-1.db.meta.json").read_text())
    assert sidecar["sha256"] == saved.sha256 and sidecar["revision"] == 42
    assert store.get("k-1.db") == saved
    assert store.list() == [saved]
    assert store.fetch("k-1.db").read() == data
    assert sorted(os.listdir(tmp_path / "etcd/backups")) == ["k-1.db", "k-1.db.meta.json"]  # no temp files


def test_volume_store_saves_from_a_path_and_a_file_object(tmp_path):
    src = tmp_path / "snap.db"
    src.write_bytes(b"etcd" * 1000)
    store = VolumeStore(tmp_path / "pvc")
    (tmp_path / "pvc").mkdir()
    a = store.save("a.db", src, meta())
    with open(src, "rb") as f:
        b = store.save("b.db", f, meta())
    assert a.sha256 == b.sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    assert a.location == str(tmp_path / "pvc" / "a.db")


def test_data_without_sidecar_is_not_listed(tmp_path):
    store = VolumeStore(tmp_path)
    (tmp_path / "half.db").write_bytes(b"x")
    (tmp_path / ".k.db.abc.tmp").write_bytes(b"x")
    assert store.list() == []
    with pytest.raises(SnapshotNotFound):
        store.fetch("half.db")
    assert [p.name for p in store.incomplete_files()] == [".k.db.abc.tmp"]


def test_writer_left_without_commit_leaves_nothing(tmp_path):
    store = VolumeStore(tmp_path)
    with store.writer("k.db") as w:
        w.write(b"partial")
    assert os.listdir(tmp_path) == []
    with pytest.raises(store_lib.StoreWriteFailed):
        w.write(b"more")


def test_existing_snapshot_is_not_overwritten(tmp_path):
    store = VolumeStore(tmp_path)
    store.save("k.db", [b"one"], meta())
    with pytest.raises(SnapshotAlreadyExists) as err:
        store.save("k.db", [b"two"], meta())
    assert err.value.reason == "SnapshotAlreadyExists"
    assert (tmp_path / "k.db").read_bytes() == b"one"


def test_corrupt_sidecar_reads_as_integrity_failure_and_is_not_listed(tmp_path):
    store = VolumeStore(tmp_path)
    store.save("k.db", [b"one"], meta())
    (tmp_path / "k.db.meta.json").write_text("{not json")
    with pytest.raises(IntegrityCheckFailed, match="sidecar"):
        store.get("k.db")
    assert store.list() == []


def test_unmounted_volume_is_unreachable(tmp_path):
    store = VolumeStore(tmp_path / "not-mounted", "x", claim_name="backups")
    with pytest.raises(StoreUnreachable) as err:
        store.list()
    assert "pvc://backups/x" in str(err.value) and err.value.reason == "StoreUnreachable"
    with pytest.raises(StoreUnreachable):
        store.check()


# --------------------------------------------------------------------------- factory


def test_factory_builds_a_volume_store_from_the_pvc_spec(tmp_path):
    store = store_lib.store_from_spec({"pvc": {"claimName": "backups", "subPath": "etcd"}}, volume_root=tmp_path)
    assert isinstance(store, VolumeStore) and store.dir == tmp_path / "etcd"
    assert str(store) == f"pvc://backups/etcd (mounted at {tmp_path})"


def test_factory_builds_an_s3_store_from_the_s3_spec():
    spec = {"s3": {"endpoint": "https://s3.example.com:9000/", "bucket": "karmada-backups", "prefix": "/prod/etcd/",
                   "region": "eu-1", "forcePathStyle": True, "credentialsSecretRef": {"name": "s3"}}}
    with store_lib.store_from_spec(spec, credentials=S3Credentials("AK", "SK"), part_size=8 << 20) as store:
        assert isinstance(store, store_lib.S3Store)
        assert str(store) == "s3://karmada-backups/prod/etcd at https://s3.example.com:9000"
        assert store.location("k.db") == "s3://karmada-backups/prod/etcd/k.db"
        assert store.part_size == 8 << 20


@pytest.mark.parametrize("spec,kwargs,match", [
    ({}, {}, "exactly one"),
    ({"pvc": {"claimName": "c"}, "s3": {"bucket": "b"}}, {}, "exactly one"),
    ({"pvc": {"claimName": "c"}}, {}, "mount path"),
    ({"pvc": {"claimName": "c", "subPath": "../x"}}, {"volume_root": "/tmp"}, r"\.\."),
    ({"s3": {"endpoint": "https://e", "bucket": "b"}}, {}, "credentials"),
    ({"s3": {"endpoint": "ftp://e", "bucket": "b"}}, {"credentials": S3Credentials("a", "s")}, "http"),
    ({"s3": {"endpoint": "https://e", "bucket": "b"}},
     {"credentials": S3Credentials("a", "s"), "ca_bundle": "/nonexistent/ca.pem"}, "CA bundle"),
])
def test_factory_refuses_bad_specs(spec, kwargs, match):
    with pytest.raises(InvalidStoreConfig, match=match):
        store_lib.store_from_spec(spec, **kwargs)


def test_ca_bundle_pem_text_goes_to_a_file_removed_on_close():
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    store = store_lib.S3Store("https://e", "bucket", S3Credentials("a", "s"), ca_bundle=pem)
    ca_file = store._ca_file
    assert ca_file and Path(ca_file).read_text() == pem
    store.close()
    assert not os.path.exists(ca_file)
