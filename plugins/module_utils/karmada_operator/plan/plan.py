"""Everything the install derives from a KarmadaDeployment, as one plain dictionary.

The roles render templates from this plan and never compute names, images or flags
themselves, so the whole install can be read (and tested) here: ``build_plan(cr)``
takes the custom resource as the API server returns it (defaults filled in) and returns
object names, images, command lines and pod settings for every component, in install
order. Nothing here talks to a cluster.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from karmada_operator import components as karmada_components
from karmada_operator.etcd import defragmentation
from karmada_operator.etcd import space as etcd_space
from karmada_operator.kube import ownership, pod_security
from karmada_operator.pki import encryption as karmada_encryption
from karmada_operator.pki.pki import ETCD_PEER_CN
from karmada_operator.plan import audit as karmada_audit

# Defaults and paths have their home in the registry module.
CRDS_URL_TEMPLATE = karmada_components.CRDS_URL_TEMPLATE
DEFAULT_ETCD_TAG = karmada_components.DEFAULT_ETCD_TAG
# spec.etcd.local.resources unset: kubeadm's requests for its etcd. Without a request etcd is
# BestEffort, the lowest CPU weight on the node: any busy pod (a backup Job, a controller)
# starves it, and every Karmada request waits on it.
DEFAULT_ETCD_RESOURCES = {"requests": {"cpu": "100m", "memory": "100Mi"}}
DEFAULT_KARMADA_REGISTRY = karmada_components.DEFAULT_KARMADA_REGISTRY
DEFAULT_KARMADA_VERSION = karmada_components.DEFAULT_KARMADA_VERSION
DEFAULT_KUBERNETES_REGISTRY = karmada_components.DEFAULT_KUBERNETES_REGISTRY
DEFAULT_KUBERNETES_VERSION = karmada_components.DEFAULT_KUBERNETES_VERSION
KUBECONFIG_DIR = karmada_components.KUBECONFIG_DIR
KUBECONFIG_FILE = karmada_components.KUBECONFIG_FILE
PKI_DIR = karmada_components.PKI_DIR
SERVING_DIR = karmada_components.SERVING_DIR
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
ETCD_METRICS_PORT = 2381
APISERVER_PORT = 5443
# Inside karmada-apiserver (the Karmada "cluster"), not the host cluster.
KARMADA_SERVICE_CIDR = "10.96.0.0/12"
ETCD_PKI_DIR = f"{PKI_DIR}/etcd"
# The largest local etcd (spec.etcd.local.replicas is 1, 3, 5 or 7).
ETCD_MAX_MEMBERS = 7


class PlanError(ValueError):
    """A spec the operator cannot act on; ``field`` names the spec path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _image(registry: str, repository: str, tag: str, override: dict[str, Any] | None) -> str:
    """registry/repository:tag, or registry/repository@digest when the override pins a digest."""
    override = override or {}
    name = f"{override.get('registry') or registry}/{override.get('repository') or repository}"
    if override.get("digest"):
        return f"{name}@{override['digest']}"
    return f"{name}:{override.get('tag') or tag}"


def _image_version(override: dict[str, Any] | None, default: str) -> str:
    """What status reports as a component's desired version: the digest it is pinned to, else its tag."""
    override = override or {}
    return override.get("digest") or override.get("tag") or default


def _args(defaults: dict[str, Any], extra: dict[str, str] | None, gates: dict[str, bool], *,
          key: str, field: str) -> list[str]:
    """Command-line flags: defaults, then feature gates, then the user's extraArgs (which win).

    extraArgs closed for spec key ``key`` (karmada_components.closed_args) are refused (the CRD
    refuses them too; this covers objects stored before that rule): PlanError naming ``field``.
    """
    refused = karmada_components.closed_args_used(key, extra)
    if refused:
        raise PlanError(field, f"must not set {', '.join(refused)}: the operator sets these itself")
    merged: dict[str, Any] = dict(defaults)
    if gates:
        merged["feature-gates"] = ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))
    merged.update(extra or {})
    return [f"--{k}={v}" for k, v in sorted(merged.items())]


# Every workload's pods are spread over nodes, and over zones when the nodes carry one
# (docs/karmadadeployment.md#spread-over-nodes-and-zones): soft (ScheduleAnyway), so a cluster with
# fewer nodes or no zones still schedules them; with one replica there is nothing to spread. Always
# set, whatever the replicas, so scaling a workload does not change its pod template.
SPREAD_TOPOLOGY_KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")


