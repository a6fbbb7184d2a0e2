"""The restore Job's entrypoint: seed one etcd member's volume from a stored snapshot.

Run in the operator image as ``python3 -m karmada_operator.backup.restore_job`` with the member's
plan (:func:`etcd_restore.member_plan`) as JSON in ``ETCD_RESTORE_PLAN``. In order, and
stopping at the first problem with nothing written into the member's data directory:

1. the data directory must not exist or be empty (``TargetHasData``: never over live data);
2. the snapshot's metadata is read from the store; when the EtcdRestore expected a sha256
   (the EtcdBackup's status) it must match (``IntegrityCheckFailed``);
3. the snapshot is downloaded into the staging directory and its sha256 checked against the
   store's record on the way (a flipped byte: ``IntegrityCheckFailed``, no file kept);
4. ``etcdutl snapshot restore`` as planned (member name, peer URL, cluster, token,
   ``--bump-revision``, ``--mark-compacted``) into a temporary directory beside the data
   directory, renamed into place only when it succeeded. etcdutl checks etcd's own sha256
   trailer before it writes anything (a snapshot corrupted before it was stored:
   ``SnapshotCorrupted``); we do not read the file a second time for that;
5. the restored database's revision, read from its own bbolt pages (a few pages, not a walk
   of every key). The keys are not counted here: the verification reads them from the
   restored etcd itself at that revision, once it runs (restore_controller.py).

Output: one JSON line on stdout (and in ``ETCD_RESTORE_RESULT_FILE`` when it fits):
``{"ok": true, "member", "snapshot": {...}, "restored": {"revision"}, "seconds": {...}}`` or ``{"ok": false, "reason",
"message"}``; exit 0, 1, or 2 when retrying cannot help.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from karmada_operator.backup import job as backup_job
from karmada_operator.backup import store as store_lib
from karmada_operator.etcd.snapshots import HASH_SIZE, EtcdSnapshotError, snapshot_revision

PLAN_FORMAT = 1
# What etcdutl prints when a snapshot's trailer does not match its content.
HASH_MISMATCH = "expected sha256"
EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


class RestoreFailed(Exception):
    def __init__(self, message: str, reason: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code


def restore_member(plan: Mapping[str, Any], store: store_lib.SnapshotStore, etcdutl: str) -> dict[str, Any]:
    member = plan["member"]
    snap = plan["snapshot"]
    data_dir = Path(member["dataDir"])
    clock = time.monotonic
    t0 = mark = clock()
    seconds: dict[str, float] = {}

    def took(phase: str) -> None:
        nonlocal mark
        now = clock()
        seconds[phase] = round(now - mark, 3)
        mark = now

    if data_dir.exists() and any(data_dir.iterdir()):
        raise RestoreFailed(f"{data_dir} already holds etcd data: a restore never writes over a member's data "
                            "(delete the volume first if the data is expendable)", "TargetHasData", EXIT_INVALID)
    info = store.get(snap["name"])
    took("metadata")
    if snap.get("sha256") and snap["sha256"] != info.sha256:
        raise RestoreFailed(f"{store}: snapshot {snap['name']} has sha256 {info.sha256}, not the {snap['sha256']} "
                            "the EtcdBackup recorded", "IntegrityCheckFailed", EXIT_INVALID)
    staged = Path(snap["path"])
    try:
        store.fetch_to_file(snap["name"], staged)  # sha256 checked against the store's record on the way
        took("download")
        size = staged.stat().st_size
        if size <= HASH_SIZE or size % 512 != HASH_SIZE:
            raise RestoreFailed(f"snapshot {snap['name']} is {size} bytes, not an etcd database plus its 32-byte "
                                "sha256 trailer: it was cut or is not a snapshot", "SnapshotCorrupted", EXIT_INVALID)
        work = data_dir.with_name(f".{data_dir.name}.restoring")
        shutil.rmtree(work, ignore_errors=True)
        argv = list(member["argv"])
        argv[0] = etcdutl
        argv[argv.index("--data-dir") + 1] = str(work)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
        if proc.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            error = proc.stderr.strip()[-800:]
            if HASH_MISMATCH in error:
                raise RestoreFailed(f"snapshot {snap['name']} fails etcd's own sha256 check (it was corrupted "
                                    f"before it was stored); use another backup: {error}", "SnapshotCorrupted",
                                    EXIT_INVALID)
            raise RestoreFailed(f"etcdutl snapshot restore failed: {error}", "RestoreFailed")
        took("restore")
        try:
            restored = snapshot_revision(work / "member" / "snap" / "db")
        except (OSError, EtcdSnapshotError) as exc:
            shutil.rmtree(work, ignore_errors=True)
            raise RestoreFailed(f"the restored database cannot be read: {exc}", "RestoreFailed") from exc
        if data_dir.exists():
            data_dir.rmdir()  # empty (checked above)
        os.replace(work, data_dir)
        took("revision")
    finally:
        staged.unlink(missing_ok=True)
    return {"ok": True, "member": member["name"],
            "snapshot": {"name": info.name, "sha256": info.sha256, "sizeBytes": info.size, "location": info.location,
                         "revision": info.revision, "keys": info.keys, "counts": dict(info.counts)},
            "restored": {"revision": restored},
            "seconds": {**seconds, "total": round(clock() - t0, 3)}}


def emit_result(doc: dict[str, Any], code: int, env: Mapping[str, str], out: Any) -> int:
    """A restore Job's one result line: on stdout and, when it fits, in ETCD_RESTORE_RESULT_FILE
    (the Job's termination message). Returns ``code``."""
    line = json.dumps(doc, sort_keys=True)
    out.write(line + "\n")
    out.flush()
    if env.get("ETCD_RESTORE_RESULT_FILE") and len(line) < 4000:
        with contextlib.suppress(OSError):
            Path(env["ETCD_RESTORE_RESULT_FILE"]).write_text(line + "\n")
    return code


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None, out: Any = None) -> int:
    env = os.environ if env is None else env
    out = out or sys.stdout
    etcdutl = (list(argv or sys.argv[1:]) or [env.get("ETCDUTL_PATH") or shutil.which("etcdutl") or "etcdutl"])[0]

    def emit(doc: dict[str, Any], code: int) -> int:
        return emit_result(doc, code, env, out)

    try:
        plan = json.loads(env.get("ETCD_RESTORE_PLAN") or "")
        if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
            raise ValueError(f"not a restore plan of format {PLAN_FORMAT}")
    except ValueError as exc:
        return emit({"ok": False, "reason": "InvalidPlan", "message": f"ETCD_RESTORE_PLAN: {exc}"}, EXIT_INVALID)
    store = None
    try:
        store = backup_job.open_store(plan, env)
        return emit(restore_member(plan, store, etcdutl), EXIT_OK)
    except RestoreFailed as exc:
        return emit({"ok": False, "reason": exc.reason, "message": str(exc)}, exc.code)
    except store_lib.StoreError as exc:
        code = EXIT_INVALID if isinstance(exc, (store_lib.IntegrityCheckFailed, store_lib.InvalidStoreConfig,
                                                store_lib.SnapshotNotFound)) else EXIT_FAILED
        return emit({"ok": False, "reason": exc.reason, "message": str(exc)}, code)
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":
    sys.exit(main())
