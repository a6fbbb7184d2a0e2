from __future__ import annotations

import copy

import pytest

from karmada_operator.members import plan as km


def member(name, **extra):
    entry = {"name": name, "kubeconfigSecretRef": {"name": f"{name}-kubeconfig", "key": "kubeconfig"},
             "syncMode": "Push"}
    entry.update(extra)
    return entry


def deployment(name="karmada", namespace="karmada-system", members=(), status_members=None, uid="u-1"):
    obj = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
           "metadata": {"name": name, "namespace": namespace, "uid": uid},
           "spec": {"members": list(members)}}
    if status_members is not None:
        obj["status"] = {"members": list(status_members)}
    return obj


def joined(entry, state="Joined", spec_hash=None):
    return {"name": entry["name"], "state": state, "ready": state == "Joined", "syncMode": entry.get("syncMode"),
            "specHash": km.member_spec_hash(entry) if spec_hash is None else spec_hash}


def test_new_members_are_added_with_their_vars():
    m1 = member("member1", provider="onprem", region="cn-east", zones=["az1", "az2"], labels={"env": "prod"},
                taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    m2 = {"name": "member2", "kubeconfigSecretRef": {"name": "m2"}, "syncMode": "Pull"}
    inv = km.build_inventory([deployment(members=[m1, m2])])
    assert inv.groups["add_member"] == ["karmada-system/karmada/member1", "karmada-system/karmada/member2"]
    assert inv.groups["del_member"] == [] and inv.groups["members_joined"] == []
    assert inv.groups["karmada_karmada_system_karmada"] == inv.groups["add_member"]
    assert inv.groups["push"] == ["karmada-system/karmada/member1"]
    assert inv.groups["pull"] == ["karmada-system/karmada/member2"]
    v1 = inv.hosts["karmada-system/karmada/member1"]
    assert v1 == {
        "karmada_member_name": "member1",
        "karmada_member_kubeconfig_secret": {"name": "member1-kubeconfig", "key": "kubeconfig"},
        "karmada_member_sync_mode": "Push",
        "karmada_member_region": "cn-east",
        "karmada_member_zones": ["az1", "az2"],
        "karmada_member_provider": "onprem",
        "karmada_member_labels": {"env": "prod"},
        "karmada_member_taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        "karmada_member_agent_placement": "Member",
        "karmada_member_spec_hash": km.member_spec_hash(m1),
        "karmada_member_state": "",
        "karmada_member_action": "add",
        "karmada_member_reason": "NotInStatus",
        "karmada_deployment": {"name": "karmada", "namespace": "karmada-system", "uid": "u-1"},
    }
    # Defaults the API server would fill are filled here too.
    assert inv.hosts["karmada-system/karmada/member2"]["karmada_member_kubeconfig_secret"]["key"] == "kubeconfig"


def test_joined_and_unchanged_member_is_left_alone():
    m1 = member("member1", region="r1")
    inv = km.build_inventory([deployment(members=[m1], status_members=[joined(m1)])])
    assert inv.groups["members_joined"] == ["karmada-system/karmada/member1"]
    assert inv.groups["add_member"] == []
    hv = inv.hosts["karmada-system/karmada/member1"]
    assert (hv["karmada_member_action"], hv["karmada_member_reason"], hv["karmada_member_state"]) == \
        ("none", "Unchanged", "Joined")


def test_joined_member_whose_spec_changed_is_added_again():
    before = member("member1", region="r1")
    after = member("member1", region="r2")
    inv = km.build_inventory([deployment(members=[after], status_members=[joined(before)])])
    assert inv.groups["add_member"] == ["karmada-system/karmada/member1"]
    assert inv.hosts["karmada-system/karmada/member1"]["karmada_member_reason"] == "SpecChanged"


@pytest.mark.parametrize(("status", "reason"), [
    ({"state": "Failed"}, "StateFailed"),
    ({"state": "Joining"}, "StateJoining"),
    ({"state": "Pending"}, "StatePending"),
    ({}, "NotInStatus"),
    ({"state": "Joined"}, "NoRecordedSpecHash"),
])
def test_members_not_cleanly_joined_are_added(status, reason):
    m1 = member("member1")
    entry = {"name": "member1", **status} if status else None
    inv = km.build_inventory([deployment(members=[m1], status_members=[entry] if entry else [])])
    assert inv.groups["add_member"] == ["karmada-system/karmada/member1"]
    assert inv.hosts["karmada-system/karmada/member1"]["karmada_member_reason"] == reason


def test_member_removed_from_spec_is_deleted_with_vars_from_status():
    gone = member("gone", syncMode="Pull")
    entry = joined(gone) | {"kubeconfigSecretRef": {"name": "gone-kc", "key": "config"}}
    never = {"name": "never", "state": "Pending"}  # never registered: nothing to undo
    inv = km.build_inventory([deployment(members=[], status_members=[entry, never])])
    assert inv.groups["del_member"] == ["karmada-system/karmada/gone"]
    assert inv.groups["pull"] == ["karmada-system/karmada/gone"]
    assert "karmada-system/karmada/never" not in inv.hosts
    hv = inv.hosts["karmada-system/karmada/gone"]
    assert hv["karmada_member_action"] == "delete"
    assert hv["karmada_member_sync_mode"] == "Pull"
    assert hv["karmada_member_kubeconfig_secret"] == {"name": "gone-kc", "key": "config"}
    assert hv["karmada_member_spec_hash"] == km.member_spec_hash(gone)
    assert hv["karmada_member_state"] == "Joined"


def test_a_deployment_being_deleted_unjoins_every_registered_member():
    kept, fresh = member("kept"), member("fresh")
    dep = deployment(members=[kept, fresh], status_members=[joined(kept) | {"kubeconfigSecretRef": {"name": "kc"}},
                                                          {"name": "fresh", "state": "Pending"}])
    dep["metadata"]["deletionTimestamp"] = "2026-12-01T05:00:00Z"
    inv = km.build_inventory([dep])
    assert inv.groups["del_member"] == ["karmada-system/karmada/kept"]
    assert inv.groups["add_member"] == [] and inv.groups["members_joined"] == []
    assert "karmada-system/karmada/fresh" not in inv.hosts  # never registered: nothing to undo
    assert inv.hosts["karmada-system/karmada/kept"]["karmada_member_action"] == "delete"


def test_a_deployment_deleted_with_retain_leaves_every_member_joined():
    kept = member("kept")
    dep = deployment(members=[kept], status_members=[joined(kept)])
    dep["spec"]["deletionPolicy"] = "Retain"
    dep["metadata"]["deletionTimestamp"] = "2026-12-01T05:00:00Z"
    inv = km.build_inventory([dep])
    assert inv.groups["del_member"] == [] and inv.groups["add_member"] == [] and inv.hosts == {}


@pytest.mark.parametrize("state", ["Joined", "Joining", "Unjoining", "Failed"])
def test_every_registered_state_is_unjoined_when_removed(state):
    inv = km.build_inventory([deployment(status_members=[{"name": "m", "state": state}])])
    assert inv.groups["del_member"] == ["karmada-system/karmada/m"]
    assert inv.hosts["karmada-system/karmada/m"]["karmada_member_kubeconfig_secret"] == {"name": "",
                                                                                          "key": "kubeconfig"}


def test_hash_ignores_key_order_and_api_defaults_but_not_content():
    written = {"name": "m", "kubeconfigSecretRef": {"name": "s"}, "zones": []}
    stored = {"syncMode": "Push", "kubeconfigSecretRef": {"key": "kubeconfig", "name": "s"}, "name": "m"}
    assert km.member_spec_hash(written) == km.member_spec_hash(stored)
    assert len(km.member_spec_hash(written)) == 16
    for change in ({"syncMode": "Pull"}, {"labels": {"a": "b"}}, {"zones": ["z"]},
                   {"taints": [{"key": "k", "effect": "NoExecute"}]}, {"kubeconfigSecretRef": {"name": "t"}}):
        assert km.member_spec_hash(stored | change) != km.member_spec_hash(stored), change


def test_hosts_are_unique_across_deployments_and_namespaces():
    objs = [deployment("a", "ns1", [member("m")], uid="1"), deployment("a", "ns2", [member("m")], uid="2"),
            deployment("b", "ns1", [member("m")], uid="3")]
    inv = km.build_inventory(objs)
    assert list(inv.hosts) == ["ns1/a/m", "ns1/b/m", "ns2/a/m"]
    assert inv.groups["karmada_ns1_a"] == ["ns1/a/m"]
    assert inv.groups["karmada_ns2_a"] == ["ns2/a/m"]
    assert inv.hosts["ns2/a/m"]["karmada_deployment"] == {"name": "a", "namespace": "ns2", "uid": "2"}


def test_deployment_groups_that_sanitize_alike_get_distinct_suffixes():
    inv = km.build_inventory([deployment("b-c", "a", [member("m")]), deployment("c", "a-b", [member("m")])])
    groups = [g for g in inv.groups if g.startswith("karmada_a_b_c")]
    assert len(groups) == 2 and all(len(inv.groups[g]) == 1 for g in groups)


def test_sanitize_group():
    assert km.sanitize_group("karmada_my-ns_my.cp") == "karmada_my_ns_my_cp"
    assert km.sanitize_group("1abc") == "_1abc"


def test_bad_entries_are_skipped_and_input_is_not_changed():
    objs = [deployment(members=[member("m"), member("m", region="dup"), {"region": "no-name"}]),
            {"metadata": {"name": "no-namespace"}, "spec": {"members": [member("x")]}},
            {"metadata": {"name": "empty", "namespace": "ns"}}]
    before = copy.deepcopy(objs)
    inv = km.build_inventory(objs)
    assert list(inv.hosts) == ["karmada-system/karmada/m"]
    assert inv.hosts["karmada-system/karmada/m"]["karmada_member_region"] == ""  # first entry wins
    assert inv.groups["karmada_ns_empty"] == []
    assert objs == before


def test_empty_input_still_has_the_plan_groups():
    inv = km.build_inventory([])
    assert inv.hosts == {}
    assert inv.groups == {"add_member": [], "del_member": [], "members_joined": []}


def test_thousand_members_are_fast():
    import time

    members = [member(f"m{i}", labels={"i": str(i)}) for i in range(1000)]
    status = [joined(m) for m in members[::2]]
    start = time.perf_counter()
    inv = km.build_inventory([deployment(members=members, status_members=status)])
    assert time.perf_counter() - start < 1.0
    assert len(inv.groups["add_member"]) == 500 and len(inv.groups["members_joined"]) == 500


def test_member_jobs_join_spec_members_and_unjoin_removed_ones():
    kept, changed, gone = member("m1"), member("m2", region="r2"), member("m3", syncMode="Pull")
    obj = deployment(members=[kept, changed],
                     status_members=[joined(kept), joined(member("m2")), joined(gone)])
    jobs = km.member_jobs(obj)
    assert [(j["name"], j["state"]) for j in jobs] == [("m1", "present"), ("m2", "present"), ("m3", "absent")]
    m2 = jobs[1]
    assert m2["region"] == "r2" and m2["kubeconfig_secret"] == {"name": "m2-kubeconfig", "key": "kubeconfig"}
    assert jobs[2]["sync_mode"] == "Pull"
    # exactly the karmada_member module's member options, nothing the module would refuse
    assert set(m2) == {"name", "state", "sync_mode", "provider", "region", "zones", "labels", "taints",
                       "agent_placement", "kubeconfig_secret"}


def test_member_jobs_of_a_deployment_being_deleted_unjoin_everything_registered():
    m1 = member("m1")
    obj = deployment(members=[m1], status_members=[joined(m1), {"name": "never", "state": "Pending"}])
    obj["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    assert [(j["name"], j["state"]) for j in km.member_jobs(obj)] == [("m1", "absent")]


def test_member_results_from_the_module_or_its_failure_for_every_member():
    jobs = [{"name": "m1"}, {"name": "m2"}]
    ok = {"changed": False, "members": {"m1": {"state": "Joined", "ready": True}}}
    assert km.member_results(ok, jobs) == ok["members"]
    crashed = {"failed": True, "msg": "MODULE FAILURE: boom"}
    results = km.member_results(crashed, jobs)
    assert results == {"m1": {"msg": "MODULE FAILURE: boom"}, "m2": {"msg": "MODULE FAILURE: boom"}}
    status = km.members_status([member("m1"), member("m2")], [], results)
    assert [(e["state"], e["reason"]) for e in status["members"]] == [("Failed", "OperatorError")] * 2
    assert status["retry"] and "boom" in status["condition"]["message"]
