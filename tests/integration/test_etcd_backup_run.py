"""EtcdBackup runs against a real 3-member TLS etcd into a real volume and a real S3 (versitygw).

The snapshot streams from etcd into the store with no local copy; the tests check what was
stored (sha256, size, revision against the file reader and `etcdutl snapshot status`), that
it restores with the pinned `etcdutl snapshot restore` into an etcd that holds the keys,
retention, the Job's CLI as a subprocess (one JSON line, no secrets), and a dead etcd.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from karmada_operator.backup import job
from karmada_operator.backup import plan as eb_plan
from karmada_operator.backup import runner as eb_runner
from karmada_operator.backup import status as eb_status
from karmada_operator.backup.store import SnapshotStore, VolumeStore
from karmada_operator.etcd.snapshots import snapshot_revision, verify_snapshot
from support.etcd_cluster import free_port, load_module, run_restore, start_cluster, start_restored
from support.s3_server import S3Server

ROOT = Path(__file__).resolve().parents[2]
JOB_PYTHONPATH = str(ROOT / "plugins" / "module_utils")
T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
SMALL_KEYS = 3000
BIG_KEYS = 40  # values larger than a bbolt page: leaf pages with overflow


def value_of(i: int, big: bool = False) -> bytes:
    base = hashlib.sha256(str(i).encode()).hexdigest().encode()
    return base * (200 if big else 8)  # 12.8 KB or 512 B


@pytest.fixture(scope="module")
def etcd(bin_path, tmp_path_factory):
    cluster = start_cluster(bin_path("etcd"), 3, tmp_path_factory.mktemp("etcd-backup-src"),
                            extra_args=["--max-txn-ops", "1000"])
    try:
        client = cluster.client(timeout=30)
        for start in range(0, SMALL_KEYS, 1000):
            client.put_many((f"/registry/small/{i:05d}", value_of(i)) for i in range(start, start + 1000))
        client.put_many((f"/registry/big/{i:03d}", value_of(i, big=True)) for i in range(BIG_KEYS))
        client.put("/registry/deleted", "x")
        client.call("kv/deleterange", {"key": "L3JlZ2lzdHJ5L2RlbGV0ZWQ="})  # a tombstone: the last revision
        yield cluster
    finally:
        cluster.close()


def karmada_cr() -> dict:
    return yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())


def make_plan(etcd, storage: dict, when: datetime = T0, max_backups: int = 7, name: str = "nightly",
              endpoints: list[str] | None = None) -> dict:
    kd = karmada_cr()
    kd["metadata"]["uid"] = "kd-uid-1"
    bk = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdBackup",
          "metadata": {"name": name, "namespace": kd["metadata"]["namespace"], "uid": "bk-uid"},
          "spec": {"karmadaDeploymentRef": {"name": kd["metadata"]["name"]}, "storage": storage,
                   "retention": {"maxBackups": max_backups}}}
    plan = eb_plan.backup_plan(bk, kd, scheduled_time=when)
    # the test etcd listens on loopback; the plan's in-cluster names would not resolve here
    plan["etcd"]["endpoints"] = endpoints if endpoints is not None else etcd.endpoints()
    plan["etcd"]["tls"].update(ca=etcd.certs.ca, cert=etcd.certs.client_cert, key=etcd.certs.client_key)
    return plan


def volume_plan(etcd, root: Path, **kw) -> dict:
    plan = make_plan(etcd, {"pvc": {"claimName": "etcd-backups", "subPath": "karmada"}}, **kw)
    plan["storage"]["mountPath"] = str(root)
    return plan


def s3_plan(etcd, server: S3Server, bucket: str, **kw) -> dict:
    return make_plan(etcd, {"s3": {"endpoint": server.endpoint, "bucket": bucket, "prefix": "site-a/karmada",
                                   "credentialsSecretRef": {"name": "s3-creds"}}}, **kw)


def s3_env(server: S3Server) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": server.access_key, "AWS_SECRET_ACCESS_KEY": server.secret_key}


def etcdutl_status(bin_path, path: Path) -> dict:
    out = subprocess.run([bin_path("etcdutl"), "snapshot", "status", "-w", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def restore_and_read(bin_path, etcd, snapshot: Path, work: Path) -> dict[bytes, bytes]:
    """Restore with the pinned etcdutl into a new 1-member cluster and read every key."""
    node = etcd.new_node("restored-0")
    plan = load_module("etcd_restore_plan").run_module({
        "snapshot": str(snapshot),
        "members": [{"name": node.name, "peer_url": node.peer_url, "client_url": node.client_url}],
        "data_dir_root": str(work / "restored"),
        "bump_revision": 1000,
        "mark_compacted": True,
        "etcdutl": bin_path("etcdutl"),
    })
    run_restore(plan)
    restored = start_restored(bin_path("etcd"), plan, work, etcd.certs)
    try:
        client = restored.client(timeout=30)
        assert client.get("/registry/deleted") is None
        got = {kv.key: kv.value for kv in client.iter_prefix(b"/registry/small/")}
        got.update({kv.key: kv.value for kv in client.iter_prefix(b"/registry/big/")})
        return got
    finally:
        restored.close()


def expected_keys() -> dict[bytes, bytes]:
    keys = {f"/registry/small/{i:05d}".encode(): value_of(i) for i in range(SMALL_KEYS)}
    keys.update({f"/registry/big/{i:03d}".encode(): value_of(i, big=True) for i in range(BIG_KEYS)})
    return keys


def test_backup_to_a_volume_is_verified_and_restores_with_etcdutl(etcd, bin_path, tmp_path):
    plan = volume_plan(etcd, tmp_path / "pvc")
    (tmp_path / "pvc").mkdir()
    before = etcd.client().status(etcd.endpoints()[0]).revision
    store = job.open_store(plan, {})
    result = eb_runner.run_backup(plan, etcd.client(timeout=30), store)
    info = result.snapshot
    path = tmp_path / "pvc" / "karmada" / "nightly-20260301T020000Z.db"
    assert info.name == path.name and info.location == f"pvc://etcd-backups/karmada/{path.name}"
    data = path.read_bytes()
    assert info.size == len(data) and info.sha256 == hashlib.sha256(data).hexdigest()
    assert info.revision == before == snapshot_revision(path) == etcdutl_status(bin_path, path)["revision"]
    assert verify_snapshot(path)["sha256"] == info.sha256
    assert info.etcd_version == "3.6.6" and info.source.name == "karmada" and info.source.uid == "kd-uid-1"
    assert result.endpoint in etcd.endpoints() and result.deleted == []
    assert [s.name for s in result.kept] == [path.name]
    assert store.list() == [info] and VolumeStore(tmp_path / "pvc", "karmada").incomplete_files() == []
    assert restore_and_read(bin_path, etcd, path, tmp_path) == expected_keys()
    # the status the operator writes from it
    status = eb_status.status_after({}, result.as_dict(), datetime.now(UTC), scheduled_time=T0, schedule="0 2 * * *")
    assert status["lastSuccessfulBackup"]["sha256"] == info.sha256
    assert status["lastSuccessfulBackup"]["revision"] == info.revision
    assert status["snapshots"][0]["name"] == path.name


def test_streamed_revision_matches_the_file_while_etcd_is_written_to(etcd, tmp_path):
    """Writes during the snapshot: the revision read from the stream is the file's, within the
    member's revisions before and after."""
    (tmp_path / "pvc").mkdir()
    stop = threading.Event()

    def writer():
        client = etcd.client(timeout=30)
        i = 0
        while not stop.is_set():
            client.put(f"/registry/churn/{i % 50}", f"v{i}")
            i += 1

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        revisions = []
        for n in range(3):
            plan = volume_plan(etcd, tmp_path / "pvc", when=T0 + timedelta(minutes=n))
            result = eb_runner.run_backup(plan, etcd.client(timeout=30), job.open_store(plan, {}))
            path = tmp_path / "pvc" / "karmada" / result.snapshot.name
            assert result.snapshot.revision == snapshot_revision(path)
            low, high = result.member_revisions
            assert low <= result.snapshot.revision <= high
            revisions.append(result.snapshot.revision)
    finally:
        stop.set()
        thread.join(10)
    assert revisions == sorted(revisions) and revisions[0] < revisions[-1]


