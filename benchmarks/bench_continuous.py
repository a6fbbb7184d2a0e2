#!/usr/bin/env python3
"""Benchmark continuous backup: what it costs the writer, what a loss takes, what a restore costs.

A 3-member TLS etcd (real etcd processes on loopback, fsync on), versitygw as the S3 store,
the follower as the operator runs it (``python -m karmada_operator.backup.continuous``, its own
process, the plan a follower gets) and a writer of ``RATE`` puts a second, each acknowledged
put recorded with its time.

1. Write latency: the writer for ``SECONDS`` without a follower, then with one; p50 and p99 of
   the acknowledged puts, side by side, as a ratio.
2. RPO: with the follower running, every etcd member and the follower are SIGKILLed at the same
   instant (a lost site), at a random point of a delta interval. The newest full and its
   deltas are restored (``point_restore.prepare`` + ``etcdutl snapshot restore``) and every
   acknowledged put is looked up: the count missing and how long before the kill the newest of
   them was acknowledged (at most ``deltaInterval`` by design).
3. Restore time: the point (full + N deltas) prepared as one snapshot, then restored with
   etcdutl, against ``etcdutl snapshot restore`` of the full alone by hand.

Env: CONT_BENCH_SECONDS (default 30), CONT_BENCH_RATE (100), CONT_BENCH_INTERVAL (default 5 s:
the RPO bound printed with the result), KO_PREBUILT_BIN.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils", "tests", "tests/integration"):
    sys.path.insert(0, str(ROOT / sub))

from test_etcd_backup_run import s3_env, s3_plan  # noqa: E402

from karmada_operator.backup import job, point_restore  # noqa: E402
from support.etcd_cluster import start_cluster  # noqa: E402
from support.etcd_db import read_keys  # noqa: E402
from support.s3_server import start_s3_server  # noqa: E402

BIN = Path(os.environ.get("KO_PREBUILT_BIN") or Path.home() / ".cache" / "karmada-operator" / "links")
SECONDS = float(os.environ.get("CONT_BENCH_SECONDS", "30"))
RATE = float(os.environ.get("CONT_BENCH_RATE", "100"))
INTERVAL = float(os.environ.get("CONT_BENCH_INTERVAL", "5"))


def write(client, seconds: float, tag: str, acked: list | None = None) -> list[float]:
    """Puts at RATE for ``seconds``; their latencies (s). ``acked`` gets (key, value, ack time)."""
    latencies, start, i = [], time.monotonic(), 0
    while time.monotonic() - start < seconds:
        key, value = f"/registry/bench/{tag}/{i % 2000:05d}", f"{tag}-{i}"
        t = time.monotonic()
        try:
            client.put(key, value)
        except Exception:  # noqa: BLE001 - the kill: nothing more is acknowledged
            break
        latencies.append(time.monotonic() - t)
        if acked is not None:
            acked.append((key.encode(), value.encode(), time.time()))
        i += 1
        time.sleep(max(0.0, start + i / RATE - time.monotonic()))
    return latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-continuous-"))
    etcd = start_cluster(str(BIN / "etcd"), 3, work / "etcd")
    s3 = start_s3_server(str(BIN / "versitygw"), work / "s3")
    follower = None
    try:
        client = etcd.client(timeout=30)
        for start in range(0, 2000, 100):
            client.put_many((f"/registry/seed/{i:05d}", "x" * 512) for i in range(start, start + 100))
        plan = s3_plan(etcd, s3, s3.create_bucket(), max_backups=3)
        plan["continuous"] = {"deltaIntervalSeconds": INTERVAL, "deltaMaxBytes": 10 << 20, "fullAfterDeltas": 1000}
        env = {**os.environ, "PYTHONPATH": str(ROOT / "plugins/module_utils"), "ETCD_BACKUP_PLAN": json.dumps(plan),
               **s3_env(s3)}
        without = write(client, SECONDS, "without")
        follower = subprocess.Popen([sys.executable, "-m", "karmada_operator.backup.continuous",
                                     f"--etcdctl={BIN / 'etcdctl'}", f"--staging-dir={work}"],
                                    env=env, stdout=subprocess.PIPE, text=True)
        first = json.loads(follower.stdout.readline())
        assert first["event"] == "full", first
        acked: list = []
        # the kill lands at a random point of a delta interval
        with_follower = write(client, SECONDS + random.uniform(0, INTERVAL), "with", acked)
        killed_at = time.time()
        follower.send_signal(signal.SIGKILL)
        for node in list(etcd.nodes.values()):
            etcd.kill(node.name)
        follower.wait()
        print(f"write latency at {RATE:.0f} puts/s, {len(without)} and {len(with_follower)} puts: "
              f"p50 {pct(without, 50):.2f} ms without, {pct(with_follower, 50):.2f} ms with the follower "
              f"({pct(with_follower, 50) / pct(without, 50):.2f}x); p99 {pct(without, 99):.2f} ms without, "
              f"{pct(with_follower, 99):.2f} ms with ({pct(with_follower, 99) / pct(without, 99):.2f}x)")

        store = job.open_store(plan, s3_env(s3))
        t0 = time.monotonic()
        prepared = point_restore.prepare(store, plan["snapshot"]["prefix"], "bench-latest.db", work / "prepare",
                                         str(BIN / "etcd"), str(BIN / "etcdutl"))
        prepare_s = time.monotonic() - t0
        restored, restore_s = restore(store, "bench-latest.db", work / "restored")
        last = {}
        for key, value, when in acked:
            last[key] = (value, when)
        missing = [when for key, (value, when) in last.items() if restored.get(key) != value]
        newest = max((killed_at - w for w in missing), default=0.0)
        oldest = min((killed_at - w for w in missing), default=0.0)
        print(f"RPO, site lost with the follower (SIGKILL, no flush), deltaInterval {INTERVAL:.0f} s: "
              f"{len(acked)} puts acknowledged, {len(missing)} keys not at their last value, acknowledged "
              f"{oldest:.1f}..{newest:.1f} s before the kill (bound: {INTERVAL:.0f} s)")
        _, full_s = restore(store, prepared.full, work / "full-only", by_hand=True)
        print(f"restore: full + {prepared.replayed['revisions']} revisions replayed "
              f"(prepare {prepare_s:.2f} s: {prepared.seconds}) + etcdutl restore {restore_s:.2f} s = "
              f"{prepare_s + restore_s:.2f} s; the full alone by hand (download + etcdutl) {full_s:.2f} s "
              f"({(prepare_s + restore_s) / full_s:.2f}x)")
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
        etcd.close()
        s3.stop()


def restore(store, name: str, work: Path, by_hand: bool = False) -> tuple[dict, float]:
    """Download ``name`` and ``etcdutl snapshot restore`` it; the keys of the result (read back
    from the database file after the timing) and the seconds it took."""
    work.mkdir(parents=True)
    t0 = time.monotonic()
    store.fetch_to_file(name, work / "snap.db")
    subprocess.run([str(BIN / "etcdutl"), "snapshot", "restore", str(work / "snap.db"), "--data-dir",
                    str(work / "data")], check=True, capture_output=True)
    seconds = time.monotonic() - t0
    keys = {} if by_hand else {k: kv.value for k, kv in read_keys(work / "data/member/snap/db").kvs.items()}
    return keys, seconds


if __name__ == "__main__":
    main()
