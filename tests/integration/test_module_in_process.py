"""Modules run in the task's worker, on a real kube-apiserver through real Ansible.

karmada_k8s and karmada_k8s_info are kubernetes.core.k8s and k8s_info, the collection's own
code, run without a new Python per task (runtime.adapter.module_in_process_action); ours
(karmada_pki, karmada_private_file, ...) run their task's ``run(params)`` the same way
(runtime.adapter.in_process_action). What must hold: the same answer as the module process
gives, no module file written for them (no AnsiballZ), failures and check mode as the module
has them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import kube_apiserver

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("in-process-apiserver"))
    try:
        yield srv
    finally:
        srv.stop()


def ansible(module: str, args: dict, tmp_path: Path, check: bool = False, action_plugins: bool = True) -> dict:
    """``ansible localhost -m module`` with the project's ansible.cfg, remote files kept under
    tmp_path/remote; ``action_plugins=False`` takes ours away (every module is a process)."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"),
           "ANSIBLE_REMOTE_TMP": str(tmp_path / "remote"), "ANSIBLE_KEEP_REMOTE_FILES": "1",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"}
    if not action_plugins:
        (tmp_path / "no-actions").mkdir(exist_ok=True)
        env["ANSIBLE_ACTION_PLUGINS"] = str(tmp_path / "no-actions")
    cmd = [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", module, "-a", json.dumps(args)]
    proc = subprocess.run(cmd + (["--check"] if check else []), capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def module_files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "remote").rglob("AnsiballZ_*"))


def configmap(name: str, value: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"a": value}}


def test_k8s_info_answers_as_kubernetes_core_without_a_module_process(server, tmp_path):
    args = {"kind": "Namespace", "name": "default", "kubeconfig": str(server.kubeconfig)}
    ours = ansible("karmada_k8s_info", args, tmp_path)
    assert module_files(tmp_path) == [], "karmada_k8s_info went through AnsiballZ"
    theirs = ansible("kubernetes.core.k8s_info", args, tmp_path)
    assert module_files(tmp_path) == ["AnsiballZ_k8s_info.py"]  # the collection's module is a process
    assert ours["resources"][0]["metadata"]["name"] == "default"
    assert ours.pop("action") == "karmada_k8s_info" and theirs.pop("action") == "kubernetes.core.k8s_info"
    assert ours == theirs


def test_k8s_apply_creates_then_changes_nothing_and_check_mode_writes_nothing(server, tmp_path):
    kc = str(server.kubeconfig)
    first = ansible("karmada_k8s", {"state": "present", "apply": True, "definition": configmap("probe", "1"),
                                    "kubeconfig": kc}, tmp_path)
    assert first["changed"] is True and first["method"] == "apply", first
    uid = json.loads(server.kubectl("get", "configmap", "probe", "-o", "json").stdout)["metadata"]["uid"]
    again = ansible("karmada_k8s", {"state": "present", "apply": True, "definition": configmap("probe", "1"),
                                    "kubeconfig": kc}, tmp_path)
    assert again["changed"] is False, again
    edited = ansible("karmada_k8s", {"state": "present", "apply": True, "definition": configmap("probe", "2"),
                                     "kubeconfig": kc}, tmp_path)
    assert edited["changed"] is True and edited["result"]["data"] == {"a": "2"}
    live = json.loads(server.kubectl("get", "configmap", "probe", "-o", "json").stdout)
    assert live["metadata"]["uid"] == uid and live["data"] == {"a": "2"}

    checked = ansible("karmada_k8s", {"state": "present", "definition": configmap("not-created", "1"),
                                      "kubeconfig": kc}, tmp_path, check=True)
    assert checked["changed"] is True and checked.get("failed") is not True, checked
    gone = server.kubectl("get", "configmap", "not-created", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    assert module_files(tmp_path) == []


def test_failures_are_the_modules_own(server, tmp_path):
    kc = str(server.kubeconfig)
    unknown = ansible("karmada_k8s", {"state": "present", "kubeconfig": kc, "definition": {
        "apiVersion": "v1", "kind": "NoSuchKind", "metadata": {"name": "x", "namespace": "default"}}}, tmp_path)
    assert unknown["failed"] is True and "NoSuchKind" in unknown["msg"], unknown
    bad_arg = ansible("karmada_k8s_info", {"kind": "Namespace", "no_such_option": 1, "kubeconfig": kc}, tmp_path)
    assert bad_arg["failed"] is True and "no_such_option" in bad_arg["msg"], bad_arg


def test_our_module_in_process_gives_what_its_process_gives(tmp_path):
    """karmada_pki (no cluster): the same arguments through the action plugin and as a module
    process give the same certificates' names and the same failure for bad input."""
    args = {"etcd": {"replicas": 1}, "certificates": {"keyAlgorithm": "ECDSA", "keySize": 256}}
    ours = ansible("karmada_pki", args, tmp_path)
    assert module_files(tmp_path) == [], "karmada_pki went through AnsiballZ"
    process = ansible("karmada_pki", args, tmp_path, action_plugins=False)
    assert module_files(tmp_path) == ["AnsiballZ_karmada_pki.py"]
    assert ours["changed"] is True and sorted(ours["files"]) == sorted(process["files"])
    assert [c["name"] for c in ours["certificates"]] == [c["name"] for c in process["certificates"]]
    bad = {**args, "certificates": {"keyAlgorithm": "RSA", "keySize": 1000}}
    ours_bad, process_bad = ansible("karmada_pki", bad, tmp_path), ansible("karmada_pki", bad, tmp_path,
                                                                            action_plugins=False)
    assert ours_bad["failed"] is True and ours_bad["field"] == "certificates.keySize"
    assert (ours_bad["msg"], ours_bad["field"]) == (process_bad["msg"], process_bad["field"])


def test_private_file_is_written_0600_once_and_removed_with_its_directory(tmp_path):
    """karmada_private_file (the operator's kubeconfig): 0600 in a 0700 directory, unchanged
    content is not rewritten, the content never shows in the result, absent removes the directory."""
    secret = "client-key-data: c2VjcmV0"
    path = tmp_path / "work" / "uid" / "admin.conf"
    first = ansible("karmada_private_file", {"path": str(path), "content": secret}, tmp_path)
    assert module_files(tmp_path) == [], "karmada_private_file went through AnsiballZ"
    assert first["changed"] is True and path.read_text() == secret
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert "c2VjcmV0" not in json.dumps(first)
    inode = path.stat().st_ino
    again = ansible("karmada_private_file", {"path": str(path), "content": secret}, tmp_path)
    assert again["changed"] is False and path.stat().st_ino == inode
    edited = ansible("karmada_private_file", {"path": str(path), "content": secret + "\n# new"}, tmp_path)
    assert edited["changed"] is True and path.read_text().endswith("# new")
    assert [p.name for p in path.parent.iterdir()] == ["admin.conf"]  # no temporary file left
    gone = ansible("karmada_private_file", {"path": str(path.parent), "state": "absent"}, tmp_path)
    assert gone["changed"] is True and not path.parent.exists()
    assert ansible("karmada_private_file", {"path": str(path.parent), "state": "absent"}, tmp_path)["changed"] is False
    missing = ansible("karmada_private_file", {"path": str(path)}, tmp_path)
    assert missing["failed"] is True and "content" in missing["msg"]
