"""Poll an API server's /readyz every second in the background, counting failures."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path


class ReadyzPoller:
    """``kubectl get --raw /readyz`` with ``kubeconfig`` every second until finish()."""

    def __init__(self, kubeconfig: Path, kubectl: str):
        self.kubeconfig, self.kubectl = kubeconfig, kubectl
        self.polls, self.failures = 0, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            proc = subprocess.run([self.kubectl, "--kubeconfig", str(self.kubeconfig), "get", "--raw", "/readyz",
                                   "--request-timeout=5s"], capture_output=True, text=True, check=False)
            self.polls += 1
            if proc.returncode != 0 or proc.stdout.strip() != "ok":
                self.failures.append(f"{time.strftime('%H:%M:%S')}: {(proc.stderr or proc.stdout).strip()[:200]}")
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def finish(self) -> tuple[int, list[str]]:
        self.stop.set()
        self.thread.join(timeout=15)
        return self.polls, self.failures
