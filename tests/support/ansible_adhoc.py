"""Run one of our modules through real ansible (ad hoc, on localhost) and return its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_module(module: str, params: dict, tmp_path: Path, check: bool = False, env: dict | None = None) -> dict:
    """The module's result for localhost (``ansible localhost -m <module> -a <json>``); ``env`` is
    added to the environment (e.g. K8S_AUTH_KUBECONFIG for a module that finds its own cluster)."""
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, **(env or {}), "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
           "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"}
    cmd = [str(Path(venv_bin) / "ansible"), "localhost", "-m", module, "-a", json.dumps(params)]
    proc = subprocess.run(cmd + (["--check"] if check else []), capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    out = json.loads(proc.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]
