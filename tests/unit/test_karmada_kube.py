"""karmada_kube without a server: where credentials come from, and what error messages may say.

Building a client reads the kubeconfig but sends nothing, so the loader's choices are visible
in ``Kube.server`` / ``Kube.where``. Calls against a real kube-apiserver are in
tests/integration/test_karmada_kube_apiserver.py.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
import yaml

from karmada_operator.kube.client import Kube, KubeConfigError, _api_error, _secret_values, root_cause


def kubeconfig(server: str, token: str = "t0ken-value-123", context: str = "c1") -> dict:
    return {"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "k", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": "k", "user": "u"}}],
            "current-context": context}


def write(path: Path, server: str) -> str:
    path.write_text(yaml.safe_dump(kubeconfig(server)))
    return str(path)


@pytest.fixture
def env(monkeypatch, tmp_path):
    for var in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "K8S_AUTH_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def server_of(kube: Kube) -> str:
    try:
        return kube.server
    finally:
        kube.close()


def test_default_takes_the_first_source_that_is_set(env, tmp_path):
    explicit = write(tmp_path / "explicit", "https://explicit:6443")
    auth = write(tmp_path / "auth", "https://auth:6443")
    kubeconfig_env = write(tmp_path / "env", "https://env:6443")
    home = tmp_path / "home" / ".kube"
    home.mkdir(parents=True)
    write(home / "config", "https://home:6443")

    assert server_of(Kube.default()) == "https://home:6443"
    env.setenv("KUBECONFIG", kubeconfig_env)
    assert server_of(Kube.default()) == "https://env:6443"
    env.setenv("K8S_AUTH_KUBECONFIG", auth)
    kube = Kube.default()
    assert (kube.server, kube.where) == ("https://auth:6443", f"K8S_AUTH_KUBECONFIG={auth}")
    kube.close()
    kube = Kube.default(explicit)
    assert (kube.server, kube.where) == ("https://explicit:6443", f"kubeconfig {explicit}")
    kube.close()


def test_kubeconfig_env_may_list_several_files_and_the_context_is_chosen(env, tmp_path):
    first = tmp_path / "a"
    first.write_text(yaml.safe_dump(kubeconfig("https://a:6443", context="ctx-a")))
    second = tmp_path / "b"
    conf = kubeconfig("https://b:6443", context="ctx-b")
    conf["clusters"][0]["name"] = conf["contexts"][0]["context"]["cluster"] = "kb"
    del conf["current-context"]
    second.write_text(yaml.safe_dump(conf))
    env.setenv("KUBECONFIG", f"{first}{os.pathsep}{second}")
    assert server_of(Kube.default()) == "https://a:6443"  # current-context of the first file
    env.setenv("K8S_AUTH_CONTEXT", "ctx-b")
    assert server_of(Kube.default()) == "https://b:6443"


def test_in_cluster_first_skips_the_variables_only_inside_a_pod(env, tmp_path):
    env.setenv("K8S_AUTH_KUBECONFIG", write(tmp_path / "proxy", "http://localhost:8888"))
    assert server_of(Kube.default(in_cluster_first=True)) == "http://localhost:8888"  # not in a pod
    env.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    env.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert server_of(Kube.default()) == "http://localhost:8888"
    with pytest.raises(KubeConfigError, match="in-cluster service account"):  # no token file here
        Kube.default(in_cluster_first=True)


def test_in_cluster_first_on_a_host_takes_the_operators_kubeconfig_not_the_proxy(env, tmp_path):
    """ansible-operator run on a host (`make run`, the e2e tests): K8S_AUTH_KUBECONFIG is its
    caching proxy, KUBECONFIG the operator's own credentials; a live read wants the latter."""
    env.setenv("K8S_AUTH_KUBECONFIG", write(tmp_path / "proxy", "http://localhost:8888"))
    env.setenv("KUBECONFIG", write(tmp_path / "own", "https://apiserver:6443"))
    assert server_of(Kube.default(in_cluster_first=True)) == "https://apiserver:6443"
    assert server_of(Kube.default()) == "http://localhost:8888"  # applies still go through the proxy


def test_no_credentials_anywhere_is_a_clear_error(env):
    with pytest.raises(KubeConfigError, match="no Kubernetes credentials"):
        Kube.default()


def test_in_cluster_without_a_service_account_is_a_config_error(env):
    env.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    env.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeConfigError, match="in-cluster service account"):
        Kube.default()


def test_from_kubeconfig_takes_text_or_dict_and_overrides_the_server(env):
    conf = kubeconfig("https://original:6443")
    assert server_of(Kube.from_kubeconfig(yaml.safe_dump(conf))) == "https://original:6443"
    kube = Kube.from_kubeconfig(conf, server="https://10.0.0.7:5443", tls_server_name="karmada-apiserver")
    assert kube.server == "https://10.0.0.7:5443"
    assert kube.configuration.tls_server_name == "karmada-apiserver"
    kube.close()
    assert conf["clusters"][0]["cluster"]["server"] == "https://original:6443"  # the caller's dict is untouched


