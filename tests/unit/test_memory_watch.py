"""The benchmark's memory figure: a process tree's PSS, children included."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from support.memory import MemoryWatch, children, pss_kib, tree_pss_mib


def test_the_tree_counts_every_descendant_and_the_peak_is_kept():
    # a child holding ~64 MiB, which itself starts a grandchild
    code = ("import subprocess, time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); "
            "subprocess.Popen(['sleep', '30']); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        watch = MemoryWatch(os.getpid())
        deadline = time.monotonic() + 20
        while len(children(proc.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)
        assert proc.pid in children(os.getpid()) and len(children(proc.pid)) == 1
        assert pss_kib(proc.pid) > 60 * 1024
        assert tree_pss_mib(os.getpid()) > tree_pss_mib(proc.pid) > 60
        assert watch.finish() > 60
    finally:
        for pid in children(proc.pid):
            os.kill(pid, 9)
        proc.kill()
        proc.wait()
