"""`make install deploy` on a machine that has only kubectl (README, "Use it on your own cluster"):
the test bed's binaries are not built (LOCALBIN points at an empty directory, so the Makefile
falls back to the kubectl on PATH), and the CRDs, the RBAC and the operator's Deployment with
the image given as IMG land on a real kube-apiserver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import kube_apiserver
from support.waiting import crds_established

ROOT = Path(__file__).resolve().parents[2]
IMG = "registry.example.com/team/karmada-ansible-operator:0.1.0"


def get(server, *args: str) -> dict:
    return json.loads(server.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("make-install-apiserver"))
    try:
        yield srv
    finally:
        srv.stop()


def test_make_install_deploy_needs_only_the_kubectl_on_path(server, bin_path, tmp_path):
    path_dir, empty = tmp_path / "path", tmp_path / "no-test-bed"
    path_dir.mkdir()
    empty.mkdir()
    shutil.copy(bin_path("kubectl"), path_dir / "kubectl")  # the machine's own kubectl
    env = {"HOME": str(tmp_path), "KUBECONFIG": str(server.kubeconfig),
           "PATH": f"{path_dir}:/usr/bin:/bin"}  # no venv, no ~/.cache/karmada-operator/links
    make = subprocess.run(["make", "--no-print-directory", "install", "deploy", f"IMG={IMG}",
                           f"LOCALBIN={empty}", f"KO_CACHE={tmp_path / 'cache'}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    print(make.stdout[-1500:])
    assert make.returncode == 0, make.stdout[-2000:] + make.stderr[-2000:]
    assert "kubectl kustomize config/crd | kubectl apply -f -" in make.stdout  # the kubectl on PATH
    crds_established(server.kubectl, ["karmadadeployments.operator.karmada.io", "etcdbackups.operator.karmada.io",
                                      "etcdrestores.operator.karmada.io"])
    deployments = get(server, "deployments", "-n", "karmada-operator-system")["items"]
    assert [d["spec"]["template"]["spec"]["containers"][0]["image"] for d in deployments] == [IMG]
    roles = {r["metadata"]["name"] for r in get(server, "clusterroles")["items"]}
    assert {"karmada-operator-manager-role", "karmada-operator-metrics-reader"} <= roles, sorted(roles)
    assert os.listdir(empty) == []
