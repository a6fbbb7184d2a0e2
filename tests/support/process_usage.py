"""CPU and memory of named groups of processes, sampled every second while a benchmark works.

A benchmark names the processes it cares about (``classify``: pid and argv to a group name, or
None to ignore the process); each second every process in /proc is read once (utime + stime
from /proc/<pid>/stat, resident pages from /proc/<pid>/statm). finish() gives per group the
CPU seconds used in the window, the average and the peak cores (the busiest one-second
interval), and the peak resident memory (RSS summed over the group's processes, the same
process counted once per sample); and for the machine the average and peak busy share of all
cores (/proc/stat) and the lowest MemAvailable. Enough to say which process is the limit and
whether it is CPU or memory.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

Classify = Callable[[int, list[str]], "str | None"]


@dataclass
class GroupUsage:
    cpu_seconds: float = 0.0
    peak_cores: float = 0.0
    peak_rss_mib: float = 0.0
    processes: set[int] = field(default_factory=set)

    def average_cores(self, seconds: float) -> float:
        return self.cpu_seconds / seconds if seconds > 0 else 0.0


@dataclass
class Usage:
    seconds: float
    groups: dict[str, GroupUsage]
    machine_busy_avg: float  # share of all cores, 0..1
    machine_busy_peak: float
    mem_available_min_mib: float
    cores: int

    def rows(self) -> list[tuple[str, GroupUsage]]:
        """The groups, busiest first."""
        return sorted(self.groups.items(), key=lambda kv: -kv[1].cpu_seconds)


def argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def cpu_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def rss_mib(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / (1 << 20)
    except (OSError, IndexError, ValueError):
        return 0.0


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already in user
    return total - idle, total


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


class ProcessUsage:
    """Samples the groups ``classify`` names every ``interval`` seconds until finish()."""

    def __init__(self, classify: Classify, interval: float = 1.0):
        self.classify, self.interval = classify, interval
        self.names: dict[int, str | None] = {}  # pid -> group (None: not ours), decided once per pid
        self.last: dict[int, int] = {}  # pid -> cpu ticks at the previous sample
        self.groups: dict[str, GroupUsage] = {}
        self.busy: list[float] = []
        self.mem_min = float("inf")
        self.start = time.monotonic()
        self.prev_machine = machine_ticks()
        self.prev_time = self.start
        self.sample(first=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _group(self, pid: int) -> str | None:
        if pid not in self.names:
            self.names[pid] = self.classify(pid, argv(pid))
        return self.names[pid]

    def sample(self, first: bool = False) -> None:
        now = time.monotonic()
        elapsed = max(now - self.prev_time, 1e-3)
        used: dict[str, float] = {}
        rss: dict[str, float] = {}
        seen: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            group = self._group(pid)
            if group is None:
                continue
            ticks = cpu_ticks(pid)
            if ticks is None:
                continue
            seen[pid] = ticks
            usage = self.groups.setdefault(group, GroupUsage())
            usage.processes.add(pid)
            # A process that appeared since the last sample: all its CPU so far is in the window.
            delta = 0 if first else ticks - self.last.get(pid, 0)
            used[group] = used.get(group, 0.0) + max(delta, 0) / TICKS
            rss[group] = rss.get(group, 0.0) + rss_mib(pid)
        self.last = seen
        for group, seconds in used.items():
            usage = self.groups[group]
            usage.cpu_seconds += seconds
            usage.peak_cores = max(usage.peak_cores, seconds / elapsed)
        for group, mib in rss.items():
            usage = self.groups[group]
            usage.peak_rss_mib = max(usage.peak_rss_mib, mib)
        busy, total = machine_ticks()
        if not first and total > self.prev_machine[1]:
            self.busy.append((busy - self.prev_machine[0]) / (total - self.prev_machine[1]))
        self.prev_machine, self.prev_time = (busy, total), now
        self.mem_min = min(self.mem_min, mem_available_mib())

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            with contextlib.suppress(OSError):  # /proc moved under us; the next sample counts it
                self.sample()

    def finish(self) -> Usage:
        self.stop.set()
        self.thread.join(timeout=30)
        self.sample()
        seconds = time.monotonic() - self.start
        return Usage(seconds=seconds, groups=self.groups,
                     machine_busy_avg=sum(self.busy) / len(self.busy) if self.busy else 0.0,
                     machine_busy_peak=max(self.busy, default=0.0),
                     mem_available_min_mib=self.mem_min, cores=os.cpu_count() or 1)