@pytest.mark.parametrize("method", ["etcdctl", "gateway"])
def test_backup_to_s3_through_the_job_cli(etcd, bin_path, s3_server, tmp_path, method):
    bucket = s3_server.create_bucket()
    plan = s3_plan(etcd, s3_server, bucket)
    env = {"ETCD_BACKUP_PLAN": json.dumps(plan), **s3_env(s3_server)}
    staging = tmp_path / "staging"
    staging.mkdir()
    argv = [f"--etcdctl={bin_path('etcdctl')}", f"--staging-dir={staging}"] if method == "etcdctl" else ["--etcdctl="]
    code, doc = run_job_cli(env, argv)
    assert list(staging.iterdir()) == []  # the staged file is gone once the snapshot is in the store
    assert code == 0, doc
    snap = doc["snapshot"]
    key = "site-a/karmada/nightly-20260301T020000Z.db"
    assert snap["location"] == f"s3://{bucket}/{key}" and doc["deleted"] == []
    got = s3_server.client().get_object(Bucket=bucket, Key=key)
    body = got["Body"].read()
    assert hashlib.sha256(body).hexdigest() == snap["sha256"] and len(body) == snap["sizeBytes"]
    if method == "etcdctl":  # staged, checked, then one PUT: a plain md5 ETag, not a multipart '-<parts>'
        assert got["ETag"].strip('"') == hashlib.md5(body).hexdigest(), got["ETag"]  # noqa: S324 - S3's ETag
        assert doc["phases"]["upload"] >= 0, doc["phases"]
    local = tmp_path / "fetched.db"
    local.write_bytes(body)
    assert etcdutl_status(bin_path, local)["revision"] == snap["revision"]
    assert verify_snapshot(local)["revision"] == snap["revision"]
    assert restore_and_read(bin_path, etcd, local, tmp_path) == expected_keys()


