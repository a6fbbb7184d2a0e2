"""The fast path's decision: a run ends early only when nothing changed since the last full pass."""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from karmada_operator.plan import converged as kc

NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
BUILD = "b1"


def deployment(name, generation=1, ready=1, replicas=1, uid=None):
    return {"kind": "Deployment",
            "metadata": {"name": name, "uid": uid or f"uid-{name}", "generation": generation, "resourceVersion": "7"},
            "spec": {"replicas": replicas},
            "status": {"observedGeneration": generation, "readyReplicas": ready, "replicas": replicas}}


def objects():
    return [
        deployment("karmada-apiserver", replicas=2, ready=2),
        deployment("karmada-scheduler"),
        {"kind": "StatefulSet", "metadata": {"name": "karmada-etcd", "uid": "u-etcd", "generation": 3},
         "spec": {"replicas": 3}, "status": {"observedGeneration": 3, "readyReplicas": 3, "replicas": 3}},
        {"kind": "Service", "metadata": {"name": "karmada-apiserver", "uid": "u-svc", "resourceVersion": "9"},
         "spec": {"ports": [{"port": 5443}], "clusterIP": "10.0.0.9"}},
        {"kind": "Secret", "metadata": {"name": "karmada-cert", "uid": "u-sec"}, "type": "Opaque",
         "data": {"ca.crt": "QQ=="}},
        {"kind": "ConfigMap", "metadata": {"name": "karmada-etcd-bootstrap", "uid": "u-cm"},
         "data": {"ETCD_INITIAL_CLUSTER_STATE": "new"}},
    ]


