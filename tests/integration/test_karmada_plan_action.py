"""karmada_plan runs in the controller (plugins/action/karmada_plan.py): through real ansible it
returns the plan, and a spec the operator cannot act on fails with the spec path in ``field``."""

from __future__ import annotations

from karmada_operator.plan import plan as karmada_plan
from support.ansible_adhoc import run_module


def test_plan_from_ansible_equals_the_library_plan(tmp_path):
    cr = {"metadata": {"name": "kd", "namespace": "karmada-system"}, "spec": {}}
    out = run_module("karmada_plan", {"resource": cr}, tmp_path)
    assert out.get("failed") is not True, out
    assert out["changed"] is False
    assert out["plan"] == karmada_plan.build_plan(cr)


def test_a_spec_the_operator_refuses_fails_naming_the_field(tmp_path):
    cr = {"metadata": {"name": "kd", "namespace": "karmada-system"},
          "spec": {"components": {"scheduler": {"extraArgs": {"kubeconfig": "/tmp/x"}}}}}
    out = run_module("karmada_plan", {"resource": cr}, tmp_path)
    assert out["failed"] is True
    assert out["field"] == "spec.components.scheduler.extraArgs", out
    assert "kubeconfig" in out["msg"]


def test_a_resource_that_is_not_an_object_is_an_argument_error(tmp_path):
    out = run_module("karmada_plan", {"resource": ["not", "a", "dict"]}, tmp_path)
    assert out["failed"] is True
    assert "resource" in out["msg"], out
