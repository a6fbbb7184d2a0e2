"""The audit log's plan (plan/audit.py): flags, volumes and the policy of karmada-apiserver and
karmada-aggregated-apiserver for each setting of spec.apiServer.audit."""

from __future__ import annotations

import json

import pytest

from karmada_operator.plan import audit
from karmada_operator.plan.plan import PlanError, build_plan


def cr(audit_spec=None):
    spec = {"apiServer": {} if audit_spec is None else {"audit": audit_spec}}
    return {"metadata": {"name": "k", "namespace": "ns"}, "spec": spec}


def flags(args):
    return dict(a[2:].split("=", 1) for a in args)


def test_on_by_default_to_stdout_with_the_operators_policy_in_both_apiservers():
    plan = build_plan(cr())
    api = flags(plan["apiserver"]["args"])
    aggregated = next(c for c in plan["components"] if c["key"] == "aggregatedAPIServer")
    for f in (api, flags(aggregated["args"])):
        assert f["audit-policy-file"] == "/etc/kubernetes/audit/policy.json"
        assert (f["audit-log-path"], f["audit-log-format"]) == ("-", "json")
        assert "audit-webhook-config-file" not in f
    for pod in (plan["apiserver"], aggregated):
        assert [v["name"] for v in pod["extraVolumes"]] == ["audit-policy"]
        assert pod["extraVolumes"][0]["configMap"]["name"] == "k-audit-policy"
        assert pod["extraMounts"] == [{"name": "audit-policy", "mountPath": "/etc/kubernetes/audit", "readOnly": True}]
    assert plan["apiserver"]["templateAnnotations"] == aggregated["templateAnnotations"] != {}
    # no other component is audited
    others = [c for c in plan["components"] if c["key"] != "aggregatedAPIServer"]
    assert all(not c["extraVolumes"] and not c["templateAnnotations"] for c in others)
    assert not any(a.startswith("--audit-policy-file") for c in others for a in c["args"])
    policy = json.loads(plan["audit"]["configMap"]["data"]["policy.json"])
    assert (policy["apiVersion"], policy["kind"]) == ("audit.k8s.io/v1", "Policy")
    # Secrets and ConfigMaps at Metadata before any rule that could log a body
    levels = [r["level"] for r in policy["rules"]]
    secrets = next(i for i, r in enumerate(policy["rules"])
                   if any("secrets" in (g.get("resources") or []) for g in r.get("resources") or []))
    assert levels[secrets] == "Metadata" and all(lv in ("None", "Metadata") for lv in levels[:secrets])
    assert policy["rules"][-1] == {"level": "Metadata"}


def test_a_file_target_rotates_in_an_emptydir_sized_for_every_file_it_keeps():
    plan = build_plan(cr({"log": {"target": "File", "maxSizeMB": 20, "maxBackups": 3, "maxAgeDays": 2}}))
    f = flags(plan["apiserver"]["args"])
    assert f["audit-log-path"] == "/var/log/kubernetes/audit/audit.log"
    assert (f["audit-log-maxsize"], f["audit-log-maxbackup"], f["audit-log-maxage"]) == ("20", "3", "2")
    volume = next(v for v in plan["apiserver"]["extraVolumes"] if v["name"] == "audit-log")
    assert volume == {"name": "audit-log", "emptyDir": {"sizeLimit": "100Mi"}}  # (3 + 1 + 1 spare) x 20
    assert {"name": "audit-log", "mountPath": "/var/log/kubernetes/audit"} in plan["apiserver"]["extraMounts"]
    defaults = flags(build_plan(cr({"log": {"target": "File"}}))["apiserver"]["args"])
    assert (defaults["audit-log-maxsize"], defaults["audit-log-maxbackup"], defaults["audit-log-maxage"]) == \
        ("100", "5", "7")


def test_a_webhook_reads_the_users_secret_and_off_leaves_only_the_webhook():
    plan = build_plan(cr({"log": {"target": "Off"}, "webhook": {"kubeconfigSecretRef": {"name": "sink"}}}))
    f = flags(plan["apiserver"]["args"])
    assert "audit-log-path" not in f
    assert f["audit-webhook-config-file"] == "/etc/kubernetes/audit-webhook/kubeconfig"
    assert f["audit-webhook-mode"] == "batch"
    volume = next(v for v in plan["apiserver"]["extraVolumes"] if v["name"] == "audit-webhook")
    assert volume["secret"] == {"secretName": "sink", "defaultMode": 0o400,
                                "items": [{"key": "kubeconfig", "path": "kubeconfig"}]}


def test_off_without_a_webhook_is_refused_naming_the_field():
    with pytest.raises(PlanError) as err:
        build_plan(cr({"log": {"target": "Off"}}))
    assert err.value.field == "spec.apiServer.audit.log.target"


def test_disabled_sets_no_flag_and_mounts_nothing():
    plan = build_plan(cr({"enabled": False}))
    assert not any(a.startswith("--audit-policy-file") for a in plan["apiserver"]["args"])
    assert plan["apiserver"]["extraVolumes"] == [] and plan["apiserver"]["templateAnnotations"] == {}


def test_the_users_policy_replaces_the_operators_and_a_change_changes_the_pods_hash():
    own = {"rules": [{"level": "RequestResponse", "resources": [{"group": "policy.karmada.io"}]}]}
    plan = build_plan(cr({"policy": own}))
    policy = json.loads(plan["audit"]["configMap"]["data"]["policy.json"])
    assert policy["rules"] == own["rules"] and "omitStages" not in policy
    hashes = {build_plan(c)["apiserver"]["templateAnnotations"][audit.HASH_ANNOTATION]
              for c in (cr(), cr({"policy": own}), cr({"policy": {"rules": [{"level": "None"}]}}))}
    assert len(hashes) == 3
    assert build_plan(cr({"policy": own}))["apiserver"] == plan["apiserver"]  # the same spec, the same plan
