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

from karmada_operator.components import closed_args

CLOSED_ARGS = closed_args()

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
    assert spec["etcd"]["local"]["defragmentation"] == {"policy": "Auto", "fragmentationPercent": 45,
                                                         "minDbSize": "100Mi"}
    assert spec["karmadaVersion"] == "v1.18.2"
    assert spec["apiServer"]["serviceType"] == "ClusterIP"
    assert spec["apiServer"]["audit"] == {"enabled": True, "log": {"target": "Stdout"}}
    assert spec["apiServer"]["encryption"] == {"enabled": True, "resources": ["secrets"], "provider": "Secretbox"}
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
RESERVED = ["app.kubernetes.io/instance", "app.kubernetes.io/name", "app.kubernetes.io/managed-by",
            "operator.karmada.io/karmadadeployment-uid"]

# (id, kind, {path: value}, substrings the user must see)
BROKEN = [
    ("even-etcd-replicas", "KarmadaDeployment", {"spec.etcd.local.replicas": 4},
     ["spec.etcd.local.replicas", "Unsupported value: 4"]),
    ("tiny-etcd-quota", "KarmadaDeployment", {"spec.etcd.local.quotaBackendBytes": "1Mi"},
     ["spec.etcd.local.quotaBackendBytes", "must be between 16Mi and 8Gi"]),
    ("huge-etcd-quota", "KarmadaDeployment", {"spec.etcd.local.quotaBackendBytes": 16 * 2**30},
     ["spec.etcd.local.quotaBackendBytes", "must be between 16Mi and 8Gi"]),
    ("etcd-quota-over-half-the-claim", "KarmadaDeployment",
     {"spec.etcd.local.quotaBackendBytes": "5Gi", "spec.etcd.local.storage.size": "8Gi"},
     ["spec.etcd.local.quotaBackendBytes", "at most half of spec.etcd.local.storage.size"]),
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
    ("force-renew-sa", "KarmadaDeployment",
     {"spec.certificates.forceRenew": {"issuedBefore": "2026-12-02T08:00:00Z", "certificates": ["admin", "sa"]}},
     ["spec.certificates.forceRenew.certificates", "no issue time"]),
    ("force-renew-without-time", "KarmadaDeployment", {"spec.certificates.forceRenew": {"certificates": ["admin"]}},
     ["spec.certificates.forceRenew.issuedBefore", "Required value"]),
    ("ca-rotation-unknown-ca", "KarmadaDeployment",
     {"spec.certificates.caRotation": {"ca": "root", "requestedAt": "2026-12-02T08:00:00Z"}},
     ["spec.certificates.caRotation.ca", "Unsupported value"]),
    ("ca-rotation-not-a-time", "KarmadaDeployment",
     {"spec.certificates.caRotation": {"ca": "karmada", "requestedAt": "tomorrow"}},
     ["spec.certificates.caRotation.requestedAt", "date-time"]),
    ("ca-rotation-without-time", "KarmadaDeployment", {"spec.certificates.caRotation": {"ca": "etcd"}},
     ["spec.certificates.caRotation.requestedAt", "Required value"]),
    ("ca-rotation-of-a-byo-ca", "KarmadaDeployment",
     {"spec.certificates.caSecretRef": {"name": "my-ca"},
      "spec.certificates.caRotation": {"ca": "karmada", "requestedAt": "2026-12-02T08:00:00Z"}},
     ["spec.certificates.caRotation.ca", "caSecretRef"]),
    ("leaf-validity-not-a-duration", "KarmadaDeployment", {"spec.certificates.leafValidity": "soon"},
     ["spec.certificates.leafValidity", "should match"]),
    ("leaf-validity-too-short", "KarmadaDeployment",
     {"spec.certificates.leafValidity": "2m", "spec.certificates.renewBefore": "1m"},
     ["spec.certificates.leafValidity", "at least 5m"]),
    ("leaf-validity-outlives-ca", "KarmadaDeployment",
     {"spec.certificates.leafValidity": "9000h", "spec.certificates.caValidityDays": 365},
     ["spec.certificates.leafValidity", "cannot outlive its CA"]),
    ("short-leaf-keeps-the-default-window", "KarmadaDeployment", {"spec.certificates.leafValidity": "20m"},
     ["spec.certificates.renewBefore", "renewal window"]),
    ("renew-window-longer-than-leaf", "KarmadaDeployment",
     {"spec.certificates.leafValidity": "20m", "spec.certificates.renewBefore": "30m"},
     ["spec.certificates.renewBefore", "renewal window"]),
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
    ("backup-job-requests-over-limits", "EtcdBackup",
     {"spec.jobResources": {"requests": {"cpu": "2"}, "limits": {"cpu": "500m"}}},
     ["spec.jobResources", "requests must not exceed"]),
    ("backup-job-resources-not-a-quantity", "EtcdBackup", {"spec.jobResources": {"requests": {"cpu": "lots"}}},
     ["spec.jobResources.requests"]),
    ("backup-continuous-with-a-schedule", "EtcdBackup", {"spec.continuous": {}},
     ["spec", "spec.continuous takes its own full snapshots: leave spec.schedule empty"]),
    ("backup-continuous-interval-too-short", "EtcdBackup",
     {"spec.schedule": _DELETE, "spec.continuous": {"deltaInterval": "500ms"}},
     ["spec.continuous.deltaInterval", "must be between 1s and 10m"]),
    ("backup-continuous-interval-too-long", "EtcdBackup",
     {"spec.schedule": _DELETE, "spec.continuous": {"deltaInterval": "1h"}},
     ["spec.continuous.deltaInterval", "must be between 1s and 10m"]),
    ("backup-continuous-interval-not-a-duration", "EtcdBackup",
     {"spec.schedule": _DELETE, "spec.continuous": {"deltaInterval": "20 seconds"}},
     ["spec.continuous.deltaInterval", "should match"]),
    ("backup-continuous-tiny-deltas", "EtcdBackup",
     {"spec.schedule": _DELETE, "spec.continuous": {"deltaMaxBytes": 1000}},
     ["spec.continuous.deltaMaxBytes", "greater than or equal to 65536"]),
    ("backup-continuous-no-fulls", "EtcdBackup",
     {"spec.schedule": _DELETE, "spec.continuous": {"fullAfterDeltas": 0}},
     ["spec.continuous.fullAfterDeltas", "greater than or equal to 1"]),
    ("restore-two-sources", "EtcdRestore", {"spec.source.location": "pvc://etcd-backups/karmada/x.db"},
     ["spec.source", "exactly one of source.backupRef or source.location"]),
    ("restore-revision-and-time", "EtcdRestore",
     {"spec.source.revision": 5, "spec.source.time": "2026-03-01T02:00:00Z"},
     ["spec.source", "source.revision and source.time are two ways to name a point: set one"]),
    ("restore-revision-of-a-named-snapshot", "EtcdRestore",
     {"spec.source.revision": 5, "spec.source.snapshot": "nightly-20260301T020000Z.db"},
     ["spec.source", "they go with source.backupRef and no snapshot name"]),
    ("restore-revision-of-a-location", "EtcdRestore",
     {"spec.source": {"location": "pvc://etcd-backups/karmada/x.db", "revision": 5}},
     ["spec.source", "they go with source.backupRef and no snapshot name"]),
    ("restore-backup-name-without-location", "EtcdRestore", {"spec.source.backupName": "nightly"},
     ["spec.source", "source.backupName names the continuous backup whose chains are at source.location"]),
    ("restore-revision-zero", "EtcdRestore", {"spec.source.revision": 0},
     ["spec.source.revision", "greater than or equal to 1"]),
    ("restore-time-not-a-time", "EtcdRestore", {"spec.source.time": "yesterday"},
     ["spec.source.time"]),
    ("restore-negative-bump", "EtcdRestore", {"spec.bumpRevision": -5},
     ["spec.bumpRevision", "greater than or equal to 0"]),
    ("restore-bad-location", "EtcdRestore", {"spec.source": {"location": "ftp://host/file.db"}},
     ["spec.source.location", "should match"]),
    # extraArgs the operator owns (karmada_components.closed_args()): cases added below, one per spec key.
    # spec.globals.labels / members[].labels: reserved keys and Kubernetes label syntax.
    *[(f"reserved-label-{key.rsplit('/', 1)[1]}", "KarmadaDeployment", {"spec.globals.labels": {key: "x"}},
       ["spec.globals.labels", f"must not set {', '.join(RESERVED)}", "selects its objects by them"])
      for key in RESERVED],
    ("label-key-leading-dash", "KarmadaDeployment", {"spec.globals.labels": {"-team": "a"}},
     ["spec.globals.labels", "keys must be label keys"]),
    ("label-key-two-slashes", "KarmadaDeployment", {"spec.globals.labels": {"a.example/b/c": "a"}},
     ["spec.globals.labels", "keys must be label keys"]),
    ("label-key-name-too-long", "KarmadaDeployment", {"spec.globals.labels": {"x" * 64: "a"}},
     ["spec.globals.labels", "keys must be label keys"]),
    ("label-key-prefix-upper-case", "KarmadaDeployment", {"spec.globals.labels": {"Example.com/team": "a"}},
     ["spec.globals.labels", "keys must be label keys"]),
    ("label-key-prefix-too-long", "KarmadaDeployment",
     {"spec.globals.labels": {("a" * 60 + ".") * 4 + "abcdefghijklmnopq/team": "a"}},
     ["spec.globals.labels", "keys must be label keys"]),
    ("label-value-space", "KarmadaDeployment", {"spec.globals.labels": {"team": "a b"}},
     ["spec.globals.labels.team", "should match"]),
    ("label-value-too-long", "KarmadaDeployment", {"spec.globals.labels": {"team": "v" * 64}},
     ["spec.globals.labels.team", "may not be more than 63"]),
    ("member-label-key", "KarmadaDeployment", {"spec.members.0.labels": {"env!": "prod"}},
     ["spec.members[0].labels", "members[].labels keys must be label keys"]),
    # image registries and repositories carry no tag or digest; digest has its own field
    ("registry-with-tag", "KarmadaDeployment",
     {"spec.components.scheduler.image": {"registry": "docker.io/karmada:v1.18.2"}},
     ["spec.components.scheduler.image.registry", "image.registry must not contain a tag or digest"]),
    ("registry-with-digest", "KarmadaDeployment",
     {"spec.apiServer.image": {"registry": "registry.k8s.io@sha256"}},
     ["spec.apiServer.image.registry", "image.registry must not contain a tag or digest"]),
    ("registry-tag-without-path", "KarmadaDeployment",
     {"spec.etcd.local.image": {"registry": "etcd:latest"}},
     ["spec.etcd.local.image.registry", "image.registry must not contain a tag or digest"]),
    ("repository-with-tag", "KarmadaDeployment",
     {"spec.components.webhook.image": {"repository": "karmada-webhook:v1.18.2"}},
     ["spec.components.webhook.image.repository", "image.repository must not contain ':' or '@'"]),
    ("repository-with-digest", "KarmadaDeployment",
     {"spec.components.webhook.image": {"repository": "karmada-webhook@sha256:" + "a" * 64}},
     ["spec.components.webhook.image.repository", "image.repository must not contain ':' or '@'"]),
    ("karmada-registry-with-tag", "KarmadaDeployment", {"spec.images.karmadaRegistry": "docker.io/karmada:latest"},
     ["spec.images.karmadaRegistry", "images.karmadaRegistry must not contain a tag or digest"]),
    ("kubernetes-registry-with-digest", "KarmadaDeployment",
     {"spec.images.kubernetesRegistry": "registry.k8s.io@sha256:" + "a" * 64},
     ["spec.images.kubernetesRegistry", "images.kubernetesRegistry must not contain a tag or digest"]),
    ("digest-not-sha256", "KarmadaDeployment",
     {"spec.components.scheduler.image": {"digest": "md5:" + "a" * 32}},
     ["spec.components.scheduler.image.digest", "should match"]),
    ("digest-short", "KarmadaDeployment", {"spec.components.scheduler.image": {"digest": "sha256:abc"}},
     ["spec.components.scheduler.image.digest", "should match"]),
    # resource quantities
    ("negative-request", "KarmadaDeployment", {"spec.components.scheduler.resources": {"requests": {"cpu": "-100m"}}},
     ["spec.components.scheduler.resources.requests[cpu]", "must not be negative"]),
    ("negative-integer-limit", "KarmadaDeployment", {"spec.apiServer.resources": {"limits": {"cpu": -1}}},
     ["spec.apiServer.resources.limits[cpu]", "must not be negative"]),
    ("negative-storage-size", "KarmadaDeployment", {"spec.etcd.local.storage.size": "-8Gi"},
     ["spec.etcd.local.storage.size", "must not be negative"]),
    ("request-above-limit", "KarmadaDeployment",
     {"spec.components.controllerManager.resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}},
     ["spec.components.controllerManager.resources.requests", "requests must not exceed resources.limits"]),
    ("etcd-memory-request-above-limit", "KarmadaDeployment",
     {"spec.etcd.local.resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1000Mi"}}},
     ["spec.etcd.local.resources.requests", "requests must not exceed resources.limits"]),
    # etcd hostPath storage on the node's system directories
    *[(f"hostpath-{name}", "KarmadaDeployment",
       {"spec.etcd.local.storage": {"type": "HostPath", "hostPath": path}},
       ["spec.etcd.local.storage.hostPath", "must not be / or a system directory"])
      for name, path in [("root", "/"), ("etc", "/etc"), ("etc-child", "/etc/kubernetes/etcd"),
                         ("proc", "/proc/1"), ("sys", "/sys/"), ("dev", "/dev/shm"), ("boot", "/boot/x"),
                         ("var-run", "/var/run"), ("usr", "/usr/local/etcd"), ("var", "/var/"),
                         ("double-slash", "//etc")]],
    ("hostpath-dotdot", "KarmadaDeployment",
     {"spec.etcd.local.storage": {"type": "HostPath", "hostPath": "/var/lib/../../etc"}},
     ["spec.etcd.local.storage.hostPath", "must not contain '.' or '..' segments"]),
    # EtcdBackup schedule: cron fields within their ranges
    *[(f"backup-schedule-{name}", "EtcdBackup", {"spec.schedule": cron},
       ["spec.schedule", "must be @hourly, @daily", "minute 0-59"])
      for name, cron in [("minute-60", "60 * * * *"), ("hour-24", "0 24 * * *"), ("dom-0", "0 0 0 * *"),
                         ("dom-32", "0 0 32 * *"), ("month-13", "0 0 1 13 *"), ("dow-7", "0 0 * * 7"),
                         ("bad-name", "0 0 * JANUARY *"), ("step-0", "*/0 * * * *"),
                         ("six-fields", "0 0 * * * *"), ("every", "@every 1h"), ("letters", "a b c d e")]],
    # paths inside backup volumes stay inside them
    ("backup-subpath-dotdot", "EtcdBackup", {"spec.storage.pvc.subPath": "../other-team"},
     ["spec.storage.pvc.subPath", "must not contain '..' segments"]),
    ("backup-subpath-inner-dotdot", "EtcdBackup", {"spec.storage.pvc.subPath": "karmada/../../x"},
     ["spec.storage.pvc.subPath", "must not contain '..' segments"]),
    ("backup-subpath-absolute", "EtcdBackup", {"spec.storage.pvc.subPath": "/srv/backups"},
     ["spec.storage.pvc.subPath", "must be relative to the volume"]),
    # EtcdBackup time zone: an IANA name, nothing else (the operator also checks the zone database)
    *[(f"backup-timezone-{name}", "EtcdBackup", {"spec.schedule": "0 2 * * *", "spec.timeZone": tz},
       ["spec.timeZone", "should match"])
      for name, tz in [("path", "/etc/localtime"), ("dotdot", "../../etc/passwd"), ("space", "Europe/Berlin x"),
                       ("semicolon", "UTC;date"), ("empty-segment", "Europe//Berlin"), ("trailing-slash", "UTC/")]],
    ("backup-timezone-too-long", "EtcdBackup", {"spec.timeZone": "A" * 65},
     ["spec.timeZone", "may not be more than 64"]),
    ("backup-s3-ca-without-name", "EtcdBackup",
     {"spec.storage": {"s3": {"endpoint": "https://s3.example", "bucket": "bkt", "credentialsSecretRef": {"name": "c"},
                              "caSecretRef": {"key": "ca.pem"}}}},
     ["spec.storage.s3.caSecretRef.name", "Required value"]),
    ("restore-location-dotdot", "EtcdRestore", {"spec.source": {"location": "pvc://etcd-backups/../x.db"}},
     ["spec.source.location", "must not contain '..' path segments"]),
    ("restore-s3-location-dotdot", "EtcdRestore", {"spec.source": {"location": "s3://bucket/a/../../b.db"}},
     ["spec.source.location", "must not contain '..' path segments"]),
    ("restore-s3-location-without-connection", "EtcdRestore", {"spec.source": {"location": "s3://bucket/dc1/x.db"}},
     ["spec.source.location", "needs source.s3"]),
    ("restore-s3-connection-with-pvc-location", "EtcdRestore",
     {"spec.source": {"location": "pvc://etcd-backups/x.db",
                      "s3": {"endpoint": "https://s3.example", "credentialsSecretRef": {"name": "c"}}}},
     ["spec.source.s3", "goes with an s3:// source.location"]),
    ("restore-s3-connection-without-credentials", "EtcdRestore",
     {"spec.source": {"location": "s3://bucket/x.db", "s3": {"endpoint": "https://s3.example"}}},
     ["spec.source.s3.credentialsSecretRef", "Required value"]),
    ("restore-pki-without-name", "EtcdRestore", {"spec.pki": {"secretRef": {}}},
     ["spec.pki.secretRef.name", "Required value"]),
    # what a careless user could still send before (issue "production-grade", item 8)
    ("member-empty-zone", "KarmadaDeployment", {"spec.members.0.zones": ["az1", ""]},
     ["spec.members[0].zones[1]", "at least 1 chars long"]),
    *[(f"etcd-storage-size-{name}", "KarmadaDeployment", {"spec.etcd.local.storage.size": size},
       ["spec.etcd.local.storage.size", "must be greater than zero"])
      for name, size in [("zero", 0), ("zero-string", "0"), ("zero-gi", "0Gi")]],
    # etcd's automatic defragmentation (docs/etcd.md)
    ("defragmentation-policy", "KarmadaDeployment", {"spec.etcd.local.defragmentation.policy": "Sometimes"},
     ["spec.etcd.local.defragmentation.policy", "Unsupported value", '"Auto"', '"Off"']),
    *[(f"defragmentation-percent-{value}", "KarmadaDeployment",
       {"spec.etcd.local.defragmentation.fragmentationPercent": value},
       ["spec.etcd.local.defragmentation.fragmentationPercent", bound])
      for value, bound in [(0, "should be greater than or equal to 1"), (100, "should be less than or equal to 99")]],
    *[(f"defragmentation-min-db-size-{name}", "KarmadaDeployment",
       {"spec.etcd.local.defragmentation.minDbSize": size}, ["spec.etcd.local.defragmentation.minDbSize", why])
      for name, size, why in [("zero", "0", "must be greater than zero"), ("negative", "-1Gi", "must not be negative"),
                              ("words", "lots", "should match")]],
    *[(f"defragmentation-schedule-{name}", "KarmadaDeployment", {"spec.etcd.local.defragmentation.schedule": cron},
       ["spec.etcd.local.defragmentation.schedule", "must be @hourly, @daily", "minute 0-59"])
      for name, cron in [("hour-24", "0 24 * * *"), ("six-fields", "0 0 * * * *"), ("every", "@every 1h")]],
    ("defragmentation-time-zone", "KarmadaDeployment", {"spec.etcd.local.defragmentation.timeZone": "not a zone"},
     ["spec.etcd.local.defragmentation.timeZone", "should match"]),
    # the audit log (docs/security.md#audit)
    ("encryption-without-secrets", "KarmadaDeployment", {"spec.apiServer.encryption": {"resources": ["configmaps"]}},
     ["spec.apiServer.encryption.resources", "must include secrets"]),
    ("encryption-kms-without-its-plugin", "KarmadaDeployment", {"spec.apiServer.encryption": {"provider": "KMSv2"}},
     ["spec.apiServer.encryption.provider KMSv2 needs spec.apiServer.encryption.kms"]),
    ("encryption-kms-with-the-operators-rotation", "KarmadaDeployment",
     {"spec.apiServer.encryption": {"provider": "KMSv2", "kms": {"name": "vault", "image": "kms:v1"},
                                    "rotation": {"requestedAt": "2026-12-06T10:00:00Z"}}},
     ["spec.apiServer.encryption.rotation rotates the operator's own secretbox key"]),
    ("encryption-kms-name", "KarmadaDeployment",
     {"spec.apiServer.encryption": {"provider": "KMSv2", "kms": {"name": "Vault:1", "image": "kms:v1"}}},
     ["spec.apiServer.encryption.kms.name", "should match"]),
    ("encryption-kms-timeout", "KarmadaDeployment",
     {"spec.apiServer.encryption": {"provider": "KMSv2", "kms": {"name": "vault", "image": "kms:v1", "timeout": "3"}}},
     ["spec.apiServer.encryption.kms.timeout", "should match"]),
    ("encryption-provider", "KarmadaDeployment", {"spec.apiServer.encryption": {"provider": "aesgcm"}},
     ["spec.apiServer.encryption.provider", 'supported values: "Secretbox", "KMSv2"']),
    ("encryption-resource-name", "KarmadaDeployment",
     {"spec.apiServer.encryption": {"resources": ["secrets", "Config Maps"]}},
     ["spec.apiServer.encryption.resources[1]", "should match"]),
    ("audit-target", "KarmadaDeployment", {"spec.apiServer.audit": {"log": {"target": "Syslog"}}},
     ["spec.apiServer.audit.log.target", "Unsupported value", '"Stdout"', '"File"', '"Off"']),
    ("audit-file-limits-with-stdout", "KarmadaDeployment", {"spec.apiServer.audit": {"log": {"maxSizeMB": 10}}},
     ["spec.apiServer.audit.log", "apply to target File only"]),
    ("audit-file-size", "KarmadaDeployment",
     {"spec.apiServer.audit": {"log": {"target": "File", "maxSizeMB": 0}}},
     ["spec.apiServer.audit.log.maxSizeMB", "should be greater than or equal to 1"]),
    ("audit-off-without-webhook", "KarmadaDeployment", {"spec.apiServer.audit": {"log": {"target": "Off"}}},
     ["spec.apiServer.audit", "Off needs spec.apiServer.audit.webhook"]),
    ("audit-rule-level", "KarmadaDeployment",
     {"spec.apiServer.audit": {"policy": {"rules": [{"level": "Everything"}]}}},
     ["spec.apiServer.audit.policy.rules[0].level", "Unsupported value", '"Metadata"']),
    ("audit-rules-empty", "KarmadaDeployment", {"spec.apiServer.audit": {"policy": {"rules": []}}},
     ["spec.apiServer.audit.policy.rules", "should have at least 1 items"]),
    ("audit-webhook-mode", "KarmadaDeployment",
     {"spec.apiServer.audit": {"webhook": {"kubeconfigSecretRef": {"name": "w"}, "mode": "later"}}},
     ["spec.apiServer.audit.webhook.mode", "Unsupported value", '"batch"']),
    ("audit-webhook-no-secret", "KarmadaDeployment", {"spec.apiServer.audit": {"webhook": {"mode": "batch"}}},
     ["spec.apiServer.audit.webhook.kubeconfigSecretRef", "Required value"]),
    *[(f"backup-s3-bucket-{name}", "EtcdBackup",
       {"spec.storage": {"s3": {"endpoint": "https://s3.example", "bucket": bucket,
                                "credentialsSecretRef": {"name": "c"}}}},
       ["spec.storage.s3.bucket", "must be an S3 bucket name"])
      for name, bucket in [("dotdot", "team..backups"), ("dot-dash", "team.-backups"), ("dash-dot", "team-.b"),
                           ("ip", "192.168.1.10")]],
]


