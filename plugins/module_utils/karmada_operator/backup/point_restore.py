"""A continuous backup's point as one snapshot: the full replayed up to the point (Job side).

A restore to a point (``latest``, a revision or a time) needs the chain's full snapshot plus the
revisions after it up to the point (:func:`deltas.choose_point`). :func:`prepare` turns them into
one ordinary snapshot, so every member is then seeded from it exactly as from any snapshot (the
same checks, the same ``etcdutl snapshot restore`` with the revision bump): the full is restored
into a throw-away one-member etcd listening on loopback only, the revisions are replayed into
it, and a snapshot of it is taken, checked and committed to the store under the restore's name,
with the metadata a restore is verified against (Karmada's object counts at its revision).

The replayed etcd numbers its revisions itself (a revision with more events than one
transaction may carry is replayed in several), so the snapshot's revision is its own; what the
point stands for is the source's revision and time, returned beside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from karmada_operator.backup import deltas, restore_job
from karmada_operator.backup import job as backup_job
from karmada_operator.backup import runner as eb_runner
from karmada_operator.backup import store as store_lib
from karmada_operator.etcd.gateway import EtcdClient, EtcdError

# The throw-away etcd: loopback only, a quota no replay reaches, fast start.
QUOTA_BYTES = 8 * 1024 * 1024 * 1024
START_TIMEOUT = 60.0


class PrepareFailed(Exception):
    def __init__(self, message: str, reason: str = "PointRestoreFailed"):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Prepared:
    snapshot: store_lib.SnapshotInfo  # the snapshot every member is seeded from
    full: str  # the chain's full snapshot
    point_revision: int  # the source's revision the point stands for
    point_time_ms: int  # when the follower received the last change included
    replayed: Mapping[str, int]  # revisions, puts, deletes, leases
    seconds: Mapping[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {"ok": True, "snapshot": self.snapshot.status_item(), "full": self.full,
                "pointRevision": self.point_revision, "pointTimeMs": self.point_time_ms,
                "replayed": dict(self.replayed), "seconds": dict(self.seconds)}


def chain_snapshots(store: store_lib.SnapshotStore, prefix: str) -> list[store_lib.SnapshotInfo]:
    """The full snapshots a continuous backup named ``<prefix>-<UTC time>.db`` keeps."""
    pattern = re.compile(re.escape(prefix) + r"-[0-9]{8}T[0-9]{6}Z\.db")
    return [s for s in store.list() if pattern.fullmatch(s.name)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare(store: store_lib.SnapshotStore, prefix: str, name: str, work: Path, etcd: str, etcdutl: str,
            revision: int = 0, time_ms: int = 0) -> Prepared:
    """Commit snapshot ``name``: the chain of ``prefix`` replayed up to ``revision`` or ``time_ms``
    (neither: latest). Raises :class:`PrepareFailed` (reason) or a StoreError."""
    t0 = time.monotonic()
    seconds: dict[str, float] = {}
    try:
        point = deltas.choose_point(chain_snapshots(store, prefix), lambda f: deltas.load_chain(store, f),
                                    revision=revision, time_ms=time_ms)
    except deltas.Gap as exc:
        raise PrepareFailed(f"{store}: {exc}", "PointNotInBackup") from exc
    except deltas.DeltaCorrupt as exc:
        raise PrepareFailed(str(exc), "IntegrityCheckFailed") from exc
    seconds["choose"] = round(time.monotonic() - t0, 3)
    work.mkdir(parents=True, exist_ok=True)
    full_file, data_dir = work / "full.db", work / "replay"
    shutil.rmtree(data_dir, ignore_errors=True)
    mark = time.monotonic()
    store.fetch_to_file(point.full.name, full_file)  # sha256 checked on the way
    seconds["fetch"] = round(time.monotonic() - mark, 3)
    client_port, peer_port = _free_port(), _free_port()
    peer = f"http://127.0.0.1:{peer_port}"
    mark = time.monotonic()
    done = subprocess.run([etcdutl, "snapshot", "restore", str(full_file), "--data-dir", str(data_dir),
                           "--name", "replay", "--initial-cluster", f"replay={peer}",
                           "--initial-advertise-peer-urls", peer], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise PrepareFailed(f"etcdutl snapshot restore of {point.full.name}: {done.stderr.strip()[-500:]}",
                            "SnapshotCorrupted")
    full_file.unlink(missing_ok=True)
    seconds["restoreFull"] = round(time.monotonic() - mark, 3)
    endpoint = f"http://127.0.0.1:{client_port}"
    log = open(work / "etcd.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([etcd, "--name", "replay", "--data-dir", str(data_dir),
                             "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
                             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                             "--initial-cluster", f"replay={peer}", "--quota-backend-bytes", str(QUOTA_BYTES),
                             "--max-txn-ops", str(deltas.REPLAY_TXN_OPS), "--log-level", "warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        client = EtcdClient(endpoint, timeout=30)
        _wait_ready(client, proc, work / "etcd.log")
        mark = time.monotonic()
        replayed = deltas.replay(client, point.revisions)
        seconds["replay"] = round(time.monotonic() - mark, 3)
        mark = time.monotonic()
        plan = {"snapshot": {"name": name, "prefix": name}, "retention": {"maxBackups": 1000},
                "source": {"namespace": point.full.source.namespace, "name": point.full.source.name,
                           "uid": point.full.source.uid, "karmadaVersion": point.full.karmada_version}}
        try:
            result = eb_runner.run_backup(plan, client, store)
        except eb_runner.BackupFailed as exc:
            raise PrepareFailed(f"snapshot of the replayed etcd: {exc}", exc.reason) from exc
        seconds["snapshot"] = round(time.monotonic() - mark, 3)
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    seconds["total"] = round(time.monotonic() - t0, 3)
    return Prepared(result.snapshot, point.full.name, point.revision, point.time_ms, replayed, seconds)


def _wait_ready(client: EtcdClient, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise PrepareFailed(f"the replay etcd exited ({proc.returncode}): "
                                f"{log.read_text(errors='replace')[-800:]}")
        try:
            if client.status(client.endpoints[0]).leader:
                return
        except EtcdError:
            pass
        if time.monotonic() > deadline:
            raise PrepareFailed(f"the replay etcd did not start in {START_TIMEOUT:.0f}s")
        time.sleep(0.2)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None, out: Any = None) -> int:
    """The point's Job (``python3 -m karmada_operator.backup.point_restore``): the plan
    (restore.point_plan) in ``ETCD_RESTORE_PLAN``; one JSON result line, like the members' Jobs."""
    env = os.environ if env is None else env
    out = out or sys.stdout

    def emit(doc: dict[str, Any], code: int) -> int:
        return restore_job.emit_result(doc, code, env, out)

    try:
        plan = json.loads(env.get("ETCD_RESTORE_PLAN") or "")
        point, name = plan["point"], plan["snapshot"]["name"]
    except (ValueError, KeyError, TypeError) as exc:
        return emit({"ok": False, "reason": "InvalidPlan", "message": f"ETCD_RESTORE_PLAN: {exc}"}, 2)
    etcd = env.get("ETCD_PATH") or shutil.which("etcd") or "etcd"
    etcdutl = env.get("ETCDUTL_PATH") or shutil.which("etcdutl") or "etcdutl"
    store = None
    try:
        store = backup_job.open_store(plan, env)
        with contextlib.suppress(store_lib.SnapshotNotFound):
            store.get(name)
            store.delete(name)  # left by an earlier attempt of this restore: its own name, made again
        prepared = prepare(store, point["prefix"], name, Path(plan.get("workDir") or "/tmp/point"), etcd, etcdutl,
                           revision=int(point.get("revision") or 0), time_ms=int(point.get("timeMs") or 0))
        return emit(prepared.as_dict(), 0)
    except PrepareFailed as exc:
        return emit({"ok": False, "reason": exc.reason, "message": str(exc)}, 1)
    except store_lib.StoreError as exc:
        return emit({"ok": False, "reason": exc.reason, "message": str(exc)}, 1)
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":
    sys.exit(main())
