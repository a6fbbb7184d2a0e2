"""The component registry: every Karmada control-plane component, defined once.

Everything else reads this module: the CRD schema (hack/crdgen: one spec.components key per
entry), the plan (karmada_plan: names, images, commands, flags, mounts, ports, probes, install
order), the PKI set (karmada_pki: client certificates, kubeconfigs and serving certificates),
the templates (component.yaml.j2 renders ports and probes from here, with no per-component
branches), the Karmada resources step (the APIServices) and the status (component names).

A component is plain data. Default flags are format strings with these placeholders, filled in
by the plan: ``{name}`` (the KarmadaDeployment), ``{pki}`` (the PKI mount), ``{kubeconfig}``
(the component's kubeconfig file), ``{binary}`` and ``{port}`` (the serving port). A component
that is an etcd client also gets the etcd flags (``--etcd-servers`` and its TLS files).

The versions the operator installs by default and the URL of Karmada's CRD tarball are here
too: one home for each (tests/unit/test_karmada_components.py checks hack/versions.env agrees).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Defaults of spec.karmadaVersion, spec.kubernetesVersion and the etcd image tag (the CRD's
# defaults are generated from these). hack/versions.env pins the same for the test bed.
DEFAULT_KARMADA_VERSION = "v1.18.2"
DEFAULT_KUBERNETES_VERSION = "v1.34.12"
DEFAULT_ETCD_TAG = "3.6.6-0"
# Karmada's CRDs: the release asset of a version ({version} is replaced), unless spec.crds.url.
CRDS_URL_TEMPLATE = "https://github.com/karmada-io/karmada/releases/download/{version}/crds.tar.gz"
DEFAULT_KARMADA_REGISTRY = "docker.io/karmada"
DEFAULT_KUBERNETES_REGISTRY = "registry.k8s.io"

PKI_DIR = "/etc/kubernetes/pki"
KUBECONFIG_DIR = "/etc/kubernetes/config"
KUBECONFIG_FILE = f"{KUBECONFIG_DIR}/kubeconfig"
# Where a component with ``serving_dir`` finds tls.crt and tls.key (controller-runtime's cert-dir).
SERVING_DIR = "/var/serving-cert"
# The user of the admin kubeconfig (its client certificate's CN, in system:masters); Karmada's
# cluster proxy RBAC names it, so members impersonate it through clusters/proxy.
ADMIN_USER = "karmada-admin"


@dataclass(frozen=True)
class Probe:
    """An HTTPS probe of the component's container."""

    kind: str  # readinessProbe | livenessProbe
    path: str
    port: int
    period: int = 10
    initial_delay: int = 0
    timeout: int = 0
    failure_threshold: int = 0

    def render(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"httpGet": {"path": self.path, "port": self.port, "scheme": "HTTPS"},
                                "periodSeconds": self.period}
        for key, value in (("initialDelaySeconds", self.initial_delay), ("timeoutSeconds", self.timeout),
                           ("failureThreshold", self.failure_threshold)):
            if value:
                spec[key] = value
        return {"type": self.kind, "spec": spec}


@dataclass(frozen=True)
class APIService:
    """An aggregated API a component serves through karmada-apiserver."""

    group: str
    version: str
    group_priority_minimum: int
    version_priority: int

    @property
    def name(self) -> str:
        return f"{self.version}.{self.group}"