def _extra_args_path(key: str) -> str:
    return {"apiServer": "spec.apiServer", "etcd": "spec.etcd.local"}.get(key, f"spec.components.{key}")


# Every closed flag of every spec key, all at once: the message names the field and each flag.
BROKEN += [(f"closed-extra-args-{key}", "KarmadaDeployment",
            {f"{_extra_args_path(key)}.extraArgs": {"v": "4", **{flag: "x" for flag in flags}}},
            [f"{_extra_args_path(key)}.extraArgs", f"{_extra_args_path(key)}.extraArgs must not set",
             *flags, "the operator sets these itself"])
           for key, flags in CLOSED_ARGS.items()]

# The valid counterparts of the rules above: still accepted.
ACCEPTED = [
    ("short-lived-leaves", "KarmadaDeployment",
     {"spec.certificates.leafValidity": "20m", "spec.certificates.renewBefore": "15m"}),
    ("duration-window-with-day-leaves", "KarmadaDeployment", {"spec.certificates.renewBefore": "1h30m"}),
    ("s3-bucket-with-dots", "EtcdBackup",
     {"spec.storage": {"s3": {"endpoint": "https://s3.example", "bucket": "team.backups-1",
                              "credentialsSecretRef": {"name": "c"}}}}),
    ("etcd-storage-size-small", "KarmadaDeployment", {"spec.etcd.local.storage.size": "1Mi"}),
    ("defragmentation-settings", "KarmadaDeployment",
     {"spec.etcd.local.defragmentation": {"policy": "Off", "fragmentationPercent": 99, "minDbSize": 1048576,
                                          "schedule": "30 2 * * SUN", "timeZone": "Europe/Berlin"}}),
    ("audit-file-webhook-own-policy", "KarmadaDeployment", {"spec.apiServer.audit": {
        "log": {"target": "File", "maxSizeMB": 10, "maxBackups": 2, "maxAgeDays": 0},
        "webhook": {"kubeconfigSecretRef": {"name": "audit-sink"}, "mode": "blocking"},
        "policy": {"omitStages": ["RequestReceived"], "rules": [
            {"level": "RequestResponse", "resources": [{"group": "policy.karmada.io"}], "verbs": ["create"]},
            {"level": "Metadata", "omitStages": ["ResponseStarted"]}]}}}),
    ("audit-webhook-only", "KarmadaDeployment", {"spec.apiServer.audit": {
        "log": {"target": "Off"}, "webhook": {"kubeconfigSecretRef": {"name": "audit-sink", "key": "config"}}}}),
    ("audit-off", "KarmadaDeployment", {"spec.apiServer.audit": {"enabled": False, "log": {"target": "Off"}}}),
    ("open-extra-args", "KarmadaDeployment",
     {f"{_extra_args_path(key)}.extraArgs": {"v": "4", "kube-api-qps": "50"} for key in CLOSED_ARGS}),
    ("labels", "KarmadaDeployment",
     {"spec.globals.labels": {"app.kubernetes.io/part-of": "karmada", "example.com/team": "a-b_c.d", "empty": "",
                              "x" * 63: "v" * 63, ("a" * 60 + ".") * 4 + "abcdefghi/n": "1"},
      "spec.members.0.labels": {"topology.example.com/zone": "az1"}}),
    ("registry-with-port-and-digest", "KarmadaDeployment", {
        "spec.components.scheduler.image": {"registry": "reg.example:5000/mirror/karmada",
                                            "repository": "team/karmada-scheduler", "tag": "v1.18.2",
                                            "digest": "sha256:" + "0123456789abcdef" * 4},
        "spec.images.karmadaRegistry": "localhost:5000/karmada"}),
    ("request-equal-to-limit", "KarmadaDeployment", {
        "spec.components.scheduler.resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                "limits": {"cpu": "1000m", "memory": "1024Mi"}},
        "spec.apiServer.resources": {"requests": {"cpu": 0, "memory": "512Mi"}, "limits": {"cpu": 2}},
        "spec.etcd.local.resources": {"requests": {"cpu": "100m"}}}),
    *[(f"hostpath-{name}", "KarmadaDeployment", {"spec.etcd.local.storage": {"type": "HostPath", "hostPath": path}})
      for name, path in [("var-lib", "/var/lib/etcd-data"), ("under-root-home", "/root/etcd"), ("etcd", "/etcd")]],
    *[(f"schedule-{name}", "EtcdBackup", {"spec.schedule": cron})
      for name, cron in [("ranges-steps-lists", "*/15 0-6,22-23/2 1,15 JAN-MAR mon-fri"),
                         ("bounds", "59 23 31 12 6"), ("start-step", "5/10 * * * SUN"), ("weekly", "@weekly"),
                         ("annually", "@annually"), ("quarterly", "0 0 1 */3 *")]],
    *[(f"backup-timezone-{tz.replace('/', '-').replace('+', 'plus').lower()}", "EtcdBackup",
       {"spec.schedule": "30 2 * * *", "spec.timeZone": tz})
      for tz in ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "America/Port-au-Prince"]],
    ("restore-to-a-revision", "EtcdRestore", {"spec.source.revision": 4711}),
    ("restore-to-a-time", "EtcdRestore", {"spec.source.time": "2026-03-01T02:00:00Z"}),
    ("restore-a-point-from-a-location", "EtcdRestore",
     {"spec.source": {"location": "pvc://etcd-backups/karmada", "backupName": "nightly", "revision": 5}}),
    ("backup-continuous", "EtcdBackup", {"spec.schedule": _DELETE, "spec.continuous": {"deltaInterval": "20s"}}),
    ("backup-continuous-defaults", "EtcdBackup", {"spec.schedule": _DELETE, "spec.continuous": {}}),
    ("backup-continuous-compound-interval", "EtcdBackup",
     {"spec.schedule": _DELETE, "spec.continuous": {"deltaInterval": "1m30s", "fullAfterDeltas": 100}}),
    ("backup-s3-with-ca", "EtcdBackup",
     {"spec.storage": {"s3": {"endpoint": "https://s3.example", "bucket": "bkt", "credentialsSecretRef": {"name": "c"},
                              "caSecretRef": {"name": "s3-ca"}}}}),
    ("subpath-with-dots-in-names", "EtcdBackup", {"spec.storage.pvc.subPath": "karmada/..backups/v1..2"}),
    ("restore-location", "EtcdRestore", {"spec.source": {"location": "pvc://etcd-backups/karmada/x..db"}}),
    ("restore-s3-location", "EtcdRestore",
     {"spec.source": {"location": "s3://bucket/dc1/x.db",
                      "s3": {"endpoint": "https://s3.example", "credentialsSecretRef": {"name": "c"}}}}),
    ("restore-with-source-pki", "EtcdRestore", {"spec.pki": {"secretRef": {"name": "source-pki"}}}),
    ("encryption-kms-v2", "KarmadaDeployment",
     {"spec.apiServer.encryption": {"provider": "KMSv2", "kms": {
         "name": "vault", "image": "registry.example/vault-kms:v1", "args": ["--listen=/var/run/kmsplugin/kms.sock"],
         "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "kms-token", "key": "token"}}}],
         "timeout": "5s", "resources": {"requests": {"cpu": "20m"}}}}}),
    ("force-renew-leaves", "KarmadaDeployment",
     {"spec.certificates.forceRenew": {"issuedBefore": "2026-12-02T08:00:00Z"}}),
    ("ca-rotation", "KarmadaDeployment",
     {"spec.certificates.caRotation": {"ca": "karmada", "requestedAt": "2026-12-02T08:00:00Z"}}),
    ("ca-rotation-of-etcd-with-a-byo-karmada-ca", "KarmadaDeployment",
     {"spec.certificates.caSecretRef": {"name": "my-ca"},
      "spec.certificates.caRotation": {"ca": "etcd", "requestedAt": "2026-12-02T08:00:00+01:00"}}),
    ("force-renew-listed", "KarmadaDeployment",
     {"spec.certificates.forceRenew": {"issuedBefore": "2026-12-02T08:00:00Z",
                                       "certificates": ["admin", "etcd/server", "karmada-controller-manager-client"]}}),
]


