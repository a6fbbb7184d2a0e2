from pathlib import Path

import pytest
import yaml

from karmada_operator.kube import observed as ko
from karmada_operator.plan import plan as kp

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
PLAN = kp.build_plan(SAMPLE)


def deployment(name, image, replicas, ready):
    return {"metadata": {"name": name}, "spec": {"replicas": replicas, "template": {"spec": {
        "containers": [{"image": image}]}}}, "status": {"readyReplicas": ready}}


def test_component_status_reports_running_version_and_ready_replicas():
    deps = [deployment("karmada-apiserver", "registry.k8s.io/kube-apiserver:v1.34.12", 1, 1),
            deployment("karmada-scheduler", "reg:5000/karmada/karmada-scheduler:v1.18.1", 2, 1)]
    out = {c["name"]: c for c in ko.component_status(deps, PLAN)}
    assert out["karmada-apiserver"] == {"name": "karmada-apiserver", "version": "v1.34.12",
                                        "desiredVersion": "v1.34.12", "replicas": 1, "readyReplicas": 1}
    assert out["karmada-scheduler"]["version"] == "v1.18.1"
    assert out["karmada-scheduler"]["desiredVersion"] == "v1.18.2"
    assert out["karmada-webhook"]["readyReplicas"] == 0  # missing workload shows as not ready
    assert "karmada-descheduler" not in out


def test_component_status_reads_the_digest_of_a_pinned_image():
    digest = "sha256:" + "cd" * 32
    deps = [deployment("karmada-scheduler", f"reg:5000/karmada/karmada-scheduler@{digest}", 1, 1),
            deployment("karmada-webhook", f"reg:5000/karmada/karmada-webhook:v1.18.2@{digest}", 1, 1)]
    out = {c["name"]: c for c in ko.component_status(deps, PLAN)}
    assert out["karmada-scheduler"]["version"] == digest
    assert out["karmada-webhook"]["version"] == digest


