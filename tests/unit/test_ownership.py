"""What is one KarmadaDeployment's on the host cluster (kube/ownership.py), the names a pass
checks before it writes (plan.host_objects), and the check and removal of the ownership step
(tasks/karmada_ownership.py) against a fake API that records every write."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from test_rendered_manifests import ROTATIONS, render

from karmada_operator.kube import ownership
from karmada_operator.plan import plan as kp
from karmada_operator.task import ModuleFailed
from karmada_operator.tasks import karmada_ownership as task
from support.sample_plans import crs

ROOT = Path(__file__).resolve().parents[2]
UID = "0b6f7c9e-1111-4c2a-9f00-000000000001"


def obj(kind: str, name: str, labels: dict | None = None, refs: list | None = None, uid: str = "u1") -> dict:
    meta = {"name": name, "namespace": "kc", "uid": uid, "labels": labels or {}}
    if refs is not None:
        meta["ownerReferences"] = refs
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


THEIRS = {"app.kubernetes.io/name": "karmada-apiserver", "app.kubernetes.io/instance": "karmada",
          "app.kubernetes.io/managed-by": "karmada-operator"}


def test_an_owner_reference_or_the_uid_label_makes_an_object_ours():
    assert ownership.owned(obj("Deployment", "karmada-apiserver", refs=[{"uid": UID}]), UID)
    assert ownership.owned(obj("PersistentVolumeClaim", "data-karmada-etcd-0",
                               {ownership.OWNER_UID_LABEL: UID}), UID)
    assert not ownership.owned(obj("Deployment", "karmada-apiserver", THEIRS), UID)
    assert not ownership.owned(obj("Deployment", "karmada-apiserver", refs=[{"uid": "other"}]), UID)
    assert not ownership.owned(obj("Deployment", "x", {ownership.OWNER_UID_LABEL: ""}), "")


def test_karmadas_own_operators_objects_are_never_ours_and_the_message_says_whose():
    # Karmada's operator: managed-by karmada-operator, our old value too, and no part-of label
    for kind in ("Deployment", "StatefulSet", "Secret", "PersistentVolumeClaim"):
        assert not ownership.ours(obj(kind, "karmada-x", THEIRS), "karmada", UID)
    # its etcd volumes carry only the StatefulSet's selector labels
    assert not ownership.ours(obj("PersistentVolumeClaim", "etcd-data-karmada-etcd-0",
                                  {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": "karmada"}),
                              "karmada", UID)
    assert "managed by karmada-operator" in ownership.describe(obj("Deployment", "karmada-apiserver", THEIRS), UID)
    owned_by = obj("Deployment", "karmada-apiserver", refs=[{"kind": "Karmada", "name": "karmada", "uid": "k"}])
    assert "owned by Karmada karmada" in ownership.describe(owned_by, UID)
    other = ownership.describe(obj("Secret", "karmada-pki", {ownership.OWNER_UID_LABEL: "old"}), UID)
    assert "another KarmadaDeployment (uid old)" in other and f"{ownership.OWNER_UID_LABEL}={UID}" in other


def test_volumes_and_secrets_an_earlier_version_left_without_owner_stay_ours():
    before = {"app.kubernetes.io/part-of": "karmada", "app.kubernetes.io/instance": "karmada",
              "app.kubernetes.io/managed-by": "karmada-operator", "app.kubernetes.io/name": "etcd"}
    assert ownership.ours(obj("PersistentVolumeClaim", "data-karmada-etcd-0", before), "karmada", UID)
    assert ownership.ours(obj("Secret", "karmada-pki", before), "karmada", UID)
    # not a workload (those always had an owner), not another instance's, not with an owner
    assert not ownership.ours(obj("Deployment", "karmada-apiserver", before), "karmada", UID)
    assert not ownership.ours(obj("Secret", "karmada-pki", before), "other", UID)
    assert not ownership.ours(obj("Secret", "karmada-pki", before, refs=[{"uid": "x"}]), "karmada", UID)
    assert not ownership.ours(obj("Secret", "karmada-pki", {**before, ownership.OWNER_UID_LABEL: "old"}),
                              "karmada", UID)


def test_the_objects_inside_karmada_carry_the_same_managed_by():
    defaults = yaml.safe_load((ROOT / "roles/karmada_resources/defaults/main.yml").read_text())
    assert defaults["karmada_resources_labels"]["app.kubernetes.io/managed-by"] == ownership.MANAGED_BY


def test_every_object_carries_our_own_managed_by_and_the_uid_and_a_user_label_cannot_replace_them():
    cr = copy.deepcopy(crs()["sample"])
    cr["metadata"]["uid"] = UID
    cr["spec"].setdefault("globals", {})["labels"] = {"team": "a", "app.kubernetes.io/part-of": "mine"}
    plan = kp.build_plan(cr)
    assert plan["labels"]["app.kubernetes.io/managed-by"] == "karmadadeployment-operator"
    assert plan["labels"][ownership.OWNER_UID_LABEL] == UID
    assert plan["labels"]["app.kubernetes.io/part-of"] == "mine" and plan["labels"]["team"] == "a"
    for what, objs in render(cr, ROTATIONS["no-rotation"]).items():
        for o in objs if not what.startswith("components-absent") else []:  # names to delete
            assert ownership.owned(o, UID), (o["kind"], o["metadata"]["name"])


@pytest.mark.parametrize("which", sorted(crs()))
def test_the_names_checked_are_every_name_the_templates_make(which):
    cr = crs()[which]
    plan = kp.build_plan(cr)
    checked = {(o["kind"], o["name"]) for o in kp.host_objects(plan)}
    rendered = {(o["kind"], o["metadata"]["name"]) for objs in render(cr, ROTATIONS["no-rotation"]).values()
                for o in objs}
    assert rendered <= checked, sorted(rendered - checked)
    names = plan["names"]
    made_elsewhere = {("Secret", names[k]) for k in task.KEPT_SECRETS}
    if plan["etcd"]["mode"] == "local":
        made_elsewhere |= {("ConfigMap", names["etcdBootstrap"])}
        if plan["etcd"]["storage"]["type"] == "PersistentVolumeClaim":
            made_elsewhere |= {("PersistentVolumeClaim", f"data-{names['etcd']}-{i}")
                               for i in range(plan["etcd"]["replicas"])}
    assert checked - rendered == made_elsewhere


class FakeKube:
    """The host API as a dict; every write recorded."""

    def __init__(self, objs):
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        self.writes = []

    def get(self, api_version, kind, name, namespace=None):
        return copy.deepcopy(self.objs.get((kind, name)))

    def list(self, api_version, kind, namespace=None, label_selector=""):
        want = dict(p.split("=", 1) for p in label_selector.split(",") if p)
        return [copy.deepcopy(o) for (k, _), o in self.objs.items()
                if k == kind and all(o["metadata"]["labels"].get(a) == b for a, b in want.items())]

    def delete(self, api_version, kind, name, namespace=None, uid=""):
        self.writes.append(("delete", kind, name))
        return self.objs.pop((kind, name), None) is not None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def merge_patch(self, api_version, kind, name, patch, namespace=None):
        self.writes.append(("patch", kind, name, patch))
        self.objs[(kind, name)]["metadata"].update(patch["metadata"])


def plan_for(name="karmada", policy="Delete"):
    cr = copy.deepcopy(crs()["sample"])
    cr["metadata"].update({"name": name, "namespace": "kc", "uid": UID})
    cr["spec"]["deletionPolicy"] = policy
    return kp.build_plan(cr)


def test_the_check_names_every_object_in_the_way_and_passes_our_own():
    plan = plan_for()
    theirs = [obj("Deployment", "karmada-apiserver", THEIRS), obj("StatefulSet", "karmada-etcd", THEIRS),
              obj("Service", "karmada-etcd-client", THEIRS)]
    mine = [obj("Secret", "karmada-pki", refs=[{"uid": UID}])]
    found = task.check(FakeKube(theirs + mine), plan, "karmada", UID)
    assert len(found) == 3 and all("managed by karmada-operator" in f for f in found)
    assert {f.split(" (")[0] for f in found} == {"Deployment kc/karmada-apiserver", "StatefulSet kc/karmada-etcd",
                                                  "Service kc/karmada-etcd-client"}
    assert task.check(FakeKube(mine), plan, "karmada", UID) == []


def test_the_step_fails_as_name_conflict_before_any_write(monkeypatch):
    kube = FakeKube([obj("Deployment", "karmada-apiserver", THEIRS)])
    monkeypatch.setattr(task.Kube, "default", classmethod(lambda cls, *a, **k: kube))
    with pytest.raises(ModuleFailed) as failed:
        task.run({"state": "present", "plan": plan_for(), "owner": {"metadata": {"name": "karmada", "uid": UID}},
                  "timeout": 1, "poll": 0, "kubeconfig": None})
    assert failed.value.extra["step_reason"] == "NameConflict"
    assert "Deployment kc/karmada-apiserver" in failed.value.msg and "nothing was changed" in failed.value.msg
    assert kube.writes == []


def test_deletion_removes_only_what_is_ours_and_names_what_it_left():
    etcd = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": "karmada"}
    kube = FakeKube([
        obj("StatefulSet", "karmada-etcd", refs=[{"uid": UID}]),
        obj("Deployment", "karmada-apiserver", THEIRS),                       # theirs, same name
        obj("PersistentVolumeClaim", "data-karmada-etcd-0", {**etcd, ownership.OWNER_UID_LABEL: UID}),
        obj("PersistentVolumeClaim", "etcd-data-karmada-etcd-0", etcd),        # theirs: selector labels only
        obj("Secret", "karmada-pki", refs=[{"uid": UID}]),
        obj("Secret", "karmada-admin-kubeconfig", THEIRS),
    ])
    done = task.remove(kube, plan_for(), "karmada", UID, timeout=1, poll=0)
    assert sorted(w[1:3] for w in kube.writes) == [("PersistentVolumeClaim", "data-karmada-etcd-0"),
                                                    ("Secret", "karmada-pki"), ("StatefulSet", "karmada-etcd")]
    assert ("Deployment", "karmada-apiserver") in kube.objs
    assert ("PersistentVolumeClaim", "etcd-data-karmada-etcd-0") in kube.objs
    assert len(done["left"]) == 3


def test_retain_drops_only_our_reference_from_our_secrets_and_deletes_nothing():
    other = {"kind": "Something", "name": "x", "uid": "other"}
    kube = FakeKube([obj("Secret", "karmada-pki", refs=[{"uid": UID}, other]),
                     obj("StatefulSet", "karmada-etcd", refs=[{"uid": UID}]),
                     obj("Secret", "karmada-etcd-pki", THEIRS)])
    done = task.remove(kube, plan_for(policy="Retain"), "karmada", UID, timeout=1, poll=0)
    assert kube.writes == [("patch", "Secret", "karmada-pki", {"metadata": {"ownerReferences": [other]}})]
    assert done["released"] == ["Secret karmada-pki"] and len(done["left"]) == 1