@dataclass(frozen=True)
class Component:
    """One Deployment of the control plane (karmada-apiserver and etcd have their own steps)."""

    key: str  # spec.components key
    binary: str  # container and label name; stem of its certificates and kubeconfig
    suffix: str  # Deployment name: <KarmadaDeployment name>-<suffix>
    description: str  # for the CRD schema
    order: int  # install (and upgrade) order; karmada-apiserver is 10, etcd 0
    step: str  # install step that applies it: "aggregated" (before Karmada's CRDs) or "components"
    args: dict[str, str]  # default flags (format strings, see the module docstring)
    optional: bool = False
    installable: bool = True  # False: in the API, refused until the operator installs it
    image_source: str = "karmada"  # karmada | kubernetes (registry and default version)
    repository: str = ""  # image repository; default: the binary
    command: tuple[str, ...] = ()  # default: /bin/<binary>
    pki_files: tuple[str, ...] = ()  # files of the PKI Secret it reads (besides its serving pair)
    serving: bool = False  # has a serving certificate from the Karmada CA, behind a Service
    serving_dir: bool = False  # serving pair mounted as tls.crt/tls.key in SERVING_DIR
    port: int = 0  # serving port of the container (the Service's targetPort; Service port 443)
    probes: tuple[Probe, ...] = ()
    etcd_client: bool = False  # keeps objects in etcd itself (etcd flags and client certificate)
    api_services: tuple[APIService, ...] = ()
    # Flags extraArgs may not set: they would weaken security or break what the operator wires.
    closed_args: dict[str, str] = field(default_factory=dict)
    # The check through karmada-apiserver after a rollout: the leader-election Lease
    # ("namespace/name", the namespace from --leader-elect-resource-namespace when set) a ready
    # pod must hold, or an admission dry-run (the webhook must answer).
    lease: str = ""
    admission_probe: bool = False
    # Its default resources.requests (spec.components.<key>.resources replaces them): what it used
    # on the test bed, so no pod of the plane is BestEffort (MEASURED below).
    requests: dict[str, str] = field(default_factory=dict)
    # Writes the audit log spec.apiServer.audit asks for (its policy, log and webhook: plan/audit.py).
    audited: bool = False

    @property
    def image_repository(self) -> str:
        return self.repository or self.binary

    @property
    def default_command(self) -> list[str]:
        return list(self.command) or [f"/bin/{self.binary}"]


def _ready(path: str, port: int) -> Probe:
    """A readiness probe each second: a new pod counts as ready (and the rollout's gate passes)
    within a second of its server answering, not up to a period later; 15 failures in a row,
    the same 15 s as 3 at a 5 s period, mark a running pod unready (docs/performance.md)."""
    return Probe("readinessProbe", path, port, period=1, failure_threshold=15)


_KUBECONFIG_ARGS = {"kubeconfig": "{kubeconfig}"}
# Aggregated API servers (karmada-aggregated-apiserver, karmada-search, karmada-metrics-adapter):
# TLS from the Karmada CA, authentication and authorization delegated to karmada-apiserver.
_AGGREGATED_ARGS = {
    **_KUBECONFIG_ARGS,
    "authentication-kubeconfig": "{kubeconfig}",
    "authorization-kubeconfig": "{kubeconfig}",
    "tls-cert-file": "{pki}/{binary}.crt",
    "tls-private-key-file": "{pki}/{binary}.key",
    "tls-min-version": "VersionTLS12",
    "audit-log-path": "-",
    "bind-address": "$(POD_IP)",
    "secure-port": "{port}",
    "v": "2",
}
_CONTROLLER_ARGS = {
    **_KUBECONFIG_ARGS,
    "metrics-bind-address": "$(POD_IP):8080",
    "leader-elect-resource-namespace": "karmada-system",
    "v": "2",
}
# Why each closed flag is closed (docs/karmadadeployment.md lists them all; a unit test checks).
_KUBECONFIG = "the operator writes the component's kubeconfig; another one could point it at a " \
              "different API server or credentials"
_TLS_CERT = "serving certificate the operator issues from its CA and rotates"
_TLS_KEY = "key of the serving certificate the operator issues"
_TLS_MIN = "the operator pins TLS 1.2 as the minimum; a lower version weakens every connection"
_TLS_CIPHERS = "could enable weak cipher suites; Go's defaults are the safe set"
_ETCD_CA = "CA that authenticates etcd (the operator's etcd CA or the external etcd's)"
_ETCD_CERT = "client certificate for etcd, issued by the operator"
_ETCD_KEY = "key of the etcd client certificate"
_CLIENT_CA = "CA that authenticates client certificates; another CA would let other clients in"
_AUTHN_KUBECONFIG = "delegated authentication must go to karmada-apiserver with the operator's credentials"
_AUTHZ_KUBECONFIG = "delegated authorization must go to karmada-apiserver with the operator's credentials"