def test_certificate_files_live_in_a_private_directory_removed_on_close(env):
    key = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nnot-a-real-key\n-----END PRIVATE KEY-----\n").decode()
    conf = kubeconfig("https://k:6443")
    conf["users"][0]["user"] = {"client-certificate-data": base64.b64encode(b"cert").decode(),
                                "client-key-data": key}
    kube = Kube.from_kubeconfig(conf)
    directory = Path(kube.tmp)
    assert Path(kube.configuration.key_file).parent == directory
    assert oct(directory.stat().st_mode & 0o777) == "0o700"
    kube.close()
    assert not directory.exists()
    # A second client from the same kubeconfig gets its own files (not the removed ones).
    again = Kube.from_kubeconfig(conf)
    assert Path(again.configuration.key_file).exists()
    again.close()


def test_two_clients_alive_at_once_from_the_same_credentials_keep_their_own_files(env):
    """Every member thread of a pass makes a karmada-apiserver client from the same admin
    kubeconfig; the first one closed must not take the others' certificate files with it (the
    kubernetes loader memoizes its files by content: a member unjoin failed with "[Errno 2] No
    such file or directory" on its next TLS connection)."""
    conf = kubeconfig("https://k:6443")
    conf["clusters"][0]["cluster"] = {"server": "https://k:6443",
                                      "certificate-authority-data": base64.b64encode(b"ca").decode()}
    conf["users"][0]["user"] = {"client-certificate-data": base64.b64encode(b"cert").decode(),
                                "client-key-data": base64.b64encode(b"key").decode()}
    first, second = Kube.from_kubeconfig(conf), Kube.from_kubeconfig(conf)
    files = {name: getattr(second.configuration, name) for name in ("ssl_ca_cert", "cert_file", "key_file")}
    first.close()
    for name, path in files.items():
        assert Path(path).parent == Path(second.tmp), (name, path)
        assert oct(Path(path).stat().st_mode & 0o777) == "0o600", name
    assert {n: Path(p).read_bytes() for n, p in files.items()} == {
        "ssl_ca_cert": b"ca", "cert_file": b"cert", "key_file": b"key"}
    second.close()
    assert "certificate-authority-data" in conf["clusters"][0]["cluster"]  # the caller's dict is untouched


def test_embedded_credentials_that_are_not_base64_are_a_config_error(env):
    conf = kubeconfig("https://k:6443")
    conf["users"][0]["user"] = {"client-certificate-data": "not base64!", "client-key-data": "also not"}
    with pytest.raises(KubeConfigError, match=r"users\[0\]\.user\.client-certificate-data is not base64"):
        Kube.from_kubeconfig(conf, where="Secret ns/s")


def test_broken_kubeconfigs_say_why_without_their_contents(env, tmp_path):
    with pytest.raises(KubeConfigError, match="not a kubeconfig"):
        Kube.from_kubeconfig("just: text", where="Secret ns/s")
    conf = kubeconfig("https://k:6443", token="")
    conf["users"][0]["user"] = {"client-certificate-data": "c2VjcmV0LWNlcnQ=", "client-key-data": "%%%not-base64"}
    with pytest.raises(KubeConfigError) as err:
        Kube.from_kubeconfig(conf, where="Secret ns/s")
    assert "Secret ns/s" in str(err.value) and "%%%not-base64" not in str(err.value)
    assert "\n" not in str(err.value)


class FakeApiException:
    """The attributes of kubernetes' ApiException that _api_error reads."""

    def __init__(self, status, reason, body):
        self.status, self.reason, self.body = status, reason, body


def test_api_errors_are_the_servers_reason_and_message_with_secret_values_hidden():
    secret = {"kind": "Secret", "data": {"token": base64.b64encode(b"super-secret-token").decode()},
              "stringData": {"short": "abc"}}
    body = (b'{"kind":"Status","reason":"Invalid","message":"Secret \\"x\\" is invalid: token: '
            b'super-secret-token is wrong\\nmore"}')
    err = _api_error(FakeApiException(422, "Unprocessable Entity", body), _secret_values(secret))
    assert (err.status, err.reason) == (422, "Invalid")
    assert err.message == 'Secret "x" is invalid: token: <redacted> is wrong'
    plain = _api_error(FakeApiException(503, "Service Unavailable", "no json"))
    assert (plain.status, plain.reason, plain.message) == (503, "Service Unavailable", "Service Unavailable")
    assert _secret_values({"kind": "ConfigMap", "data": {"a": "long-enough-value"}}) == []


def test_root_cause_is_the_innermost_reason_in_one_line():
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as inner:
            raise RuntimeError("Max retries exceeded\nwith url: /version") from inner
    except RuntimeError as outer:
        assert root_cause(outer) == "[Errno 111] Connection refused"


def test_content_changed_ignores_status_and_server_bookkeeping():
    """Karmada's controllers write a Cluster's status every few seconds: that is not our change."""
    from karmada_operator.kube import client as kk

    before = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
              "metadata": {"name": "m1", "resourceVersion": "10", "labels": {"a": "1"},
                           "managedFields": [{"manager": "karmada-operator"}]},
              "spec": {"syncMode": "Push"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    status_only = {**before, "metadata": {**before["metadata"], "resourceVersion": "11",
                                          "managedFields": [{"manager": "karmada-operator"}, {"manager": "x"}]},
                   "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    assert not kk.content_changed(before, status_only)
    relabelled = {**before, "metadata": {**before["metadata"], "labels": {"a": "2"}}}
    assert kk.content_changed(before, relabelled)
    assert kk.content_changed(before, {**before, "spec": {"syncMode": "Pull"}})
