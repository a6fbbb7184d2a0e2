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


# Module -> seconds: every run ends with this table (setup, call and teardown of each test,
# fixtures included, summed per file), so the cost of each proof is on record.
_MODULE_SECONDS: dict[str, float] = {}
_MODULE_OUTCOMES: dict[str, dict[str, int]] = {}


def pytest_runtest_logreport(report):
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration
    outcome = report.outcome
    if report.when != "call" and outcome == "failed":
        outcome = "error"  # a fixture's setup or teardown failed, as pytest's summary says
    if report.when == "call" or outcome != "passed" and not (report.when == "teardown" and outcome == "skipped"):
        counts = _MODULE_OUTCOMES.setdefault(module, {})
        counts[outcome] = counts.get(outcome, 0) + 1


def module_table(seconds: dict[str, float], outcomes: dict[str, dict[str, int]]) -> list[str]:
    """Markdown rows: each module in run order, its seconds and outcomes, then the total."""
    rows = ["| module | seconds | tests |", "|---|---:|---|"]
    for module, secs in seconds.items():
        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.get(module, {}).items()))
        rows.append(f"| {module} | {secs:.1f} | {counts} |")
    rows.append(f"| **total** | **{sum(seconds.values()):.1f}** | |")
    return rows


def pytest_terminal_summary(terminalreporter):
    if not _MODULE_SECONDS:
        return
    terminalreporter.section("module -> seconds")
    rows = module_table(_MODULE_SECONDS, _MODULE_OUTCOMES)
    for row in rows:
        terminalreporter.write_line(row)
    target = os.environ.get("KO_MODULE_SECONDS_FILE")
    if target:
        Path(target).write_text("\n".join(rows) + "\n")