# The flags spec.apiServer.audit owns (plan/audit.py), for karmada-apiserver and
# karmada-aggregated-apiserver; the other audit-* flags stay open for tuning (batch sizes,
# truncation, the log's mode).
AUDIT_CLOSED_ARGS = {
    "audit-policy-file": "the operator writes the audit policy (spec.apiServer.audit.policy)",
    "audit-log-path": "set by spec.apiServer.audit.log.target",
    "audit-webhook-config-file": "set by spec.apiServer.audit.webhook.kubeconfigSecretRef",
}
_CLOSED_AGGREGATED = {
    "kubeconfig": _KUBECONFIG,
    "authentication-kubeconfig": _AUTHN_KUBECONFIG,
    "authorization-kubeconfig": _AUTHZ_KUBECONFIG,
    "client-ca-file": _CLIENT_CA,
    "tls-cert-file": _TLS_CERT,
    "tls-private-key-file": _TLS_KEY,
    "tls-min-version": _TLS_MIN,
    "tls-cipher-suites": _TLS_CIPHERS,
}
_CLOSED_ETCD_CLIENT = {
    "etcd-cafile": _ETCD_CA,
    "etcd-certfile": _ETCD_CERT,
    "etcd-keyfile": _ETCD_KEY,
    "etcd-servers": "the operator's etcd; another one would hold Karmada's data outside the operator's TLS, "
                    "scaling, backups and restores",
    "etcd-servers-overrides": "would keep some resources in another etcd, outside the operator's TLS, scaling, "
                              "backups and restores",
    "etcd-prefix": "where Karmada's data lives in etcd (/registry): backups, the restore's verification and "
                   "the other etcd clients read it there",
}


# The port a serving component listens on in its pod: above 1024, which a process without
# capabilities may bind (Pod Security "restricted"); its Service keeps port 443.
SERVING_PORT = 8443

# Default requests, from what each workload used on the 2-core test bed (the kubelet's summary
# API every 10 s: CPU over the interval, working-set memory), rounded up from the median: a
# Karmada with two kwok members, search, metrics-adapter and descheduler enabled, at rest, and
# one under a writer of about 6 creates/s (docs/performance.md#sizing has the figures).
# karmada-scheduler-estimator cannot be installed yet: the smallest default, not measured.
APISERVER_REQUESTS = {"cpu": "50m", "memory": "256Mi"}
AGENT_REQUESTS = {"cpu": "5m", "memory": "24Mi"}  # karmada-agent when the operator runs it on the host
# The user's KMS v2 plugin beside karmada-apiserver (spec.apiServer.encryption.kms): the bed's
# plugin (hack/testenv/kms-plugin) used under 1m CPU and 12 MiB at rest; a real one (Vault, a cloud
# KMS client) needs more, which kms.resources says.
KMS_PLUGIN_REQUESTS = {"cpu": "10m", "memory": "32Mi"}