def cr(members=True):
    spec = {"karmadaVersion": "v1.18.2", "certificates": {"renewBeforeDays": 30}}
    conditions = [{"type": "Ready", "status": "True", "reason": "Running"}]
    if members:
        spec["members"] = [{"name": "member1"}, {"name": "member2"}]
        conditions.append({"type": "MembersReady", "status": "True", "reason": "AllMembersReady"})
    return {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
            "metadata": {"name": "karmada", "namespace": "karmada-system", "generation": 4,
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": spec, "status": {"observedGeneration": 4, "conditions": conditions}}


def recorded(obj=None, objs=None, at=NOW - dt.timedelta(minutes=5), certificates=None):
    obj = obj or cr()
    obj["status"]["converged"] = kc.record(
        obj, objs or objects(), BUILD, at,
        certificates if certificates is not None else [{"name": "apiserver", "notAfter": "2027-12-01T00:00:00Z"}],
        dt.timedelta(days=30), "https://10.0.0.9:5443", "karmada-apiserver.karmada-system.svc.cluster.local")
    return obj


def test_a_recorded_full_pass_with_nothing_changed_is_converged():
    decision = kc.decide(recorded(), objects(), BUILD, NOW, 3600)
    assert decision.converged, decision


def test_the_fingerprint_ignores_order_status_and_metadata_churn():
    objs = objects()
    obj = recorded(objs=objs)
    churned = list(reversed(copy.deepcopy(objs)))
    for o in churned:
        o["metadata"]["resourceVersion"] = "999"
        o["metadata"].setdefault("annotations", {})["touched"] = "now"  # e.g. kubectl annotate on a Service
    churned[-1]["status"]["updatedReplicas"] = 2  # status churn
    obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = '{"x": 1}'
    assert kc.decide(obj, churned, BUILD, NOW, 3600).converged


def edit_spec(obj, objs):
    obj["spec"]["karmadaVersion"] = "v1.19.0"


def ask_full_pass(obj, objs):
    obj["metadata"]["annotations"][kc.FULL_PASS_ANNOTATION] = "2026-12-02T12:00:00Z"


def recreate_deployment(obj, objs):
    objs[1]["metadata"]["uid"] = "another"


def delete_secret(obj, objs):
    del objs[4]


def add_object(obj, objs):
    objs.append(deployment("karmada-descheduler"))


def edit_deployment(obj, objs):
    objs[1]["metadata"]["generation"] = 2
    objs[1]["status"]["observedGeneration"] = 2


def edit_service(obj, objs):
    objs[3]["spec"]["ports"][0]["port"] = 6443


def edit_secret(obj, objs):
    objs[4]["data"]["ca.crt"] = "Qg=="


def edit_configmap(obj, objs):
    objs[5]["data"]["ETCD_INITIAL_CLUSTER_STATE"] = "existing"


@pytest.mark.parametrize("change", [edit_spec, ask_full_pass, recreate_deployment, delete_secret, add_object,
                                    edit_deployment, edit_service, edit_secret, edit_configmap])
def test_any_change_to_the_spec_or_an_owned_object_runs_the_full_pass(change):
    obj, objs = recorded(), objects()
    change(obj, objs)
    decision = kc.decide(obj, objs, BUILD, NOW, 3600)
    assert not decision.converged and ("changed" in decision.reason or "asked" in decision.reason), decision


def test_the_full_pass_annotation_is_compared_apart_from_the_fingerprint():
    obj = recorded()
    ask_full_pass(obj, [])
    assert kc.decide(obj, objects(), BUILD, NOW, 3600).reason.startswith("a full pass was asked for")
    # the full pass it asked for records the value; the fingerprint is the one before
    before = obj["status"]["converged"]["fingerprint"]
    obj["status"]["converged"] = kc.record(obj, objects(), BUILD, NOW, [], dt.timedelta(days=30), "https://x", "")
    assert obj["status"]["converged"]["fingerprint"] == before
    assert obj["status"]["converged"]["fullPass"] == "2026-12-02T12:00:00Z"
    assert kc.decide(obj, objects(), BUILD, NOW, 3600).converged


def test_a_new_operator_build_runs_the_full_pass():
    decision = kc.decide(recorded(), objects(), "b2", NOW, 3600)
    assert not decision.converged and "the operator" in decision.reason


@pytest.mark.parametrize("status_change, why", [
    (lambda s: s.update(observedGeneration=3), "generation 4 not reconciled"),
    (lambda s: s["conditions"].__setitem__(0, {"type": "Ready", "status": "False", "reason": "RolloutStopped"}),
     "Ready is False (RolloutStopped)"),
    (lambda s: s.pop("converged"), "no full pass recorded"),
])
def test_a_plane_not_ready_at_this_generation_runs_the_full_pass(status_change, why):
    obj = recorded()
    status_change(obj["status"])
    decision = kc.decide(obj, objects(), BUILD, NOW, 3600)
    assert not decision.converged and why in decision.reason, decision


def test_a_replica_not_ready_runs_the_full_pass():
    objs = objects()
    obj = recorded(objs=objs)
    objs[2]["status"]["readyReplicas"] = 2
    decision = kc.decide(obj, objs, BUILD, NOW, 3600)
    assert not decision.converged and decision.reason == "not every replica ready: StatefulSet karmada-etcd"


def test_an_old_full_pass_runs_another():
    obj = recorded(at=NOW - dt.timedelta(minutes=61))
    decision = kc.decide(obj, objects(), BUILD, NOW, 3600)
    assert not decision.converged and "older than 3600 s" in decision.reason
    assert kc.decide(recorded(at=NOW - dt.timedelta(minutes=59)), objects(), BUILD, NOW, 3600).converged


def test_a_certificate_in_its_renewal_window_runs_the_full_pass():
    # leaves valid to 12:20 with 15 minutes' renewal window: due at 12:05
    certs = [{"name": "apiserver", "notAfter": "2026-12-02T12:30:00Z"},
             {"name": "admin", "notAfter": "2026-12-02T12:20:00Z"}]
    obj = cr()
    obj["status"]["converged"] = kc.record(obj, objects(), BUILD, NOW - dt.timedelta(minutes=1), certs,
                                           dt.timedelta(minutes=15), "https://x", "")
    assert obj["status"]["converged"]["renewAt"] == "2026-12-02T12:05:00Z"
    assert kc.decide(obj, objects(), BUILD, NOW, 3600).converged
    decision = kc.decide(obj, objects(), BUILD, NOW + dt.timedelta(minutes=5), 3600)
    assert not decision.converged and "due for renewal since 2026-12-02T12:05:00Z" in decision.reason


def test_a_ca_rotation_under_way_runs_full_passes():
    """Each phase of a CA rotation is a full pass: no fast path, not even members-only, until Done."""
    obj = recorded()
    obj["status"]["caRotation"] = {"ca": "karmada", "phase": "Reissuing", "requestedAt": "2026-12-02T11:00:00Z"}
    decision = kc.decide(obj, objects(), BUILD, NOW, 3600)
    assert not decision.converged and not decision.control_plane
    assert decision.reason == "CA rotation under way (karmada CA, phase Reissuing)"
    obj["status"]["caRotation"]["phase"] = "Done"
    assert kc.decide(obj, objects(), BUILD, NOW, 3600).converged
    # a newer request than the last rotation's starts one: no fast path either
    obj["spec"]["certificates"]["caRotation"] = {"ca": "etcd", "requestedAt": "2026-12-02T11:30:00Z"}
    obj = recorded(obj)  # the request recorded by a full pass (the spec is in the fingerprint)
    decision = kc.decide(obj, objects(), BUILD, NOW, 3600)
    assert not decision.converged and decision.reason == "CA rotation under way (etcd CA, phase Trusting)"


def test_members_must_be_ready_in_karmada_apiserver():
    def cluster(name, ready):
        return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}

    assert kc.unready_members(cr(), [cluster("member1", "True"), cluster("member2", "True")]) == []
    assert kc.unready_members(cr(), [cluster("member1", "True"), cluster("member2", "False")]) == ["member2"]
    assert kc.unready_members(cr(), [cluster("member1", "True")]) == ["member2"]
    assert kc.unready_members(cr(members=False), []) == []


def test_without_members_membersready_is_not_needed():
    decision = kc.decide(recorded(cr(members=False)), objects(), BUILD, NOW, 3600)
    assert decision.converged, decision


def test_the_build_id_follows_the_operators_code(tmp_path):
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("- debug: {}\n")
    (tmp_path / "watches.yaml").write_text("[]\n")
    (tmp_path / "plugins" / "__pycache__").mkdir(parents=True)
    first = kc.build_id(str(tmp_path))
    (tmp_path / "plugins" / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert kc.build_id(str(tmp_path)) == first
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("- debug: {msg: new}\n")
    assert kc.build_id(str(tmp_path)) != first


def test_members_not_ready_leave_the_control_plane_converged():
    obj = recorded()
    obj["status"]["conditions"][1] = {"type": "MembersReady", "status": "False", "reason": "MembersNotReady"}
    decision = kc.decide(obj, objects(), BUILD, NOW, 3600)
    assert decision == kc.Decision(False, "MembersReady is not True", control_plane=True)
    # but not when anything of the control plane changed too
    objs = objects()
    objs[1]["metadata"]["uid"] = "another"
    assert kc.decide(obj, objs, BUILD, NOW, 3600).control_plane is False
    assert kc.decide(recorded(), objects(), BUILD, NOW, 3600).control_plane is True
