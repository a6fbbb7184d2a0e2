#!/usr/bin/env python3
"""Benchmark our etcd snapshot and restore path against etcd's own tools, in one run.

1. Fills a one-member TLS etcd with ETCD_BENCH_DB_MB megabytes (default 1024) of values.
2. Snapshot save: our client (etcd_snapshot module code: HTTP gateway, JSON lines, base64,
   sha256 trailer check) vs ``etcdctl snapshot save`` (gRPC) on the same database: MB/s and ratio.
3. Restore of that snapshot into one member: our path (verify_snapshot + plan_restore + the
   planned etcdutl argv) vs raw ``etcdutl snapshot restore`` with the same flags: seconds and ratio.

Env: ETCD_BENCH_DB_MB (size), ETCD_BENCH_RUNS (repeats, best kept; default 1),
ETCD_BENCH_WORKDIR (scratch dir; default a tmp dir, removed afterwards), KO_PREBUILT_BIN.
Quick run: ``ETCD_BENCH_DB_MB=64 python benchmarks/bench_etcd.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils", "tests"):
    sys.path.insert(0, str(ROOT / sub))

from karmada_operator.etcd.snapshots import verify_snapshot
from support.etcd_cluster import free_port, load_module, start_cluster  # noqa: E402

BIN = Path(os.environ.get("KO_PREBUILT_BIN") or Path.home() / ".cache" / "karmada-operator" / "links")
VALUE_SIZE = 64 * 1024
PER_TXN = 48  # ~3 MB of values per transaction, ~4.2 MB as base64 JSON


def fill(client, megabytes: int, per_txn: int = PER_TXN) -> int:
    """``per_txn`` values per transaction: keep it under the server's --max-request-bytes."""
    count = max(1, megabytes * 1024 * 1024 // VALUE_SIZE)
    blob = os.urandom(VALUE_SIZE)
    for start in range(0, count, per_txn):
        end = min(count, start + per_txn)
        # vary each value a little so bbolt does not see identical pages
        client.put_many(
            (f"bench/{i:08d}".encode(), i.to_bytes(8, "big") + blob[8:]) for i in range(start, end)
        )
    return count


def best(runs: int, fn) -> tuple[float, object]:
    results = []
    for _ in range(runs):
        started = time.perf_counter()
        out = fn()
        results.append((time.perf_counter() - started, out))
    return min(results, key=lambda r: r[0])


def main() -> int:
    megabytes = int(os.environ.get("ETCD_BENCH_DB_MB", "1024"))
    runs = int(os.environ.get("ETCD_BENCH_RUNS", "1"))
    scratch = os.environ.get("ETCD_BENCH_WORKDIR")
    work = Path(scratch or tempfile.mkdtemp(prefix="ko-etcd-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    extra = [
        "--quota-backend-bytes",
        str(max(8, megabytes * 4 // 1024 + 2) * 1024**3),
        "--max-request-bytes",
        str(8 * 1024 * 1024),
        "--max-txn-ops",
        "1000",
        "--unsafe-no-fsync",
        "--snapshot-count",
        "1000000000",
    ]  # fill speed only
    cluster = start_cluster(str(BIN / "etcd"), 1, work / "source", extra_args=extra)
    try:
        client = cluster.client(timeout=120)
        endpoint = cluster.endpoints()[0]
        t0 = time.perf_counter()
        keys = fill(client, megabytes)
        db_size = client.status(endpoint).db_size
        print(
            f"database: {keys} keys of {VALUE_SIZE // 1024} KiB, dbSize {db_size / 1e6:.1f} MB "
            f"(filled in {time.perf_counter() - t0:.1f}s)"
        )

        snapshot_module = load_module("etcd_snapshot")
        ours_path, ctl_path = work / "ours.db", work / "etcdctl.db"

        def ours() -> dict:
            return snapshot_module.run_module(
                {**cluster.conn_params(), "path": str(ours_path), "timeout": 120}
            )

        def etcdctl() -> None:
            c = cluster.certs
            subprocess.run(
                [
                    str(BIN / "etcdctl"),
                    "--endpoints",
                    endpoint,
                    "--cacert",
                    c.ca,
                    "--cert",
                    c.client_cert,
                    "--key",
                    c.client_key,
                    "snapshot",
                    "save",
                    str(ctl_path),
                ],
                check=True,
                capture_output=True,
                env={**os.environ, "ETCDCTL_API": "3"},
            )

        def gateway_raw() -> int:
            # the gateway's own rate: read the JSON stream and throw it away (our ceiling)
            c = cluster.certs
            resp = requests.post(
                f"{endpoint}/v3/maintenance/snapshot",
                data="{}",
                stream=True,
                verify=c.ca,
                cert=(c.client_cert, c.client_key),
                timeout=120,
            )
            return sum(len(chunk) for chunk in resp.raw.stream(1 << 20))

        t_ctl, _ = best(runs, etcdctl)
        t_raw_gw, _ = best(runs, gateway_raw)
        t_ours, snap = best(runs, ours)
        size_mb = snap["size"] / 1e6
        ours_mbs, ctl_mbs = size_mb / t_ours, ctl_path.stat().st_size / 1e6 / t_ctl
        print(
            f"snapshot save  ours (etcd_snapshot, HTTP gateway): {size_mb:8.1f} MB in {t_ours:6.2f}s "
            f"= {ours_mbs:7.1f} MB/s"
        )
        print(
            f"snapshot save  etcdctl snapshot save (gRPC):        {ctl_path.stat().st_size / 1e6:8.1f} MB in "
            f"{t_ctl:6.2f}s = {ctl_mbs:7.1f} MB/s"
        )
        print(f"snapshot save  ratio ours/etcdctl: {ours_mbs / ctl_mbs:.2f}x")
        print(
            f"gateway ceiling: the raw JSON stream, read and discarded, carries the db at "
            f"{size_mb / t_raw_gw:.1f} MB/s (ours reaches {ours_mbs / (size_mb / t_raw_gw):.0%} of it)"
        )
    finally:
        cluster.close()

    from karmada_operator.backup import restore_plan as plan_lib
    bump = 1_000_000
    peer = f"https://127.0.0.1:{free_port()}"
    member = {"name": "restore-0", "peer_url": peer, "client_url": f"https://127.0.0.1:{free_port()}"}
    counter = iter(range(1000))

    def restore_ours() -> None:
        root = work / f"ours-restore-{next(counter)}"
        verify_snapshot(ours_path)
        plan = plan_lib.plan_restore(
            str(ours_path), [member], str(root), bump_revision=bump, etcdutl=str(BIN / "etcdutl")
        )
        for m in plan.members:
            subprocess.run(m.restore_argv, check=True, capture_output=True)
        shutil.rmtree(root)

    def restore_raw() -> None:
        root = work / f"raw-restore-{next(counter)}"
        subprocess.run(
            [
                str(BIN / "etcdutl"),
                "snapshot",
                "restore",
                str(ours_path),
                "--name",
                "restore-0",
                "--initial-cluster",
                f"restore-0={peer}",
                "--initial-cluster-token",
                "bench",
                "--initial-advertise-peer-urls",
                peer,
                "--data-dir",
                str(root / "restore-0"),
                "--bump-revision",
                str(bump),
                "--mark-compacted",
            ],
            check=True,
            capture_output=True,
        )
        shutil.rmtree(root)

    t_raw, _ = best(runs, restore_raw)
    t_plan, _ = best(runs, restore_ours)
    print(f"restore        ours (verify + plan + etcdutl argv):   {t_plan:6.2f}s")
    print(f"restore        raw etcdutl snapshot restore:          {t_raw:6.2f}s")
    print(f"restore        ratio ours/raw: {t_plan / t_raw:.2f}x (the difference is our sha256 pre-check)")
    if not scratch:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
