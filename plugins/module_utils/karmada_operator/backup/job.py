"""The backup Job's entrypoint: one EtcdBackup run inside the cluster, one JSON line out.

Run in the operator image as ``python3 -m karmada_operator.backup.job`` (``PYTHONPATH`` names
plugins/module_utils: ``backup.job_program``). Inputs:

- ``etcdctl`` on PATH (the operator image carries it; ``--etcdctl``/``ETCDCTL_PATH`` name another,
  an empty value uses etcd's JSON gateway instead) and ``--staging-dir`` for its file;
- the plan (:func:`karmada_operator.backup.plan.backup_plan`) as JSON in ``ETCD_BACKUP_PLAN``, or a file named
  by ``ETCD_BACKUP_PLAN_FILE`` or ``--plan FILE``;
- etcd client TLS: the files named in ``plan.etcd.tls`` (a Secret volume with ``items``);
- the store: the PVC mounted at ``plan.storage.mountPath``; or S3 credentials from the
  mounted Secret files ``accessKeyID``/``secretAccessKey`` in ``plan.storage.credentials
  .mountPath``, else from ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, and the optional
  CA bundle file ``plan.storage.caBundle.file``.

Output: exactly one JSON line on stdout (and, when it fits, in ``ETCD_BACKUP_RESULT_FILE``, the
Job's termination message): :meth:`BackupResult.as_dict` (``"ok": true``) or
``{"ok": false, "reason", "message"}``; exit code 0 or 1 (2: bad input, no point retrying).
Nothing secret is printed: store and etcd errors carry no credentials.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from karmada_operator.backup import runner as eb_runner
from karmada_operator.backup import store as store_lib
from karmada_operator.etcd.gateway import EtcdClient, EtcdConfigError, EtcdError

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def load_plan(argv_plan: str | None, env: Mapping[str, str]) -> dict[str, Any]:
    text = env.get("ETCD_BACKUP_PLAN")
    path = argv_plan or env.get("ETCD_BACKUP_PLAN_FILE")
    if path:
        text = Path(path).read_text()
    if not text:
        raise ValueError("no plan: set ETCD_BACKUP_PLAN (JSON) or ETCD_BACKUP_PLAN_FILE, or pass --plan")
    plan = json.loads(text)
    if not isinstance(plan, dict) or plan.get("format") != eb_runner.PLAN_FORMAT:
        raise ValueError(f"not an EtcdBackup plan of format {eb_runner.PLAN_FORMAT}")
    return plan


def _read(path: Path) -> str:
    return path.read_text().strip()


def credentials(plan: Mapping[str, Any], env: Mapping[str, str]) -> store_lib.S3Credentials:
    """From the mounted Secret files, else from the environment (secretKeyRef env vars)."""
    mount = Path(((plan.get("storage") or {}).get("credentials") or {}).get("mountPath") or "/nonexistent")
    key_file, secret_file = mount / "accessKeyID", mount / "secretAccessKey"
    if key_file.is_file() and secret_file.is_file():
        return store_lib.S3Credentials(_read(key_file), _read(secret_file))
    key, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
    if key and secret:
        return store_lib.S3Credentials(key, secret)
    raise store_lib.InvalidStoreConfig(
        f"S3 credentials not found: no {key_file} and {secret_file}, and no AWS_ACCESS_KEY_ID/"
        "AWS_SECRET_ACCESS_KEY in the environment")


def open_store(plan: Mapping[str, Any], env: Mapping[str, str], **s3_tuning: Any) -> store_lib.SnapshotStore:
    storage = plan["storage"]
    if storage["type"] == "pvc":
        return store_lib.store_from_spec(storage["spec"], volume_root=storage["mountPath"])
    ca = (storage.get("caBundle") or {}).get("file")
    return store_lib.store_from_spec(storage["spec"], credentials=credentials(plan, env), ca_bundle=ca,
                                     **s3_tuning)


def etcd_client(plan: Mapping[str, Any], timeout: float = 10.0) -> EtcdClient:
    tls = plan["etcd"]["tls"]
    return EtcdClient(plan["etcd"]["endpoints"], cert=tls["cert"], key=tls["key"], ca=tls["ca"], timeout=timeout)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None, out: Any = None) -> int:
    env = os.environ if env is None else env
    out = out or sys.stdout
    parser = argparse.ArgumentParser(description="Take one etcd backup as the EtcdBackup plan says.")
    parser.add_argument("--plan", help="plan JSON file (default: $ETCD_BACKUP_PLAN or $ETCD_BACKUP_PLAN_FILE)")
    parser.add_argument("--readback", action="store_true", help="read the snapshot back from the store to verify")
    parser.add_argument("--etcd-timeout", type=float, default=10.0)
    parser.add_argument("--etcdctl", default=env.get("ETCDCTL_PATH") or shutil.which("etcdctl") or "",
                        help="take the snapshot with this etcdctl (gRPC); empty: the JSON gateway")
    parser.add_argument("--staging-dir", default=env.get("ETCD_BACKUP_STAGING_DIR", "/tmp"),
                        help="where etcdctl writes the snapshot before it goes to the store")
    args = parser.parse_args(argv)

    def emit(doc: dict[str, Any], code: int) -> int:
        line = json.dumps(doc, sort_keys=True)
        out.write(line + "\n")
        out.flush()
        result_file = env.get("ETCD_BACKUP_RESULT_FILE")
        if result_file and len(line) < 4000:  # the kubelet keeps 4 KiB of a termination message
            with contextlib.suppress(OSError):
                Path(result_file).write_text(line + "\n")
        return code

    try:
        plan = load_plan(args.plan, env)
    except (OSError, ValueError) as exc:
        return emit({"ok": False, "reason": "InvalidPlan", "message": str(exc)}, EXIT_INVALID)
    store = None
    try:
        store = open_store(plan, env)
        result = eb_runner.run_backup(plan, etcd_client(plan, args.etcd_timeout), store, readback=args.readback,
                                        etcdctl=args.etcdctl, staging_dir=args.staging_dir)
        return emit(result.as_dict(), EXIT_OK)
    except store_lib.InvalidStoreConfig as exc:
        return emit({"ok": False, "reason": exc.reason, "message": str(exc)}, EXIT_INVALID)
    except (store_lib.StoreError, eb_runner.BackupFailed) as exc:
        return emit({"ok": False, "reason": exc.reason, "message": str(exc)}, EXIT_FAILED)
    except EtcdConfigError as exc:  # the TLS files are not where the plan says
        return emit({"ok": False, "reason": "InvalidEtcdClientConfig", "message": str(exc)}, EXIT_INVALID)
    except EtcdError as exc:
        return emit({"ok": False, "reason": "EtcdUnavailable", "message": str(exc)}, EXIT_FAILED)
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":
    sys.exit(main())
