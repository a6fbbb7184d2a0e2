"""role_templates renders the roles' templates exactly as Ansible's template lookup does.

Both renderers get the same variables; the objects they produce must be equal for every
system object of karmada-apiserver and every component of a sample plan (local and external
etcd, every optional component, pod settings that take the templates' optional branches).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import add_all_plugin_dirs, init_plugin_loader
from ansible.template import Templar

from karmada_operator.plan import plan as kp
from karmada_operator.runtime import templates as role_templates
from support import sample_plans

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins" / "filter"))

SYSTEM_TEMPLATES = ["namespaces.yaml.j2", "apiservices.yaml.j2", "mutating-webhook-configuration.yaml.j2",
                    "validating-webhook-configuration.yaml.j2", "cluster-proxy-admin-rbac.yaml.j2",
                    "karmada-view-clusterrole.yaml.j2", "karmada-edit-clusterrole.yaml.j2"]


@functools.cache
def plugins_loaded() -> None:
    init_plugin_loader()
    add_all_plugin_dirs(str(ROOT / "plugins"))  # our filters (karmada_mounts_hash)


def ansible_render(role: str, name: str, variables: dict) -> list:
    """What ``lookup('ansible.builtin.template', name) | from_yaml_all`` gives in the role."""
    plugins_loaded()
    search = {"ansible_search_path": [str(ROOT / "roles" / role)]}
    templar = Templar(loader=DataLoader(), variables={**variables, **search})
    text = templar.template("{{ lookup('ansible.builtin.template', '" + name + "') }}")
    return [d for d in yaml.safe_load_all(text) if d]


def sample() -> dict:
    return yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())


def system_context(**overrides) -> dict:
    plan = kp.build_plan(sample())
    ctx = {
        "karmada_resources_labels": {"app.kubernetes.io/managed-by": "karmada-operator", "karmada.io/system": "true"},
        "karmada_resources_namespaces": ["karmada-system", "karmada-cluster"],
        "karmada_resources_apiservices": plan["apiServices"],
        "karmada_resources_ca_bundle": "LS0tLS1CRUdJTi0tLS0t",
        "karmada_resources_cluster_domain": "cluster.local",
        "karmada_resources_host_namespace": "tenant-a",
        "karmada_resources_system_namespace": "karmada-system",
        "karmada_resources_admin_user": "system:admin",
        "karmada_resources_webhook_service": "karmada-webhook",
    }
    ctx.update(overrides)
    return ctx


def test_system_objects_equal_ansibles():
    ctx = system_context()
    ours = role_templates.render_objects("karmada_resources", SYSTEM_TEMPLATES, ctx)
    theirs = [obj for name in SYSTEM_TEMPLATES for obj in ansible_render("karmada_resources", name, ctx)]
    assert ours == theirs
    assert [o["kind"] for o in ours].count("ClusterRole") == 3 and len(ours) >= 10


def plans() -> dict[str, dict]:
    return {which: kp.build_plan(cr) for which, cr in sample_plans.crs().items()}


def pki_for(plan: dict) -> dict:
    """The certificates step's result as the component template reads it (its pod-template hashes)."""
    return {"hashes": {"components": {c["component"]: f"hash-of-{c['component']}" for c in plan["components"]}}}


@pytest.mark.parametrize("which", ["sample", "every-component", "external-etcd"])
def test_component_manifests_equal_ansibles(which):
    plan = plans()[which]
    pki = pki_for(plan)
    steps = role_templates.component_steps(plan["components"], plan, pki)
    enabled = [c for c in plan["components"] if c["enabled"]]
    assert [s["name"] for s in steps] == [c["component"] for c in enabled]
    for comp, step in zip(enabled, steps, strict=True):
        theirs = ansible_render("karmada_deployment", "component.yaml.j2",
                                {"karmada_deployment_plan": plan, "comp": comp, "karmada_deployment_pki": pki})
        assert step["objects"] == theirs, comp["component"]
        assert step["deployment"] == comp["name"] and step["replicas"] == comp["pod"]["replicas"]
        assert step["selector"] == f"app.kubernetes.io/name={comp['component']},app.kubernetes.io/instance=karmada"


def test_a_variable_the_caller_did_not_pass_is_named():
    ctx = system_context()
    del ctx["karmada_resources_webhook_service"]
    with pytest.raises(KeyError, match="karmada_resources_webhook_service"):
        role_templates.render_objects("karmada_resources", ["mutating-webhook-configuration.yaml.j2"], ctx)
