#!/usr/bin/env python3
"""EtcdBackup and EtcdRestore end to end on the test bed, on a ~1 GB etcd, against raw tools.

Issue 13's figure: what a user waits for, from ``kubectl apply`` to done, side by side with
what an admin would run by hand, in one run on the same machine.

1. The real ansible-operator (as the e2e tests run it; backup and restore Jobs run the operator
   image the test bed builds) installs a Karmada with one etcd member in ``bench-backup``;
   versitygw (S3) listens on the node's address. The etcd is filled to ETCD_BENCH_DB_MB
   megabytes (default 1024) of 64 KiB values under ``bench/``, over its client port.
2. Backup to S3: ``EtcdBackup`` apply -> Succeeded (the reconcile, the Job's pod, the snapshot
   with its checks, the upload, the metadata, the status) vs ``etcdctl snapshot save`` from the
   node to the etcd pod followed by boto3 ``upload_file`` to the same S3 server: MB/s and ratio
   (goal >= 0.9x). A second EtcdBackup with ``spec.jobResources`` requesting one CPU shows how
   much of the gap is the Job pod's CPU weight.
3. Restore: a new KarmadaDeployment with one etcd member on a PVC and an ``EtcdRestore`` of that
   snapshot: apply -> etcd seeded, apply -> KarmadaDeployment Ready, apply -> EtcdRestore
   Succeeded (verified), vs boto3 ``download_file`` plus raw ``etcdutl snapshot restore`` (same
   bump and mark-compacted) for the same one member. The source's own install (apply -> Ready,
   empty etcd) is printed as well: the restore's apply -> Ready is an install plus the seeding.

Env: ETCD_BENCH_DB_MB, BENCH_BACKUP_TIMEOUT (seconds per wait, default 1800),
BENCH_ETCD_RESOURCES (JSON: the source's spec.etcd.local.resources; default the operator's),
BENCH_JOB_RESOURCES (JSON: spec.jobResources of the second backup; default a one-CPU request). Needs root; a
host cluster that is not running is started with hack/testenv/up.sh and taken down afterwards.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils", "tests", "benchmarks"):
    sys.path.insert(0, str(ROOT / sub))

import karmada_operator_baseline as baseline  # noqa: E402
from bench_etcd import fill  # noqa: E402
from bench_install import condition, host_up, pgrep, say, wait_established  # noqa: E402

from karmada_operator.etcd.gateway import EtcdClient
from support import karmada_e2e  # noqa: E402
from support.karmada_crds_server import serve  # noqa: E402
from support.operator_runtime import OperatorProcess  # noqa: E402
from support.s3_server import start_s3_server  # noqa: E402
from support.testenv import HACK, settings  # noqa: E402

NS, SOURCE, TARGET = "bench-backup", "karmada", "restored"
BUMP = 1_000_000_000
TIMEOUT = float(os.environ.get("BENCH_BACKUP_TIMEOUT", "1800"))
BIN = Path(settings()["KO_LINKS"])
# The Karmada's etcd keeps etcd's default --max-request-bytes (1.5 MiB): 16 values of 64 KiB a txn.
PER_TXN = 16
# A second backup with other spec.jobResources: how the Job's CPU weight against etcd's moves the
# in-pod time (a one-CPU request, measured, starves an etcd with the default 100m).
JOB_CPU = json.loads(os.environ.get("BENCH_JOB_RESOURCES") or '{"requests": {"cpu": "1", "memory": "256Mi"}}')


class Bed:
    def __init__(self, host, work: Path, s3):
        self.host, self.work, self.s3 = host, work, s3

    def apply(self, doc: dict) -> None:
        self.host.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))

    def get(self, kind: str, name: str) -> dict:
        proc = self.host.kubectl("get", kind, name, "-n", NS, "-o", "json", check=False, timeout=30)
        return json.loads(proc.stdout) if proc.returncode == 0 else {}

    def wait(self, kind: str, name: str, predicate, what: str) -> dict:
        obj = baseline.wait_until(lambda: (lambda o: o if o and predicate(o) else None)(self.get(kind, name)),
                                  TIMEOUT, 1)
        if not obj:
            last = self.get(kind, name).get("status", {})
            raise RuntimeError(f"{kind} {NS}/{name}: not {what} after {TIMEOUT:.0f} s; status {json.dumps(last)[:600]}")
        return obj

    def watch_phase(self, kind: str, name: str, phases: tuple[str, ...]) -> float:
        """Watch (not poll) until status.phase is one of ``phases``; the monotonic time it was seen."""
        proc = subprocess.Popen([str(BIN / "kubectl"), "--kubeconfig", str(self.host.kubeconfig), "get", kind, name,
                                 "-n", NS, "-w", "-o", "jsonpath={.status.phase}{\"\\n\"}"],
                                stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + TIMEOUT
        try:
            for line in proc.stdout:  # one line per change of the object
                if line.strip() in phases:
                    return time.monotonic()
                if time.monotonic() > deadline:
                    break
        finally:
            proc.kill()
            proc.wait()
        raise RuntimeError(f"{kind} {NS}/{name}: no phase in {phases} after {TIMEOUT:.0f} s")

    def etcd(self, name: str) -> tuple[str, dict[str, str]]:
        """The client URL of member 0 by pod IP, and the etcd CA plus a client certificate as files."""
        ip = self.get("pod", f"{name}-etcd-0")["status"]["podIP"]
        secret = self.get("secret", f"{name}-etcd-pki")["data"]
        files = {}
        for key, out in (("ca.crt", "ca"), ("healthcheck-client.crt", "cert"), ("healthcheck-client.key", "key")):
            path = self.work / f"{name}-{key}"
            path.write_bytes(base64.b64decode(secret[key]))
            path.chmod(0o600)
            files[out] = str(path)
        return f"https://{ip}:2379", files


def ready(kd: dict) -> bool:
    c = condition(kd, "Ready")
    return c.get("status") == "True" and c.get("observedGeneration") == kd["metadata"]["generation"]


def karmada(name: str, crds, storage: dict) -> dict:
    cr = karmada_e2e.sample()
    cr["metadata"].update(name=name, namespace=NS)
    spec = cr["spec"]
    spec.pop("members", None)
    spec["crds"] = {"url": crds.url, "sha256": crds.sha256}
    spec["etcd"]["local"] = {"replicas": 1, "storage": storage}
    if os.environ.get("BENCH_ETCD_RESOURCES"):
        spec["etcd"]["local"]["resources"] = json.loads(os.environ["BENCH_ETCD_RESOURCES"])
    spec["apiServer"] = {"replicas": 1, "serviceType": "ClusterIP"}
    return cr


def since(obj: dict, stamp: str | None) -> float | None:
    if not stamp:
        return None
    created = datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return (datetime.fromisoformat(stamp.replace("Z", "+00:00")) - created).total_seconds()


def run(bed: Bed, crds, megabytes: int) -> None:
    # --- the source Karmada, filled
    started = time.monotonic()
    bed.apply(karmada(SOURCE, crds, {"type": "EmptyDir"}))
    bed.wait("karmadadeployment", SOURCE, ready, "Ready")
    install = time.monotonic() - started
    say(f"install apply-to-Ready (1 etcd member, empty): {install:.1f} s")
    endpoint, tls = bed.etcd(SOURCE)
    client = EtcdClient(endpoint, cert=tls["cert"], key=tls["key"], ca=tls["ca"], timeout=120,
                        tls_server_name="localhost")
    t0 = time.perf_counter()
    keys = fill(client, megabytes, PER_TXN)
    db = client.status(endpoint).db_size
    say(f"database: {keys} keys of 64 KiB, dbSize {db / 1e6:.1f} MB (filled in {time.perf_counter() - t0:.1f} s)")

    # --- backup: ours
    bucket = bed.s3.create_bucket()
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-credentials", "namespace": NS},
               "stringData": {"accessKeyID": bed.s3.access_key, "secretAccessKey": bed.s3.secret_key}})
    storage = {"endpoint": bed.s3.endpoint, "bucket": bucket, "prefix": "bench", "region": "us-east-1",
               "forcePathStyle": True, "credentialsSecretRef": {"name": "s3-credentials"}}
    t_ours, snap, split = backup_once(bed, "bench", storage)
    ours_mbs = snap["sizeBytes"] / 1e6 / t_ours
    t_cpu, snap_cpu, split_cpu = backup_once(bed, "bench-cpu", storage, {"jobResources": JOB_CPU})

    # --- backup: etcdctl snapshot save + boto3 upload, from the node
    path = bed.work / "etcdctl.db"
    started = time.monotonic()
    subprocess.run([str(BIN / "etcdctl"), "--endpoints", endpoint, "--cacert", tls["ca"], "--cert", tls["cert"],
                    "--key", tls["key"], "--insecure-skip-tls-verify", "snapshot", "save", str(path)],
                   check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
    t_save = time.monotonic() - started
    bed.s3.client().upload_file(str(path), bucket, "baseline/etcdctl.db")
    t_base = time.monotonic() - started
    size = path.stat().st_size
    path.unlink()
    base_mbs = size / 1e6 / t_base
    say(f"backup to S3   ours (EtcdBackup apply -> Succeeded): {snap['sizeBytes'] / 1e6:8.1f} MB in {t_ours:6.1f} s = "
        f"{ours_mbs:6.1f} MB/s; the Job's program {split} (default spec.jobResources)")
    say(f"backup to S3   etcdctl snapshot save + boto3 upload_file, from the node:   {size / 1e6:8.1f} MB in "
        f"{t_base:6.1f} s = {base_mbs:6.1f} MB/s (save {t_save:.1f} s, upload {t_base - t_save:.1f} s)")
    say(f"backup to S3   ratio ours/baseline: {ours_mbs / base_mbs:.2f}x (goal >= 0.90x)")
    cpu_mbs = snap_cpu["sizeBytes"] / 1e6 / t_cpu
    say(f"backup to S3   ours with spec.jobResources {json.dumps(JOB_CPU)}: {snap_cpu['sizeBytes'] / 1e6:8.1f} MB in "
        f"{t_cpu:6.1f} s = {cpu_mbs:6.1f} MB/s; the Job's program {split_cpu}; ratio {cpu_mbs / base_mbs:.2f}x")

    # --- restore: raw
    root = bed.work / "raw"
    root.mkdir()
    member = f"{TARGET}-etcd-0"
    peer = f"https://{member}.{TARGET}-etcd.{NS}.svc.cluster.local:2380"
    started = time.monotonic()
    bed.s3.client().download_file(bucket, f"bench/{snap['name']}", str(root / "snap.db"))
    subprocess.run([str(BIN / "etcdutl"), "snapshot", "restore", str(root / "snap.db"), "--name", member,
                    "--initial-cluster", f"{member}={peer}", "--initial-cluster-token", "bench",
                    "--initial-advertise-peer-urls", peer, "--data-dir", str(root / "data"),
                    "--bump-revision", str(BUMP), "--mark-compacted"], check=True, capture_output=True)
    t_raw = time.monotonic() - started
    shutil.rmtree(root)

    # --- restore: ours, into a new Karmada (the source's CA and service-account key)
    started = time.monotonic()
    bed.apply({"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdRestore",
               "metadata": {"name": "bench", "namespace": NS},
               "spec": {"source": {"backupRef": {"name": "bench"}, "snapshot": "latest"},
                        "target": {"karmadaDeploymentRef": {"name": TARGET}}, "bumpRevision": BUMP,
                        "pki": {"secretRef": {"name": f"{SOURCE}-pki"}}}})
    bed.apply(karmada(TARGET, crds, {"type": "PersistentVolumeClaim", "size": f"{max(4, megabytes // 256)}Gi",
                                     "storageClassName": "standard"}))
    bed.wait("karmadadeployment", TARGET, ready, "Ready")
    t_ready = time.monotonic() - started
    r = bed.wait("etcdrestore", "bench", lambda r: r.get("status", {}).get("phase") in ("Succeeded", "Failed"),
                 "finished")
    t_verified = time.monotonic() - started
    if r["status"]["phase"] != "Succeeded":
        raise RuntimeError(f"EtcdRestore failed: {condition(r, 'Ready')}")
    seeded = since(r, r["status"].get("seededAt"))
    verified = condition(r, "Verified")
    say(f"restore 1 member  ours: apply -> etcd seeded {seeded:.0f} s (EtcdRestore status.seededAt), -> "
        f"Karmada Ready {t_ready:.1f} s, -> EtcdRestore Succeeded {t_verified:.1f} s (Verified "
        f"{verified.get('status')}: {verified.get('message', '')[:120]})")
    say(f"restore 1 member  ours, where the seeding went: {timeline(bed, r, seeded, 'seeded seen')}; the Job's "
        f"program {restore_program(bed, r)}")
    say(f"restore 1 member  boto3 download_file + etcdutl snapshot restore:      {t_raw:6.1f} s")
    say(f"restore 1 member  ratio ours/raw: apply -> Ready {t_ready / t_raw:.2f}x time; seeding alone "
        f"{seeded / t_raw:.2f}x. Apply -> Ready is an install (empty: {install:.1f} s above) waiting for the "
        "seed, then starting on 1 GB")


def backup_once(bed, name: str, storage: dict, extra: dict | None = None) -> tuple[float, dict, str]:
    """One EtcdBackup apply -> Succeeded: (seconds, lastSuccessfulBackup, the Job's phase split)."""
    started = time.monotonic()
    bed.apply({"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdBackup",
               "metadata": {"name": name, "namespace": NS},
               "spec": {"karmadaDeploymentRef": {"name": SOURCE}, "storage": {"s3": storage}, **(extra or {})}})
    seconds = bed.watch_phase("etcdbackup", name, ("Succeeded", "Failed")) - started
    done = bed.get("etcdbackup", name)
    if done["status"]["phase"] != "Succeeded":
        raise RuntimeError(f"EtcdBackup {name} failed: {condition(done, 'Ready')}")
    snap = done["status"]["lastSuccessfulBackup"]
    events = json.loads(bed.host.kubectl("get", "events", "-n", NS, "--field-selector",
                                         f"involvedObject.kind=EtcdBackup,involvedObject.name={name},"
                                         "reason=BackupSucceeded", "-o", "json").stdout)
    split = [e["message"].rsplit(" in ", 1)[-1] for e in events["items"]]
    program = split[0] if split else str(snap.get("durationSeconds"))
    return seconds, snap, f"{program}; {timeline(bed, done, seconds)}"


def restore_program(bed, restore: dict) -> str:
    """The restore Job's own phase split (its result line, the container's termination message)."""
    uid = restore["metadata"]["uid"]
    listed = json.loads(bed.host.kubectl("get", "jobs", "-n", NS, "-o", "json").stdout)["items"]
    jobs = [j["metadata"]["name"] for j in listed
            if any(o.get("uid") == uid for o in j["metadata"].get("ownerReferences", []))]
    for job in jobs:
        pods = json.loads(bed.host.kubectl("get", "pods", "-n", NS, "-l", f"job-name={job}", "-o", "json").stdout)
        for pod in pods["items"]:
            for cs in pod.get("status", {}).get("containerStatuses", []):
                message = (cs.get("state", {}).get("terminated") or {}).get("message") or ""
                try:
                    doc = json.loads(message.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    continue
                if doc.get("seconds"):
                    return ", ".join(f"{k} {v} s" for k, v in doc["seconds"].items())
    return "(no result with its seconds found)"


def timeline(bed, backup: dict, seconds: float, end: str = "Succeeded seen") -> str:
    """Where apply -> Succeeded (a restore: -> seeded) went, from the API's own stamps (whole
    seconds): the pass before the Job, the Job's pod until its container ran, the container, and
    the recording after it. ``backup``: the EtcdBackup or EtcdRestore that owns the Job."""
    uid = backup["metadata"]["uid"]
    jobs = [j for j in json.loads(bed.host.kubectl("get", "jobs", "-n", NS, "-o", "json").stdout)["items"]
            if any(o.get("uid") == uid for o in j["metadata"].get("ownerReferences", []))]
    if not jobs:
        return "no Job found for the split"
    job = jobs[-1]
    pods = json.loads(bed.host.kubectl("get", "pods", "-n", NS, "-l", f"job-name={job['metadata']['name']}",
                                       "-o", "json").stdout)["items"]
    term = {}
    for pod in pods:
        for cs in pod.get("status", {}).get("containerStatuses", []):
            term = cs.get("state", {}).get("terminated") or cs.get("lastState", {}).get("terminated") or term
    created = since(backup, job["metadata"]["creationTimestamp"])
    started, finished = since(backup, term.get("startedAt")), since(backup, term.get("finishedAt"))
    if None in (created, started, finished):
        return f"Job created at +{created} s (no finished container for the rest of the split)"
    return (f"split: to the Job {created:.0f} s, Job to container start {started - created:.0f} s, container "
            f"{finished - started:.0f} s, container end to {end} {seconds - finished:.0f} s")


def cleanup(host) -> None:
    host.kubectl("delete", "etcdbackups,etcdrestores", "--all", "-n", NS, "--timeout=120s", check=False,
                 timeout=150)
    host.kubectl("delete", "karmadadeployments", "--all", "-n", NS, "--timeout=600s", check=False, timeout=630)
    host.kubectl("delete", "namespace", NS, "--timeout=300s", check=False, timeout=330)


def main() -> int:
    megabytes = int(os.environ.get("ETCD_BENCH_DB_MB", "1024"))
    bed = host_up("backup benchmark on the test bed")
    if bed is None:
        return 0
    host, started_cluster = bed
    busy = pgrep("ansible-operator run")
    if busy:
        say(f"backup benchmark on the test bed: not measured (another ansible-operator runs: {busy[0][:160]})")
        return 0
    work = Path(tempfile.mkdtemp(prefix="ko-backup-karmada-bench-"))
    say(f"operator image built and imported in {karmada_e2e.load_operator_image(host):.0f} s; logs in {work}")
    s3 = start_s3_server(str(BIN / "versitygw"), work / "s3", host=settings()["KO_NODE_IP"])
    crds = serve()
    operator = None
    try:
        host.kubectl("apply", "-k", str(ROOT / "config" / "crd"))
        for crd in ("karmadadeployments", "etcdbackups", "etcdrestores"):
            wait_established(host, f"{crd}.operator.karmada.io")
        host.kubectl("create", "namespace", NS, check=False)
        operator = OperatorProcess(str(BIN / "ansible-operator"), host.kubeconfig, work,
                                   extra_env={"KARMADA_OPERATOR_IMAGE": karmada_e2e.OPERATOR_IMAGE})
        operator.wait_healthy()
        run(Bed(host, work, s3), crds, megabytes)
    except Exception as exc:  # noqa: BLE001 - reported as "not measured", never as a figure
        say(f"backup benchmark on the test bed: not measured ({type(exc).__name__}: {str(exc)[-600:]}); "
            f"operator log {work}")
    finally:
        cleanup(host)
        if operator is not None:
            operator.stop()
        crds.stop()
        s3.stop()
        # the S3 store holds GBs of snapshots; the logs next to it stay
        shutil.rmtree(work / "s3", ignore_errors=True)
        if started_cluster:
            subprocess.run([str(HACK / "down.sh")], capture_output=True, text=True, timeout=600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
