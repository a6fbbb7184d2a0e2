"""The k8s_status module against a real kube-apiserver: which generation a status claims.

A run reconciles the object as it was when the run started; a spec edit during the run bumps
the generation, and the status the run writes must not claim that newer generation as seen.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support import kube_apiserver
from support.ansible_adhoc import run_module
from support.waiting import crds_established

ROOT = Path(__file__).resolve().parents[2]
NS = "karmada-system"


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("status-apiserver"))
    try:
        srv.kubectl("apply", "-k", str(ROOT / "config/crd"))
        crds_established(srv.kubectl)
        srv.kubectl("create", "namespace", NS)
        yield srv
    finally:
        srv.stop()


def k8s_status(server, tmp_path, check: bool = False, **args) -> dict:
    """One k8s_status call through real ansible (ad hoc), returning the module's result."""
    params = {"api_version": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment", "namespace": NS,
              "kubeconfig": str(server.kubeconfig), **args}
    return run_module("k8s_status", params, tmp_path, check=check)


def test_status_claims_the_generation_the_run_acted_on(server, tmp_path):
    cr = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
          "metadata": {"name": "gen", "namespace": NS}, "spec": {}}
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(cr))
    # the spec is edited while "the run" (started at generation 1) goes on
    server.kubectl("patch", "karmadadeployment", "gen", "-n", NS, "--type=merge", "-p", '{"spec":{"paused":true}}')
    ready = {"type": "Ready", "status": "True", "reason": "Running", "message": "serving"}
    result = k8s_status(server, tmp_path, name="gen", status={"phase": "Running"}, conditions=[ready],
                        observed_generation=1)
    assert result["changed"] is True, result
    obj = json.loads(server.kubectl("get", "karmadadeployment", "gen", "-n", NS, "-o", "json").stdout)
    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["observedGeneration"] == 1
    assert obj["status"]["conditions"][0]["observedGeneration"] == 1

    # without it, the current generation (what a caller that reads the object itself wants)
    k8s_status(server, tmp_path, name="gen", conditions=[ready])
    obj = json.loads(server.kubectl("get", "karmadadeployment", "gen", "-n", NS, "-o", "json").stdout)
    assert obj["status"]["conditions"][0]["observedGeneration"] == 2


def test_repeated_status_is_no_change_check_mode_writes_nothing_and_a_missing_object_is_reported(server, tmp_path):
    cr = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
          "metadata": {"name": "again", "namespace": NS}, "spec": {}}
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(cr))
    ready = {"type": "Ready", "status": "True", "reason": "Running", "message": "serving"}

    def live() -> dict:
        return json.loads(server.kubectl("get", "karmadadeployment", "again", "-n", NS, "-o", "json").stdout)

    first = k8s_status(server, tmp_path, name="again", status={"phase": "Running"}, conditions=[ready])
    assert first["changed"] is True and first["changed_fields"] == ["conditions", "observedGeneration", "phase"]
    version = live()["metadata"]["resourceVersion"]
    second = k8s_status(server, tmp_path, name="again", status={"phase": "Running"}, conditions=[ready])
    assert second["changed"] is False
    assert live()["metadata"]["resourceVersion"] == version

    checked = k8s_status(server, tmp_path, name="again", status={"phase": "Failed"}, check=True)
    assert checked["changed"] is True and checked["status"]["phase"] == "Failed"
    assert live()["status"]["phase"] == "Running" and live()["metadata"]["resourceVersion"] == version

    gone = k8s_status(server, tmp_path, name="never-created", status={"phase": "Running"})
    assert (gone["changed"], gone["msg"]) == (False, "object not found")


def test_the_plural_comes_from_discovery(server, tmp_path):
    """A kind whose plural is not kind + "s" (and a cluster-scoped one)."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "statuspolicies.example.karmada.io"},
           "spec": {"group": "example.karmada.io", "scope": "Cluster",
                    "names": {"plural": "statuspolicies", "singular": "statuspolicy", "kind": "StatusPolicy"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(crd))
    crds_established(server.kubectl, ["statuspolicies.example.karmada.io"])
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(
        {"apiVersion": "example.karmada.io/v1", "kind": "StatusPolicy", "metadata": {"name": "p1"}}))
    result = k8s_status(server, tmp_path, api_version="example.karmada.io/v1", kind="StatusPolicy", name="p1",
                        namespace=None, status={"phase": "Active"})
    assert result["changed"] is True, result
    obj = json.loads(server.kubectl("get", "statuspolicies", "p1", "-o", "json").stdout)
    assert obj["status"]["phase"] == "Active"


def test_an_event_is_recorded_with_a_status_change_and_only_then(server, tmp_path):
    cr = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
          "metadata": {"name": "told", "namespace": NS}, "spec": {}}
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(cr))
    uid = json.loads(server.kubectl("get", "karmadadeployment", "told", "-n", NS, "-o", "json").stdout)[
        "metadata"]["uid"]
    failed = {"type": "MembersReady", "status": "False", "reason": "MemberUnreachable", "message": "m1 down"}
    event = {"type": "Warning", "reason": "MemberUnreachable", "message": "m1 down"}

    def events() -> list[dict]:
        out = json.loads(server.kubectl("get", "events", "-n", NS, "-o", "json", "--field-selector",
                                        "involvedObject.name=told").stdout)
        return out["items"]

    first = k8s_status(server, tmp_path, name="told", conditions=[failed], event=event)
    assert first["changed"] is True and first["event"], first
    [made] = events()
    assert made["metadata"]["name"] == first["event"]
    assert (made["type"], made["reason"], made["message"]) == ("Warning", "MemberUnreachable", "m1 down")
    assert made["involvedObject"] == {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
                                      "name": "told", "namespace": NS, "uid": uid}

    again = k8s_status(server, tmp_path, name="told", conditions=[failed], event=event)
    assert again["changed"] is False and "event" not in again
    assert len(events()) == 1
