"""Continuous backup's deltas on real etcd: a full snapshot of a 3-member TLS cluster, then its
watch written as deltas while a writer changes it (single puts, a 50-key transaction, a 300-key
delete, a leased key, large values) and the member serving the watch is killed; the full
restored with etcdutl into a new cluster and the chain replayed to a revision in the middle
(equal to a read at that revision, taken during the run) and then to the end (equal to the
source). A compacted start is a Gap, a damaged or missing delta is refused."""

from __future__ import annotations

import gzip
import threading
import time

import pytest

from karmada_operator.backup import deltas
from karmada_operator.etcd.gateway import b64
from support.etcd_cluster import load_module, make_certs, run_restore, start_cluster, start_restored

INTERVAL = 1.0
MAX_BYTES = 64 * 1024


def everything(client, revision: int = 0) -> dict[bytes, bytes]:
    """Every key and value, at ``revision`` (0: now), read in pages at one revision."""
    out: dict[bytes, bytes] = {}
    start = b"\0"
    while True:
        res = client.range(start, b"\0", limit=1000, revision=revision)
        revision = revision or res["revision"]
        out.update((kv.key, kv.value) for kv in res["kvs"])
        if not res["more"]:
            return out
        start = res["kvs"][-1].key + b"\0"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("etcd-pki"))


@pytest.fixture(scope="module")
def run(bin_path, certs, tmp_path_factory):
    work = tmp_path_factory.mktemp("deltas-source")
    cluster = start_cluster(bin_path("etcd"), 3, work, certs, extra_args=["--max-txn-ops", "1000"])
    try:
        client = cluster.client(timeout=30)
        for start in range(0, 500, 100):
            client.put_many((f"seed/{i:04d}".encode(), f"seed-{i}".encode()) for i in range(start, start + 100))
        client.put(b"\xff\x00bin/\x80", b"\x00\x01")
        snap = load_module("etcd_snapshot").run_module({**cluster.conn_params(), "path": str(work / "full.db")})
        full = snap["revision"]
        written: list[tuple[deltas.Delta, bytes]] = []
        stop = threading.Event()
        outcome: dict = {}

        def follower():
            try:
                outcome["progress"] = deltas.follow(
                    cluster.client(timeout=30), full, lambda d, data: written.append((d, data)),
                    INTERVAL, MAX_BYTES, stop)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                outcome["error"] = exc

        thread = threading.Thread(target=follower, daemon=True)
        thread.start()
        first = list(cluster.nodes.values())[0]  # the member the watch is opened on
        rest = cluster.client([n for n in cluster.nodes.values() if n is not first], timeout=30)
        for i in range(300):
            client.put(f"k/{i:04d}", f"v{i}")
        client.put_many((f"t/{i:03d}".encode(), b"in-one-txn") for i in range(50))
        mid = client.status(first.client_url).revision
        at_mid = everything(client, mid)
        status = client.status(first.client_url)
        if status.is_leader:  # the watched member goes, quorum and leader stay: no election to wait for
            other = client.status(cluster.endpoints()[1])
            client.move_leader(other.member_id, first.client_url)
        cluster.kill(first.name)
        time.sleep(0.5)  # the watch breaks; what comes next arrives over another member
        rest.call("kv/deleterange", {"key": b64("k/"), "range_end": b64("k0")})
        lease = int(rest.call("lease/grant", {"TTL": "600"})["ID"])
        rest.call("kv/put", {"key": b64("leased/a"), "value": b64("on-a-lease"), "lease": str(lease)})
        for i in range(5):
            rest.put(f"big/{i}", bytes([65 + i]) * 100_000)
        for i in range(20):
            rest.put(f"seed/{i:04d}", f"changed-{i}")
        final = rest.range("seed/0000")["revision"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not written or written[-1][0].last < final) and "error" not in outcome:
            time.sleep(0.2)
        stop.set()
        thread.join(timeout=30)
        yield {"cluster": cluster, "client": rest, "full": full, "snapshot": snap, "mid": mid, "at_mid": at_mid,
               "final": final, "at_final": everything(rest, final), "written": written, "outcome": outcome,
               "work": work}
    finally:
        cluster.close()


