"""hack/bundle/generate.py: the OLM bundle made from config/ without operator-sdk.

The generator's logic on small inputs shaped like `kubectl kustomize config/manifests`
output: RBAC turned into the CSV's permissions the way operator-sdk does it, descriptors
checked against the CRD schema, relatedImages taken from the operator's own install plan
(a component added to the registry shows up with no other edit), samples as alm-examples,
and the same bytes on every run. `make lint` checks the committed bundle/ against a fresh
run on the real config/ (hack/lint.sh, "bundle generated").
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from karmada_operator import components as kc

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bundle_generate", ROOT / "hack" / "bundle" / "generate.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

SA = "karmada-operator-controller-manager"
OPERATOR_IMAGE = "registry.example/karmada-ansible-operator:9.9.9"


def crd(plural: str, kind: str, spec_props: dict, status_props: dict) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.operator.karmada.io"},
        "spec": {"group": "operator.karmada.io", "names": {"kind": kind, "plural": plural},
                 "versions": [{"name": "v1alpha1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "properties": spec_props},
                     "status": {"type": "object", "properties": status_props}}}}}]},
    }


def kd_crd() -> dict:
    components = {c.key: {"type": "object", "properties": {"enabled": {"type": "boolean"}}}
                  for c in kc.components()}
    return crd("karmadadeployments", "KarmadaDeployment",
               {"karmadaVersion": {"type": "string"},
                "members": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "components": {"type": "object", "properties": components}},
               {"phase": {"type": "string"}})


def base_csv(spec_descriptors: list[dict] | None = None) -> dict:
    return {
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "karmada-operator.v0.0.0", "namespace": "placeholder",
                     "annotations": {"capabilities": "Basic Install"}},
        "spec": {"displayName": "Karmada-Operator", "install": {"strategy": "deployment", "spec": {}},
                 "customresourcedefinitions": {"owned": [{
                     "name": "karmadadeployments.operator.karmada.io", "version": "v1alpha1",
                     "kind": "KarmadaDeployment", "displayName": "Karmada Deployment", "description": "d",
                     "specDescriptors": spec_descriptors if spec_descriptors is not None
                     else [{"path": "karmadaVersion"}, {"path": "members[0].name"}],
                     "statusDescriptors": [{"path": "phase"}]}]}},
    }


def rbac_objects() -> list[dict]:
    rule = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    lease = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}
    subject = {"kind": "ServiceAccount", "name": SA, "namespace": "karmada-operator-system"}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "karmada-operator-manager-role"}, "rules": [rule]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "karmada-operator-manager-rolebinding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "karmada-operator-manager-role"}, "subjects": [subject]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "karmada-operator-leader-election-role", "namespace": "karmada-operator-system"},
         "rules": [lease]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "karmada-operator-leader-election-rolebinding",
                      "namespace": "karmada-operator-system"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "karmada-operator-leader-election-role"}, "subjects": [subject]},
        # Nobody in the bundle binds it: it stays a manifest of its own.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "karmada-operator-metrics-reader"},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        # Bound to someone else: kept with its role.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "other-role"}, "rules": [rule]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "other-binding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "other-role"},
         "subjects": [{"kind": "ServiceAccount", "name": "someone-else", "namespace": "x"}]},
    ]


def kustomize_output(csv: dict | None = None) -> list[dict]:
    return [
        csv or base_csv(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-operator-system"}},
        kd_crd(),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SA, "namespace": "karmada-operator-system"}},
        *rbac_objects(),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "karmada-operator-controller-manager-metrics-service",
                      "namespace": "karmada-operator-system"},
         "spec": {"ports": [{"port": 8443}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": SA, "namespace": "karmada-operator-system",
                      "labels": {"control-plane": "controller-manager"}},
         "spec": {"template": {"spec": {"serviceAccountName": SA, "containers": [
             {"name": "manager", "image": "docker.io/karmada/karmada-ansible-operator:0.1.0"}]}}}},
        {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
         "metadata": {"name": "karmada", "namespace": "karmada-system"}, "spec": {"karmadaVersion": "v1.18.2"}},
        {"apiVersion": "scorecard.operatorframework.io/v1alpha3", "kind": "Configuration",
         "metadata": {"name": "config"}, "stages": [{"parallel": True, "tests": []}]},
    ]


def build(objs: list[dict] | None = None, **kw) -> dict[str, str]:
    args = {"version": "1.2.3", "channels": "candidate", "default_channel": "candidate", "image": OPERATOR_IMAGE}
    args.update(kw)
    return gen.build(objs if objs is not None else kustomize_output(), **args)


def csv_of(files: dict[str, str]) -> dict:
    return yaml.safe_load(files["bundle/manifests/karmada-operator.clusterserviceversion.yaml"])


def test_rbac_bound_to_the_operator_becomes_csv_permissions_and_the_rest_stays_manifests():
    perms, cluster_perms, extra = gen.rbac(rbac_objects(), {SA})
    assert perms == [{"serviceAccountName": SA, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}]
    assert cluster_perms == [{"serviceAccountName": SA, "rules": [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in extra) == [
        ("ClusterRole", "karmada-operator-metrics-reader"), ("ClusterRole", "other-role"),
        ("ClusterRoleBinding", "other-binding")]


def test_bundle_layout_is_operator_sdks():
    files = build()
    assert sorted(files) == [
        "bundle.Dockerfile",
        "bundle/manifests/karmada-operator-controller-manager-metrics-service_v1_service.yaml",
        "bundle/manifests/karmada-operator-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        "bundle/manifests/karmada-operator.clusterserviceversion.yaml",
        "bundle/manifests/operator.karmada.io_karmadadeployments.yaml",
        "bundle/manifests/other-binding_rbac.authorization.k8s.io_v1_clusterrolebinding.yaml",
        "bundle/manifests/other-role_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        "bundle/metadata/annotations.yaml",
        "bundle/tests/scorecard/config.yaml",
    ]
    service = yaml.safe_load(files["bundle/manifests/karmada-operator-controller-manager-metrics-service_v1_service"
                                   ".yaml"])
    assert "namespace" not in service["metadata"]  # OLM puts it into the install namespace
    annotations = yaml.safe_load(files["bundle/metadata/annotations.yaml"])["annotations"]
    assert annotations["operators.operatorframework.io.bundle.package.v1"] == "karmada-operator"
    assert annotations["operators.operatorframework.io.bundle.channels.v1"] == "candidate"
    for key, value in annotations.items():  # the image labels say the same as metadata/
        assert f"LABEL {key}={value}\n" in files["bundle.Dockerfile"]


def test_csv_is_completed_from_the_inputs():
    csv = csv_of(build())
    assert csv["metadata"]["name"] == "karmada-operator.v1.2.3"
    assert "namespace" not in csv["metadata"]
    assert csv["spec"]["version"] == "1.2.3"
    assert csv["metadata"]["annotations"]["containerImage"] == OPERATOR_IMAGE
    examples = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    assert examples == [{"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
                         "metadata": {"name": "karmada"}, "spec": {"karmadaVersion": "v1.18.2"}}]
    install = csv["spec"]["install"]["spec"]
    assert [d["name"] for d in install["deployments"]] == [SA]
    assert install["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["image"] == OPERATOR_IMAGE
    assert [p["serviceAccountName"] for p in install["permissions"]] == [SA]
    assert [p["serviceAccountName"] for p in install["clusterPermissions"]] == [SA]
    assert csv["spec"]["icon"][0]["mediatype"] == "image/svg+xml"
    assert csv["spec"]["icon"][0]["base64data"]


def test_related_images_are_every_image_the_plan_deploys_plus_the_operator():
    images = {i["name"]: i["image"] for i in gen.related_images(OPERATOR_IMAGE)}
    expected = {c.binary for c in kc.installable()} | {"karmada-operator", "etcd", "kube-apiserver", "karmada-agent"}
    assert set(images) == expected
    assert images["karmada-operator"] == OPERATOR_IMAGE
    assert images["etcd"] == f"{kc.DEFAULT_KUBERNETES_REGISTRY}/etcd:{kc.DEFAULT_ETCD_TAG}"
    assert images["kube-apiserver"].endswith(f"/kube-apiserver:{kc.DEFAULT_KUBERNETES_VERSION}")
    assert images["karmada-scheduler"] == \
        f"{kc.DEFAULT_KARMADA_REGISTRY}/karmada-scheduler:{kc.DEFAULT_KARMADA_VERSION}"
    # Not installed by this operator version: not an image it deploys.
    assert not any(not c.installable and c.binary in images for c in kc.components())


def test_a_component_added_to_the_registry_reaches_the_bundle_with_no_other_edit(monkeypatch):
    widget = kc.Component(key="widgetController", binary="karmada-widget-controller", suffix="widget-controller",
                          description="karmada-widget-controller", order=65, step="components", optional=True,
                          args={})
    monkeypatch.setattr(kc, "REGISTRY", (*kc.REGISTRY, widget))
    csv = csv_of(build())
    assert {"name": "karmada-widget-controller",
            "image": f"{kc.DEFAULT_KARMADA_REGISTRY}/karmada-widget-controller:{kc.DEFAULT_KARMADA_VERSION}"} \
        in csv["spec"]["relatedImages"]
    owned = csv["spec"]["customresourcedefinitions"]["owned"][0]
    assert "components.widgetController.enabled" in {d["path"] for d in owned["specDescriptors"]}


def test_a_descriptor_naming_no_field_of_the_crd_is_refused():
    with pytest.raises(gen.BundleError, match=r"spec\.karmadaVersoin"):
        build(kustomize_output(base_csv([{"path": "karmadaVersoin"}])))


def test_schema_paths():
    schema = kd_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert gen.schema_has_path(schema, "karmadaVersion")
    assert gen.schema_has_path(schema, "members")
    assert gen.schema_has_path(schema, "members[0].name")
    assert gen.schema_has_path(schema, "members.name")
    assert gen.schema_has_path(schema, "components.search.enabled")
    assert not gen.schema_has_path(schema, "members[0].nmae")
    assert not gen.schema_has_path(schema, "karmadaVersion.major")


def test_owned_crds_must_match_the_crds():
    objs = [o for o in kustomize_output() if o["kind"] != "CustomResourceDefinition"]
    with pytest.raises(gen.BundleError, match="owns"):
        build(objs)


def test_one_csv_base_and_a_default_channel_among_the_channels():
    with pytest.raises(gen.BundleError, match="exactly one"):
        build(kustomize_output() + [base_csv()])
    with pytest.raises(gen.BundleError, match="default channel"):
        build(channels="candidate", default_channel="stable")


def test_the_same_input_gives_the_same_bytes():
    assert build() == build()


def test_write_replaces_an_older_bundle(tmp_path):
    stale = tmp_path / "bundle" / "manifests" / "gone.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    gen.write(build(), tmp_path)
    assert not stale.exists()
    assert (tmp_path / "bundle" / "manifests" / "karmada-operator.clusterserviceversion.yaml").exists()
    assert (tmp_path / "bundle.Dockerfile").exists()


def test_version_and_channels_come_from_the_makefile(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text("VERSION ?= 4.5.6\nIMG ?= x:$(VERSION)\nCHANNELS ?= fast,stable\nDEFAULT_CHANNEL ?= stable\n")
    assert gen.makefile_defaults(makefile) == {"VERSION": "4.5.6", "CHANNELS": "fast,stable",
                                               "DEFAULT_CHANNEL": "stable"}
    makefile.write_text("VERSION ?= 4.5.6\n")
    with pytest.raises(gen.BundleError, match="CHANNELS, DEFAULT_CHANNEL"):
        gen.makefile_defaults(makefile)


def test_the_operator_image_replaces_every_env_value_naming_the_old_one():
    objs = kustomize_output()
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "KARMADA_OPERATOR_IMAGE", "value": "docker.io/karmada/karmada-ansible-operator:0.1.0"},
        {"name": "OTHER", "value": "kept"}]
    container = csv_of(build(objs))["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"][
        "containers"][0]
    assert container["image"] == OPERATOR_IMAGE
    assert container["env"] == [{"name": "KARMADA_OPERATOR_IMAGE", "value": OPERATOR_IMAGE},
                                {"name": "OTHER", "value": "kept"}]


def test_replaces_names_the_csv_of_the_version_upgraded():
    assert "replaces" not in csv_of(build())["spec"]
    assert csv_of(build(version="1.2.4", replaces="1.2.3"))["spec"]["replaces"] == "karmada-operator.v1.2.3"
