"""The component registry is the one home of a component: adding an entry is enough.

A made-up component added to the registry shows up in the CRD schema, the plan, the PKI set
and the rendered Deployment (component.yaml.j2, rendered with Ansible's own filters) with no
other edit. The versions the test bed pins agree with the registry's defaults.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import sys
from pathlib import Path

import pytest
import yaml

from karmada_operator import components as kc
from karmada_operator.pki import pki as karmada_pki
from karmada_operator.plan import plan as kp
from karmada_operator.runtime import templates as role_templates

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "roles" / "karmada_deployment" / "templates"
sys.path.insert(0, str(ROOT / "hack" / "crdgen"))
import schema  # noqa: E402

SAMPLE = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())

WIDGET = kc.Component(
    key="widgetController", binary="karmada-widget-controller", suffix="widget-controller",
    description="karmada-widget-controller", order=65, step="components", optional=True,
    pki_files=("ca.crt",), serving=True, port=9443,
    probes=(kc.Probe("readinessProbe", "/readyz", 9443, period=7),),
    args={"kubeconfig": "{kubeconfig}", "secure-port": "{port}", "cluster-name": "{name}",
          "tls-cert-file": "{pki}/{binary}.crt"},
    api_services=(kc.APIService("widgets.karmada.io", "v1alpha1", 1000, 15),),
    closed_args={"kubeconfig": "the operator's"},
)


@pytest.fixture
def widget_registry(monkeypatch):
    monkeypatch.setattr(kc, "REGISTRY", (*kc.REGISTRY, WIDGET))


def render(template: str, **variables) -> list[dict]:
    """As the role renders it (module_utils/karmada_operator/runtime/templates.py)."""
    return role_templates.render_objects("karmada_deployment", [template], variables, {})


def render_component(plan: dict, comp: dict) -> list[dict]:
    groups = {"pki": {f: "x" for f in comp["mounts"]["pki"]},
              "etcd": {f: "x" for f in comp["mounts"]["etcd"]},
              "kubeconfig": {f: "x" for f in comp["mounts"]["kubeconfig"]}}
    hashes = {"components": {comp["component"]: kp.mounts_hash(groups, comp["mounts"])}}
    return render("component.yaml.j2", karmada_deployment_plan=plan, comp=comp,
                  karmada_deployment_pki={"hashes": hashes})


def enabled_sample() -> dict:
    cr = copy.deepcopy(SAMPLE)
    cr["spec"].setdefault("components", {})["widgetController"] = {"enabled": True, "replicas": 2,
                                                                   "extraArgs": {"v": "4"}}
    return cr


def test_a_made_up_component_appears_everywhere_with_no_other_edit(widget_registry):
    # CRD schema: a spec.components key with the registry's description, optional -> enabled flag
    spec_schema = schema.karmada_deployment_spec()["properties"]["components"]["properties"]
    assert spec_schema["widgetController"]["description"] == "Settings of karmada-widget-controller."
    assert spec_schema["widgetController"]["properties"]["enabled"]["default"] is False
    assert "widgetController" in schema.upgradable()

    # plan: an entry in registry order (after the webhook, before the descheduler), its image,
    # flags (placeholders filled in, extraArgs merged), ports, probes and APIService
    plan = kp.build_plan(enabled_sample())
    keys = [c["key"] for c in plan["components"]]
    assert keys.index("webhook") < keys.index("widgetController") < keys.index("descheduler")
    widget = next(c for c in plan["components"] if c["key"] == "widgetController")
    assert widget["enabled"] and widget["name"] == "karmada-widget-controller"
    assert widget["image"] == f"docker.io/karmada/karmada-widget-controller:{kc.DEFAULT_KARMADA_VERSION}"
    assert widget["args"] == ["--cluster-name=karmada", "--kubeconfig=/etc/kubernetes/config/kubeconfig",
                              "--secure-port=9443",
                              "--tls-cert-file=/etc/kubernetes/pki/karmada-widget-controller.crt", "--v=4"]
    assert {"name": "v1alpha1.widgets.karmada.io", "group": "widgets.karmada.io", "version": "v1alpha1",
            "groupPriorityMinimum": 1000, "versionPriority": 15, "service": "karmada-widget-controller",
            "present": True, "optional": True} in plan["apiServices"]
    with pytest.raises(kp.PlanError) as err:
        cr = enabled_sample()
        cr["spec"]["components"]["widgetController"]["extraArgs"] = {"kubeconfig": "/tmp/x"}
        kp.build_plan(cr)
    assert err.value.field == "spec.components.widgetController.extraArgs"
    assert "kubeconfig" in str(err.value)

    # PKI: a client certificate, a kubeconfig and a serving certificate for its Service
    params = plan["pki"]
    assert "karmada-widget-controller" in params["components"]
    pki_spec = karmada_pki.parse_spec({"namespace": params["namespace"], "name": params["name"],
                                       "components": params["components"],
                                       "servingServices": params["serving_services"]})
    leaves = {p.name: p for p in karmada_pki.leaf_profiles(pki_spec)}
    assert "karmada-widget-controller-client" in leaves
    assert "karmada-widget-controller.karmada-system.svc.cluster.local" in leaves["karmada-widget-controller"].dns_names
    assert "karmada-widget-controller" in {k.name for k in karmada_pki.kubeconfig_profiles(pki_spec)}

    # the rendered objects: a Service to its port, a Deployment with its probe and mounts
    service, budget, deployment = render_component(plan, widget)
    assert service["kind"] == "Service" and service["spec"]["ports"][0]["targetPort"] == 9443
    # and a PodDisruptionBudget over the same pods: a drain takes one at a time
    assert budget["kind"] == "PodDisruptionBudget" and budget["metadata"]["name"] == "karmada-widget-controller"
    assert budget["spec"] == {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow",
                              "selector": deployment["spec"]["selector"]}
    assert deployment["kind"] == "Deployment" and deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"] == {"httpGet": {"path": "/readyz", "port": 9443, "scheme": "HTTPS"},
                                           "periodSeconds": 7}
    assert "livenessProbe" not in container
    assert container["command"] == ["/bin/karmada-widget-controller"]
    pki_items = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "pki")
    assert [i["key"] for i in pki_items["secret"]["items"]] == [
        "ca.crt", "karmada-widget-controller.crt", "karmada-widget-controller.key"]


def test_an_uninstallable_component_is_in_the_api_but_refused():
    estimator = kc.by_key()["schedulerEstimator"]
    assert not estimator.installable
    rules = schema.karmada_deployment_spec()["properties"]["components"]["properties"]["schedulerEstimator"]
    assert rules["x-kubernetes-validations"][0]["rule"] == "!has(self.enabled) || !self.enabled"
    assert "schedulerEstimator" not in [c["key"] for c in kp.build_plan(SAMPLE)["components"]]
    cr = copy.deepcopy(SAMPLE)
    cr["spec"].setdefault("components", {})["schedulerEstimator"] = {"enabled": True}
    with pytest.raises(kp.PlanError) as err:
        kp.build_plan(cr)
    assert err.value.field == "spec.components.schedulerEstimator.enabled"


@pytest.mark.parametrize("comp", kc.installable(), ids=lambda c: c.key)
def test_every_component_renders_from_its_registry_entry(comp):
    cr = copy.deepcopy(SAMPLE)
    cr["spec"].setdefault("components", {})[comp.key] = {"enabled": True}
    plan = kp.build_plan(cr)
    entry = next(c for c in plan["components"] if c["key"] == comp.key)
    objects = render_component(plan, entry)
    deployment = objects[-1]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == comp.binary
    for probe in comp.probes:
        assert container[probe.kind]["httpGet"]["port"] == probe.port
    assert not {"readinessProbe", "livenessProbe"} - {p.kind for p in comp.probes} & set(container)
    assert (objects[0]["kind"] == "Service") == comp.serving
    if comp.serving:
        assert objects[0]["spec"]["ports"][0]["targetPort"] == comp.port
        assert f"--secure-port={comp.port}" in entry["args"]
    # no placeholder is left unfilled
    assert not [a for a in entry["args"] if re.search(r"\{[a-z_]+\}", a)]


def test_install_and_upgrade_order():
    assert kc.upgrade_order() == ["etcd", "apiServer", "aggregatedAPIServer", "kubeControllerManager",
                                  "controllerManager", "scheduler", "webhook", "descheduler", "search",
                                  "metricsAdapter"]
    assert [c.step for c in kc.installable()][0] == "aggregated"
    assert all(c.step == "components" for c in kc.installable()[1:])
    assert len({c.order for c in kc.REGISTRY}) == len(kc.REGISTRY)
    assert all(dataclasses.is_dataclass(c) for c in kc.REGISTRY)


def test_versions_have_one_home():
    """hack/versions.env (the test bed) pins what the registry defaults to, and the CRD default is generated."""
    pinned = dict(line.split("=", 1) for line in (ROOT / "hack/versions.env").read_text().splitlines()
                  if line and not line.startswith("#"))
    assert pinned["KARMADA_VERSION"] == kc.DEFAULT_KARMADA_VERSION
    assert pinned["KUBERNETES_VERSION"] == kc.DEFAULT_KUBERNETES_VERSION
    assert pinned["ETCD_IMAGE_TAG"] == kc.DEFAULT_ETCD_TAG
    spec = schema.karmada_deployment_spec()["properties"]
    assert spec["karmadaVersion"]["default"] == kc.DEFAULT_KARMADA_VERSION
    assert spec["kubernetesVersion"]["default"] == kc.DEFAULT_KUBERNETES_VERSION
    plan = kp.build_plan(SAMPLE)
    assert plan["crds"]["url"] == kc.CRDS_URL_TEMPLATE.replace("{version}", SAMPLE["spec"]["karmadaVersion"])
