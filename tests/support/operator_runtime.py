"""Run the real ansible-operator binary with our watches.yaml against a kubeconfig,
as `make run` does."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from support.kube_apiserver import free_port
from support.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]


PROXY_PORT = 8888


def wait_for_proxy_port(timeout: float) -> None:
    """Wait until the runtime's proxy port is free: another operator (another test run on this
    machine, e.g. an integration test next to an end-to-end one) may hold it for a while."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", PROXY_PORT))
                return
            except OSError:
                pass
        if time.monotonic() >= deadline:
            raise RuntimeError(f"127.0.0.1:{PROXY_PORT} (the operator runtime's proxy) still in use after "
                               f"{timeout:.0f}s: another ansible-operator runs on this machine")
        time.sleep(2)


class OperatorProcess:
    """ansible-operator run. Its API proxy stays on the default port 8888: the kubeconfig the
    runtime hands to playbooks names that port whatever --proxy-port says (seen with v1.42.0),
    so only one operator runs at a time on a machine."""

    def __init__(self, binary: str, kubeconfig: Path, workdir: Path, extra_env: dict | None = None,
                 port_wait: float = 900, extra_args: list[str] | None = None):
        wait_for_proxy_port(port_wait)
        self.log_path = workdir / "ansible-operator.log"
        self.started = time.time()  # the runtime's records of its runs are newer than this
        self.health_port = free_port()
        venv_bin = str(Path(sys.executable).parent)
        env = dict(os.environ)
        env.update({
            "KUBECONFIG": str(kubeconfig),
            "PATH": f"{venv_bin}:{Path(binary).parent}:{env.get('PATH', '')}",
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-tmp"),
            "HOME": env.get("HOME", "/root"),
        })
        env.update(extra_env or {})
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [binary, "run", "--watches-file", str(ROOT / "watches.yaml"),
             "--ansible-roles-path", str(ROOT / "roles"), "--leader-elect=false",
             f"--health-probe-bind-address=127.0.0.1:{self.health_port}", "--metrics-bind-address=0",
             *(extra_args or [])],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ansible-operator exited: {self.log_tail()}")
            try:
                if requests.get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"ansible-operator not healthy after {timeout}s: {self.log_tail()}")

    def log_tail(self, chars: int = 6000) -> str:
        return self.log_path.read_text()[-chars:]

    def stop(self) -> None:
        stop_process(self.proc, 30)
        self._log.close()
