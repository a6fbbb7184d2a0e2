"""module_utils/karmada_operator/runtime/adapter.py through real Ansible: a task run in the controller process.

Ansible forks each task's worker while holding the lock that guards stdout and stderr, so in
the worker only the main thread may write to them. The member task runs a thread per member,
and a thread that warned (urllib3's InsecureRequestWarning) hung the task for good. A test
action here makes threads warn and print: the task must end, with what they said as its
warnings. Also: a failure keeps its extra keys, check mode is skipped unless supported, and
arguments are validated as a module's would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = textwrap.dedent('''
    import sys, threading, warnings
    from karmada_operator.runtime.adapter import in_process_action
    from karmada_operator.task import ModuleFailed

    def run(p, check_mode=False, warn=None):
        if p["fail"]:
            raise ModuleFailed("it failed", field="spec.something")
        if p["text"]:
            import yaml
            return {"changed": False, "dumped": yaml.safe_dump({"text": p["text"]})}
        def talk(i):
            warnings.warn(f"thread {i} warns", UserWarning)
            print(f"thread {i} prints")
            sys.stderr.write(f"thread {i} writes to stderr\\n")
        threads = [threading.Thread(target=talk, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        warn("a note from run")
        return {"changed": False, "threads": len(threads), "check": check_mode}

    ActionModule = in_process_action({"fail": {"type": "bool", "default": False},
                                      "text": {"type": "str", "default": ""}}, run,
                                     supports_check_mode=%s)
''')


def adhoc(tmp_path: Path, name: str, args: dict, check: bool = False) -> dict:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
           "ANSIBLE_ACTION_PLUGINS": f"{tmp_path / 'action'}:{ROOT / 'plugins' / 'action'}",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"}
    ansible = str(Path(sys.executable).parent / "ansible")
    cmd = [ansible, "localhost", "-m", name] + (["-a", json.dumps(args)] if args else [])
    cmd += ["--check"] if check else []
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture()
def plugins(tmp_path):
    (tmp_path / "action").mkdir()
    (tmp_path / "action" / "adapter_probe.py").write_text(PLUGIN % "False")
    (tmp_path / "action" / "adapter_probe_check.py").write_text(PLUGIN % "True")
    return tmp_path


def test_threads_that_warn_and_print_end_and_say_so_in_the_warnings(plugins):
    out = adhoc(plugins, "adapter_probe", {})
    assert out.get("failed") is not True, out
    assert out["threads"] == 8
    warns = "\n".join(out["warnings"])
    assert "a note from run" in warns
    assert all(f"UserWarning: thread {i} warns" in warns for i in range(8)), warns
    assert "thread 3 prints" in warns and "thread 5 writes to stderr" in warns


def test_values_templated_from_a_registered_result_are_plain_strings(plugins):
    """A value templated from a registered result is Ansible's unsafe text, a str subclass
    that yaml.safe_dump refuses ("cannot represent an object"): the member task's Pull join
    failed on it. The task gets plain JSON types, as a module would."""
    playbook = plugins / "play.yml"
    playbook.write_text(textwrap.dedent('''
        - hosts: localhost
          connection: local
          gather_facts: false
          tasks:
            - ansible.builtin.command: echo https://karmada-apiserver.example:5443
              register: said
              changed_when: false
            - adapter_probe:
                text: "{{ said.stdout }}"
              register: probed
            - ansible.builtin.assert:
                that: "probed.dumped == 'text: https://karmada-apiserver.example:5443\\n'"
    '''))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_LOCAL_TEMP": str(plugins / "tmp"),
           "ANSIBLE_ACTION_PLUGINS": f"{plugins / 'action'}:{ROOT / 'plugins' / 'action'}", "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(playbook)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_failure_keeps_its_extra_keys(plugins):
    out = adhoc(plugins, "adapter_probe", {"fail": True})
    assert out["failed"] is True and out["msg"] == "it failed" and out["field"] == "spec.something"


def test_check_mode_is_skipped_unless_the_task_supports_it(plugins):
    assert adhoc(plugins, "adapter_probe", {}, check=True).get("skipped") is True
    out = adhoc(plugins, "adapter_probe_check", {}, check=True)
    assert out.get("skipped") is not True and out["check"] is True


def test_arguments_are_validated_like_a_modules(plugins):
    out = adhoc(plugins, "adapter_probe", {"fail": "not-a-bool", "extra": 1})
    assert out["failed"] is True
    assert "extra" in out["msg"] or "fail" in out["msg"], out
