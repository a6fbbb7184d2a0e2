"""The failover benchmark's CPU and memory figures: per named group of processes."""

from __future__ import annotations

import subprocess
import sys
import time

from support.process_usage import ProcessUsage


def test_a_busy_process_and_a_large_one_are_told_apart_and_others_are_ignored():
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 3\nwhile time.time() < end: pass"])
    large = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(96 << 20); b[::4096] = "
                                                    "b'x' * len(b[::4096]); time.sleep(4)"])
    names = {busy.pid: "busy", large.pid: "large"}
    try:
        usage = ProcessUsage(lambda pid, argv: names.get(pid))
        busy.wait(timeout=30)
        time.sleep(1.2)
        result = usage.finish()
    finally:
        large.kill()
        large.wait()
    assert set(result.groups) == {"busy", "large"}
    assert result.groups["busy"].cpu_seconds > 0.5  # of its 3 s spinning, on a machine shared with others
    assert result.groups["busy"].peak_cores > 0
    assert result.groups["large"].peak_rss_mib > 90
    assert result.groups["large"].cpu_seconds < result.groups["busy"].cpu_seconds
    assert result.rows()[0][0] == "busy"
    assert 0 < result.machine_busy_avg <= result.machine_busy_peak <= 1
    assert result.mem_available_min_mib > 0
