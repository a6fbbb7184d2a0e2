"""The benchmarks' per-step splits: Karmada's operator's log, and ansible-runner job events."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_install  # noqa: E402
import karmada_operator_baseline as baseline  # noqa: E402

LOG = """\
I1202 15:20:00.000000   4242 controller.go:80] "Reconciling karmada" karmada="ns/karmada"
I1202 15:20:01.000000   4242 cert.go:55] "[certs] Running certs task" karmada="ns/karmada"
I1202 15:20:03.500000   4242 etcd.go:40] "[etcd] Running etcd task" karmada="ns/karmada"
I1202 15:20:04.000000   4242 etcd.go:77] "[etcd] Waiting for etcd" karmada="ns/karmada"
E1202 15:20:13.500000   4242 apiserver.go:12] "[karmada-apiserver] Running" karmada="ns/karmada"
I1202 15:20:20.000000   4242 apiserver.go:99] "[karmada-apiserver] done" karmada="ns/karmada"
"""


def test_log_steps_time_each_tagged_step_until_the_next():
    steps = dict((name, secs) for secs, name in baseline.log_steps(LOG))
    assert steps == {"certs": 2.5, "etcd": 10.0, "karmada-apiserver": 6.5}
    assert [name for _, name in baseline.log_steps(LOG)] == ["etcd", "karmada-apiserver", "certs"]


def test_log_steps_of_an_untagged_log_is_empty():
    assert baseline.log_steps("plain text\nI1202 15:20:00.000000 1 a.go:1] no tag\n") == []


def write_run(run: Path, events: list[tuple[str, str, str]]) -> None:
    (run / "job_events").mkdir(parents=True)
    for i, (created, event, path) in enumerate(events):
        doc = {"created": created, "event": event,
               "event_data": {"task": f"t{i}", "task_path": path, "role": "karmada_deployment"}}
        (run / "job_events" / f"{i}-x.json").write_text(json.dumps(doc))


def test_install_split_sums_task_files_and_idle_time(tmp_path, monkeypatch):
    base = "2026-12-02T15:00:"
    one, two = tmp_path / "1", tmp_path / "2"
    write_run(one, [(base + "00+00:00", "playbook_on_task_start", "/x/roles/karmada_deployment/tasks/pki.yml:3"),
                    (base + "04+00:00", "playbook_on_task_start", "/x/roles/karmada_deployment/tasks/etcd.yml:9"),
                    (base + "10+00:00", "runner_on_ok", "")])
    write_run(two, [(base + "20+00:00", "playbook_on_task_start", "/x/roles/karmada_deployment/tasks/etcd.yml:9"),
                    (base + "25+00:00", "playbook_on_task_start", "/x/playbooks/karmadadeployment.yml:40"),
                    (base + "30+00:00", "runner_on_ok", "")])
    monkeypatch.setattr(bench_install, "runs", lambda ns: {"1": one, "2": two})
    start = bench_install.datetime.fromisoformat(base + "00+00:00").timestamp()
    split = dict((step, secs) for secs, step in bench_install.install_split("ns", start, start + 32))
    assert split == {"karmada_deployment/pki": 4.0, "karmada_deployment/etcd": 11.0, "karmadadeployment": 5.0,
                     "(no run in progress)": 12.0}
