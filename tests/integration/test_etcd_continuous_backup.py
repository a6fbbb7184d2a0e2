"""Continuous backup on real components: the follower (backup/continuous.py) backs a real
3-member TLS etcd up into a real S3 server (versitygw) while a writer changes it 20 times a
second; it rolls over to new full snapshots on its threshold and keeps two chains. Then every
etcd member is killed at once. Restored from the store ("latest": the newest full plus its
deltas, replayed into a new etcd restored with etcdutl), every write acknowledged more than one
delta interval before the kill is there with its value; a restore to a revision taken during
the run equals a read at it. The program itself (``python -m karmada_operator.backup.continuous``)
starts, backs up into a volume and writes what it holds when it gets SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_etcd_backup_run import JOB_PYTHONPATH, ROOT, s3_env, s3_plan, volume_plan

from karmada_operator.backup import continuous, deltas, job, point_restore
from support.etcd_cluster import load_module, run_restore, start_cluster, start_restored

INTERVAL = 1.0
RATE = 20  # writes a second


@pytest.fixture(scope="module")
def etcd(bin_path, tmp_path_factory):
    cluster = start_cluster(bin_path("etcd"), 3, tmp_path_factory.mktemp("continuous-src"))
    try:
        yield cluster
    finally:
        cluster.close()


def everything(client, prefix: bytes, revision: int = 0) -> dict[bytes, bytes]:
    out, start = {}, prefix
    end = prefix[:-1] + bytes([prefix[-1] + 1])
    while True:
        res = client.range(start, end, limit=1000, revision=revision)
        revision = revision or res["revision"]
        out.update((kv.key, kv.value) for kv in res["kvs"])
        if not res["more"]:
            return out
        start = res["kvs"][-1].key + b"\0"


def restore_point(point: deltas.Point, store, bin_path, etcd, work: Path) -> dict[bytes, bytes]:
    """The point as a user gets it: the full fetched (checked) and restored with etcdutl into a
    new etcd, its revisions replayed; every key under /registry/ read back."""
    snapshot = work / "full.db"
    store.fetch_to_file(point.full.name, snapshot)
    node = etcd.new_node(f"restored-{time.monotonic_ns()}")
    plan = load_module("etcd_restore_plan").run_module({
        "snapshot": str(snapshot),
        "members": [{"name": node.name, "peer_url": node.peer_url, "client_url": node.client_url}],
        "data_dir_root": str(work / "data"), "bump_revision": 1000, "mark_compacted": True,
        "etcdutl": bin_path("etcdutl"),
    })
    run_restore(plan)
    restored = start_restored(bin_path("etcd"), plan, work, etcd.certs)
    try:
        client = restored.client(timeout=30)
        deltas.replay(client, point.revisions)
        return everything(client, b"/registry/")
    finally:
        restored.close()


@pytest.fixture(scope="module")
def run(etcd, s3_server, tmp_path_factory):
    """Follower to S3 under a 20/s writer (fulls after 4 deltas, 2 kept); the kill; the store."""
    bucket = s3_server.create_bucket()
    plan = s3_plan(etcd, s3_server, bucket, max_backups=2)
    plan["continuous"] = {"deltaIntervalSeconds": INTERVAL, "deltaMaxBytes": 1 << 20, "fullAfterDeltas": 4}
    store = job.open_store(plan, s3_env(s3_server))
    client = etcd.client(timeout=30)
    client.put_many((f"/registry/seed/{i:04d}", f"seed-{i}") for i in range(100))
    lines: list[dict] = []
    stop = threading.Event()
    follower = continuous.Follower(plan, etcd.client(timeout=30), store, continuous.Settings.from_plan(plan),
                                   lambda doc: lines.append({**doc, "at": time.time()}))
    thread = threading.Thread(target=follower.run, args=(stop,), daemon=True)
    thread.start()
    acked: list[tuple[bytes, bytes, float]] = []  # key, value, when acknowledged
    reads: list[dict] = []  # reads during the run: a restore to their revision must equal them
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < 12:
        key, value = f"/registry/w/{i % 150:04d}".encode(), f"v{i}".encode()
        client.put(key, value)
        acked.append((key, value, time.time()))
        if i % 40 == 20:
            revision = client.range("/registry/w/0000")["revision"]
            reads.append({"revision": revision, "keys": everything(client, b"/registry/", revision)})
        i += 1
        time.sleep(max(0.0, started + i / RATE - time.monotonic()))
    killed_at = time.time()
    for node in list(etcd.nodes.values()):
        etcd.kill(node.name)
    time.sleep(2 * INTERVAL)  # what the follower received is written on its interval
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive()
    yield {"plan": plan, "store": store, "acked": acked, "killed_at": killed_at, "reads": reads,
           "lines": lines}
    store.close()


def test_fulls_roll_over_and_retention_keeps_whole_chains(run):
    store, lines = run["store"], run["lines"]
    fulls = [line for line in lines if line["event"] == "full"]
    assert len(fulls) >= 3, [line["event"] for line in lines]  # rolled over after 4 deltas, more than once
    kept = store.list()
    assert [s.name for s in kept] == [f["full"] for f in fulls][-2:]  # maxBackups 2: the newest two fulls
    for full in kept:  # each kept full's deltas continue it with no revision missing
        chain = deltas.load_chain(store, full)
        assert deltas.check_consecutive(full.revision, chain) >= full.revision
    names = store.object_names("")
    orphans = [n for n in names if ".delta." in n and n.split(".delta.")[0] not in {s.name for s in kept}]
    assert not orphans, orphans  # the dropped fulls' deltas went with them
    # nothing went wrong before the kill (after it, a new full cannot be taken: etcd is gone)
    before_kill = lines[:next((i for i, line in enumerate(lines) if line.get("at", 0) >= run["killed_at"]), len(lines))]
    assert not [line for line in before_kill if line["event"] in ("gap", "storeError", "fullFailed")], lines


def test_latest_restore_loses_only_the_last_interval(run, etcd, bin_path, tmp_path):
    store = run["store"]
    point = deltas.choose_point(store.list(), lambda f: deltas.load_chain(store, f))
    restored = restore_point(point, store, bin_path, etcd, tmp_path)
    last_value: dict[bytes, tuple[bytes, float]] = {}
    for key, value, when in run["acked"]:
        last_value[key] = (value, when)
    lost = {k: (v, when) for k, (v, when) in last_value.items() if restored.get(k) != v}
    ages = sorted(run["killed_at"] - when for _, when in lost.values())
    print(f"\n{len(run['acked'])} writes acknowledged; restored to revision {point.revision} "
          f"({len(point.revisions)} revisions replayed on {point.full.name}); "
          f"{len(lost)} keys not at their last value, acknowledged {ages[:1] or '-'}..{ages[-1:] or '-'} s "
          "before the kill")
    assert all(age <= INTERVAL + 0.5 for age in ages), lost
    assert all(restored.get(f"/registry/seed/{i:04d}".encode()) == f"seed-{i}".encode() for i in range(100))


def mid_read(run) -> dict:
    """A read taken during the run at a revision the kept chains hold, not their last one."""
    oldest = min(s.revision for s in run["store"].list())
    read = next((r for r in run["reads"] if r["revision"] >= oldest), None)
    assert read is not None, f"no read at or after the oldest kept full ({oldest}): keep more chains"
    return read


def test_a_restore_to_a_revision_equals_a_read_at_it(run, etcd, bin_path, tmp_path):
    store, mid = run["store"], mid_read(run)
    point = deltas.choose_point(store.list(), lambda f: deltas.load_chain(store, f), revision=mid["revision"])
    assert point.revision == mid["revision"]
    assert restore_point(point, store, bin_path, etcd, tmp_path) == mid["keys"]


def test_the_program_backs_up_and_writes_what_it_holds_on_sigterm(bin_path, tmp_path_factory, tmp_path):
    cluster = start_cluster(bin_path("etcd"), 1, tmp_path_factory.mktemp("continuous-cli"))
    try:
        cluster.client().put("/registry/cli/seed", "x")  # a real etcd is never empty (revision 0 is no snapshot)
        plan = volume_plan(cluster, tmp_path / "pvc", name="cli")
        (tmp_path / "pvc").mkdir()
        plan["continuous"] = {"deltaIntervalSeconds": 30}  # longer than the run: only SIGTERM writes the delta
        env = {**os.environ, "PYTHONPATH": JOB_PYTHONPATH, "ETCD_BACKUP_PLAN": json.dumps(plan)}
        proc = subprocess.Popen([sys.executable, "-m", "karmada_operator.backup.continuous", "--etcdctl="],
                                env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        first = json.loads(proc.stdout.readline())
        assert first["event"] == "full", first
        client = cluster.client(timeout=30)
        last = max(client.put(f"/registry/cli/{i}", "x") for i in range(10))
        time.sleep(1.0)  # received, not yet due
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        events = [json.loads(line) for line in out.splitlines()]
        assert proc.returncode == 0
        written = [e for e in events if e["event"] == "delta"]
        assert written and written[-1]["last"] == last, events
        assert events[-1]["event"] == "stopped" and events[-1]["deltaRevision"] == last
        store = job.open_store(plan, {})
        full = store.get(first["full"])
        assert deltas.check_consecutive(full.revision, deltas.load_chain(store, full)) == last
        # The point's Job program on that store, twice (a retried Job makes its snapshot again).
        point_plan = {"format": 1, "storage": plan["storage"], "snapshot": {"name": "cli-point.db"},
                      "point": {"prefix": "cli", "revision": 0, "timeMs": 0}, "workDir": str(tmp_path / "point")}
        for _ in range(2):
            done = subprocess.run([sys.executable, "-m", "karmada_operator.backup.point_restore"], cwd=ROOT,
                                  env={**env, "ETCD_RESTORE_PLAN": json.dumps(point_plan),
                                       "ETCD_PATH": bin_path("etcd"), "ETCDUTL_PATH": bin_path("etcdutl")},
                                  capture_output=True, text=True, timeout=120)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            assert done.returncode == 0 and result["ok"], (done.stdout, done.stderr[-2000:])
            assert result["pointRevision"] == last and result["full"] == first["full"]
            assert store.get("cli-point.db").sha256 == result["snapshot"]["sha256"]
    finally:
        cluster.close()


@pytest.mark.parametrize("where", ["mid", "latest"])
def test_a_point_becomes_one_snapshot_that_restores_like_any(run, etcd, bin_path, tmp_path, where):
    """point_restore.prepare: the chain replayed in a throw-away etcd (the pinned binary, loopback
    only) and committed as one snapshot; restored with etcdutl alone it holds the point's keys."""
    store = run["store"]
    mid = mid_read(run)
    revision = mid["revision"] if where == "mid" else 0
    prepared = point_restore.prepare(store, "nightly", f"restore-{where}.db", tmp_path / "work", bin_path("etcd"),
                                     bin_path("etcdutl"), revision=revision)
    latest = deltas.choose_point(store.list(), lambda f: deltas.load_chain(store, f))
    assert prepared.point_revision == (mid["revision"] if where == "mid" else latest.revision)
    assert store.get(f"restore-{where}.db").sha256 == prepared.snapshot.sha256
    assert prepared.snapshot.keys is not None  # counted at its revision, for the restore's verification
    print(f"\n{where}: {prepared.as_dict()['replayed']} in {prepared.seconds}")
    got = restore_point(deltas.Point(prepared.snapshot, ()), store, bin_path, etcd, tmp_path)
    if where == "mid":
        assert got == mid["keys"]
    else:
        assert got == restore_point(latest, store, bin_path, etcd, tmp_path / "direct")
    store.delete(f"restore-{where}.db")


def test_a_point_the_backup_does_not_hold_is_refused(run, bin_path, tmp_path):
    with pytest.raises(point_restore.PrepareFailed) as failed:
        point_restore.prepare(run["store"], "nightly", "restore-early.db", tmp_path, bin_path("etcd"),
                              bin_path("etcdutl"), revision=3)
    assert failed.value.reason == "PointNotInBackup" and "no full snapshot at or before revision 3" in str(failed.value)
