#!/usr/bin/env python3
"""EtcdBackup and EtcdRestore data paths against raw etcd tools plus boto3, in one run.

1. Fills a one-member TLS etcd with ETCD_BENCH_DB_MB megabytes (default 1024) and starts the
   pinned versitygw (S3) on loopback.
2. Backup to S3: the backup Job's program (``karmada_operator.backup.job``, what the Job runs: member
   choice, ``etcdctl snapshot save``, one pass that uploads and checks etcd's trailer, revision
   and object counts, sidecar, retention) vs ``etcdctl snapshot save`` followed by boto3's
   ``upload_file`` of that file: MB/s and ratio (goal >= 0.9x).
3. Restore of that snapshot into 3 members: the restore Job's code per member (store metadata,
   download with sha256 check, ``etcdutl snapshot restore`` with the bump (it checks etcd's
   trailer) with ``etcdutl snapshot status`` of the snapshot alongside, and of the result
   after) vs boto3 ``download_file`` once plus raw ``etcdutl snapshot restore`` per member with
   the same flags: seconds and ratio.

What the operator adds around these (reconcile passes, the Jobs' pods, the install of the
restored Karmada) is measured by bench_backup_karmada.py on the test bed: apply to done.
Env: ETCD_BENCH_DB_MB, ETCD_BENCH_RUNS (best of N, default 1), ETCD_BENCH_WORKDIR, KO_PREBUILT_BIN.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils", "tests", "benchmarks"):
    sys.path.insert(0, str(ROOT / sub))

import yaml  # noqa: E402
from bench_etcd import best, fill  # noqa: E402

from karmada_operator.backup import job as backup_job
from karmada_operator.backup import plan as eb_plan
from karmada_operator.backup import restore_job
from karmada_operator.backup.restore_plan import plan_restore
from support.etcd_cluster import free_port, start_cluster  # noqa: E402
from support.s3_server import start_s3_server  # noqa: E402

BIN = Path(os.environ.get("KO_PREBUILT_BIN") or Path.home() / ".cache" / "karmada-operator" / "links")
MEMBERS = 3
BUMP = 1_000_000_000


def backup_plan(cluster, s3, bucket: str) -> dict:
    kd = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    kd["metadata"]["uid"] = "bench-kd"
    bk = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdBackup",
          "metadata": {"name": "bench", "namespace": kd["metadata"]["namespace"], "uid": "bench-bk"},
          "spec": {"karmadaDeploymentRef": {"name": kd["metadata"]["name"]}, "retention": {"maxBackups": 100},
                   "storage": {"s3": {"endpoint": s3.endpoint, "bucket": bucket, "prefix": "bench",
                                      "credentialsSecretRef": {"name": "unused"}}}}}
    plan = eb_plan.backup_plan(bk, kd)
    plan["etcd"]["endpoints"] = cluster.endpoints()
    c = cluster.certs
    plan["etcd"]["tls"].update(ca=c.ca, cert=c.client_cert, key=c.client_key)
    return plan


def main() -> int:
    megabytes = int(os.environ.get("ETCD_BENCH_DB_MB", "1024"))
    runs = int(os.environ.get("ETCD_BENCH_RUNS", "1"))
    work = Path(os.environ.get("ETCD_BENCH_WORKDIR") or tempfile.mkdtemp(prefix="ko-backup-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    extra = ["--quota-backend-bytes", str(max(8, megabytes * 4 // 1024 + 2) * 1024**3),
             "--max-request-bytes", str(8 * 1024 * 1024), "--max-txn-ops", "1000", "--unsafe-no-fsync",
             "--snapshot-count", "1000000000"]
    cluster = start_cluster(str(BIN / "etcd"), 1, work / "source", extra_args=extra)
    s3 = start_s3_server(str(BIN / "versitygw"), work / "s3")
    env = {"PATH": f"{BIN}:{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT / "plugins" / "module_utils"),
           "AWS_ACCESS_KEY_ID": s3.access_key,
           "AWS_SECRET_ACCESS_KEY": s3.secret_key}
    try:
        client = cluster.client(timeout=120)
        t0 = time.perf_counter()
        keys = fill(client, megabytes)
        db = client.status(cluster.endpoints()[0]).db_size
        print(f"database: {keys} keys, dbSize {db / 1e6:.1f} MB (filled in {time.perf_counter() - t0:.1f}s)")

        # --- backup
        bucket = s3.create_bucket()
        boto = s3.client()
        staging = work / "staging"
        staging.mkdir()
        counter = iter(range(1000))

        def ours() -> dict:
            plan = backup_plan(cluster, s3, bucket)
            plan["snapshot"]["name"] = f"bench-2026010{next(counter) % 10}T000000Z.db"
            proc = subprocess.run([sys.executable, "-m", "karmada_operator.backup.job",
                                   f"--etcdctl={BIN / 'etcdctl'}", f"--staging-dir={staging}"],
                                  env={**env, "ETCD_BACKUP_PLAN": json.dumps(plan)}, capture_output=True,
                                  text=True, check=True)
            return json.loads(proc.stdout.strip().splitlines()[-1])

        def baseline() -> int:
            path = work / "etcdctl.db"
            c = cluster.certs
            subprocess.run([str(BIN / "etcdctl"), "--endpoints", cluster.endpoints()[0], "--cacert", c.ca,
                            "--cert", c.client_cert, "--key", c.client_key, "snapshot", "save", str(path)],
                           check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
            boto.upload_file(str(path), bucket, "baseline/etcdctl.db")
            size = path.stat().st_size
            path.unlink()
            return size

        t_base, size = best(runs, baseline)
        t_ours, doc = best(runs, ours)
        assert doc["ok"], doc
        snap = doc["snapshot"]
        ours_mbs, base_mbs = snap["sizeBytes"] / 1e6 / t_ours, size / 1e6 / t_base
        print(f"backup to S3   ours (backup Job program: etcdctl + checked upload + metadata): "
              f"{snap['sizeBytes'] / 1e6:8.1f} MB in {t_ours:6.2f}s = {ours_mbs:6.1f} MB/s")
        print(f"backup to S3   etcdctl snapshot save + boto3 upload_file:                      "
              f"{size / 1e6:8.1f} MB in {t_base:6.2f}s = {base_mbs:6.1f} MB/s")
        print(f"backup to S3   ratio ours/baseline: {ours_mbs / base_mbs:.2f}x (goal >= 0.90x)")
    finally:
        cluster.close()

    # --- restore into 3 members
    storage = eb_plan.storage_plan({"s3": {"endpoint": s3.endpoint, "bucket": bucket, "prefix": "bench",
                                      "credentialsSecretRef": {"name": "unused"}}})
    members = [{"name": f"m{i}", "peer_url": f"https://127.0.0.1:{free_port()}",
                "client_url": f"https://127.0.0.1:{free_port()}"} for i in range(MEMBERS)]
    rounds = iter(range(1000))

    def restore_ours() -> None:
        root = work / f"ours-{next(rounds)}"
        rplan = plan_restore(str(root / "staging" / snap["name"]),
                             [{**m, "data_dir": str(root / m["name"] / "data")} for m in members], str(root),
                             cluster_token="bench", bump_revision=BUMP, mark_compacted=True)
        def one(m) -> dict:  # one member's Job: its own store client and its own download
            with backup_job.open_store({"storage": storage}, env) as store:
                staged = root / m.name / "staging" / snap["name"]
                return restore_job.restore_member({"storage": storage, "snapshot": {
                    "name": snap["name"], "sha256": snap["sha256"], "path": str(staged)},
                    "member": {"name": m.name, "dataDir": m.data_dir,
                               "argv": [a if a != str(root / "staging" / snap["name"]) else str(staged)
                                        for a in m.restore_argv]}},
                    store, str(BIN / "etcdutl"))

        # The three Jobs run at once in the cluster (each on its member's node); so do they here.
        with ThreadPoolExecutor(MEMBERS) as pool:
            results = list(pool.map(one, rplan.members))
        assert all(r["ok"] for r in results)
        shutil.rmtree(root)

    def restore_raw() -> None:
        root = work / f"raw-{next(rounds)}"
        root.mkdir()
        path = root / "snap.db"
        s3.client().download_file(bucket, f"bench/{snap['name']}", str(path))
        initial = ",".join(f"{m['name']}={m['peer_url']}" for m in members)
        for m in members:
            subprocess.run([str(BIN / "etcdutl"), "snapshot", "restore", str(path), "--name", m["name"],
                            "--initial-cluster", initial, "--initial-cluster-token", "bench",
                            "--initial-advertise-peer-urls", m["peer_url"], "--data-dir", str(root / m["name"]),
                            "--bump-revision", str(BUMP), "--mark-compacted"], check=True, capture_output=True)
        shutil.rmtree(root)

    try:
        t_raw, _ = best(runs, restore_raw)
        t_rest, _ = best(runs, restore_ours)
        print(f"restore 3 members  ours (3 restore Jobs' code at once: download+sha256, etcdutl restore, "
              f"status): {t_rest:6.2f}s")
        print(f"restore 3 members  boto3 download_file + etcdutl snapshot restore x3:                    "
              f"{t_raw:6.2f}s")
        print(f"restore 3 members  ratio ours/raw: {t_rest / t_raw:.2f}x time (ours downloads and checks a copy "
              "per member, as each member's Job does on its own node; here all on one machine)")
    finally:
        s3.stop()
        if not os.environ.get("ETCD_BENCH_WORKDIR"):
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