def broken_etcdctl(bin_path, tmp_path: Path, how: str) -> str:
    """The real etcdctl behind a wrapper that spoils what lands in ``<path>.part``, the file
    etcdctl streams into: ``cut`` writes the first half of the snapshot and exits 1 as a dropped
    stream does; ``flipped`` writes it whole with one byte flipped in the middle (a bad wire or
    disk), renames it to ``<path>`` and exits 0."""
    wrapper = tmp_path / f"etcdctl-{how}"
    wrapper.write_text(f"""#!{sys.executable}
import os, subprocess, sys
*args, out = sys.argv[1:]
subprocess.run([{bin_path('etcdctl')!r}, *args, out + ".real"], check=True, capture_output=True)
data = bytearray(open(out + ".real", "rb").read())
os.unlink(out + ".real")
with open(out + ".part", "wb") as part:
    if {how!r} == "cut":
        part.write(data[: len(data) // 2])
        sys.stderr.write("rpc error: code = Unavailable desc = error reading from server: EOF\\n")
        sys.exit(1)
    data[len(data) // 2] ^= 1
    part.write(data)
os.rename(out + ".part", out)
""")
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.parametrize(("how", "reason"), [("cut", "EtcdUnavailable"), ("flipped", "SnapshotCorrupted")])
def test_a_snapshot_spoiled_while_it_streams_into_s3_is_not_kept(etcd, bin_path, s3_server, tmp_path, how, reason):
    """The store takes etcdctl's bytes while they are written: a stream cut halfway, or a
    byte flipped on the way, leaves no snapshot, no unfinished upload and no staged file."""
    bucket = s3_server.create_bucket()
    plan = s3_plan(etcd, s3_server, bucket)
    store = job.open_store(plan, s3_env(s3_server))
    staging = tmp_path / "staging"
    staging.mkdir()
    with pytest.raises(eb_runner.BackupFailed) as err:
        eb_runner.run_backup(plan, etcd.client(timeout=30), store, etcdctl=broken_etcdctl(bin_path, tmp_path, how),
                      staging_dir=str(staging))
    assert err.value.reason == reason, err.value
    if how == "cut":
        assert "error reading from server" in str(err.value)
    else:
        assert "sha256" in str(err.value)
    assert store.list() == [] and store.incomplete_uploads() == []
    assert s3_server.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert list(staging.iterdir()) == []