def test_the_chain_holds_every_revision_after_the_full_in_order(run):
    assert "error" not in run["outcome"], run["outcome"].get("error")
    progress = run["outcome"]["progress"]
    chain = [d for d, _ in run["written"]]
    assert chain[0].first == run["full"] + 1
    assert deltas.check_consecutive(run["full"], chain) == run["final"] == progress.written_revision
    # what is stored decodes to what was written, checksum included
    assert [deltas.decode(data) for _, data in run["written"]] == chain
    assert progress.deltas == len(chain) and progress.bytes == sum(len(data) for _, data in run["written"])
    # the 300-key delete is one revision; the 50-key transaction is one revision
    sizes = sorted((len(r.events), r.events[0][0]) for d in chain for r in d.revisions)
    assert (300, deltas.DELETE) in sizes and (50, deltas.PUT) in sizes
    # more than one delta: written on time and on size (500 kB of large values > 64 KiB)
    assert len(chain) >= 3, [(d.first, d.last) for d in chain]
    print(f"\n{run['final'] - run['full']} revisions in {len(chain)} deltas, {progress.bytes} bytes stored")


@pytest.fixture(scope="module")
def restored(run, bin_path, certs, tmp_path_factory):
    work = tmp_path_factory.mktemp("deltas-restored")
    node = run["cluster"].new_node("restored-0")
    plan = load_module("etcd_restore_plan").run_module({
        "snapshot": run["snapshot"]["path"],
        "members": [{"name": node.name, "peer_url": node.peer_url, "client_url": node.client_url}],
        "data_dir_root": str(work / "data"), "bump_revision": 1000, "mark_compacted": True,
        "etcdutl": bin_path("etcdutl"),
    })
    run_restore(plan)
    cluster = start_restored(bin_path("etcd"), plan, work, certs)
    try:
        yield cluster.client(timeout=30)
    finally:
        cluster.close()


def test_replay_to_a_revision_equals_a_read_at_it(run, restored):
    chain = [deltas.decode(data) for _, data in run["written"]]
    revisions = deltas.select(chain, run["full"], up_to_revision=run["mid"])
    assert revisions[-1].revision == run["mid"]
    counts = deltas.replay(restored, revisions)
    assert counts["revisions"] == run["mid"] - run["full"] and counts["puts"] == 350
    assert everything(restored) == run["at_mid"]


def test_replay_to_the_end_equals_the_source(run, restored):
    chain = [deltas.decode(data) for _, data in run["written"]]
    counts = deltas.replay(restored, deltas.select(chain, run["mid"]))
    assert counts["deletes"] == 300 and counts["leases"] == 1
    now = everything(restored)
    assert now == run["at_final"], sorted(set(now) ^ set(run["at_final"]))[:10]
    leased = restored.call("kv/range", {"key": b64("leased/a")})["kvs"][0]
    ttl = restored.call("lease/timetolive", {"ID": leased["lease"]})
    assert 0 < int(ttl["TTL"]) <= deltas.LEASED_TTL


def test_a_time_selects_every_revision_received_by_then(run):
    chain = [deltas.decode(data) for _, data in run["written"]]
    every = deltas.select(chain, run["full"])
    cut = every[len(every) // 2].time_ms
    chosen = deltas.select(chain, run["full"], up_to_time_ms=cut)
    assert chosen and all(r.time_ms <= cut for r in chosen)
    assert every[len(chosen)].time_ms > cut


def test_a_missing_or_damaged_delta_is_refused(run):
    chain = [deltas.decode(data) for _, data in run["written"]]
    with pytest.raises(deltas.Gap, match=f"revision {chain[1].first} is missing"):
        deltas.select(chain[:1] + chain[2:], run["full"])
    with pytest.raises(deltas.Gap, match="ends at"):
        deltas.select(chain[:-1], run["full"], up_to_revision=run["final"])
    data = run["written"][0][1]
    body = bytearray(gzip.decompress(data))
    body[len(body) // 2] ^= 1
    with pytest.raises(deltas.DeltaCorrupt, match="checksum mismatch"):
        deltas.decode(gzip.compress(bytes(body)))
    with pytest.raises(deltas.DeltaCorrupt):
        deltas.decode(data[: len(data) // 2])


def test_a_compacted_start_is_a_gap(run):
    client = run["client"]
    client.call("kv/compaction", {"revision": str(run["final"]), "physical": True})
    stop = threading.Event()
    threading.Timer(20, stop.set).start()  # a follow that does not see the gap returns, and fails below
    with pytest.raises(deltas.Gap) as gap:
        deltas.follow(client, run["full"], lambda d, data: None, INTERVAL, MAX_BYTES, stop)
    stop.set()
    assert gap.value.compacted == run["final"]
