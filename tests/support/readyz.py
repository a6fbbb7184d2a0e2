"""Poll an API server's /readyz every second in the background, counting failures."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.sampling import Sampler


def readyz(kubeconfig: Path, kubectl: str) -> str:
    """``ok``, or what ``kubectl get --raw /readyz`` said instead (5-second request timeout)."""
    proc = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "get", "--raw", "/readyz", "--request-timeout=5s"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or proc.stdout.strip() != "ok":
        return (proc.stderr or proc.stdout).strip()[:200] or "failed"
    return "ok"


class ReadyzPoller:
    """``/readyz`` with ``kubeconfig`` every second until finish()."""

    def __init__(self, kubeconfig: Path, kubectl: str):
        self.sampler = Sampler(lambda: readyz(kubeconfig, kubectl))

    def finish(self) -> tuple[int, list[str]]:
        """How many polls, and each failed one as ``HH:MM:SS: what it said``."""
        samples = self.sampler.finish()
        return len(samples), [f"{when}: {result}" for when, result in samples if result != "ok"]