def run_job_cli(env: dict[str, str], argv: list[str] | None = None) -> tuple[int, dict]:
    """The Job's command, as a subprocess with only the given environment (plus PATH)."""
    done = subprocess.run([sys.executable, "-m", "karmada_operator.backup.job", *(argv or [])], capture_output=True,
                          text=True, timeout=300,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": JOB_PYTHONPATH, **env}, cwd="/")
    lines = done.stdout.splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    for secret in (env.get("AWS_SECRET_ACCESS_KEY"), env.get("AWS_ACCESS_KEY_ID")):
        if secret:
            assert secret not in done.stdout and secret not in done.stderr
    return done.returncode, json.loads(lines[0])


@pytest.mark.parametrize("kind", ["volume", "s3"])
def test_retention_keeps_the_newest_n_of_this_backup_only(etcd, s3_server, tmp_path, kind):
    bucket = s3_server.create_bucket() if kind == "s3" else ""

    def plan_at(n: int) -> dict:
        when = T0 + timedelta(hours=n)
        if kind == "s3":
            return s3_plan(etcd, s3_server, bucket, when=when, max_backups=2)
        return volume_plan(etcd, tmp_path, when=when, max_backups=2)

    def open_store(plan) -> SnapshotStore:
        return job.open_store(plan, s3_env(s3_server))

    # another EtcdBackup writing to the same place: retention must not touch its snapshot
    other = plan_at(0)
    other["snapshot"].update(name="weekly-20260101T000000Z.db", prefix="weekly")
    eb_runner.run_backup(other, etcd.client(timeout=30), open_store(other))
    results = []
    for n in range(1, 5):
        plan = plan_at(n)
        results.append(eb_runner.run_backup(plan, etcd.client(timeout=30), open_store(plan)))
    last = results[-1]
    assert [s.name for s in last.kept] == ["nightly-20260301T060000Z.db", "nightly-20260301T050000Z.db"]
    assert [s.name for s in results[2].deleted] == ["nightly-20260301T030000Z.db"]
    assert [s.name for s in last.deleted] == ["nightly-20260301T040000Z.db"]
    names = sorted(s.name for s in open_store(plan_at(9)).list())
    assert names == ["nightly-20260301T050000Z.db", "nightly-20260301T060000Z.db", "weekly-20260101T000000Z.db"]
    status = eb_status.status_after({}, last.as_dict(), datetime.now(UTC))
    assert [s["name"] for s in status["snapshots"]] == [s.name for s in last.kept]


@pytest.mark.parametrize("kind", ["volume", "s3"])
def test_an_etcd_that_is_down_fails_clearly_and_lists_nothing(etcd, s3_server, tmp_path, kind):
    dead = [f"https://127.0.0.1:{free_port()}", f"https://127.0.0.1:{free_port()}"]
    if kind == "s3":
        bucket = s3_server.create_bucket()
        plan = s3_plan(etcd, s3_server, bucket, endpoints=dead)
        store = job.open_store(plan, s3_env(s3_server))
    else:
        plan = volume_plan(etcd, tmp_path, endpoints=dead)
        store = job.open_store(plan, {})
    with pytest.raises(eb_runner.BackupFailed) as err:
        eb_runner.run_backup(plan, job.etcd_client(plan, timeout=2), store)
    assert err.value.reason == "EtcdUnavailable"
    assert "no healthy etcd member" in str(err.value) and dead[0] in str(err.value)
    assert store.list() == []
    if kind == "s3":
        listed = s3_server.client().list_objects_v2(Bucket=bucket)
        assert listed.get("KeyCount", 0) == 0 and store.incomplete_uploads() == []
    else:
        assert VolumeStore(tmp_path, "karmada").incomplete_files() == []
    # the same through the Job's CLI: exit 1, the reason in the line
    env = {"ETCD_BACKUP_PLAN": json.dumps(plan), **(s3_env(s3_server) if kind == "s3" else {})}
    code, doc = run_job_cli(env)
    assert code == 1 and doc["ok"] is False and doc["reason"] == "EtcdUnavailable"


def test_wrong_s3_credentials_fail_before_etcd_is_touched(etcd, s3_server):
    plan = s3_plan(etcd, s3_server, s3_server.create_bucket())
    env = {"ETCD_BACKUP_PLAN": json.dumps(plan), "AWS_ACCESS_KEY_ID": s3_server.access_key,
           "AWS_SECRET_ACCESS_KEY": "wrong-" + s3_server.secret_key[:10]}
    code, doc = run_job_cli(env)
    assert code == 1 and doc["reason"] == "StoreAccessDenied"
    assert plan["storage"]["spec"]["s3"]["bucket"] in doc["message"]


# --------------------------------------------------------------------------- restore Job


def _restore_member_plans(etcd, snapshot_name: str, sha256: str, storage: dict, work: Path, members: int = 3,
                          bump: int = 1_000_000) -> tuple[dict, list[dict]]:
    """Member plans as etcd_restore.member_plan makes them, for loopback members under ``work``."""
    from karmada_operator.backup.restore_plan import plan_restore

    nodes = [etcd.new_node(f"seeded-{i}") for i in range(members)]
    staging = work / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    rplan = plan_restore(str(staging / snapshot_name),
                         [{"name": n.name, "peer_url": n.peer_url, "client_url": n.client_url,
                           "data_dir": str(work / n.name / "data")} for n in nodes],
                         str(work), cluster_token="restored-kd-uid", bump_revision=bump, mark_compacted=True)
    plans = [{"format": 1, "storage": storage,
              "snapshot": {"name": snapshot_name, "sha256": sha256, "path": str(staging / snapshot_name)},
              "member": {"name": m.name, "dataDir": m.data_dir, "argv": m.restore_argv,
                         "mountPath": str(work / m.name)}}
             for m in rplan.members]
    cluster = {"members": [{"name": m.name, "peer_url": m.peer_url, "client_url": m.client_url,
                            "data_dir": m.data_dir} for m in rplan.members],
               "initial_cluster": rplan.initial_cluster, "cluster_token": rplan.cluster_token}
    return cluster, plans


def test_restore_job_seeds_three_members_that_start_with_every_key_and_the_revision_bumped(etcd, bin_path, tmp_path):
    from karmada_operator.backup import restore_job as rjob

    store_root = tmp_path / "pvc"
    store_root.mkdir()
    plan = volume_plan(etcd, store_root)
    with SnapshotStore_from(plan) as store:
        result = eb_runner.run_backup(plan, etcd.client(timeout=30), store, etcdctl=bin_path("etcdctl"),
                               staging_dir=str(tmp_path))
        info = result.snapshot
        # counted at the snapshot's revision (other tests of this module add keys to the same etcd)
        at_rev = etcd.client().range(b"\0", b"\0", revision=info.revision, count_only=True)["count"]
        assert info.counts["namespaces"] == 0 and info.keys == at_rev >= SMALL_KEYS + BIG_KEYS
        cluster, plans = _restore_member_plans(etcd, info.name, info.sha256, plan["storage"], tmp_path / "seed")
        reports = [rjob.restore_member(p, store, bin_path("etcdutl")) for p in plans]
    assert {r["restored"]["revision"] for r in reports} == {info.revision + 1_000_000}
    assert {r["snapshot"]["sha256"] for r in reports} == {info.sha256}
    assert {r["snapshot"]["keys"] for r in reports} == {info.keys}  # what the verification compares with
    assert not list((tmp_path / "seed" / "staging").iterdir())  # the downloaded copy is gone
    restored = start_restored(bin_path("etcd"), cluster, tmp_path, etcd.certs)
    try:
        client = restored.client(timeout=30)
        got = {kv.key: kv.value for kv in client.iter_prefix(b"/registry/small/")}
        got.update({kv.key: kv.value for kv in client.iter_prefix(b"/registry/big/")})
        assert got == expected_keys()
        assert client.status(restored.endpoints()[0]).revision >= info.revision + 1_000_000
        # the verification's reading (restore_controller._live_keys): every member holds at the
        # restored revision the live keys the backup counted at the snapshot's (the bump's marker is no key)
        for endpoint in restored.endpoints():
            assert client.range(b"\0", b"\0", revision=info.revision + 1_000_000, count_only=True,
                                endpoint=endpoint)["count"] == info.keys
    finally:
        restored.close()


def test_restore_job_refuses_a_flipped_byte_and_a_member_that_has_data(etcd, bin_path, tmp_path):
    from karmada_operator.backup import restore_job as rjob

    store_root = tmp_path / "pvc"
    store_root.mkdir()
    plan = volume_plan(etcd, store_root)
    with SnapshotStore_from(plan) as store:
        info = eb_runner.run_backup(plan, etcd.client(timeout=30), store).snapshot
        data_file = store_root / "karmada" / info.name
        raw = bytearray(data_file.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        data_file.write_bytes(bytes(raw))
        _, plans = _restore_member_plans(etcd, info.name, info.sha256, plan["storage"], tmp_path / "seed", members=1)
        with pytest.raises(Exception) as err:
            rjob.restore_member(plans[0], store, bin_path("etcdutl"))
        assert getattr(err.value, "reason", "") == "IntegrityCheckFailed", err.value
        assert not Path(plans[0]["member"]["dataDir"]).exists()  # nothing written
        assert not list((tmp_path / "seed" / "staging").iterdir())
        # A member directory with data is never written over.
        Path(plans[0]["member"]["dataDir"], "member").mkdir(parents=True)
        with pytest.raises(rjob.RestoreFailed) as err:
            rjob.restore_member(plans[0], store, bin_path("etcdutl"))
        assert err.value.reason == "TargetHasData"


def test_restore_job_refuses_a_snapshot_corrupted_before_it_was_stored(etcd, bin_path, tmp_path):
    """The store's record matches the file, but etcd's own trailer does not: etcdutl finds it."""
    import hashlib
    import json

    from karmada_operator.backup import restore_job as rjob

    store_root = tmp_path / "pvc"
    store_root.mkdir()
    plan = volume_plan(etcd, store_root)
    with SnapshotStore_from(plan) as store:
        info = eb_runner.run_backup(plan, etcd.client(timeout=30), store).snapshot
        folder = store_root / "karmada"
        raw = bytearray((folder / info.name).read_bytes())
        raw[len(raw) // 2] ^= 0x01
        (folder / "corrupt.db").write_bytes(bytes(raw))
        meta = json.loads((folder / f"{info.name}.meta.json").read_text().replace(info.name, "corrupt.db"))
        meta["sha256"] = hashlib.sha256(raw).hexdigest()
        (folder / "corrupt.db.meta.json").write_text(json.dumps(meta))
        _, plans = _restore_member_plans(etcd, "corrupt.db", meta["sha256"], plan["storage"], tmp_path / "seed",
                                         members=1)
        with pytest.raises(rjob.RestoreFailed) as err:
            rjob.restore_member(plans[0], store, bin_path("etcdutl"))
    assert err.value.reason == "SnapshotCorrupted" and err.value.code == rjob.EXIT_INVALID, err.value
    assert not Path(plans[0]["member"]["dataDir"]).exists()  # nothing written
    assert not [p for p in (tmp_path / "seed").rglob("*") if p.is_file()]  # no staged copy, no half restore


def SnapshotStore_from(plan: dict) -> SnapshotStore:  # noqa: N802 - reads like the type it returns
    return job.open_store(plan, {})