REGISTRY: tuple[Component, ...] = (
    Component(
        key="aggregatedAPIServer", binary="karmada-aggregated-apiserver", suffix="aggregated-apiserver",
        requests={"cpu": "10m", "memory": "40Mi"},
        description="karmada-aggregated-apiserver", order=20, step="aggregated",
        args=dict(_AGGREGATED_ARGS), pki_files=("ca.crt",), serving=True, port=SERVING_PORT,
        probes=(_ready("/readyz", SERVING_PORT),),
        etcd_client=True, api_services=(APIService("cluster.karmada.io", "v1alpha1", 2000, 10),),
        audited=True, closed_args={**_CLOSED_AGGREGATED, **_CLOSED_ETCD_CLIENT, **AUDIT_CLOSED_ARGS}),
    Component(
        key="kubeControllerManager", binary="kube-controller-manager", suffix="kube-controller-manager",
        requests={"cpu": "10m", "memory": "32Mi"},
        description="kube-controller-manager (for karmada-apiserver)", order=30, step="components",
        image_source="kubernetes", command=("kube-controller-manager",),
        pki_files=("ca.crt", "ca-signer.crt", "ca.key", "sa.key"),
        probes=(Probe("livenessProbe", "/healthz", 10257, period=10, initial_delay=15, failure_threshold=8),),
        args={
            **_KUBECONFIG_ARGS,
            "authentication-kubeconfig": "{kubeconfig}",
            "authorization-kubeconfig": "{kubeconfig}",
            "bind-address": "0.0.0.0",
            "client-ca-file": "{pki}/ca.crt",
            "cluster-name": "{name}",
            # one certificate, the CA whose key is ca.key: ca.crt is a bundle during a CA rotation
            "cluster-signing-cert-file": "{pki}/ca-signer.crt",
            "cluster-signing-key-file": "{pki}/ca.key",
            # Only what a Karmada control plane needs: there are no nodes behind it.
            "controllers": "namespace,garbagecollector,serviceaccount-token,ttl-after-finished,bootstrapsigner,"
                           "csrcleaner,csrsigning,clusterrole-aggregation",
            "leader-elect": "true",
            "root-ca-file": "{pki}/ca.crt",
            "service-account-private-key-file": "{pki}/sa.key",
            "service-cluster-ip-range": "{service_cidr}",
            "use-service-account-credentials": "true",
            "v": "2",
        },
        closed_args={
            "kubeconfig": _KUBECONFIG,
            "cluster-signing-cert-file": "the CA that signs certificate requests is the operator's Karmada CA",
            "cluster-signing-key-file": "key of the CA that signs certificate requests",
            "service-account-private-key-file": "key that signs service account tokens; it must match "
                                                "karmada-apiserver's service-account-key-file",
            "root-ca-file": "CA put into service account token Secrets; it must be the Karmada CA",
            "use-service-account-credentials": "each controller runs with its own least-privilege service account",
        },
        lease="kube-system/kube-controller-manager"),
    Component(
        key="controllerManager", binary="karmada-controller-manager", suffix="controller-manager",
        requests={"cpu": "20m", "memory": "64Mi"},
        description="karmada-controller-manager", order=40, step="components",
        args={**_CONTROLLER_ARGS, "health-probe-bind-address": "$(POD_IP):10357",
              "cluster-status-update-frequency": "10s"},
        closed_args={"kubeconfig": _KUBECONFIG}, lease="karmada-system/karmada-controller-manager"),
    Component(
        key="scheduler", binary="karmada-scheduler", suffix="scheduler",
        requests={"cpu": "5m", "memory": "16Mi"},
        description="karmada-scheduler", order=50, step="components",
        args={**_CONTROLLER_ARGS, "health-probe-bind-address": "$(POD_IP):10351",
              "enable-scheduler-estimator": "false"},
        closed_args={"kubeconfig": _KUBECONFIG}, lease="karmada-system/karmada-scheduler"),
    Component(
        key="webhook", binary="karmada-webhook", suffix="webhook",
        requests={"cpu": "10m", "memory": "24Mi"},
        description="karmada-webhook", order=60, step="components",
        serving=True, serving_dir=True, port=SERVING_PORT,
        probes=(_ready("/readyz", SERVING_PORT),),
        args={**_KUBECONFIG_ARGS, "bind-address": "$(POD_IP)", "metrics-bind-address": "$(POD_IP):8080",
              "health-probe-bind-address": "$(POD_IP):8000", "secure-port": "{port}",
              "cert-dir": SERVING_DIR, "v": "2"},
        closed_args={"kubeconfig": _KUBECONFIG,
                     "cert-dir": "directory of the serving certificate the operator issues and mounts"},
        admission_probe=True),
    Component(
        key="descheduler", binary="karmada-descheduler", suffix="descheduler",
        requests={"cpu": "5m", "memory": "24Mi"},
        description="karmada-descheduler", order=70, step="components", optional=True,
        pki_files=("ca.crt",),
        args={**_CONTROLLER_ARGS, "health-probe-bind-address": "$(POD_IP):10358",
              "scheduler-estimator-ca-file": "{pki}/ca.crt"},
        closed_args={"kubeconfig": _KUBECONFIG}),
    Component(
        key="search", binary="karmada-search", suffix="search",
        requests={"cpu": "5m", "memory": "32Mi"},
        description="karmada-search", order=80, step="components", optional=True,
        pki_files=("ca.crt",), serving=True, port=SERVING_PORT, etcd_client=True,
        # No readiness probe: karmada-search turns ready only once it can list its own
        # ResourceRegistries through karmada-apiserver, which reaches it through this pod's
        # Service. The components step gates on its APIService being Available instead. Its
        # /livez fails for the same reason until then (its post-start hooks wait for that list):
        # a liveness probe giving up after three failures killed it after about a minute, and it
        # started over with an empty cache (seen as 503s and a cache that never filled). The
        # liveness probe allows five minutes of failures. Not a startup probe: the pod is not
        # Ready until a startup probe passes, so its Service would not reach it, and it would
        # never pass.
        probes=(Probe("livenessProbe", "/livez", SERVING_PORT, period=15, initial_delay=15, timeout=5,
                      failure_threshold=20),),
        args={**_AGGREGATED_ARGS, "client-ca-file": "{pki}/ca.crt"},
        api_services=(APIService("search.karmada.io", "v1alpha1", 2000, 10),),
        closed_args={**_CLOSED_AGGREGATED, **_CLOSED_ETCD_CLIENT}),
    Component(
        key="metricsAdapter", binary="karmada-metrics-adapter", suffix="metrics-adapter",
        requests={"cpu": "15m", "memory": "48Mi"},
        description="karmada-metrics-adapter", order=90, step="components", optional=True,
        pki_files=("ca.crt",), serving=True, port=SERVING_PORT,
        probes=(_ready("/readyz", SERVING_PORT),),
        args={**_AGGREGATED_ARGS, "client-ca-file": "{pki}/ca.crt", "metrics-bind-address": "$(POD_IP):8080"},
        api_services=(APIService("metrics.k8s.io", "v1beta1", 100, 200),
                      APIService("custom.metrics.k8s.io", "v1beta1", 100, 200),
                      APIService("custom.metrics.k8s.io", "v1beta2", 100, 200)),
        closed_args=dict(_CLOSED_AGGREGATED)),
    Component(
        key="schedulerEstimator", binary="karmada-scheduler-estimator", suffix="scheduler-estimator",
        requests={"cpu": "5m", "memory": "16Mi"},
        description="karmada-scheduler-estimator (one per member)", order=100, step="components",
        optional=True, installable=False, args={}),
)

