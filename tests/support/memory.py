"""The memory of a process and everything it started, sampled every second while it works.

Summed as PSS (proportional set size, /proc/<pid>/smaps_rollup): pages shared between the
processes of the tree (ansible-operator, ansible-runner, ansible-playbook and its forks) count
once in the sum, as they do in a pod's memory; RSS would count them once per process.
"""

from __future__ import annotations

import os
from pathlib import Path

from support.sampling import Sampler


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and every live descendant, with the children each has reaped
    (cutime + cstime): the CPU a process tree (the operator and what it started) has used."""
    total = 0
    for p in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc/<pid>/stat's parent field)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_mib(pid: int) -> float:
    return sum(pss_kib(p) for p in [pid, *children(pid)]) / 1024


class MemoryWatch:
    """Peak PSS of ``pid``'s process tree, sampled every second until finish()."""

    def __init__(self, pid: int):
        self.sampler = Sampler(lambda: tree_pss_mib(pid))

    def finish(self) -> float:
        """The peak in MiB (0 when nothing was sampled)."""
        return max((v for _, v in self.sampler.finish() if isinstance(v, float)), default=0.0)

