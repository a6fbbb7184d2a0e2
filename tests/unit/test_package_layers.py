"""The package's layers, read from what Python imports: the Jobs' programs carry no controller
code, and no module of ours reaches Ansible's import machinery for another of ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "plugins" / "module_utils"


def imported_by(*modules: str) -> set[str]:
    """Our modules a fresh Python has loaded after importing ``modules``."""
    code = ("import importlib, json, sys\n"
            f"for m in {list(modules)!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('karmada_operator'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(PACKAGE), "PATH": "/usr/bin:/bin"})
    return set(json.loads(out.stdout))


def test_the_jobs_programs_import_no_controller_code():
    loaded = imported_by("karmada_operator.backup.job", "karmada_operator.backup.restore_job")
    assert loaded <= {
        "karmada_operator", "karmada_operator.backup", "karmada_operator.backup.job",
        "karmada_operator.backup.restore_job", "karmada_operator.backup.runner", "karmada_operator.backup.store",
        "karmada_operator.etcd", "karmada_operator.etcd.gateway", "karmada_operator.etcd.snapshots",
    }, sorted(loaded)


def test_no_plugin_edits_the_import_path_or_falls_back_to_another_import():
    offenders = [f"{path.relative_to(ROOT)}: {needle}"
                 for path in sorted((ROOT / "plugins").rglob("*.py"))
                 for needle in ("sys.path", "except ImportError", "meta_path", "ansible.module_utils.karmada")
                 if needle in path.read_text()]
    assert offenders == []
