"""tests/support/etcd_db.py reads a snapshot's keys as etcd itself serves them.

A real one-member TLS etcd gets the shapes a Karmada etcd has: thousands of keys (branch
pages), keys written several times and deleted (history and deletion marks), a compaction in
the middle of that history, values larger than a page (overflow pages), binary keys and values,
and keys attached to a lease. ``etcdctl snapshot save`` takes the snapshot the EtcdBackup Job
takes; the reader's keys must equal ``etcdctl get --prefix "" -w json`` of the member at the same
revision, field by field. ``etcdutl snapshot restore --bump-revision`` of that snapshot must read
back with the same keys and the bumped revision (the restored database the e2e test's restore
makes). The e2e test (tests/e2e/test_etcd_backup_restore.py) relies on both.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from support.etcd_cluster import make_certs, start_cluster
from support.etcd_db import etcd_keys_json, read_keys

BUMP = 1_000_000


@pytest.fixture(scope="module")
def etcd(bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("etcd-db")
    certs = make_certs(work / "pki")
    cluster = start_cluster(bin_path("etcd"), 1, work, certs)
    endpoint = cluster.endpoints()[0]

    def etcdctl(*args: str, input: str | None = None) -> str:
        proc = subprocess.run([bin_path("etcdctl"), f"--endpoints={endpoint}", f"--cacert={certs.ca}",
                               f"--cert={certs.client_cert}", f"--key={certs.client_key}", *args],
                              input=input, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"etcdctl {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    try:
        yield cluster, etcdctl, work
    finally:
        cluster.close()


def test_the_reader_sees_what_etcd_serves_and_what_a_bumped_restore_holds(etcd, bin_path):
    cluster, etcdctl, work = etcd
    client = cluster.client(timeout=30)
    for start in range(0, 4000, 100):  # etcd's default --max-txn-ops is 128
        client.put_many((f"/registry/configmaps/ns/cm-{i:05d}".encode(), f"v{i}".encode() * 7)
                        for i in range(start, start + 100))
    for round_ in range(3):  # history: each of these keys written three times
        for start in range(0, 300, 100):
            client.put_many((f"/registry/leases/ns/l-{i:03d}".encode(), f"r{round_}".encode())
                            for i in range(start, start + 100))
    etcdctl("del", "--prefix", "/registry/configmaps/ns/cm-0000")  # 10 deletions
    middle = client.status(cluster.endpoints()[0]).revision
    client.put(b"/registry/leases/ns/l-000", b"after the compaction")
    etcdctl("compaction", str(middle - 5))  # drops history below, keeps each key's latest
    client.put(b"/registry/big", bytes(range(256)) * 1200)  # 300 KiB: overflow pages
    client.put(b"\xff\x00binary/\x80", b"\x00\x01\xfe\xff")
    lease = json.loads(etcdctl("lease", "grant", "3600", "-w", "json"))["ID"]
    etcdctl("put", "--lease", format(lease, "x"), "/registry/masterleases/10.0.0.1", "leased")
    etcdctl("del", "/registry/configmaps/ns/cm-03999")

    live = etcd_keys_json(etcdctl("get", "--prefix", "", "-w", "json"))
    snapshot = work / "snap.db"
    etcdctl("snapshot", "save", str(snapshot))
    assert client.status(cluster.endpoints()[0]).revision == live.revision  # nothing written in between

    read = read_keys(snapshot)
    assert read.revision == live.revision
    assert read.kvs.keys() == live.kvs.keys() and len(read.kvs) == 4000 - 11 + 300 + 3
    assert read.kvs == live.kvs  # values, create/mod revisions, versions and leases, byte for byte
    assert read.kvs[b"/registry/leases/ns/l-000"].version == 4
    assert read.kvs[b"/registry/masterleases/10.0.0.1"].lease == lease
    status = json.loads(subprocess.run([bin_path("etcdutl"), "snapshot", "status", "-w", "json", str(snapshot)],
                                       capture_output=True, text=True, check=True).stdout)
    assert status["revision"] == read.revision

    data = work / "restored"
    subprocess.run([bin_path("etcdutl"), "snapshot", "restore", str(snapshot), "--data-dir", str(data),
                    "--bump-revision", str(BUMP), "--mark-compacted"], capture_output=True, text=True, check=True)
    restored = read_keys(data / "member" / "snap" / "db")
    assert restored.revision == read.revision + BUMP
    assert restored.kvs == read.kvs
