"""hack/olm/olm.py: OLM's quickstart manifests rewritten for the test bed, and the file-based
catalog made of our bundles (the e2e test tests/e2e/test_olm.py runs them on the host cluster)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("olm", ROOT / "hack" / "olm" / "olm.py")
olm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(olm)

UPSTREAM = "quay.io/operator-framework/olm@sha256:e74b2ac57963c7f3ba19122a8c31c9f2a0deb3c0c5cac9e5323ccffd0ca198ed"
# Shaped like deploy/upstream/quickstart/olm.yaml of OLM v0.33.0 (abridged).
QUICKSTART = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: olm}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: olm-operator, namespace: olm}}
spec:
  template:
    spec:
      containers:
        - name: olm-operator
          command: [/bin/olm]
          args: [--namespace, $(OPERATOR_NAMESPACE), --writeStatusName, ""]
          image: {UPSTREAM}
          imagePullPolicy: IfNotPresent
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: catalog-operator, namespace: olm}}
spec:
  template:
    spec:
      containers:
        - name: catalog-operator
          command: [/bin/catalog]
          args:
          - '-namespace'
          - olm
          - -configmapServerImage=quay.io/operator-framework/configmap-operator-registry:latest
          - -util-image
          -  {UPSTREAM}
          image: {UPSTREAM}
          imagePullPolicy: IfNotPresent
---
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {{name: packageserver, namespace: olm}}
spec:
  install:
    strategy: deployment
    spec:
      deployments:
      - name: packageserver
        spec:
          template:
            spec:
              containers:
              - name: packageserver
                command: [/bin/package-server, -v=4]
                image: {UPSTREAM}
                imagePullPolicy: Always
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: operatorhubio-catalog, namespace: olm}}
spec: {{sourceType: grpc, image: "quay.io/operatorhubio/catalog:latest"}}
"""
OLM = "ko-testenv.local/olm:v9.9.9"
OPM = "ko-testenv.local/opm:v8.8.8"


def rewritten() -> list[dict]:
    return olm.rewrite_olm([d for d in yaml.safe_load_all(QUICKSTART) if d], OLM, OPM)


def test_every_olm_container_runs_the_local_image_without_pulling():
    docs = rewritten()
    containers = [c for d in docs for c in olm._containers(d)]
    assert len(containers) == 3
    assert all(c["image"] == OLM and c["imagePullPolicy"] == "IfNotPresent" for c in containers)
    assert UPSTREAM not in yaml.safe_dump_all(docs)


def test_the_catalog_operator_uses_local_opm_and_util_images():
    catalog = next(d for d in rewritten() if d["metadata"]["name"] == "catalog-operator")
    args = catalog["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--namespace", "olm", f"--util-image={OLM}", f"--opmImage={OPM}",
                    f"--configmapServerImage={OPM}"]


def test_single_dash_long_flags_get_two_dashes():
    # pflag reads -namespace as the shorthands -n -a -m ... (the quickstart of v0.33.0 has them).
    assert [olm.long_flag(a) for a in ["-namespace", "olm", "-ab=1", "-v=4", "--secure-port", "5443", "-",
                                       "$(OPERATOR_NAMESPACE)"]] == \
        ["--namespace", "olm", "--ab=1", "-v=4", "--secure-port", "5443", "-", "$(OPERATOR_NAMESPACE)"]
    packageserver = next(d for d in rewritten() if d["kind"] == "ClusterServiceVersion")
    assert olm._containers(packageserver)[0]["command"] == ["/bin/package-server", "-v=4"]


def test_the_internet_catalog_is_left_out_and_the_rest_kept():
    docs = rewritten()
    assert [d["kind"] for d in docs] == ["Namespace", "Deployment", "Deployment", "ClusterServiceVersion"]
    assert olm.olm_deployments(docs) == ["olm-operator", "catalog-operator"]
    olm_operator = docs[1]["spec"]["template"]["spec"]["containers"][0]
    assert olm_operator["args"] == ["--namespace", "$(OPERATOR_NAMESPACE)", "--writeStatusName", ""]


def test_the_input_is_not_modified():
    docs = [d for d in yaml.safe_load_all(QUICKSTART) if d]
    before = yaml.safe_dump_all(docs)
    olm.rewrite_olm(docs, OLM, OPM)
    assert yaml.safe_dump_all(docs) == before


def bundle(version: str) -> dict:
    return {"schema": "olm.bundle", "name": f"karmada-operator.v{version}", "package": "karmada-operator",
            "image": f"ko-testenv.local/karmada-operator-bundle@sha256:{version.replace('.', '') * 8}",
            "properties": [{"type": "olm.package", "value": {"packageName": "karmada-operator", "version": version}}]}


def test_catalog_has_the_package_one_channel_and_the_upgrade_edge():
    docs = olm.fbc([bundle("0.1.0"), bundle("0.1.1")], "candidate",
                   {"karmada-operator.v0.1.0": None, "karmada-operator.v0.1.1": "karmada-operator.v0.1.0"})
    assert docs[0] == {"schema": "olm.package", "name": "karmada-operator", "defaultChannel": "candidate"}
    assert docs[1] == {"schema": "olm.channel", "package": "karmada-operator", "name": "candidate",
                       "entries": [{"name": "karmada-operator.v0.1.0"},
                                   {"name": "karmada-operator.v0.1.1", "replaces": "karmada-operator.v0.1.0"}]}
    assert [d["name"] for d in docs[2:]] == ["karmada-operator.v0.1.0", "karmada-operator.v0.1.1"]
    assert all(d["schema"] == "olm.bundle" and d["image"].startswith(olm.BUNDLE_REPO + "@sha256:")
               for d in docs[2:])


def test_catalog_refuses_a_broken_upgrade_graph():
    with pytest.raises(ValueError, match="not in the catalog"):
        olm.fbc([bundle("0.1.1")], "candidate", {"karmada-operator.v0.1.1": "karmada-operator.v0.1.0"})
    with pytest.raises(ValueError, match="twice"):
        olm.fbc([bundle("0.1.0"), bundle("0.1.0")], "candidate", {})
    with pytest.raises(ValueError, match="at least one"):
        olm.fbc([], "candidate", {})


def test_json_stream_reads_opm_render_output():
    assert olm._json_stream('{"a": 1}\n{\n  "b": [2]\n}\n') == [{"a": 1}, {"b": [2]}]


def test_bundle_labels_are_the_committed_annotations():
    labels = olm.bundle_labels(ROOT / "bundle")
    assert labels["operators.operatorframework.io.bundle.package.v1"] == olm.PACKAGE
    dockerfile = (ROOT / "bundle.Dockerfile").read_text()
    assert all(f"LABEL {k}={v}\n" in dockerfile for k, v in labels.items())


def test_the_charts_crds_win_and_the_quickstart_fills_gaps():
    crd = lambda name, gen: {"kind": "CustomResourceDefinition", "metadata": {"name": name}, "gen": gen}  # noqa: E731
    quick = [crd("subscriptions.operators.coreos.com", "old"), crd("only-in-quickstart.operators.coreos.com", "old")]
    chart = [crd("olmconfigs.operators.coreos.com", "new"), crd("subscriptions.operators.coreos.com", "new")]
    merged = olm.merge_crds(chart, quick)
    assert [(c["metadata"]["name"], c["gen"]) for c in merged] == [
        ("olmconfigs.operators.coreos.com", "new"), ("subscriptions.operators.coreos.com", "new"),
        ("only-in-quickstart.operators.coreos.com", "old")]