# karmada-apiserver and etcd are not Deployments of this list (own templates and gates), but
# they have a place in the order and flags extraArgs may not touch.
APISERVER_ORDER = 10
ETCD_ORDER = 0
APISERVER_CLOSED_ARGS = {
    "authorization-mode": "the operator sets Node,RBAC; AlwaysAllow would give every client full access",
    "anonymous-auth": "anonymous requests are left to RBAC (which grants them only health and version "
                      "paths; the kubelet probes need those); the flag is not a knob here",
    "client-ca-file": _CLIENT_CA,
    "requestheader-client-ca-file": "front-proxy CA; another CA would let anyone assert a user via headers",
    "service-account-key-file": "public key that verifies service account tokens; another key accepts "
                                "forged tokens",
    "tls-cert-file": _TLS_CERT,
    "tls-private-key-file": _TLS_KEY,
    "tls-min-version": _TLS_MIN,
    "tls-cipher-suites": _TLS_CIPHERS,
    "proxy-client-cert-file": "front-proxy client certificate the operator issues (the aggregated APIs trust it)",
    "proxy-client-key-file": "key of the front-proxy client certificate",
    "service-account-signing-key-file": "key that signs service account tokens; the operator keeps it with the "
                                        "public key that verifies them",
    "secure-port": "the Service, the probes and every kubeconfig the operator writes use the operator's port",
    **_CLOSED_ETCD_CLIENT,
    **AUDIT_CLOSED_ARGS,
    "encryption-provider-config": "the operator writes the encryption configuration from spec.apiServer.encryption "
                                  "with the key it keeps in the PKI Secret",
}
ETCD_CLOSED_ARGS = {
    "client-cert-auth": "etcd clients must present a certificate from the etcd CA",
    "peer-client-cert-auth": "etcd peers must present a certificate from the etcd CA",
    "auto-tls": "self-signed client TLS would replace the operator's certificates",
    "peer-auto-tls": "self-signed peer TLS would replace the operator's certificates",
    "cert-file": "client-facing certificate the operator issues",
    "key-file": "key of the client-facing certificate",
    "trusted-ca-file": "CA that authenticates etcd clients",
    "peer-cert-file": "peer certificate the operator issues",
    "peer-key-file": "key of the peer certificate",
    "peer-trusted-ca-file": "CA that authenticates etcd peers",
    "initial-cluster": "the operator sets it per member through the bootstrap ConfigMap (scaling)",
    "initial-cluster-state": "the operator sets it per member through the bootstrap ConfigMap (scaling)",
    "initial-cluster-token": "the operator sets it once for the cluster; a member with another token is refused",
    "name": "each member's name is its pod's, which membership, scaling and replacement rely on",
    "data-dir": "the member's volume; a directory elsewhere would lose the member's data with its pod",
    "listen-client-urls": "the operator sets each member's URLs (TLS on the headless Service's names)",
    "advertise-client-urls": "the operator sets each member's URLs (TLS on the headless Service's names)",
    "listen-peer-urls": "the operator sets each member's URLs (TLS on the headless Service's names)",
    "initial-advertise-peer-urls": "the operator sets each member's URLs (TLS on the headless Service's names)",
    "quota-backend-bytes": "set by spec.etcd.local.quotaBackendBytes (the NOSPACE recovery and EtcdSpaceLow use it)",
}


