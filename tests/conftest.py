"""Shared pytest setup.

Our package ``karmada_operator`` (plugins/module_utils) is importable here through pytest.ini's
``pythonpath``; the programs the tests start (ansible, ansible-operator, the Job programs) find it
through ``PYTHONPATH``, set here as the Makefile sets it. Exposes the pinned test-bed binaries
built by ``make testenv-bin``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_PATH = str(ROOT / "plugins" / "module_utils")
if PACKAGE_PATH not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PATH, os.environ.get("PYTHONPATH")) if p)

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


def slowest_waits(terminalreporter, count: int = 40, at_least: float = 10.0) -> None:
    """The longest waits of the run (support/waiting.py), each with its test: where the time of
    the slowest tests went, in the log of every run (pytest's --durations says which tests)."""
    from support import waiting

    waits = sorted((w for w in waiting.WAITS if w[2] >= at_least), key=lambda w: -w[2])[:count]
    if not waits:
        return
    terminalreporter.section(f"slowest {len(waits)} waits (>= {at_least:.0f}s)")
    for test, what, seconds in waits:
        terminalreporter.write_line(f"{seconds:7.1f}s  {test}  {what[:140]}")


def pytest_terminal_summary(terminalreporter):
    if not _MODULE_SECONDS:
        return
    terminalreporter.section("module -> seconds")
    rows = module_table(_MODULE_SECONDS, _MODULE_OUTCOMES)
    for row in rows:
        terminalreporter.write_line(row)
    slowest_waits(terminalreporter)
    target = os.environ.get("KO_MODULE_SECONDS_FILE")
    if target:
        Path(target).write_text("\n".join(rows) + "\n")