def test_etcd_status_lists_the_members_etcd_reports_and_the_plans_with_pod_readiness_otherwise():
    pods = [{"metadata": {"name": "karmada-etcd-0"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
    # a scale under way: etcd has 4 members (the plan says 3), one of them a learner
    health = {"members": [
        {"name": "karmada-etcd-1", "healthy": True, "leader": True, "id": "8e9e05c52164694d", "db_size": 20480,
         "version": "3.6.6"},
        {"name": "karmada-etcd-0", "healthy": True}, {"name": "karmada-etcd-2", "healthy": False},
        {"name": "karmada-etcd-3", "healthy": True, "learner": True}]}
    out = ko.etcd_status(pods, PLAN, health)
    assert [m["name"] for m in out["members"]] == [f"karmada-etcd-{i}" for i in range(4)]
    members = {m["name"]: m for m in out["members"]}
    assert members["karmada-etcd-1"] == {"name": "karmada-etcd-1", "healthy": True, "leader": True,
                                         "learner": False, "id": "8e9e05c52164694d", "version": "3.6.6"}
    assert members["karmada-etcd-2"]["healthy"] is False and members["karmada-etcd-3"]["learner"] is True
    # etcd could not be asked: the plan's members, healthy as their pods are Ready
    out = ko.etcd_status(pods, PLAN, {})
    members = {m["name"]: m for m in out["members"]}
    assert sorted(members) == [f"karmada-etcd-{i}" for i in range(3)]
    assert members["karmada-etcd-0"]["healthy"] is True and members["karmada-etcd-1"]["healthy"] is False


def test_failure_message_names_the_failed_loop_items_and_what_the_wait_saw():
    result = {"failed": True, "msg": "One or more items failed", "results": [
        {"ansible_loop_var": "comp", "comp": {"name": "fleet-scheduler"}, "failed": False},
        {"ansible_loop_var": "comp", "comp": {"name": "fleet-search"}, "failed": True, "attempts": 120,
         "resources": [{"spec": {"replicas": 2}, "status": {"readyReplicas": 1}}]},
        {"ansible_loop_var": "item", "item": "fleet-pki", "failed": True, "msg": "Forbidden\nsecrets is forbidden"},
        {"ansible_loop_var": "comp", "comp": {"name": "fleet-webhook"}, "failed": True, "resources": []},
    ]}
    assert ko.failure_message("Wait until every component is rolled out and ready", result) == (
        "Wait until every component is rolled out and ready: fleet-search: 1/2 replicas ready after 120 checks; "
        "fleet-pki: secrets is forbidden; fleet-webhook: not found")


def test_failure_message_of_a_plain_task_and_its_limit():
    assert ko.failure_message("Plan", {"msg": "spec.etcd: bad"}) == "Plan: spec.etcd: bad"
    assert ko.failure_message("", {"exception": "Traceback\n  x\nValueError: boom\n"}) == \
        "a step: ValueError: boom"
    assert ko.failure_message("", {"censored": "hidden"}) == "a step: failed"
    assert len(ko.failure_message("T", {"msg": "x" * 5000}, limit=100)) == 100


def test_certificates_condition_names_the_soonest_expiry():
    certs = [{"name": "ca", "notAfter": "2036-01-01T00:00:00Z"},
             {"name": "apiserver", "notAfter": "2026-12-01T20:40:00Z"},
             {"name": "karmada-scheduler", "notAfter": "2026-12-01T20:41:00Z"}]
    cond = ko.certificates_condition(certs)
    assert (cond["type"], cond["status"], cond["reason"]) == ("CertificatesValid", "True", "Issued")
    assert cond["message"] == "3 certificates valid; the soonest to expire is apiserver at 2026-12-01T20:40:00Z"


def _pod(name, component, statuses=(), conditions=(), deleting=False):
    meta = {"name": name, "labels": {"app.kubernetes.io/name": component}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {"metadata": meta, "status": {"containerStatuses": list(statuses), "conditions": list(conditions)}}


def test_stuck_pods_are_named_with_their_cause():
    pull = {"name": "kcm", "image": "docker.io/karmada/karmada-controller-manager:v0.0.0-missing",
            "state": {"waiting": {"reason": "ImagePullBackOff",
                                  "message": "Back-off pulling image \"docker.io/karmada/...\": not found"}}}
    crash = {"name": "scheduler", "image": "s:1", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    starting = {"name": "webhook", "image": "w:1", "state": {"waiting": {"reason": "ContainerCreating"}}}
    pods = [
        _pod("kcm-1", "karmada-controller-manager", [pull]),
        _pod("kcm-2", "karmada-controller-manager", [pull]),  # one line per workload
        _pod("sched-1", "karmada-scheduler", [crash]),
        _pod("sched-0", "karmada-scheduler", [crash], deleting=True),
        _pod("webhook-1", "karmada-webhook", [starting]),  # may still come up: not named
        _pod("search-1", "karmada-search", conditions=[{"type": "PodScheduled", "status": "False",
                                                         "message": "0/1 nodes are available: Insufficient cpu."}]),
    ]
    assert ko.pod_problems(pods) == [
        "karmada-controller-manager: ImagePullBackOff pulling docker.io/karmada/karmada-controller-manager:"
        "v0.0.0-missing: Back-off pulling image \"docker.io/karmada/...\": not found (pod kcm-1)",
        "karmada-scheduler: CrashLoopBackOff container scheduler: last exit 1 (Error) (pod sched-1)",
        "karmada-search: unschedulable: 0/1 nodes are available: Insufficient cpu. (pod search-1)",
    ]
    message = ko.failure_message("Wait until every component is rolled out and ready", {"msg": "timed out"},
                                 pods=pods[:1])
    assert message.startswith("Wait until every component is rolled out and ready: timed out; "
                              "karmada-controller-manager: ImagePullBackOff")


@pytest.mark.parametrize("image, tag", [
    ("docker.io/karmada/karmada-scheduler:v1.18.2", "v1.18.2"),
    ("localhost:5000/karmada/karmada-scheduler:v1.17.1", "v1.17.1"),
    ("registry.k8s.io/kube-apiserver@sha256:abcd", "sha256:abcd"),
    ("localhost:5000/busybox", ""),
])
def test_image_tag(image, tag):
    assert ko.image_tag(image) == tag


def _spod(name, image, ready=True, deleting=False, container="karmada-scheduler", app="karmada-scheduler"):
    meta = {"name": name, "labels": {"app.kubernetes.io/name": app},
            **({"deletionTimestamp": "2026-12-02T00:00:00Z"} if deleting else {})}
    return {"metadata": meta, "status": {"containerStatuses": [{"name": container, "image": image, "ready": ready}]}}


def test_the_observed_version_is_what_ready_pods_run_not_the_spec():
    new, old = "docker.io/karmada/karmada-scheduler:v1.18.2", "docker.io/karmada/karmada-scheduler:v1.17.1"
    assert ko.observed_version([_spod("a", new), _spod("b", new)], "karmada-scheduler") == "v1.18.2"
    # mid-rollout both serve
    assert ko.observed_version([_spod("a", new), _spod("b", old)], "karmada-scheduler") == "v1.17.1,v1.18.2"
    # a new pod that is not ready (image pull failing) and an old one going away do not count
    assert ko.observed_version([_spod("a", new, ready=False), _spod("b", old), _spod("c", old, deleting=True)],
                               "karmada-scheduler") == "v1.17.1"
    assert ko.observed_version([_spod("a", new, container="sidecar")], "karmada-scheduler") == ""


def test_status_components_report_the_version_of_the_running_pods():
    plan = kp.build_plan(yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml")
                                        .read_text()))
    deps = [{"metadata": {"name": "karmada-scheduler"}, "spec": {"replicas": 1, "template": {"spec": {
        "containers": [{"image": "docker.io/karmada/karmada-scheduler:v1.18.2"}]}}}, "status": {"readyReplicas": 1}}]
    pods = [_spod("s", "docker.io/karmada/karmada-scheduler:v1.17.1"),
            _spod("a", "registry.k8s.io/kube-apiserver:v1.34.12", container="kube-apiserver", app="karmada-apiserver")]
    by = {c["name"]: c for c in ko.component_status(deps, plan, pods)}
    # the spec says v1.18.2, the pod that serves still runs v1.17.1: status says what runs
    assert (by["karmada-scheduler"]["version"], by["karmada-scheduler"]["desiredVersion"]) == ("v1.17.1", "v1.18.2")
    assert by["karmada-apiserver"]["version"] == "v1.34.12"
    assert by["karmada-webhook"]["version"] == ""  # no pod ready: no version claimed
    assert {c["name"]: c["version"] for c in ko.component_status(deps, plan)}["karmada-scheduler"] == "v1.18.2"


def test_the_running_status_is_every_field_and_condition_the_status_step_writes():
    plan = kp.build_plan(SAMPLE)
    certs = [{"name": "apiserver", "notAfter": "2027-01-01T00:00:00Z", "serial": "x"},
             {"name": "etcd-server", "notAfter": "2026-12-31T00:00:00Z", "serial": "y"}]
    # the last replacement, as etcd scaling's report of this pass says it (etcd/scaling.py)
    scaling = {"fields": {"etcdScaling": {"members": 3, "replicas": 3,
                                          "lastReplacement": "karmada-etcd-1 (lost its data)"}}, "conditions": []}
    out = ko.running_status([], [], plan, certs, {}, [scaling])
    assert out["phase"] == "Running"
    assert out["event"] == {"reason": "Running", "message": f"Karmada {plan['karmadaVersion']} is serving"}
    fields = out["fields"]
    assert fields["certificates"] == [{"name": "apiserver", "notAfter": "2027-01-01T00:00:00Z"},
                                      {"name": "etcd-server", "notAfter": "2026-12-31T00:00:00Z"}]
    assert fields["controlPlaneHash"] == plan["controlPlaneHash"]
    assert fields["apiServerEndpoints"][-1] == plan["endpoints"]["inCluster"]
    assert [c["name"] for c in fields["components"]][0] == "karmada-apiserver"
    assert [c["type"] for c in out["conditions"]] == ["CertificatesValid", "EtcdReady", "ControlPlaneReady", "Ready"]
    etcd = out["conditions"][1]
    assert etcd["reason"] == "QuorumReady"
    assert etcd["message"] == "3/3 members ready; last replacement: karmada-etcd-1 (lost its data)"
    assert "etcd-server at 2026-12-31" in out["conditions"][0]["message"]
    external = dict(SAMPLE, spec={**SAMPLE["spec"], "etcd": {"external": {
        "endpoints": ["https://e1:2379", "https://e2:2379"], "tlsSecretRef": {"name": "ext"}}}})
    ext = ko.running_status([], [], kp.build_plan(external), [], {}, [])["conditions"][1]
    assert (ext["reason"], ext["message"]) == ("ExternalEtcd", "using https://e1:2379,https://e2:2379")
