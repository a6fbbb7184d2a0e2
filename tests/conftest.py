"""Shared pytest setup.

Makes ``plugins/module_utils`` importable as plain Python (``import karmada_pki``), the way
Ansible imports it as ``ansible.module_utils.karmada_pki`` at run time, and exposes the
pinned test-bed binaries built by ``make testenv-bin``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# module_utils first: modules of the same name (karmada_pki) must not shadow the library.
for sub in reversed(("plugins/module_utils", "tests", "plugins/modules")):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)

KO_CACHE = Path(os.environ.get("KO_CACHE", Path.home() / ".cache" / "karmada-operator"))
BIN_DIR = Path(os.environ.get("KO_PREBUILT_BIN") or KO_CACHE / "links")


def binary(name: str) -> str:
    """Path of a pinned test-bed binary; fails (never skips) when it was not built."""
    candidate = BIN_DIR / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found and name not in {"etcd", "etcdctl", "etcdutl", "kube-apiserver", "kubectl"}:
        return found
    pytest.fail(f"{name} not found in {BIN_DIR}: run `make testenv-bin` first")
    raise AssertionError  # unreachable, for type checkers


@pytest.fixture(scope="session")
def bin_path():
    """Callable returning the path of a pinned binary by name."""
    return binary


# host_cluster / member_clusters fixtures of the tier-3 test bed (hack/testenv); the S3 server
# (versitygw) the backup store tests use.
pytest_plugins = ["support.testenv", "support.s3_server"]
