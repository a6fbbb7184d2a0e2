"""Continuous backup, the follower: a full snapshot, then etcd's changes as deltas, for ever.

Runs in its own pod (Job side: imports no controller code) as ``python3 -m
karmada_operator.backup.continuous`` with the same plan as a backup Job plus
``plan.continuous``. A cycle: take a full snapshot exactly as a backup Job does
(:func:`runner.run_backup`: checked, committed with its metadata, retention applied to whole
chains), then follow etcd from its revision (:func:`deltas.follow`), writing each delta next to
it in the store. A new cycle starts when the chain holds ``fullAfterDeltas`` deltas or
``fullAfterBytes`` bytes (a restore then replays a bounded chain), and at once on a gap (etcd
compacted a revision the chain still needed: the follower was away too long). A store that
refuses a write is retried (the changes wait in memory, the lag grows and is reported); the
pod ending (SIGTERM) writes what it holds first.

It prints one JSON line per event (``full``, ``delta``, ``gap``, ``storeError``, ``fullFailed``,
``stopped``) and a ``progress`` line at least every ``REPORT_EVERY`` seconds, each with the
whole state (the chain's full, the last revision written, totals): the controller reads the
last line of the pod's log for the EtcdBackup's status.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from karmada_operator.backup import deltas
from karmada_operator.backup import job as eb_job
from karmada_operator.backup import runner as eb_runner
from karmada_operator.backup import store as store_lib
from karmada_operator.etcd.gateway import EtcdClient, EtcdError

REPORT_EVERY = 10.0
STORE_RETRY_MAX = 10.0


@dataclass(frozen=True)
class Settings:
    interval: float = 20.0
    max_bytes: int = 10 * 1024 * 1024
    full_after_deltas: int = 1000
    full_after_bytes: int = 1024 * 1024 * 1024

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any]) -> Settings:
        c = plan.get("continuous") or {}
        return cls(float(c.get("deltaIntervalSeconds", cls.interval)), int(c.get("deltaMaxBytes", cls.max_bytes)),
                   int(c.get("fullAfterDeltas", cls.full_after_deltas)),
                   int(c.get("fullAfterBytes", cls.full_after_bytes)))


class _Either:
    """Set when either event is."""

    def __init__(self, *events: threading.Event):
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


class Follower:
    def __init__(self, plan: Mapping[str, Any], client: EtcdClient, store: store_lib.SnapshotStore,
                 settings: Settings, emit: Callable[[dict[str, Any]], None], etcdctl: str = "",
                 staging_dir: str = "", clock: Callable[[], float] = time.monotonic):
        self.plan, self.client, self.store, self.settings = plan, client, store, settings
        self.out, self.etcdctl, self.staging_dir, self.clock = emit, etcdctl, staging_dir, clock
        self.state: dict[str, Any] = {"fulls": 0, "deltas": 0, "bytes": 0, "gaps": 0}

    def emit(self, doc: dict[str, Any]) -> None:
        """One line: the event and the whole state, so the last line alone tells the status."""
        self.out({**self.state, **doc})

    def _full(self, stop: threading.Event) -> store_lib.SnapshotInfo | None:
        """A full snapshot under a fresh name, retried until it is taken; None on ``stop``."""
        delay = 1.0
        while True:
            plan = {**self.plan, "snapshot": {**self.plan["snapshot"], "name": store_lib.snapshot_name(
                self.plan["snapshot"]["prefix"], datetime.now(UTC))}}
            try:
                result = eb_runner.run_backup(plan, self.client, self.store, etcdctl=self.etcdctl,
                                              staging_dir=self.staging_dir)
            except store_lib.SnapshotAlreadyExists:
                time.sleep(1.0)  # two fulls in one second (a gap right after a full): the next second's name
                continue
            except (store_lib.StoreError, eb_runner.BackupFailed, EtcdError) as exc:
                reason = getattr(exc, "reason", "EtcdUnavailable")
                self.emit({"event": "fullFailed", "reason": reason, "message": str(exc)})
                if stop.wait(delay):
                    return None
                delay = min(delay * 2, 60.0)
                continue
            self.state.update(fulls=self.state["fulls"] + 1, full=result.snapshot.name,
                              fullRevision=result.snapshot.revision,
                              fullTime=result.snapshot.taken_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                              deltaRevision=result.snapshot.revision, chainDeltas=0, chainBytes=0)
            snap = result.as_dict()["snapshot"]
            self.emit({"event": "full", "location": snap["location"], "sizeBytes": snap["sizeBytes"],
                       "sha256": snap["sha256"], "durationSeconds": snap["durationSeconds"],
                       "deleted": [s.name for s in result.deleted]})
            return result.snapshot

    def _write(self, full: str, stop: threading.Event) -> Callable[[deltas.Delta, bytes], None]:
        def write(delta: deltas.Delta, data: bytes) -> None:
            delay = 0.5
            while True:
                try:
                    self.store.put_object(deltas.delta_name(full, delta), data)
                    break
                except store_lib.SnapshotAlreadyExists:
                    break  # written before an error was reported for it: the bytes are the same
                except store_lib.StoreError as exc:
                    self.emit({"event": "storeError", "reason": exc.reason, "message": str(exc),
                               "pendingFrom": delta.first})
                    if stop.wait(delay):
                        raise
                    delay = min(delay * 2, STORE_RETRY_MAX)
            self.state.update(deltas=self.state["deltas"] + 1, bytes=self.state["bytes"] + len(data),
                              chainDeltas=self.state["chainDeltas"] + 1,
                              chainBytes=self.state["chainBytes"] + len(data),
                              deltaRevision=delta.last, deltaTime=delta.revisions[-1].time_ms)
            self.emit({"event": "delta", "first": delta.first, "last": delta.last, "events": delta.events,
                       "deltaBytes": len(data),
                       "lagSeconds": round(time.time() - delta.revisions[0].time_ms / 1000, 3)})
        return write

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            full = self._full(stop)
            if full is None:
                break
            next_full = threading.Event()

            def progress(_: deltas.Progress, next_full: threading.Event = next_full) -> None:
                if (self.state["chainDeltas"] >= self.settings.full_after_deltas
                        or self.state["chainBytes"] >= self.settings.full_after_bytes):
                    next_full.set()

            try:
                deltas.follow(self.client, full.revision, self._write(full.name, stop), self.settings.interval,
                              self.settings.max_bytes, _Either(stop, next_full), on_progress=progress,
                              clock=self.clock)
            except deltas.Gap as gap:
                self.state["gaps"] += 1
                self.emit({"event": "gap", "revision": gap.revision, "compacted": gap.compacted,
                           "message": f"{gap}; taking a new full snapshot"})
        self.emit({"event": "stopped"})

    def emit_progress(self) -> None:
        self.emit({"event": "progress"})


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None, out: Any = None) -> int:
    env = os.environ if env is None else env
    out = out or sys.stdout
    parser = argparse.ArgumentParser(description="Back etcd up continuously as the EtcdBackup plan says.")
    parser.add_argument("--plan", help="plan JSON file (default: $ETCD_BACKUP_PLAN or $ETCD_BACKUP_PLAN_FILE)")
    parser.add_argument("--etcd-timeout", type=float, default=10.0)
    parser.add_argument("--etcdctl", default=env.get("ETCDCTL_PATH") or shutil.which("etcdctl") or "")
    parser.add_argument("--staging-dir", default=env.get("ETCD_BACKUP_STAGING_DIR", "/tmp"))
    args = parser.parse_args(argv)
    lock = threading.Lock()

    def emit(doc: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps({"time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), **doc},
                                 sort_keys=True) + "\n")
            out.flush()

    try:
        plan = eb_job.load_plan(args.plan, env)
        store = eb_job.open_store(plan, env)
        client = eb_job.etcd_client(plan, args.etcd_timeout)
    except (OSError, ValueError, store_lib.StoreError, EtcdError) as exc:
        emit({"event": "invalid", "reason": getattr(exc, "reason", "InvalidPlan"), "message": str(exc)})
        return eb_job.EXIT_INVALID
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    follower = Follower(plan, client, store, Settings.from_plan(plan), emit, args.etcdctl, args.staging_dir)

    def reporter() -> None:
        while not stop.wait(REPORT_EVERY):
            follower.emit_progress()

    threading.Thread(target=reporter, daemon=True).start()
    try:
        follower.run(stop)
    except (store_lib.StoreError, eb_runner.BackupFailed, EtcdError) as exc:
        emit({"event": "stopped", "reason": getattr(exc, "reason", "EtcdUnavailable"), "message": str(exc)})
    finally:
        store.close()
    return eb_job.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
