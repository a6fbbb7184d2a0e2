"""The karmada_members inventory plugin, run by the real `ansible-inventory` against a real kube-apiserver.

KarmadaDeployments are created with `kubectl`, their status written through the status
subresource the way the operator writes it, and the groups and vars are read back from
`ansible-inventory --list` / `--graph`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from karmada_operator.members import plan as km
from support import kube_apiserver
from support.waiting import crds_established

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "config" / "crd" / "bases" / "operator.karmada.io_karmadadeployments.yaml"
ANSIBLE_INVENTORY = str(Path(sys.executable).parent / "ansible-inventory")


def crd_with_member_status_fields() -> dict:
    """The generated CRD, plus status.members[].specHash / kubeconfigSecretRef if the schema lacks them.

    The API server prunes status fields the schema does not declare; the plugin reads both.
    """
    crd = yaml.safe_load(CRD.read_text())
    for version in crd["spec"]["versions"]:
        props = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["members"]["items"][
            "properties"]
        props.setdefault("specHash", {"type": "string"})
        props.setdefault("kubeconfigSecretRef", {"type": "object", "properties": {
            "name": {"type": "string"}, "key": {"type": "string"}}})
    return crd


def member(name: str, **extra) -> dict:
    return {"name": name, "kubeconfigSecretRef": {"name": f"{name}-kubeconfig"}, **extra}


NEW = member("m-new", region="eu-1", zones=["a", "b"], provider="kwok", labels={"tier": "gold"},
             taints=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}])
JOINED = member("m-joined", syncMode="Pull")
CHANGED_BEFORE = member("m-changed", region="r1")
CHANGED = member("m-changed", region="r2")
GONE = member("m-gone", syncMode="Pull")


def kd(name: str, namespace: str, members: list[dict], labels: dict[str, str]) -> dict:
    return {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": {"members": members}}


def status_entry(spec_entry: dict, state: str = "Joined", **extra) -> dict:
    return {"name": spec_entry["name"], "state": state, "ready": state == "Joined",
            "syncMode": spec_entry.get("syncMode", "Push"), "specHash": km.member_spec_hash(spec_entry), **extra}


@pytest.fixture(scope="module")
def apiserver(bin_path, tmp_path_factory):
    server = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                                  tmp_path_factory.mktemp("members-apiserver"))
    try:
        server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(crd_with_member_status_fields()))
        crds_established(server.kubectl, ["karmadadeployments.operator.karmada.io"])
        server.kubectl("create", "namespace", "karmada-system")
        server.kubectl("create", "namespace", "team-b")
        objs = [kd("karmada", "karmada-system", [NEW, JOINED, CHANGED], {"env": "prod"}),
                kd("karmada", "team-b", [member("b1")], {"env": "dev"}),
                kd("other", "team-b", [member("o1", syncMode="Pull")], {"env": "test"})]
        server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(objs))
        status = {"status": {"members": [
            status_entry(JOINED), status_entry(CHANGED_BEFORE),
            status_entry(GONE, kubeconfigSecretRef={"name": "m-gone-kubeconfig", "key": "kubeconfig"}),
            {"name": "m-never", "state": "Pending"}]}}
        server.kubectl("patch", "karmadadeployment", "karmada", "-n", "karmada-system", "--subresource=status",
                       "--type=merge", "-p", json.dumps(status))
        yield server
    finally:
        server.stop()


def run_inventory(tmp_path: Path, config: dict, *args: str, name: str = "karmada_members.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"plugin": "karmada_members", **config}))
    env = {**os.environ, "ANSIBLE_INVENTORY_ENABLED": "karmada_members",
           "ANSIBLE_INVENTORY_PLUGINS": str(ROOT / "plugins" / "inventory"),
           "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true", "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([ANSIBLE_INVENTORY, "-i", str(path), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def unwrapped(text: str) -> str:
    """Ansible wraps warnings at 80 columns (also after hyphens); undo it for matching."""
    return " ".join(text.replace("-\n", "-").split())


def listing(tmp_path: Path, config: dict) -> dict:
    result = run_inventory(tmp_path, config, "--list")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def hosts_of(inv: dict, group: str) -> set[str]:
    return set((inv.get(group) or {}).get("hosts") or [])


def test_groups_say_what_the_operator_would_do(apiserver, tmp_path):
    inv = listing(tmp_path, {"kubeconfig": str(apiserver.kubeconfig), "namespaces": ["karmada-system"]})
    assert hosts_of(inv, "add_member") == {"karmada-system/karmada/m-new", "karmada-system/karmada/m-changed"}
    assert hosts_of(inv, "members_joined") == {"karmada-system/karmada/m-joined"}
    assert hosts_of(inv, "del_member") == {"karmada-system/karmada/m-gone"}  # m-never was never registered
    assert hosts_of(inv, "karmada_karmada_system_karmada") == {
        "karmada-system/karmada/m-new", "karmada-system/karmada/m-changed", "karmada-system/karmada/m-joined",
        "karmada-system/karmada/m-gone"}
    assert hosts_of(inv, "pull") == {"karmada-system/karmada/m-joined", "karmada-system/karmada/m-gone"}
    assert hosts_of(inv, "push") == {"karmada-system/karmada/m-new", "karmada-system/karmada/m-changed"}
    hostvars = inv["_meta"]["hostvars"]
    uid = apiserver.kubectl("get", "karmadadeployment", "karmada", "-n", "karmada-system",
                            "-o", "jsonpath={.metadata.uid}").stdout
    new = hostvars["karmada-system/karmada/m-new"]
    assert new["karmada_member_name"] == "m-new"
    assert new["karmada_member_kubeconfig_secret"] == {"name": "m-new-kubeconfig", "key": "kubeconfig"}
    assert new["karmada_member_sync_mode"] == "Push"  # defaulted by the API server
    assert (new["karmada_member_region"], new["karmada_member_zones"], new["karmada_member_provider"]) == \
        ("eu-1", ["a", "b"], "kwok")
    assert new["karmada_member_labels"] == {"tier": "gold"}
    assert new["karmada_member_taints"] == [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    assert new["karmada_member_spec_hash"] == km.member_spec_hash(NEW)  # as written == as stored with defaults
    assert new["karmada_deployment"] == {"name": "karmada", "namespace": "karmada-system", "uid": uid}
    assert new["ansible_connection"] == "local"
    assert hostvars["karmada-system/karmada/m-changed"]["karmada_member_reason"] == "SpecChanged"
    assert hostvars["karmada-system/karmada/m-changed"]["karmada_member_region"] == "r2"
    gone = hostvars["karmada-system/karmada/m-gone"]
    assert gone["karmada_member_action"] == "delete"
    assert gone["karmada_member_sync_mode"] == "Pull"
    assert gone["karmada_member_kubeconfig_secret"] == {"name": "m-gone-kubeconfig", "key": "kubeconfig"}


def test_graph_shows_the_plan(apiserver, tmp_path):
    result = run_inventory(tmp_path, {"kubeconfig": str(apiserver.kubeconfig), "namespaces": ["karmada-system"]},
                           "--graph", "add_member")
    assert result.returncode == 0, result.stderr
    assert "@add_member:" in result.stdout
    assert "karmada-system/karmada/m-new" in result.stdout
    assert "m-joined" not in result.stdout


def test_all_namespaces_by_default_and_kubeconfig_from_env(apiserver, tmp_path, monkeypatch):
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", str(apiserver.kubeconfig))
    inv = listing(tmp_path, {})
    assert set(inv["_meta"]["hostvars"]) == {
        "karmada-system/karmada/m-new", "karmada-system/karmada/m-changed", "karmada-system/karmada/m-joined",
        "karmada-system/karmada/m-gone", "team-b/karmada/b1", "team-b/other/o1"}
    assert hosts_of(inv, "karmada_team_b_other") == {"team-b/other/o1"}


@pytest.mark.parametrize(("config", "expected"), [
    ({"namespaces": ["team-b"]}, {"team-b/karmada/b1", "team-b/other/o1"}),
    ({"namespaces": ["team-b", "karmada-system"], "name": "karmada"},
     {"team-b/karmada/b1", "karmada-system/karmada/m-new", "karmada-system/karmada/m-changed",
      "karmada-system/karmada/m-joined", "karmada-system/karmada/m-gone"}),
    ({"name": "other"}, {"team-b/other/o1"}),
    ({"label_selector": "env in (dev,test)"}, {"team-b/karmada/b1", "team-b/other/o1"}),
    ({"label_selector": "env=dev", "name": "karmada"}, {"team-b/karmada/b1"}),
    ({"namespaces": ["nowhere"]}, set()),
], ids=["namespace", "namespaces+name", "name", "labels", "labels+name", "empty"])
def test_filters(apiserver, tmp_path, config, expected):
    inv = listing(tmp_path, {"kubeconfig": str(apiserver.kubeconfig), **config})
    assert set(inv["_meta"]["hostvars"]) == expected


def test_a_play_runs_over_the_add_member_group_on_the_controller(apiserver, tmp_path):
    playbook = tmp_path / "add.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "add_member", "gather_facts": False, "tasks": [
        {"ansible.builtin.debug": {"msg": "JOIN {{ karmada_member_name }} {{ karmada_member_reason }}"}}]}]))
    config = tmp_path / "karmada_members.yml"
    config.write_text(yaml.safe_dump({"plugin": "karmada_members", "kubeconfig": str(apiserver.kubeconfig),
                                      "namespaces": ["karmada-system"]}))
    env = {**os.environ, "ANSIBLE_INVENTORY_ENABLED": "karmada_members",
           "ANSIBLE_INVENTORY_PLUGINS": str(ROOT / "plugins" / "inventory"), "ANSIBLE_NOCOLOR": "1"}
    result = subprocess.run([str(Path(ANSIBLE_INVENTORY).with_name("ansible-playbook")), "-i", str(config),
                             str(playbook)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "JOIN m-new NotInStatus" in result.stdout and "JOIN m-changed SpecChanged" in result.stdout
    assert "m-joined" not in result.stdout and "m-gone" not in result.stdout


def test_unreachable_api_server_is_a_clear_error(apiserver, tmp_path):
    port = kube_apiserver.free_port()
    kubeconfig = tmp_path / "unreachable"
    kubeconfig.write_text(apiserver.kubeconfig.read_text().replace(f"127.0.0.1:{apiserver.port}",
                                                                   f"127.0.0.1:{port}"))
    result = run_inventory(tmp_path, {"kubeconfig": str(kubeconfig), "request_timeout": 5}, "--list")
    assert result.returncode != 0
    assert f"cannot reach the Kubernetes API at https://127.0.0.1:{port}" in unwrapped(result.stderr)
    assert "Connection refused" in unwrapped(result.stderr)
    assert "Traceback" not in result.stderr + result.stdout


def test_refused_credentials_are_a_clear_error(apiserver, tmp_path):
    kubeconfig = tmp_path / "bad-token"
    kubeconfig.write_text(apiserver.kubeconfig.read_text().replace(apiserver.token, "not-the-token"))
    result = run_inventory(tmp_path, {"kubeconfig": str(kubeconfig)}, "--list")
    assert result.returncode != 0
    assert "HTTP 401: Unauthorized. The credentials were refused; renew the kubeconfig" in unwrapped(result.stderr)
    assert "Traceback" not in result.stderr + result.stdout


def test_other_file_names_are_not_taken(apiserver, tmp_path):
    result = run_inventory(tmp_path, {"kubeconfig": str(apiserver.kubeconfig)}, "--list", name="members.yml")
    assert result.returncode != 0  # no enabled plugin accepts it
    assert "karmada-system/karmada" not in result.stdout
