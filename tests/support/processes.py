"""Stopping the processes tests and benchmarks start."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen | None, timeout: float = 30) -> None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; nothing to do if it has exited."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