# What the admission check of karmada-webhook creates, with dryRun (nothing is stored): a
# PropagationPolicy, which karmada-webhook validates and mutates.
ADMISSION_PROBE = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": "karmada-operator-admission-check", "namespace": "default"},
    "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "karmada-operator-check"}],
             "placement": {}},
}


def components(registry: tuple[Component, ...] | None = None) -> list[Component]:
    """The components in install order."""
    return sorted(registry if registry is not None else REGISTRY, key=lambda c: c.order)


def by_key(registry: tuple[Component, ...] | None = None) -> dict[str, Component]:
    return {c.key: c for c in components(registry)}


def by_binary(registry: tuple[Component, ...] | None = None) -> dict[str, Component]:
    return {c.binary: c for c in components(registry)}


def installable(registry: tuple[Component, ...] | None = None) -> list[Component]:
    return [c for c in components(registry) if c.installable]


def closed_args(registry: tuple[Component, ...] | None = None) -> dict[str, dict[str, str]]:
    """Flags extraArgs may not set, by the spec key that owns the extraArgs: ``apiServer``, ``etcd``
    (spec.etcd.local) and every installable component's key -> {flag: why it is closed}.

    hack/crdgen turns them into the CRD's CEL rules; the plan refuses them too (objects stored
    before the rule); docs/karmadadeployment.md explains each.
    """
    out = {"apiServer": dict(APISERVER_CLOSED_ARGS), "etcd": dict(ETCD_CLOSED_ARGS)}
    for comp in installable(registry):
        if comp.closed_args:
            out[comp.key] = dict(comp.closed_args)
    return out


def closed_args_used(key: str, extra: dict[str, str] | None) -> list[str]:
    """The flags in ``extra`` (the extraArgs of spec key ``key``) that are closed, sorted."""
    closed = closed_args().get(key) or {}
    return sorted(flag for flag in (extra or {}) if flag in closed)


def upgrade_order(registry: tuple[Component, ...] | None = None) -> list[str]:
    """spec keys in the order a full upgrade moves them: etcd, karmada-apiserver, then the components."""
    keyed = [(ETCD_ORDER, "etcd"), (APISERVER_ORDER, "apiServer")]
    keyed += [(c.order, c.key) for c in installable(registry)]
    return [key for _, key in sorted(keyed)]
