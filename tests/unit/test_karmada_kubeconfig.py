import pytest
import yaml

from karmada_operator.kube import kubeconfig as kk

CONF = """apiVersion: v1
kind: Config
clusters:
- name: karmada
  cluster: {server: "https://karmada.example.com:443", certificate-authority-data: Q0E=}
users:
- name: admin
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
contexts:
- name: admin@karmada
  context: {cluster: karmada, user: admin}
current-context: admin@karmada
"""


def test_server_is_replaced_and_name_kept_for_tls():
    out = yaml.safe_load(kk.with_server(CONF, "https://10.96.0.20:5443", "karmada-apiserver.ns.svc.cluster.local"))
    cluster = out["clusters"][0]["cluster"]
    assert cluster["server"] == "https://10.96.0.20:5443"
    assert cluster["tls-server-name"] == "karmada-apiserver.ns.svc.cluster.local"
    assert cluster["certificate-authority-data"] == "Q0E="
    assert out["users"] == yaml.safe_load(CONF)["users"]
    plain = yaml.safe_load(kk.with_server(CONF, "https://x:1"))["clusters"][0]["cluster"]
    assert plain["server"] == "https://x:1" and "tls-server-name" not in plain


def test_kubeconfig_without_clusters_is_refused():
    with pytest.raises(ValueError, match="no clusters"):
        kk.with_server("apiVersion: v1\nkind: Config\n", "https://x")
