"""The karmada_resources role through real ansible-playbook against a real kube-apiserver.

Karmada's CRDs come from a loopback HTTP server (the tarball built from the downloaded Karmada
module, as the release's crds.tar.gz is). No Karmada pods run here, so the webhooks and the
aggregated API are registered but not served: the role must not wait for them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from karmada_operator.plan import plan as karmada_plan
from support import kube_apiserver
from support.karmada_crds_server import serve

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "tests" / "integration" / "playbooks" / "karmada_resources.yml"
HOST_NS = "tenant-a"
PLAN = karmada_plan.build_plan({"metadata": {"name": "kd", "namespace": HOST_NS}, "spec": {}})
RECAP = re.compile(r"^localhost\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@pytest.fixture(scope="module")
def bed(bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("karmada-resources")
    server = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"), work)
    crds = serve()
    try:
        yield server, crds, work
    finally:
        crds.stop()
        server.stop()


def ca_bundle(server) -> str:
    """Any real PEM certificate will do: the apiserver's self-signed serving certificate."""
    return base64.b64encode((server.workdir / "certs" / "apiserver.crt").read_bytes()).decode()


def play(server, crds, work, **overrides) -> tuple[subprocess.CompletedProcess, dict[str, int]]:
    extra = {
        "karmada_resources_kubeconfig": str(server.kubeconfig),
        "karmada_resources_host_namespace": HOST_NS,
        "karmada_resources_webhook_service": "kd-webhook",
        # what the karmada_deployment role passes: the plan's APIServices (from the component registry)
        "karmada_resources_apiservices": PLAN["apiServices"],
        "karmada_resources_ca_bundle": ca_bundle(server),
        "karmada_resources_crds_url": crds.url,
        "karmada_resources_crds_sha256": crds.sha256,
        "karmada_resources_crds_cache_dir": str(work / "crds-cache"),
        "karmada_resources_poll_delay": 1,
        "karmada_resources_timeout": 60,
        **overrides,
    }
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
           "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1"}
    result = subprocess.run([str(Path(venv_bin) / "ansible-playbook"), str(PLAYBOOK), "-e", json.dumps(extra)],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    match = RECAP.search(result.stdout)
    assert match, f"no play recap:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    stats = dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups()), strict=True))
    return result, stats


def get_json(server, *args) -> dict:
    return json.loads(server.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def installed(bed):
    server, crds, work = bed
    first, stats = play(server, crds, work)
    assert stats["failed"] == 0, first.stdout[-4000:]
    assert stats["changed"] > 0
    return first


def test_all_karmada_crds_established(bed, installed):
    server, crds, _ = bed
    items = get_json(server, "crd")["items"]
    karmada = {c["metadata"]["name"]: c for c in items}
    assert len(karmada) == 19  # every CRD of Karmada v1.18.2's crds/bases
    for name, crd in karmada.items():
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", name
    conversion = karmada["resourcebindings.work.karmada.io"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"]["url"] == f"https://kd-webhook.{HOST_NS}.svc:443/convert"
    assert conversion["webhook"]["clientConfig"]["caBundle"] == ca_bundle(server)
    # the tarball was downloaded once and cached
    assert crds.hits == 1


def test_karmada_api_groups_served(bed, installed):
    server = bed[0]
    # the aggregated group is registered but unavailable here, so kubectl may warn: read stdout
    out = server.kubectl("api-resources", "-o", "name", check=False).stdout
    groups = {name.split(".", 1)[1] for name in out.split() if "." in name}
    assert {"policy.karmada.io", "work.karmada.io", "config.karmada.io", "autoscaling.karmada.io"} <= groups
    server.kubectl("get", "propagationpolicies", "-A")


def test_webhook_configurations_point_at_karmada_webhook(bed, installed):
    server = bed[0]
    ca = ca_bundle(server)
    mutating = get_json(server, "mutatingwebhookconfiguration", "mutating-config")
    validating = get_json(server, "validatingwebhookconfiguration", "validating-config")
    assert len(mutating["webhooks"]) == 8 and len(validating["webhooks"]) == 13
    for hook in mutating["webhooks"] + validating["webhooks"]:
        assert hook["clientConfig"]["caBundle"] == ca
        assert hook["clientConfig"]["url"].startswith(f"https://kd-webhook.{HOST_NS}.svc:443/")
        assert hook["failurePolicy"] == "Fail"
    paths = {h["clientConfig"]["url"].rsplit("/", 1)[1] for h in validating["webhooks"]}
    assert {"validate-propagationpolicy", "validate-resourcedeletionprotection"} <= paths


def test_apiservice_and_externalname_service(bed, installed):
    server = bed[0]
    api = get_json(server, "apiservice", "v1alpha1.cluster.karmada.io")
    assert api["spec"]["caBundle"] == ca_bundle(server)
    assert api["spec"]["service"] == {"name": "kd-aggregated-apiserver", "namespace": "karmada-system", "port": 443}
    svc = get_json(server, "service", "-n", "karmada-system", "kd-aggregated-apiserver")
    assert svc["spec"]["type"] == "ExternalName"
    assert svc["spec"]["externalName"] == f"kd-aggregated-apiserver.{HOST_NS}.svc.cluster.local"
    # the optional components are off: none of their APIServices is registered
    names = {a["metadata"]["name"] for a in get_json(server, "apiservices", "-l", "apiserver=true")["items"]}
    assert names == {"v1alpha1.cluster.karmada.io"}


def test_namespaces_and_rbac(bed, installed):
    server = bed[0]
    for ns in ("karmada-system", "karmada-cluster"):
        assert get_json(server, "namespace", ns)["metadata"]["labels"]["karmada.io/system"] == "true"
    binding = get_json(server, "clusterrolebinding", "cluster-proxy-admin")
    assert binding["subjects"][0]["name"] == "system:admin"
    assert get_json(server, "clusterrole", "cluster-proxy-admin")["rules"][0]["resources"] == ["clusters/proxy"]
    # labelled for aggregation into the built-in view role (kube-controller-manager does the merge)
    view = get_json(server, "clusterrole", "karmada-view")
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert any("policy.karmada.io" in r["apiGroups"] for r in view["rules"])
    edit = get_json(server, "clusterrole", "karmada-edit")
    assert "deletecollection" in edit["rules"][0]["verbs"]


def outcome(stdout: str, task: str) -> str:
    """What the play printed for a task (ok, changed, skipping, failed), by the start of its name."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("TASK [") and task in line:
            for after in lines[i + 1:]:
                status = after.split(":", 1)[0].strip()
                if status in ("ok", "changed", "skipping", "failed", "fatal"):
                    return status
    raise AssertionError(f"task {task!r} not in the play's output:\n{stdout[-3000:]}")


APPLY_CRDS = "Karmada's CRDs - fetched, verified, rendered, applied where missing or different"
APPLY_SYSTEM = "Apply Karmada's system objects to karmada-apiserver"
APISERVICE_GATE = "Gate - the aggregator registered every APIService with the Karmada CA"


def crd_versions(server) -> dict[str, str]:
    return {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in get_json(server, "crd")["items"]}


def test_second_run_changes_nothing(bed, installed):
    server, crds, work = bed
    before = crd_versions(server)
    second, stats = play(server, crds, work)
    assert stats["failed"] == 0, second.stdout[-4000:]
    assert stats["changed"] == 0, second.stdout[-6000:]
    assert crds.hits == 1  # served from the cache
    # the CRDs read back equal what would be applied (server defaults and all): not one written
    assert outcome(second.stdout, APPLY_CRDS) == "ok", second.stdout[-6000:]
    assert crd_versions(server) == before
    assert outcome(second.stdout, APPLY_SYSTEM) == "skipping"
    # the lists read back show every APIService registered with the CA: no second read, no wait
    assert outcome(second.stdout, APISERVICE_GATE) == "skipping"


def test_a_crd_edited_by_hand_is_put_back(bed, installed):
    server, crds, work = bed
    hook = f"https://kd-webhook.{HOST_NS}.svc:443/convert"
    server.kubectl("patch", "crd", "resourcebindings.work.karmada.io", "--type=merge", "-p", json.dumps(
        {"spec": {"conversion": {"webhook": {"clientConfig": {"url": "https://elsewhere.example/convert"}}}}}))
    before = crd_versions(server)
    result, stats = play(server, crds, work)
    assert stats["failed"] == 0, result.stdout[-4000:]
    assert outcome(result.stdout, APPLY_CRDS) == "changed"
    crd = get_json(server, "crd", "resourcebindings.work.karmada.io")
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == hook
    # only the edited one was written
    after = crd_versions(server)
    assert {name for name in before if after[name] != before[name]} == {"resourcebindings.work.karmada.io"}


def test_a_webhook_configuration_edited_by_hand_is_put_back_alone(bed, installed):
    """One object differs: only it is applied (one result, not a list), and the CA gate reads it."""
    server, crds, work = bed
    server.kubectl("patch", "validatingwebhookconfiguration", "validating-config", "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]))
    result, stats = play(server, crds, work)
    assert stats["failed"] == 0, result.stdout[-4000:]
    assert outcome(result.stdout, APPLY_SYSTEM) == "changed"
    assert outcome(result.stdout, "Gate - the webhook configurations karmada-apiserver stored") == "ok"
    assert outcome(result.stdout, APISERVICE_GATE) == "ok"  # something was applied: the gate reads again
    assert all(h["failurePolicy"] == "Fail" for h in get_json(server, "validatingwebhookconfiguration",
                                                                "validating-config")["webhooks"])


def test_deleted_objects_come_back(bed, installed):
    server, crds, work = bed
    server.kubectl("delete", "validatingwebhookconfiguration", "validating-config")
    server.kubectl("delete", "clusterrole", "cluster-proxy-admin")
    server.kubectl("delete", "crd", "works.work.karmada.io")
    result, stats = play(server, crds, work)
    assert stats["failed"] == 0 and stats["changed"] >= 2, result.stdout[-4000:]
    get_json(server, "validatingwebhookconfiguration", "validating-config")
    get_json(server, "clusterrole", "cluster-proxy-admin")
    server.kubectl("get", "works", "-A")


def test_an_apiservice_with_another_ca_is_put_back_and_gated(bed, installed):
    server, crds, work = bed
    server.kubectl("patch", "apiservice", "v1alpha1.cluster.karmada.io", "--type=merge", "-p", json.dumps(
        {"spec": {"caBundle": base64.b64encode(b"not the Karmada CA").decode()}}))
    result, stats = play(server, crds, work)
    assert stats["failed"] == 0, result.stdout[-4000:]
    assert outcome(result.stdout, APPLY_SYSTEM) == "changed"
    assert outcome(result.stdout, APISERVICE_GATE) == "ok"
    assert get_json(server, "apiservice", "v1alpha1.cluster.karmada.io")["spec"]["caBundle"] == ca_bundle(server)


REMOVE_SWITCHED_OFF = "Remove the APIServices of components that are switched off"


def test_a_switched_off_components_apiservice_and_service_go_and_the_next_run_skips_the_removal(bed, installed):
    """karmada-search is off in the plan: its APIService and ExternalName Service, left from when
    it was on, are deleted; with none of them there, the removal is not even attempted."""
    server, crds, work = bed
    search = next(api for api in PLAN["apiServices"] if api["group"] == "search.karmada.io")
    assert not search["present"]
    server.kubectl("create", "service", "externalname", search["service"], "-n", "karmada-system",
                   "--external-name", f"{search['service']}.{HOST_NS}.svc.cluster.local")
    server.kubectl("apply", "-f", "-", input_text=json.dumps({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": search["name"]},
        "spec": {"group": search["group"], "version": search["version"], "groupPriorityMinimum": 2000,
                 "versionPriority": 10, "insecureSkipTLSVerify": True,
                 "service": {"name": search["service"], "namespace": "karmada-system", "port": 443}}}))
    result, stats = play(server, crds, work)
    assert stats["failed"] == 0, result.stdout[-4000:]
    assert outcome(result.stdout, REMOVE_SWITCHED_OFF) == "changed"
    names = {o["metadata"]["name"] for o in get_json(server, "apiservice")["items"]}
    assert search["name"] not in names and "v1alpha1.cluster.karmada.io" in names
    services = {o["metadata"]["name"] for o in get_json(server, "service", "-n", "karmada-system")["items"]}
    assert search["service"] not in services
    again, stats = play(server, crds, work)
    assert stats["failed"] == 0 and stats["changed"] == 0, again.stdout[-4000:]
    assert outcome(again.stdout, REMOVE_SWITCHED_OFF) == "skipping"


def test_checksum_mismatch_fails_with_a_clear_message(bed, installed):
    server, crds, work = bed
    result, stats = play(server, crds, work, karmada_resources_crds_sha256="0" * 64)
    assert stats["failed"] == 1
    assert "CrdChecksumMismatch" in result.stdout and "spec.crds.sha256" in result.stdout


def test_unreachable_source_says_how_to_set_a_mirror(bed, installed):
    server, crds, work = bed
    url = f"http://127.0.0.1:{kube_apiserver.free_port()}/v1.18.2/crds.tar.gz"
    result, stats = play(server, crds, work, karmada_resources_crds_url=url, karmada_resources_crds_sha256="",
                         karmada_resources_crds_download_timeout=5)
    assert stats["failed"] == 1
    assert "CrdSourceUnreachable" in result.stdout and "spec.crds.url" in result.stdout
