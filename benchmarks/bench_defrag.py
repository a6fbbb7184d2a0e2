#!/usr/bin/env python3
"""Benchmark etcd defragmentation: the operator's call against ``etcdctl defrag`` by hand, in one run.

1. A 3-member TLS etcd (real etcd processes on loopback, tests/support/etcd_cluster.py, fsync
   on) is filled with ETCD_BENCH_DB_MB megabytes (default 1024) of 64 KiB values, 80 % of them
   deleted and compacted away: every member then holds a database mostly of free pages.
2. Two followers with the same data: one defragmented the operator's way (the gateway call
   etcd/defragmentation.py makes, then its wait for the member to answer healthy again), the
   other with ``etcdctl defrag --endpoints=<that member>``; the leader last, the operator's way.
   Three rounds, each from a new fill: round 0 warms up and is not counted (in two trial runs the
   first defragmentation of the run took about 3.8 s whichever way went first, the later ones
   1.2-1.9 s); rounds 1 and 2 swap the followers, so each way goes first once.
3. Prints seconds per member, seconds per GB of database before, sizes before and after, and
   the ratio ours/etcdctl (the sum of rounds 1 and 2).

Env: ETCD_BENCH_DB_MB (size), ETCD_BENCH_WORKDIR (scratch dir; default a tmp dir, removed),
KO_PREBUILT_BIN. Quick run: ``ETCD_BENCH_DB_MB=128 python benchmarks/bench_defrag.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils", "tests"):
    sys.path.insert(0, str(ROOT / sub))

from karmada_operator.etcd.gateway import b64  # noqa: E402
from karmada_operator.etcd.health import cluster_health  # noqa: E402
from support.etcd_cluster import start_cluster  # noqa: E402

BIN = Path(os.environ.get("KO_PREBUILT_BIN") or Path.home() / ".cache" / "karmada-operator" / "links")
VALUE_SIZE = 64 * 1024
PER_TXN = 16  # 1 MiB of values per transaction
KEPT_PERCENT = 20


def fill(client, megabytes: int) -> int:
    count = max(10, megabytes * 1024 * 1024 // VALUE_SIZE)
    blob = os.urandom(VALUE_SIZE)
    for start in range(0, count, PER_TXN):
        client.put_many((f"bench/{i:08d}".encode(), i.to_bytes(8, "big") + blob[8:])
                        for i in range(start, min(count, start + PER_TXN)))
    return count


def fragment(client, count: int) -> None:
    """Delete all but KEPT_PERCENT of the keys, compact to now and let every member free the pages."""
    kept_from = count - count * KEPT_PERCENT // 100
    client.call("kv/deleterange", {"key": b64("bench/"), "range_end": b64(f"bench/{kept_from:08d}")}, timeout=300)
    revision = client.status().revision
    client.call("kv/compaction", {"revision": str(revision), "physical": True}, timeout=600)


def settled(client, endpoints, timeout: float = 600) -> None:
    """Until every member has freed the compacted pages (its in-use size steady for 3 s)."""
    last, steady, deadline = {}, 0, time.monotonic() + timeout
    while steady < 3 and time.monotonic() < deadline:
        now = {e: client.status(e).db_size_in_use for e in endpoints}
        steady = steady + 1 if now == last else 0
        last = now
        time.sleep(1)


def free(status) -> float:
    return 100 * (status.db_size - status.db_size_in_use) / status.db_size if status.db_size else 0.0


def main() -> int:
    megabytes = int(os.environ.get("ETCD_BENCH_DB_MB", "1024"))
    scratch = os.environ.get("ETCD_BENCH_WORKDIR")
    work = Path(scratch or tempfile.mkdtemp(prefix="ko-defrag-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    extra = ["--quota-backend-bytes", str(max(8, megabytes * 4 // 1024 + 2) * 1024**3),
             "--max-request-bytes", str(8 * 1024 * 1024), "--snapshot-count", "1000000000"]
    cluster = start_cluster(str(BIN / "etcd"), 3, work / "etcd", extra_args=extra)
    try:
        client = cluster.client(timeout=600)
        endpoints = cluster.endpoints()
        c = cluster.certs

        def ours(endpoint: str) -> float:
            started = time.perf_counter()
            client.defragment(endpoint, timeout=600)
            while not next(m for m in cluster_health(client)["members"] if m["endpoint"] == endpoint)["healthy"]:
                time.sleep(0.2)
            return time.perf_counter() - started

        def etcdctl(endpoint: str) -> float:
            started = time.perf_counter()
            subprocess.run([str(BIN / "etcdctl"), "--endpoints", endpoint, "--cacert", c.ca, "--cert", c.client_cert,
                            "--key", c.client_key, "--command-timeout=600s", "defrag"],
                           check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
            return time.perf_counter() - started

        totals = {"ours": 0.0, "etcdctl": 0.0}
        for round_ in (0, 1, 2):  # round 0 warms up: the first defragmentation of a run is slower either way
            client.call("kv/deleterange", {"key": b64("bench/"), "range_end": b64("bench0")}, timeout=600)
            t0 = time.perf_counter()
            keys = fill(client, megabytes)
            label = f"round {round_}" + ("" if round_ else " (warm-up, not counted)")
            print(f"{label}: {keys} keys of {VALUE_SIZE // 1024} KiB written in {time.perf_counter() - t0:.1f}s")
            fragment(client, keys)
            settled(client, endpoints)
            statuses = {e: client.status(e) for e in endpoints}
            leader = next(e for e, st in statuses.items() if st.is_leader)
            followers = [e for e in endpoints if e != leader]
            for e, st in statuses.items():
                print(f"  before {e}: dbSize {st.db_size / 1e6:7.1f} MB, in use {st.db_size_in_use / 1e6:6.1f} MB, "
                      f"{free(st):4.1f} % free{' (leader)' if e == leader else ''}")
            ways = [("ours", ours), ("etcdctl", etcdctl)]
            if round_ == 2:
                ways.reverse()
            rows = [(name, f, way(f)) for (name, way), f in zip(ways, followers, strict=True)]
            rows.append(("ours, the leader last", leader, ours(leader)))
            for label, endpoint, seconds in rows:
                before, after = statuses[endpoint], client.status(endpoint)
                if round_:
                    totals[label] = totals.get(label, 0.0) + seconds
                print(f"  defrag {label:22} {endpoint}: {seconds:6.2f}s = {seconds / (before.db_size / 1e9):6.2f} "
                      f"s/GB; {before.db_size / 1e6:.1f} MB -> {after.db_size / 1e6:.1f} MB, {free(after):.1f} % free")
        print(f"defrag ours {totals['ours']:.2f}s, etcdctl {totals['etcdctl']:.2f}s over two followers each "
              f"(same data, each way first once): ratio ours/etcdctl {totals['ours'] / totals['etcdctl']:.2f}x")
        return 0
    finally:
        cluster.close()
        if not scratch:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