def spread(selector: dict[str, str]) -> list[dict[str, Any]]:
    """The topologySpreadConstraints of the pods ``selector`` picks."""
    return [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": dict(selector)}} for key in SPREAD_TOPOLOGY_KEYS]


def selector_of(workload: str, name: str) -> dict[str, str]:
    """The labels that pick one workload's pods (its Deployment's or StatefulSet's selector, its
    Service's and its PodDisruptionBudget's)."""
    return {"app.kubernetes.io/name": workload, "app.kubernetes.io/instance": name}


def _pod(spec: dict[str, Any], comp: dict[str, Any], default_replicas: int,
         selector: dict[str, str], requests: dict[str, str]) -> dict[str, Any]:
    """Pod-level settings of a component: its own win over spec.globals. ``requests``: its
    default resources.requests (measured, components.py), replaced whole by its ``resources``."""
    glob = spec.get("globals") or {}
    images = spec.get("images") or {}
    node_selector = dict(glob.get("nodeSelector") or {})
    node_selector.update(comp.get("nodeSelector") or {})
    replicas = comp.get("replicas")
    return {
        "replicas": default_replicas if replicas is None else int(replicas),
        "resources": copy.deepcopy(comp.get("resources") or {"requests": dict(requests)}),
        "nodeSelector": node_selector,
        "tolerations": list(glob.get("tolerations") or []) + list(comp.get("tolerations") or []),
        "affinity": comp.get("affinity") or {},
        "selector": selector,
        "topologySpreadConstraints": spread(selector),
        "priorityClassName": comp.get("priorityClassName") or "",
        "imagePullPolicy": images.get("pullPolicy") or "IfNotPresent",
        "imagePullSecrets": [{"name": s["name"]} for s in images.get("pullSecrets") or []],
        # Pod Security "restricted" (kube/pod_security.py, docs/security.md)
        "securityContext": pod_security.pod(),
        "containerSecurityContext": pod_security.container(),
    }


def _gates(spec: dict[str, Any], comp: dict[str, Any], karmada_binary: bool = True) -> dict[str, bool]:
    """A component's --feature-gates: spec.globals.featureGates, then its own. The global gates are
    Karmada's and go to Karmada's own binaries only: kube-apiserver (karmada-apiserver) and
    kube-controller-manager refuse to start on a gate they do not know (such as Failover); they
    take only the gates set on them."""
    gates = dict((spec.get("globals") or {}).get("featureGates") or {}) if karmada_binary else {}
    gates.update(comp.get("featureGates") or {})
    return gates


def config_hash(*parts: Any) -> str:
    """A short stable hash of anything JSON-serializable; put on pod templates so a change rolls them."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def mounts_hash(groups: dict[str, dict[str, str]], mounts: dict[str, list[str]]) -> str:
    """config_hash of exactly the Secret keys a pod mounts (``mounts``: group -> keys).

    Put on the pod template: a renewed certificate restarts the pods that read it and no
    others; enabling an optional component (new certificates) restarts nothing else.
    """
    picked = {}
    for group, keys in sorted(mounts.items()):
        data = groups.get(group) or {}
        missing = [k for k in keys if k not in data]
        if missing:
            raise KeyError(f"the {group} Secret has no {', '.join(missing)}")
        picked[group] = {k: data[k] for k in sorted(keys)}
    return config_hash(picked)


def build_plan(cr: dict[str, Any]) -> dict[str, Any]:
    meta = cr.get("metadata") or {}
    spec = cr.get("spec") or {}
    name = meta.get("name") or ""
    ns = meta.get("namespace") or ""
    if not name or not ns:
        raise PlanError("metadata", "the KarmadaDeployment needs a name and a namespace")
    domain = spec.get("clusterDomain") or "cluster.local"
    karmada_version = spec.get("karmadaVersion") or DEFAULT_KARMADA_VERSION
    kube_version = spec.get("kubernetesVersion") or DEFAULT_KUBERNETES_VERSION
    images = spec.get("images") or {}
    karmada_registry = images.get("karmadaRegistry") or DEFAULT_KARMADA_REGISTRY
    kube_registry = images.get("kubernetesRegistry") or DEFAULT_KUBERNETES_REGISTRY
    glob = spec.get("globals") or {}

    def svc_dns(service: str) -> str:
        return f"{service}.{ns}.svc.{domain}"

    names = {
        "etcd": f"{name}-etcd",
        "etcdClientService": f"{name}-etcd-client",
        "etcdPeerService": f"{name}-etcd",
        "apiserver": f"{name}-apiserver",
        "pkiSecret": f"{name}-pki",
        "etcdPkiSecret": f"{name}-etcd-pki",
        "etcdBootstrap": f"{name}-etcd-bootstrap",
        "kubeconfigSecret": f"{name}-kubeconfigs",
        "adminKubeconfigSecret": f"{name}-admin-kubeconfig",
        "auditPolicy": f"{name}-audit-policy",
    }
    # ours alone, the UID among them (kube/ownership.py: what is this KarmadaDeployment's)
    # (app.kubernetes.io/part-of is the user's to change; the others are refused by the schema)
    labels = ownership.labels(name, meta.get("uid") or "")
    labels.update({k: v for k, v in (glob.get("labels") or {}).items()
                   if k not in labels or k == ownership.PART_OF_LABEL})
    annotations = dict(glob.get("annotations") or {})

    etcd = _etcd_plan(spec, name, ns, domain, kube_registry, names)
    etcd.update(_etcd_step_facts(etcd, name, ns, names, labels))
    try:
        audit = karmada_audit.plan(spec.get("apiServer") or {}, names["auditPolicy"])
    except karmada_audit.AuditError as err:
        raise PlanError(err.field, err.message) from err
    apiserver = _apiserver_plan(spec, name, ns, domain, kube_registry, kube_version, names, etcd, audit)
    apiserver["serviceDNS"] = svc_dns(names["apiserver"])
    held = held_versions(cr, karmada_version)
    components = [_component_plan(comp, spec, name, karmada_registry, kube_registry,
                                  held.get(comp.binary, karmada_version),
                                  kube_version, etcd, svc_dns, audit) for comp in karmada_components.installable()]
    for comp in karmada_components.components():
        if not comp.installable and ((spec.get("components") or {}).get(comp.key) or {}).get("enabled"):
            raise PlanError(f"spec.components.{comp.key}.enabled",
                            f"{comp.description} is not installed by this operator version")

    api = spec.get("apiServer") or {}
    lb = api.get("externalLoadBalancer") or {}
    lb_hosts = list(lb.get("dnsNames") or []) + list(lb.get("addresses") or [])
    lb_port = int(lb.get("port") or 443)
    in_cluster = f"https://{svc_dns(names['apiserver'])}:{APISERVER_PORT}"
    external = [f"https://{_host(h)}:{lb_port}" for h in lb_hosts]
    plan = {
        "name": name,
        "namespace": ns,
        "clusterDomain": domain,
        "karmadaVersion": karmada_version,
        "kubernetesVersion": kube_version,
        "labels": labels,
        "annotations": annotations,
        "names": names,
        "adminUser": karmada_components.ADMIN_USER,
        "etcd": etcd,
        "apiserver": apiserver,
        "audit": {"enabled": audit["enabled"], "target": audit["target"], "configMap": audit["configMap"]},
        "components": components,
        "enabledComponents": [c["name"] for c in components if c["enabled"]],
        # The aggregated APIs, registered in karmada-apiserver while their component is enabled
        # and removed when it is not (a dangling APIService breaks discovery).
        "apiServices": [{**api, "service": c["service"], "present": c["enabled"], "optional": c["optional"]}
                        for c in components for api in c["apiServices"]],
        "endpoints": {
            "inCluster": in_cluster,
            "external": external,
            # What generated kubeconfigs name: the balancer when there is one.
            "kubeconfigServer": external[0] if external else in_cluster,
        },
        "paths": {"pki": PKI_DIR, "etcdPki": ETCD_PKI_DIR, "kubeconfigDir": KUBECONFIG_DIR,
                  "servingDir": SERVING_DIR},
        # the writable /tmp of every pod (their root file systems are read-only: kube/pod_security.py)
        "podTmp": {"volume": dict(pod_security.TMP_VOLUME), "mount": dict(pod_security.TMP_MOUNT)},
        "paused": bool(spec.get("paused", False)),
        "deletionPolicy": spec.get("deletionPolicy") or "Delete",
        "pki": _pki_input(spec, name, ns, domain, names, etcd, components, cr.get("status") or {}),
        "crds": {"url": (spec.get("crds") or {}).get("url")
                 or CRDS_URL_TEMPLATE.replace("{version}", karmada_version),
                 "sha256": (spec.get("crds") or {}).get("sha256") or ""},
        # karmada-agent for Pull members: same registry and version as the control plane.
        "agent": {
            "image": _image(karmada_registry, "karmada-agent", karmada_version, None),
            "imagePullPolicy": images.get("pullPolicy") or "IfNotPresent",
            "imagePullSecrets": [{"name": s["name"]} for s in images.get("pullSecrets") or []],
        },
    }
    # every workload a KarmadaDeployment can have, etcd first (what deletion removes, in order)
    plan["workloads"] = ([{"kind": "StatefulSet", "name": names["etcd"]},
                          {"kind": "Deployment", "name": plan["apiserver"]["name"]}]
                         + [{"kind": "Deployment", "name": c["name"]} for c in plan["components"]])
    plan["controlPlaneHash"] = control_plane_hash(plan)
    return plan


def host_objects(plan: dict[str, Any]) -> list[dict[str, str]]:
    """Every object a full pass of ``plan`` makes in its namespace on the host cluster (apiVersion,
    kind, name): what the ownership step checks before the pass writes anything
    (tasks/karmada_ownership.py). The templates make the same (tests/unit/test_ownership.py)."""
    names = plan["names"]

    def obj(api_version: str, kind: str, name: str) -> dict[str, str]:
        return {"apiVersion": api_version, "kind": kind, "name": name}

    out = [obj("v1", "Secret", names[key])
           for key in ("pkiSecret", "etcdPkiSecret", "kubeconfigSecret", "adminKubeconfigSecret")]
    etcd = plan["etcd"]
    if etcd["mode"] == "local":
        out += [obj("apps/v1", "StatefulSet", names["etcd"]), obj("v1", "Service", names["etcdPeerService"]),
                obj("v1", "Service", names["etcdClientService"]),
                obj("policy/v1", "PodDisruptionBudget", names["etcd"]), obj("v1", "ConfigMap", names["etcdBootstrap"])]
        if etcd["storage"]["type"] == "PersistentVolumeClaim":
            # the StatefulSet takes any claim of these names it finds: someone else's data
            out += [obj("v1", "PersistentVolumeClaim", f"data-{names['etcd']}-{i}") for i in range(etcd["replicas"])]
    api = plan["apiserver"]
    out += [obj("v1", "ConfigMap", plan["audit"]["configMap"]["name"]), obj("v1", "Service", api["name"]),
            obj("policy/v1", "PodDisruptionBudget", api["name"]), obj("apps/v1", "Deployment", api["name"])]
    for comp in plan["components"]:
        if comp["service"]:
            out.append(obj("v1", "Service", comp["service"]))
        out += [obj("policy/v1", "PodDisruptionBudget", comp["name"]), obj("apps/v1", "Deployment", comp["name"])]
    return out


def control_plane_hash(plan: dict[str, Any]) -> str:
    """A short hash of everything the control plane is made from (the plan holds no members).

    Recorded in status after a full pass; a spec edit that leaves it unchanged only touched
    the members (or paused/deletionPolicy, which the full pass does not use).
    """
    body = {k: v for k, v in plan.items() if k not in ("controlPlaneHash", "paused", "deletionPolicy")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _etcd_plan(spec: dict[str, Any], name: str, ns: str, domain: str, registry: str,
               names: dict[str, str]) -> dict[str, Any]:
    etcd = spec.get("etcd") or {"local": {}}
    if etcd.get("local") and etcd.get("external"):
        raise PlanError("spec.etcd", "set exactly one of etcd.local and etcd.external")
    if etcd.get("external"):
        ext = etcd["external"]
        endpoints = list(ext.get("endpoints") or [])
        if not endpoints:
            raise PlanError("spec.etcd.external.endpoints", "at least one endpoint is needed")
        return {"mode": "external", "endpoints": endpoints, "tlsSecret": ext["tlsSecretRef"]["name"],
                "replicas": 0, "members": []}
    local = etcd.get("local") or {}
    replicas = int(local.get("replicas") or 3)
    if replicas not in (1, 3, 5, 7):
        raise PlanError("spec.etcd.local.replicas", f"{replicas} is not 1, 3, 5 or 7")
    sts = names["etcd"]
    peer_svc = names["etcdPeerService"]
    member_domain = f"{peer_svc}.{ns}.svc.{domain}"  # a member's name is <pod>.<member_domain>
    members = [f"{sts}-{i}" for i in range(replicas)]
    peer_dns = [f"{m}.{member_domain}" for m in members]
    storage = local.get("storage") or {}
    try:
        space = etcd_space.settings(local, {"type": storage.get("type") or "PersistentVolumeClaim",
                                            "size": storage.get("size") or "8Gi"})
    except etcd_space.QuotaError as err:
        raise PlanError(err.field, err.message) from err
    return {
        "mode": "local",
        "replicas": replicas,
        "members": members,
        "memberDomain": member_domain,
        "memberDNS": peer_dns,
        "image": _image(registry, "etcd", local.get("version") or DEFAULT_ETCD_TAG, local.get("image")),
        "initialCluster": ",".join(f"{m}=https://{d}:{ETCD_PEER_PORT}" for m, d in zip(members, peer_dns,
                                                                                        strict=True)),
        "endpoints": [f"https://{names['etcdClientService']}.{ns}.svc.{domain}:{ETCD_CLIENT_PORT}"],
        "memberEndpoints": [f"https://{d}:{ETCD_CLIENT_PORT}" for d in peer_dns],
        "peerCommonName": ETCD_PEER_CN,
        # the client URLs of every member etcd can grow to (the rollout takes the first as many
        # as the StatefulSet has while a scale is under way)
        "allMemberEndpoints": [f"https://{sts}-{i}.{member_domain}:{ETCD_CLIENT_PORT}"
                               for i in range(ETCD_MAX_MEMBERS)],
        "storage": {
            "type": storage.get("type") or "PersistentVolumeClaim",
            "size": str(storage.get("size") or "8Gi"),
            "storageClassName": storage.get("storageClassName") or "",
            "hostPath": storage.get("hostPath") or "",
        },
        # the space quota (etcd/space.py: its flag, the low mark, the NOSPACE recovery)
        "space": space,
        "args": _args({"quota-backend-bytes": space["quotaBytes"]}, local.get("extraArgs"), {}, key="etcd",
                      field="spec.etcd.local.extraArgs"),
        "defragmentation": _defragmentation(local),
        "pod": {**_pod(spec, local, replicas, selector_of("etcd", name), DEFAULT_ETCD_RESOURCES["requests"]),
                # members on different nodes when there are several (unless spec.etcd.local.affinity)
                "affinity": local.get("affinity") or {"podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": selector_of("etcd", name)}}}]}}},
        # the user etcd runs as (etcd/run_as.py decides Auto when the StatefulSet is applied, from
        # the storage; its securityContext goes on the pod template then)
        "runAs": local.get("runAs") or "Auto",
    }


def _defragmentation(local: dict[str, Any]) -> dict[str, Any]:
    try:
        return defragmentation.policy(local.get("defragmentation"))
    except defragmentation.PolicyError as exc:
        raise PlanError(exc.field, exc.message) from None


# The etcd client pair the operator's etcd steps use, by Secret: the local etcd's health-check
# client (the etcd PKI Secret) or the user's Secret for an external etcd.
ETCD_LOCAL_CLIENT_KEYS = {"ca.crt": "ca.crt", "tls.crt": "healthcheck-client.crt", "tls.key": "healthcheck-client.key"}
ETCD_EXTERNAL_CLIENT_KEYS = {"ca.crt": "ca.crt", "tls.crt": "tls.crt", "tls.key": "tls.key"}


def _etcd_step_facts(etcd: dict[str, Any], name: str, ns: str, names: dict[str, str],
                     labels: dict[str, str]) -> dict[str, Any]:
    """What the etcd steps (tasks/etcd_scale, etcd_rollout, etcd_health) are told beside the
    slice: where etcd lives and the Secret holding their client pair (never the keys)."""
    if etcd["mode"] == "external":
        return {"namespace": ns, "clientSecret": {"name": etcd["tlsSecret"], "keys": ETCD_EXTERNAL_CLIENT_KEYS,
                                                  "field": "spec.etcd.external.tlsSecretRef"}}
    return {
        "namespace": ns,
        "statefulset": names["etcd"],
        "selector": ",".join(f"{k}={v}" for k, v in selector_of("etcd", name).items()),
        "bootstrapConfigMap": names["etcdBootstrap"],
        "labels": {**labels, "app.kubernetes.io/name": "etcd", "app.kubernetes.io/component": "etcd"},
        "clientSecret": {"name": names["etcdPkiSecret"], "keys": ETCD_LOCAL_CLIENT_KEYS, "field": "spec.etcd.local"},
    }


def _kube_minor(version: str) -> int:
    """The minor of a Kubernetes version ("v1.34.12" -> 34; unparseable: the newest, 999)."""
    match = re.match(r"v?1\.(\d+)", version or "")
    return int(match.group(1)) if match else 999


def _apiserver_plan(spec: dict[str, Any], name: str, ns: str, domain: str, registry: str, version: str,
                    names: dict[str, str], etcd: dict[str, Any], audit: dict[str, Any]) -> dict[str, Any]:
    api = spec.get("apiServer") or {}
    etcd_files = etcd_client_args(etcd)
    defaults = {
        "allow-privileged": "true",
        "authorization-mode": "Node,RBAC",
        "bind-address": "0.0.0.0",
        "client-ca-file": f"{PKI_DIR}/ca.crt",
        "disable-admission-plugins": "StorageObjectInUseProtection,ServiceAccount",
        "enable-admission-plugins": "NodeRestriction",
        "enable-bootstrap-token-auth": "true",
        "etcd-prefix": "/registry",
        "max-mutating-requests-inflight": "500",
        "max-requests-inflight": "1500",
        "proxy-client-cert-file": f"{PKI_DIR}/front-proxy-client.crt",
        "proxy-client-key-file": f"{PKI_DIR}/front-proxy-client.key",
        "requestheader-allowed-names": "front-proxy-client",
        "requestheader-client-ca-file": f"{PKI_DIR}/front-proxy-ca.crt",
        "requestheader-extra-headers-prefix": "X-Remote-Extra-",
        "requestheader-group-headers": "X-Remote-Group",
        "requestheader-username-headers": "X-Remote-User",
        "secure-port": str(APISERVER_PORT),
        "service-account-issuer": f"https://kubernetes.default.svc.{domain}",
        "service-account-key-file": f"{PKI_DIR}/sa.pub",
        "service-account-signing-key-file": f"{PKI_DIR}/sa.key",
        "service-cluster-ip-range": KARMADA_SERVICE_CIDR,
        "tls-cert-file": f"{PKI_DIR}/apiserver.crt",
        "tls-private-key-file": f"{PKI_DIR}/apiserver.key",
        "tls-min-version": "VersionTLS12",
        **etcd_files,
        **audit["args"],
        # Secrets (and what spec.apiServer.encryption.resources adds) encrypted in etcd with the
        # key the certificates step keeps in the PKI Secret (pki/encryption.py)
        "encryption-provider-config": f"{PKI_DIR}/{karmada_encryption.FILE}",
        # On SIGTERM (after the preStop delay) kube-apiserver ends its watches within this and
        # exits: 1.1 s measured with three watches open. Without it (0, the default) it waits for
        # the watch streams up to its request timeout (60 s) and the kubelet kills it at the
        # pod's 30 s grace period: every replaced replica held a rolling restart 30 s longer.
        # (kube-apiserver >= 1.27: before, the flag does not exist; docs/performance.md)
        **({"shutdown-watch-termination-grace-period": "10s"} if _kube_minor(version) >= 27 else {}),
    }
    lb = api.get("externalLoadBalancer") or {}
    etcd_client, etcd_ca = _etcd_mounts(etcd)
    pki_files = ["ca.crt", "apiserver.crt", "apiserver.key", *etcd_client, "front-proxy-ca.crt",
                 "front-proxy-client.crt", "front-proxy-client.key", "sa.key", "sa.pub", karmada_encryption.FILE]
    return {
        "name": names["apiserver"],
        "pkiFiles": pki_files,
        "mounts": {"pki": pki_files, "etcd": etcd_ca, "kubeconfig": []},
        # What kube-apiserver reads only when it starts (its pod template hashes these): it
        # reloads its serving pair, client CAs and front-proxy client pair from disk, and its
        # etcd client reads its pair at every TLS handshake, so a renewed leaf restarts no
        # karmada-apiserver pod; the etcd CA and the service-account keys need a restart.
        "restartMounts": {"pki": APISERVER_RESTART_FILES, "etcd": etcd_ca, "kubeconfig": []},
        "image": _image(registry, "kube-apiserver", version, api.get("image")),
        "version": _image_version(api.get("image"), version),
        "serviceType": api.get("serviceType") or "ClusterIP",
        "nodePort": api.get("nodePort"),
        "port": APISERVER_PORT,
        "args": _args(defaults, api.get("extraArgs"), _gates(spec, api, karmada_binary=False), key="apiServer",
                      field="spec.apiServer.extraArgs"),
        "pod": _pod(spec, api, int(api.get("replicas") or 1), selector_of("karmada-apiserver", name),
                    karmada_components.APISERVER_REQUESTS),
        **_with_kms_socket(_audit_pod(audit), api),
        # only with a plugin: the spec hash of a karmada-apiserver without one stays as it was
        **({"kmsPlugin": plugin} if (plugin := _kms_plugin(api)) else {}),
        "externalLoadBalancer": {"addresses": list(lb.get("addresses") or []),
                                 "dnsNames": list(lb.get("dnsNames") or []), "port": int(lb.get("port") or 443)},
        "certSANs": list(api.get("certSANs") or []),
    }


KMS_SOCKET_VOLUME = "kms-socket"


def _with_kms_socket(extras: dict[str, Any], api: dict[str, Any]) -> dict[str, Any]:
    """The volume kube-apiserver shares with the KMS v2 plugin (spec.apiServer.encryption.kms),
    added to the pod's extra volumes and kube-apiserver's mounts."""
    if not (api.get("encryption") or {}).get("kms"):
        return extras
    return {**extras, "extraVolumes": [*extras["extraVolumes"], {"name": KMS_SOCKET_VOLUME, "emptyDir": {}}],
            "extraMounts": [*extras["extraMounts"],
                            {"name": KMS_SOCKET_VOLUME, "mountPath": karmada_encryption.KMS_SOCKET_DIR}]}


def _kms_plugin(api: dict[str, Any]) -> dict[str, Any] | None:
    """The KMS v2 plugin's container (spec.apiServer.encryption.kms), a native sidecar: it starts
    before kube-apiserver and stops after it, so kube-apiserver can decrypt until its last request
    (a plain second container gets SIGTERM with it, during its preStop delay and drain). Held to
    Pod Security "restricted" like every container; /tmp writable, the socket's volume shared."""
    kms = (api.get("encryption") or {}).get("kms")
    if not kms:
        return None
    requests = {"requests": dict(karmada_components.KMS_PLUGIN_REQUESTS)}
    return {"name": "kms-plugin", "image": kms["image"], "restartPolicy": "Always",
            "args": list(kms.get("args") or []), "env": list(kms.get("env") or []),
            "resources": copy.deepcopy(kms.get("resources") or requests),
            "securityContext": pod_security.container(),
            "volumeMounts": [dict(pod_security.TMP_MOUNT),
                             {"name": KMS_SOCKET_VOLUME, "mountPath": karmada_encryption.KMS_SOCKET_DIR}]}


# Files karmada-apiserver does not reload while it runs (see _apiserver_plan's restartMounts).
APISERVER_RESTART_FILES = ["sa.key", "sa.pub", karmada_encryption.FILE]


def etcd_client_args(etcd: dict[str, Any]) -> dict[str, str]:
    """Flags that point karmada-apiserver and karmada-aggregated-apiserver at etcd."""
    if etcd["mode"] == "external":
        etcd_dir = "/etc/kubernetes/pki/external-etcd"
        files = {"etcd-cafile": f"{etcd_dir}/ca.crt", "etcd-certfile": f"{etcd_dir}/tls.crt",
                 "etcd-keyfile": f"{etcd_dir}/tls.key"}
    else:
        files = {"etcd-cafile": f"{ETCD_PKI_DIR}/ca.crt",
                 "etcd-certfile": f"{PKI_DIR}/apiserver-etcd-client.crt",
                 "etcd-keyfile": f"{PKI_DIR}/apiserver-etcd-client.key"}
    return {"etcd-servers": ",".join(etcd["endpoints"]), **files}


def _etcd_mounts(etcd: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(files from the PKI Secret, files from the etcd PKI Secret) an etcd client mounts."""
    if etcd["mode"] == "external":
        return [], []  # the external etcd's own TLS Secret, mounted whole
    return ["apiserver-etcd-client.crt", "apiserver-etcd-client.key"], ["ca.crt"]


def held_versions(cr: dict[str, Any], target: str) -> dict[str, str]:
    """With ``spec.upgrade.strategy: Components``, the Karmada components not listed in
    ``spec.upgrade.components`` stay on the version their pods run (status.components):
    {component: running version} for those that run another version than ``target``."""
    upgrade = (cr.get("spec") or {}).get("upgrade") or {}
    if upgrade.get("strategy") != "Components":
        return {}
    listed = {karmada_components.by_key()[k].binary for k in upgrade.get("components") or []
              if k in karmada_components.by_key()}
    karmada_made = {c.binary for c in karmada_components.installable() if c.image_source == "karmada"}
    held = {}
    for comp in (cr.get("status") or {}).get("components") or []:
        running = str(comp.get("version") or "")
        if comp.get("name") in karmada_made and comp.get("name") not in listed and running \
                and "," not in running and running != target:
            held[str(comp["name"])] = running
    return held


def _component_plan(comp: karmada_components.Component, spec: dict[str, Any], name: str, karmada_registry: str,
                    kube_registry: str, karmada_version: str, kube_version: str, etcd: dict[str, Any],
                    svc_dns: Any, audit: dict[str, Any]) -> dict[str, Any]:
    """One plan.components entry, from the component's registry entry and its spec."""
    cspec = (spec.get("components") or {}).get(comp.key) or {}
    kube = comp.image_source == "kubernetes"
    version = kube_version if kube else karmada_version
    deploy_name = f"{name}-{comp.suffix}"
    context = {"name": name, "pki": PKI_DIR, "kubeconfig": KUBECONFIG_FILE, "binary": comp.binary,
               "port": comp.port, "service_cidr": KARMADA_SERVICE_CIDR}
    defaults = {flag: value.format(**context) for flag, value in comp.args.items()}
    if comp.etcd_client:
        defaults.update(etcd_client_args(etcd))
    if comp.audited:
        defaults.update(audit["args"])
    args = _args(defaults, cspec.get("extraArgs"), _gates(spec, cspec, karmada_binary=not kube), key=comp.key,
                 field=f"spec.components.{comp.key}.extraArgs")
    return {
        "key": comp.key,
        "name": deploy_name,
        "component": comp.binary,
        "gate": _gate(comp, args),
        "order": comp.order,
        "step": comp.step,
        "optional": comp.optional,
        "enabled": bool(cspec.get("enabled", not comp.optional)),
        "image": _image(kube_registry if kube else karmada_registry, comp.image_repository, version,
                        cspec.get("image")),
        "version": _image_version(cspec.get("image"), version),
        "command": comp.default_command,
        "args": args,
        "kubeconfigSecret": f"{name}-{comp.suffix}-kubeconfig",
        "service": deploy_name if comp.serving else "",
        "serviceDNS": svc_dns(deploy_name),
        "port": comp.port,
        "probes": [p.render() for p in comp.probes],
        "pod": _pod(spec, cspec, 1, selector_of(comp.binary, name), comp.requests),
        **_audit_pod(audit if comp.audited else {}),
        **_mounts(comp, etcd),
        "apiServices": [{"name": api.name, "group": api.group, "version": api.version,
                         "groupPriorityMinimum": api.group_priority_minimum,
                         "versionPriority": api.version_priority} for api in comp.api_services],
    }


def _encryption(api: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    try:
        return karmada_encryption.settings(api, status.get("encryption") or {})
    except karmada_encryption.EncryptionError as err:
        raise PlanError(err.field, err.message) from err


def _audit_pod(audit: dict[str, Any]) -> dict[str, Any]:
    """What the audit log adds to a pod (plan/audit.py): volumes, mounts, template annotations."""
    return {"extraVolumes": list(audit.get("volumes") or []), "extraMounts": list(audit.get("mounts") or []),
            "templateAnnotations": dict(audit.get("annotations") or {})}


def _gate(comp: karmada_components.Component, args: list[str]) -> dict[str, Any]:
    """The check through karmada-apiserver after the component rolled out (karmada_rollout):
    ``lease`` ("namespace/name", none when leader election is switched off) and ``admission``
    (an object to create with dryRun)."""
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    lease = ""
    if comp.lease and flags.get("leader-elect", "true").lower() != "false":
        namespace, name = comp.lease.split("/", 1)
        namespace = flags.get("leader-elect-resource-namespace") or namespace
        lease = f"{namespace}/{flags.get('leader-elect-resource-name') or name}"
    probe = copy.deepcopy(karmada_components.ADMISSION_PROBE) if comp.admission_probe else {}
    return {"lease": lease, "admission": probe}


def _mounts(comp: karmada_components.Component, etcd: dict[str, Any]) -> dict[str, Any]:
    """What a component mounts from the operator's Secrets.

    ``pkiFiles`` go to /etc/kubernetes/pki, ``servingCert`` (webhook) to SERVING_DIR,
    ``etcdFiles`` (the etcd CA) to /etc/kubernetes/pki/etcd; ``mounts`` lists every key per
    Secret group so a pod restarts when, and only when, something it reads changes.
    """
    pki = list(comp.pki_files)
    etcd_files: list[str] = []
    if comp.serving and not comp.serving_dir:
        pki += [f"{comp.binary}.crt", f"{comp.binary}.key"]
    if comp.etcd_client:
        client, etcd_files = _etcd_mounts(etcd)
        pki += client
    serving = comp.binary if comp.serving_dir else ""
    return {
        "pkiFiles": pki,
        "servingCert": serving,
        "etcdClient": comp.etcd_client,
        "etcdFiles": etcd_files,
        "mounts": {
            "kubeconfig": [f"{comp.binary}.conf"],
            "pki": pki + ([f"{serving}.crt", f"{serving}.key"] if serving else []),
            "etcd": etcd_files,
        },
    }


def _pki_input(spec: dict[str, Any], name: str, ns: str, domain: str, names: dict[str, str],
               etcd: dict[str, Any], components: list[dict[str, Any]], status: dict[str, Any]) -> dict[str, Any]:
    """Parameters of the karmada_pki module (names and SANs derived from the plan).

    spec.certificates.caSecretRef is read by the certificates step (``ca_secret``) and passed as
    certificates.ca; everything else comes from here.
    """
    api = spec.get("apiServer") or {}
    certs = {k: v for k, v in (spec.get("certificates") or {}).items()
             if k not in ("caSecretRef", "forceRenew", "caRotation")}
    force = (spec.get("certificates") or {}).get("forceRenew") or {}
    return {
        "name": name,
        "namespace": ns,
        "cluster_domain": domain,
        "certificates": certs,
        "api_server": {
            "serviceName": names["apiserver"],
            "port": APISERVER_PORT,
            "externalLoadBalancer": api.get("externalLoadBalancer") or {},
            "certSANs": list(api.get("certSANs") or []),
            # spec.apiServer.encryption: the key and its EncryptionConfiguration live in the PKI Secret
            "encryption": _encryption(api, status),
        },
        # every member the cluster can grow to, so that scaling never re-issues (and rolls) them
        "etcd": {
            "replicas": ETCD_MAX_MEMBERS,
            "memberNames": [f"{names['etcd']}-{i}" for i in range(ETCD_MAX_MEMBERS)],
            "headlessServiceName": names["etcdPeerService"],
            "clientServiceName": names["etcdClientService"],
        },
        # Serving certificates: component -> its Service (only the enabled components).
        "serving_services": {c["component"]: c["service"] for c in components if c["enabled"] and c["service"]},
        "components": [c["component"] for c in components if c["enabled"]],
        # spec.certificates.forceRenew: re-issue what was issued before a time (once, declaratively).
        "force_renew": list(force.get("certificates") or ["leaves"]) if force else [],
        "force_renew_issued_before": str(force["issuedBefore"]) if force else None,
        # spec.certificates.caRotation as asked (the phase of a pass comes from status:
        # karmada_ca_rotation.current); here so that asking for one changes the plan's hash.
        "ca_rotation_request": (spec.get("certificates") or {}).get("caRotation") or {},
        # spec.certificates.caSecretRef: the Secret the certificates step reads the CA from ("": made here)
        "ca_secret": str(((spec.get("certificates") or {}).get("caSecretRef") or {}).get("name") or ""),
        # The etcd members read their serving and peer pairs at every TLS handshake; only a new
        # etcd CA restarts them (the etcd pods' pki-hash covers these keys).
        "etcd_restart_mounts": {"etcd": ["ca.crt"]},
    }
