"""The CRD schemas, served by a real kube-apiserver, accept the samples and reject nonsense.

Each broken variant is sent the way a user sends it (`kubectl create` with server-side
dry run and kubectl's default strict field validation), and the test checks the message
the user would see names the field.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from support import kube_apiserver
from support.waiting import crds_established

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "config" / "crd" / "bases"
SAMPLES = ROOT / "config" / "samples"


@pytest.fixture(scope="module")
def apiserver(bin_path, tmp_path_factory):
    server = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                                  tmp_path_factory.mktemp("crd-apiserver"))
    try:
        server.kubectl("apply", "-f", str(CRD_DIR))
        crds_established(server.kubectl)
        server.kubectl("create", "namespace", "karmada-system")
        yield server
    finally:
        server.stop()


def load_sample(kind: str) -> dict:
    return yaml.safe_load((SAMPLES / f"operator_v1alpha1_{kind.lower()}.yaml").read_text())


def dry_run(server, obj: dict):
    return server.kubectl("create", "--dry-run=server", "-o", "yaml", "-f", "-",
                          input_text=yaml.safe_dump(obj), check=False)


@pytest.mark.parametrize("kind", ["KarmadaDeployment", "EtcdBackup", "EtcdRestore"])
def test_sample_is_accepted_and_defaulted(apiserver, kind):
    sample = load_sample(kind)
    result = apiserver.kubectl("create", "-o", "yaml", "-f", "-", input_text=yaml.safe_dump(sample))
    stored = yaml.safe_load(result.stdout)
    assert stored["kind"] == kind
    if kind == "KarmadaDeployment":
        # Defaults the user did not write are filled in by the API server.
        assert stored["spec"]["members"][1]["syncMode"] == "Pull"
        assert stored["spec"]["members"][1]["kubeconfigSecretRef"]["key"] == "kubeconfig"
        assert stored["spec"]["upgrade"]["strategy"] == "Full"
        assert stored["spec"]["apiServer"]["externalLoadBalancer"]["port"] == 443
    apiserver.kubectl("delete", kind.lower(), sample["metadata"]["name"], "-n", "karmada-system")


def test_minimal_karmada_deployment_gets_full_defaults(apiserver):
    minimal = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
               "metadata": {"name": "minimal", "namespace": "karmada-system"}, "spec": {}}
    result = dry_run(apiserver, minimal)
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(result.stdout)["spec"]
    assert spec["etcd"]["local"]["replicas"] == 3
    assert spec["etcd"]["local"]["storage"]["type"] == "PersistentVolumeClaim"
    assert spec["karmadaVersion"] == "v1.18.2"
    assert spec["apiServer"]["serviceType"] == "ClusterIP"
    assert spec["certificates"]["keyAlgorithm"] == "RSA"
    assert spec["deletionPolicy"] == "Delete"
    assert spec["images"]["pullPolicy"] == "IfNotPresent"


def _set(obj: dict, path: str, value) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        obj = obj[int(key)] if isinstance(obj, list) else obj.setdefault(key, {})
    if value is _DELETE:
        del obj[keys[-1]]
    else:
        obj[keys[-1]] = value


_DELETE = object()

# (id, kind, {path: value}, substrings the user must see)
BROKEN = [
    ("even-etcd-replicas", "KarmadaDeployment", {"spec.etcd.local.replicas": 4},
     ["spec.etcd.local.replicas", "Unsupported value: 4"]),
    ("negative-component-replicas", "KarmadaDeployment", {"spec.components.scheduler.replicas": -1},
     ["spec.components.scheduler.replicas", "greater than or equal to 0"]),
    ("apiserver-zero-replicas", "KarmadaDeployment", {"spec.apiServer.replicas": 0},
     ["spec.apiServer.replicas", "greater than or equal to 1"]),
    ("unknown-service-type", "KarmadaDeployment", {"spec.apiServer.serviceType": "Ingress"},
     ["spec.apiServer.serviceType", 'Unsupported value: "Ingress"']),
    ("malformed-version", "KarmadaDeployment", {"spec.karmadaVersion": "1.18"},
     ["spec.karmadaVersion", "should match"]),
    ("bad-san", "KarmadaDeployment", {"spec.apiServer.certSANs": ["not a name!"]},
     ["spec.apiServer.certSANs[0]", "must be an IP address or a lower-case DNS name"]),
    ("bad-lb-address", "KarmadaDeployment", {"spec.apiServer.externalLoadBalancer.addresses": ["10.0.0.300"]},
     ["spec.apiServer.externalLoadBalancer.addresses[0]", "must be an IP address"]),
    ("unknown-component", "KarmadaDeployment", {"spec.components.etcdProxy": {"replicas": 1}},
     ['unknown field "spec.components.etcdProxy"']),
    ("external-and-local-etcd", "KarmadaDeployment",
     {"spec.etcd.external": {"endpoints": ["https://etcd.example:2379"], "tlsSecretRef": {"name": "etcd-tls"}}},
     ["spec.etcd", "exactly one of etcd.local or etcd.external must be set"]),
    ("external-etcd-bad-url", "KarmadaDeployment",
     {"spec.etcd": {"external": {"endpoints": ["etcd.example:2379"], "tlsSecretRef": {"name": "t"}}}},
     ["spec.etcd.external.endpoints[0]", "should match"]),
    ("ecdsa-with-rsa-size", "KarmadaDeployment", {"spec.certificates.keyAlgorithm": "ECDSA"},
     ["spec.certificates.keySize", "256 or 384 for ECDSA"]),
    ("leaf-outlives-ca", "KarmadaDeployment",
     {"spec.certificates.leafValidityDays": 3000, "spec.certificates.caValidityDays": 365},
     ["spec.certificates.leafValidityDays", "cannot outlive its CA"]),
    ("zero-validity", "KarmadaDeployment", {"spec.certificates.leafValidityDays": 0},
     ["spec.certificates.leafValidityDays", "greater than or equal to 1"]),
    ("duplicate-member", "KarmadaDeployment", {"spec.members.1.name": "member1"},
     ["spec.members[1]", "Duplicate value"]),
    ("member-not-dns1123", "KarmadaDeployment", {"spec.members.0.name": "Member_1"},
     ["spec.members[0].name", "should match"]),
    ("unknown-sync-mode", "KarmadaDeployment", {"spec.members.0.syncMode": "Poll"},
     ["spec.members[0].syncMode", 'Unsupported value: "Poll"']),
    ("member-without-secret", "KarmadaDeployment", {"spec.members.0.kubeconfigSecretRef": _DELETE},
     ["spec.members[0].kubeconfigSecretRef", "Required value"]),
    ("components-upgrade-without-list", "KarmadaDeployment", {"spec.upgrade": {"strategy": "Components"}},
     ["spec.upgrade", "must list at least one component"]),
    ("hostpath-without-path", "KarmadaDeployment", {"spec.etcd.local.storage": {"type": "HostPath"}},
     ["spec.etcd.local.storage.hostPath", "required when storage.type is HostPath"]),
    ("bad-deletion-policy", "KarmadaDeployment", {"spec.deletionPolicy": "Orphan"},
     ["spec.deletionPolicy", 'Unsupported value: "Orphan"']),
    ("nodeport-with-clusterip", "KarmadaDeployment", {"spec.apiServer.nodePort": 30443},
     ["spec.apiServer.nodePort", "only valid with serviceType NodePort"]),
    ("feature-gate-name", "KarmadaDeployment", {"spec.components.controllerManager.featureGates": {"fail-over": True}},
     ["spec.components.controllerManager.featureGates", "CamelCase"]),
    ("scheduler-estimator-not-yet", "KarmadaDeployment", {"spec.components.schedulerEstimator": {"enabled": True}},
     ["spec.components.schedulerEstimator.enabled", "not installed by this operator version yet"]),
    ("backup-two-targets", "EtcdBackup",
     {"spec.storage.s3": {"endpoint": "https://s3.example", "bucket": "bkt", "credentialsSecretRef": {"name": "c"}}},
     ["spec.storage", "exactly one of storage.pvc or storage.s3"]),
    ("backup-bad-schedule", "EtcdBackup", {"spec.schedule": "every night"},
     ["spec.schedule", "should match"]),
    ("backup-zero-retention", "EtcdBackup", {"spec.retention.maxBackups": 0},
     ["spec.retention.maxBackups", "greater than or equal to 1"]),
    ("backup-without-ref", "EtcdBackup", {"spec.karmadaDeploymentRef": _DELETE},
     ["spec.karmadaDeploymentRef", "Required value"]),
    ("restore-two-sources", "EtcdRestore", {"spec.source.location": "pvc://etcd-backups/karmada/x.db"},
     ["spec.source", "exactly one of source.backupRef or source.location"]),
    ("restore-negative-bump", "EtcdRestore", {"spec.bumpRevision": -5},
     ["spec.bumpRevision", "greater than or equal to 0"]),
    ("restore-bad-location", "EtcdRestore", {"spec.source": {"location": "ftp://host/file.db"}},
     ["spec.source.location", "should match"]),
]


@pytest.mark.parametrize("kind,changes,expected", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_variant_is_rejected_with_a_clear_message(apiserver, kind, changes, expected):
    obj = copy.deepcopy(load_sample(kind))
    for path, value in changes.items():
        _set(obj, path, value)
    result = dry_run(apiserver, obj)
    assert result.returncode != 0, f"accepted but should not be:\n{yaml.safe_dump(obj)}"
    for text in expected:
        assert text in result.stderr, f"missing {text!r} in the error the user sees:\n{result.stderr}"
