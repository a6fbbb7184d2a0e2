"""applied_objects: when an apply can be skipped (the live object already is the definition)."""

from __future__ import annotations

import copy

from karmada_operator.controlplane.crds import established_count
from karmada_operator.kube.applied import (
    DIGEST_ANNOTATION,
    digest,
    is_subset,
    kinds,
    unapplied,
    unregistered_apiservices,
    with_digest,
)

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "works.work.karmada.io", "annotations": {"controller-gen.kubebuilder.io/version": "v0.18"}},
    "spec": {"group": "work.karmada.io", "names": {"kind": "Work", "plural": "works"}, "scope": "Namespaced",
             "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object"}}}}}]},
}


def live_of(obj: dict) -> dict:
    """As the API server returns it: defaults, metadata and status added."""
    live = copy.deepcopy(obj)
    live["metadata"].update({"uid": "u1", "resourceVersion": "7", "generation": 1})
    live["spec"]["conversion"] = {"strategy": "None"}
    live["spec"]["names"]["listKind"] = "WorkList"
    live["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
    return live


def test_what_the_server_added_does_not_count():
    want = with_digest([CRD])
    assert unapplied(want, [live_of(want[0])]) == []


def test_a_missing_object_an_edited_field_and_a_new_definition_are_applied():
    want = with_digest([CRD])
    assert unapplied(want, []) == want  # missing
    edited = live_of(want[0])
    edited["spec"]["scope"] = "Cluster"
    assert unapplied(want, [edited]) == want
    # a new release drops a field: every field left is still in the live object, the digest is not
    newer = copy.deepcopy(CRD)
    del newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    assert is_subset({k: v for k, v in newer.items() if k != "metadata"}, live_of(want[0]))
    assert unapplied(with_digest([newer]), [live_of(want[0])]) == with_digest([newer])
    # an object applied before digests (no annotation) is applied once more
    assert unapplied(want, [live_of(CRD)]) == want


def test_the_digest_ignores_itself_and_changes_with_the_definition():
    annotated = with_digest([CRD])[0]
    assert annotated["metadata"]["annotations"][DIGEST_ANNOTATION] == digest(CRD) == digest(annotated)
    assert CRD["metadata"]["annotations"] == {"controller-gen.kubebuilder.io/version": "v0.18"}  # input untouched
    other = copy.deepcopy(CRD)
    other["spec"]["scope"] = "Cluster"
    assert digest(other) != digest(CRD)


def test_subset_compares_values_exactly():
    assert is_subset({"a": 1}, {"a": 1.0, "b": 2})
    assert not is_subset({"a": True}, {"a": 1})  # a bool is not a number
    assert not is_subset({"a": [1, 2]}, {"a": [1, 2, 3]})  # lists: same length
    assert not is_subset({"a": "1"}, {"a": 1})
    assert not is_subset({"a": {}}, {})  # a key that is missing
    assert is_subset({"a": {}}, {"a": {"x": 1}})
    assert not is_subset({"a": 1}, None)


def test_objects_are_matched_by_group_kind_namespace_and_name():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "namespace": "a"},
           "spec": {"type": "ClusterIP"}}
    want = with_digest([svc])
    elsewhere = copy.deepcopy(want[0])
    elsewhere["metadata"]["namespace"] = "b"
    assert unapplied(want, [elsewhere]) == want
    other_kind = copy.deepcopy(want[0])
    other_kind["kind"] = "Endpoints"
    assert unapplied(want, [other_kind]) == want
    assert unapplied(want, [copy.deepcopy(want[0])]) == []


def test_established_count_needs_status_true():
    live = [live_of(CRD), {**live_of(CRD), "metadata": {"name": "other"}},
            {"metadata": {"name": "clusters.cluster.karmada.io"},
             "status": {"conditions": [{"type": "Established", "status": "False"}]}}]
    assert established_count(live, ["works.work.karmada.io", "clusters.cluster.karmada.io"]) == 1
    assert established_count([], ["works.work.karmada.io"]) == 0


def test_kinds_lists_each_kind_and_namespace_once_in_order():
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "a"}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "t", "namespace": "a"}}]
    assert kinds(objs) == [{"apiVersion": "v1", "kind": "Namespace", "namespace": ""},
                           {"apiVersion": "v1", "kind": "Service", "namespace": "a"}]


def _apiservice(name: str, ca: str, conditions: list[dict]) -> dict:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
            "spec": {"caBundle": ca}, "status": {"conditions": conditions}}


def test_an_apiservice_counts_as_registered_with_the_ca_and_any_available_condition():
    live = [
        _apiservice("v1alpha1.cluster.karmada.io", "CA", [{"type": "Available", "status": "False"}]),
        _apiservice("v1beta1.metrics.karmada.io", "CA", [{"type": "Available", "status": "True"}]),
        _apiservice("v1alpha1.search.karmada.io", "OTHER", [{"type": "Available", "status": "True"}]),
        _apiservice("v1beta1.custom.metrics.k8s.io", "CA", []),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "v1alpha1.cluster.karmada.io"}},
    ]
    wanted = ["v1alpha1.cluster.karmada.io", "v1beta1.metrics.karmada.io", "v1alpha1.search.karmada.io",
              "v1beta1.custom.metrics.k8s.io", "v1.missing.example"]
    assert unregistered_apiservices(live, wanted, "CA") == [
        "v1alpha1.search.karmada.io", "v1beta1.custom.metrics.k8s.io", "v1.missing.example"]
    assert unregistered_apiservices(live, wanted[:2], "CA") == []