@pytest.mark.parametrize("kind,changes", [a[1:] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_valid_counterpart_is_accepted(apiserver, kind, changes):
    obj = copy.deepcopy(load_sample(kind))
    for path, value in changes.items():
        _set(obj, path, value)
    result = dry_run(apiserver, obj)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("kind,changes,expected", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_variant_is_rejected_with_a_clear_message(apiserver, kind, changes, expected):
    obj = copy.deepcopy(load_sample(kind))
    for path, value in changes.items():
        _set(obj, path, value)
    result = dry_run(apiserver, obj)
    assert result.returncode != 0, f"accepted but should not be:\n{yaml.safe_dump(obj)}"
    for text in expected:
        assert text in result.stderr, f"missing {text!r} in the error the user sees:\n{result.stderr}"


EXTERNAL_ETCD = {"external": {"endpoints": ["https://etcd.example:2379"], "tlsSecretRef": {"name": "etcd-tls"}}}

# (id, etcd at creation, change applied to the stored spec, substrings the user must see or None: accepted)
UPDATES = [
    ("etcd-replicas-even", None, lambda s: s["etcd"]["local"].update(replicas=4),
     ["spec.etcd.local.replicas", 'supported values: "1", "3", "5", "7"']),
    ("etcd-storage-type", None, lambda s: s["etcd"]["local"]["storage"].update(type="EmptyDir"),
     ["spec.etcd.local.storage.type", "cannot change after creation"]),
    ("etcd-local-to-external", None, lambda s: s.update(etcd=copy.deepcopy(EXTERNAL_ETCD)),
     ["spec.etcd", "spec.etcd.local and spec.etcd.external cannot be switched after creation"]),
    ("etcd-external-to-local", EXTERNAL_ETCD, lambda s: s.update(etcd={"local": {"replicas": 3}}),
     ["spec.etcd", "spec.etcd.local and spec.etcd.external cannot be switched after creation"]),
    # what may still change (the operator scales etcd one member at a time)
    ("etcd-replicas", None, lambda s: s["etcd"]["local"].update(replicas=5), None),
    ("etcd-resources-and-apiserver-replicas", None,
     lambda s: (s["etcd"]["local"].update(resources={"requests": {"cpu": "200m"}}), s["apiServer"].update(replicas=2)),
     None),
    ("etcd-storage-size-and-version", None,
     lambda s: s["etcd"]["local"].update(version="3.6.7-0", storage={"type": "PersistentVolumeClaim", "size": "16Gi"}),
     None),
    # encryption at rest: a resource once encrypted stays listed; more may be added
    ("encryption-resource-added", None,
     lambda s: s["apiServer"].update(encryption={"resources": ["secrets", "configmaps"]}), None),
    ("external-etcd-endpoints", EXTERNAL_ETCD,
     lambda s: s["etcd"]["external"].update(endpoints=["https://etcd-a.example:2379", "https://etcd-b.example:2379"]),
     None),
]


@pytest.mark.parametrize("name,etcd,change,expected", UPDATES, ids=[u[0] for u in UPDATES])
def test_update_rules_refuse_what_cannot_change_after_creation(apiserver, name, etcd, change, expected):
    obj = copy.deepcopy(load_sample("KarmadaDeployment"))
    obj["metadata"]["name"] = f"update-{name}"
    if etcd is not None:
        obj["spec"]["etcd"] = copy.deepcopy(etcd)
    stored = yaml.safe_load(apiserver.kubectl("create", "-o", "yaml", "-f", "-", input_text=yaml.safe_dump(obj)).stdout)
    try:
        change(stored["spec"])
        result = apiserver.kubectl("replace", "--dry-run=server", "-o", "yaml", "-f", "-",
                                   input_text=yaml.safe_dump(stored), check=False)
        if expected is None:
            assert result.returncode == 0, result.stderr
            return
        assert result.returncode != 0, f"update accepted but should not be:\n{yaml.safe_dump(stored['spec'])}"
        for text in expected:
            assert text in result.stderr, f"missing {text!r} in the error the user sees:\n{result.stderr}"
    finally:
        apiserver.kubectl("delete", "karmadadeployment", obj["metadata"]["name"], "-n", "karmada-system")


def test_an_encrypted_resource_cannot_be_removed_from_the_list(apiserver):
    obj = copy.deepcopy(load_sample("KarmadaDeployment"))
    obj["metadata"]["name"] = "update-encryption-resources"
    obj["spec"]["apiServer"]["encryption"] = {"resources": ["secrets", "configmaps"]}
    stored = yaml.safe_load(apiserver.kubectl("create", "-o", "yaml", "-f", "-", input_text=yaml.safe_dump(obj)).stdout)
    try:
        stored["spec"]["apiServer"]["encryption"]["resources"] = ["secrets"]
        result = apiserver.kubectl("replace", "--dry-run=server", "-o", "yaml", "-f", "-",
                                   input_text=yaml.safe_dump(stored), check=False)
        assert result.returncode != 0
        assert "spec.apiServer.encryption.resources: a resource cannot be removed" in result.stderr, result.stderr
    finally:
        apiserver.kubectl("delete", "karmadadeployment", obj["metadata"]["name"], "-n", "karmada-system")


def test_the_kms_plugins_name_cannot_change_and_kms_may_go_back_to_a_reader_before_it_goes(apiserver):
    obj = copy.deepcopy(load_sample("KarmadaDeployment"))
    obj["metadata"]["name"] = "update-encryption-kms"
    obj["spec"]["apiServer"]["encryption"] = {"provider": "KMSv2", "kms": {"name": "vault", "image": "kms:v1"}}
    stored = yaml.safe_load(apiserver.kubectl("create", "-o", "yaml", "-f", "-", input_text=yaml.safe_dump(obj)).stdout)
    try:
        assert stored["spec"]["apiServer"]["encryption"]["kms"]["timeout"] == "3s"
        renamed = copy.deepcopy(stored)
        renamed["spec"]["apiServer"]["encryption"]["kms"]["name"] = "vault-2"
        result = apiserver.kubectl("replace", "--dry-run=server", "-o", "yaml", "-f", "-",
                                   input_text=yaml.safe_dump(renamed), check=False)
        assert result.returncode != 0
        assert "spec.apiServer.encryption.kms.name cannot change" in result.stderr, result.stderr
        back = copy.deepcopy(stored)
        back["spec"]["apiServer"]["encryption"]["provider"] = "Secretbox"
        result = apiserver.kubectl("replace", "--dry-run=server", "-o", "yaml", "-f", "-",
                                   input_text=yaml.safe_dump(back), check=False)
        assert result.returncode == 0, result.stderr
        # leaving KMSv2 and dropping the plugin in the same edit: what it stored would be unreadable
        dropped = copy.deepcopy(back)
        del dropped["spec"]["apiServer"]["encryption"]["kms"]
        result = apiserver.kubectl("replace", "--dry-run=server", "-o", "yaml", "-f", "-",
                                   input_text=yaml.safe_dump(dropped), check=False)
        assert result.returncode != 0
        assert ("spec.apiServer.encryption.kms cannot be removed in the edit that leaves provider KMSv2"
                in result.stderr), result.stderr
        # from Secretbox (the plugin a reader), the CRD lets it go: the operator checks status first
        reader = yaml.safe_load(apiserver.kubectl("replace", "-o", "yaml", "-f", "-",
                                                  input_text=yaml.safe_dump(back)).stdout)
        del reader["spec"]["apiServer"]["encryption"]["kms"]
        result = apiserver.kubectl("replace", "--dry-run=server", "-o", "yaml", "-f", "-",
                                   input_text=yaml.safe_dump(reader), check=False)
        assert result.returncode == 0, result.stderr
    finally:
        apiserver.kubectl("delete", "karmadadeployment", obj["metadata"]["name"], "-n", "karmada-system")
