"""Join and unjoin one member cluster, Push or Pull, idempotently.

What ``karmadactl join`` (Push) and ``karmadactl register`` (Pull) do, as a reconcile:

Push
  member:  namespace ``karmada-cluster``; service account ``karmada-<cluster>`` bound to a
           cluster role with every verb (what Karmada's controllers need to apply any
           workload); service account ``karmada-impersonator``; a token Secret for each.
  Karmada: namespace ``karmada-cluster``; Secrets ``<cluster>`` (caBundle + token) and
           ``<cluster>-impersonator`` (token); the ``Cluster`` object; then wait until
           Karmada reports it Ready.

Pull
  Karmada: the agent's RBAC (the same rules ``karmadactl register`` grants user
           ``system:karmada:agent:<cluster>``) and a client certificate for that user,
           signed by the deployment's Karmada CA (our PKI), in a kubeconfig.
  agent:   karmada-agent with that kubeconfig, either in the member (``placement
           Member``, the usual way: only the member dials out) or in the host cluster
           next to Karmada (``placement Host``: for members whose nodes cannot run it,
           e.g. virtual or kwok clusters; the member API must then be reachable from
           the host). The agent registers the Cluster itself; we wait until it is Ready
           and then put the labels and taints from the spec on it.

Unjoin deletes the Cluster, waits until Karmada has withdrawn its work from the member
(the Cluster's finalizer goes), then removes what the join made on both sides. A member
that cannot be reached is still removed from Karmada after the timeout, and the result
says what was left behind.

Every outcome is a :class:`Result` (state, ready, reason, message): problems with one
member are reported, never raised, so the other members proceed.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from karmada_operator import components as karmada_components
from karmada_operator.kube import ownership, pod_security
from karmada_operator.kube.client import (
    Kube,
    KubeConfigError,
    KubeError,
    content_changed,
    kubeconfig_cluster,
    load_kubeconfig_text,
)
from karmada_operator.pki import pki

CLUSTER_API = "cluster.karmada.io/v1alpha1"
WORK_API = "work.karmada.io/v1alpha1"
CLUSTER_NAMESPACE = "karmada-cluster"  # Karmada's default for member credentials, on both sides
AGENT_NAMESPACE = "karmada-system"  # where karmada-agent runs in a member
MANAGED_BY = {ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY}
MEMBER_LABEL = "operator.karmada.io/member"
AGENT_USER_PREFIX = "system:karmada:agent:"
AGENT_GROUP = "system:karmada:agents"
AGENT_CERT_DAYS = 365
AGENT_RENEW_DAYS = 30
# Reasons meaning the member's kubeconfig is gone or unusable (not a passing outage).
CREDENTIALS_GONE = ("KubeconfigSecretMissing", "InvalidKubeconfig")


@dataclass
class Result:
    state: str  # Joined | Joining | Unjoined | Unjoining | Failed
    ready: bool = False
    reason: str = ""
    message: str = ""
    changed: bool = False
    changes: list[str] = field(default_factory=list)
    cluster_id: str = ""
    # Wall seconds per step of this member's join (where a slow join went; not written to status).
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class MemberProblem(Exception):
    """Stops one member's join or unjoin with a reason for status."""

    def __init__(self, reason: str, message: str, state: str = "Failed"):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.state = state


@dataclass
class MemberSpec:
    name: str
    sync_mode: str = "Push"
    provider: str = ""
    region: str = ""
    zones: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    agent_placement: str = "Member"


@dataclass
class AgentSettings:
    image: str
    pull_policy: str = "IfNotPresent"
    pull_secrets: list[dict[str, str]] = field(default_factory=list)
    host_namespace: str = ""  # where a Host-placed agent runs (the deployment's namespace)
    karmada_server_in_cluster: str = ""  # for an agent in the host cluster
    karmada_server_external: str = ""  # for an agent in the member
    owner: dict[str, str] = field(default_factory=dict)  # labels tying host objects to the deployment


# --------------------------------------------------------------------------- names


def push_sa(cluster: str) -> str:
    return f"karmada-{cluster}"


def push_role(cluster: str) -> str:
    return f"karmada-controller-manager:{push_sa(cluster)}"


def agent_user(cluster: str) -> str:
    return AGENT_USER_PREFIX + cluster


def execution_namespace(cluster: str) -> str:
    return f"karmada-es-{cluster}"


def host_agent_name(deployment: str, cluster: str) -> str:
    return f"{deployment}-agent-{cluster}"[:63].rstrip("-")


# --------------------------------------------------------------------------- manifests

# Keeps a Pull agent's access to its Works while they are withdrawn (``held``).
WORK_ACCESS_FINALIZER = "operator.karmada.io/agent-work-access"


def _meta(name: str, namespace: str | None = None, cluster: str = "", extra: dict | None = None) -> dict:
    labels = dict(MANAGED_BY)
    if cluster:
        labels[MEMBER_LABEL] = cluster
    labels.update(extra or {})
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return meta


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name, extra={"karmada.io/system": "true"})}


def service_account(name: str, ns: str, cluster: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, ns, cluster)}


def token_secret(sa: str, ns: str, cluster: str) -> dict:
    meta = _meta(f"{sa}-token", ns, cluster)
    meta["annotations"] = {"kubernetes.io/service-account.name": sa}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token", "metadata": meta}


def all_access_role(name: str, cluster: str) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": _meta(name, cluster=cluster),
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["get"]}]}


def binding(kind: str, name: str, role_kind: str, role: str, subjects: list[dict], cluster: str,
            ns: str | None = None) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": _meta(name, ns, cluster),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": subjects}


def sa_subject(name: str, ns: str) -> dict:
    return {"kind": "ServiceAccount", "name": name, "namespace": ns}


def user_subject(name: str) -> dict:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}


def member_push_objects(cluster: str) -> list[dict]:
    """What a Push join creates in the member (order matters: namespace first)."""
    sa = push_sa(cluster)
    return [
        namespace(CLUSTER_NAMESPACE),
        service_account(sa, CLUSTER_NAMESPACE, cluster),
        all_access_role(push_role(cluster), cluster),
        binding("ClusterRoleBinding", push_role(cluster), "ClusterRole", push_role(cluster),
                [sa_subject(sa, CLUSTER_NAMESPACE)], cluster),
        token_secret(sa, CLUSTER_NAMESPACE, cluster),
        service_account("karmada-impersonator", CLUSTER_NAMESPACE, cluster),
        token_secret("karmada-impersonator", CLUSTER_NAMESPACE, cluster),
    ]


def cluster_object(spec: MemberSpec, api_endpoint: str, cluster_id: str = "", push: bool = True,
                   proxy_url: str = "") -> dict:
    """The Cluster in Karmada. For Pull the agent creates it; we only own labels and taints."""
    labels = dict(spec.labels)
    labels.update(MANAGED_BY)
    body: dict[str, Any] = {"apiVersion": CLUSTER_API, "kind": "Cluster",
                            "metadata": {"name": spec.name, "labels": labels},
                            "spec": {"taints": [dict(t) for t in spec.taints]}}
    if push:
        body["spec"].update({
            "syncMode": "Push",
            "apiEndpoint": api_endpoint,
            "secretRef": {"namespace": CLUSTER_NAMESPACE, "name": spec.name},
            "impersonatorSecretRef": {"namespace": CLUSTER_NAMESPACE, "name": f"{spec.name}-impersonator"},
            "provider": spec.provider,
            "region": spec.region,
            "zones": list(spec.zones),
        })
        if cluster_id:
            body["spec"]["id"] = cluster_id
        if proxy_url:
            body["spec"]["proxyURL"] = proxy_url
    return body


def karmada_push_secrets(cluster: str, ca_bundle: bytes, token: bytes, impersonator_token: bytes) -> list[dict]:
    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return [
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": _meta(cluster, CLUSTER_NAMESPACE, cluster),
         "data": {"caBundle": b64(ca_bundle), "token": b64(token)}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": _meta(f"{cluster}-impersonator", CLUSTER_NAMESPACE, cluster),
         "data": {"token": b64(impersonator_token)}},
    ]


def karmada_agent_rbac(cluster: str) -> list[dict]:
    """The agent's permissions in Karmada, the same rules karmadactl register grants."""
    user = [user_subject(agent_user(cluster))]
    role = f"system:karmada:{cluster}:agent"
    es = execution_namespace(cluster)
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        namespace(CLUSTER_NAMESPACE),
        namespace(es),
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": _meta(role, cluster=cluster), "rules": [
            {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"], "resourceNames": [cluster],
             "verbs": ["get", "delete"]},
            {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"], "verbs": ["create", "list", "watch"]},
            {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters/status"], "resourceNames": [cluster],
             "verbs": ["update"]},
            {"apiGroups": ["config.karmada.io"],
             "resources": ["resourceinterpreterwebhookconfigurations", "resourceinterpretercustomizations"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
            {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
             "verbs": ["get", "create"]},
            {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["patch", "create", "update"]},
        ]},
        binding("ClusterRoleBinding", role, "ClusterRole", role, user, cluster),
        {"apiVersion": rbac, "kind": "Role", "metadata": _meta(f"{role}-secret", CLUSTER_NAMESPACE, cluster), "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [cluster, f"{cluster}-impersonator"],
             "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        ]},
        binding("RoleBinding", f"{role}-secret", "Role", f"{role}-secret", user, cluster, CLUSTER_NAMESPACE),
        held({"apiVersion": rbac, "kind": "Role", "metadata": _meta(f"{role}-work", es, cluster), "rules": [
            {"apiGroups": ["work.karmada.io"], "resources": ["works"],
             "verbs": ["get", "create", "list", "watch", "update", "delete"]},
            {"apiGroups": ["work.karmada.io"], "resources": ["works/status"], "verbs": ["patch", "update"]},
        ]}),
        held(binding("RoleBinding", f"{role}-work", "Role", f"{role}-work", user, cluster, es)),
    ]


def held(obj: dict) -> dict:
    """``obj`` with the finalizer that keeps it until its execution namespace holds no Work.

    A Pull member's Works are withdrawn by its agent: it deletes the workload in the member,
    then removes the Work's finalizer, through this Role. When the Cluster goes, Karmada deletes
    the execution namespace, and the namespace controller deletes the Role and RoleBinding with
    the Works; without a finalizer they went first, the agent lost its access and every Work
    (and so the Cluster) stayed until the unjoin's timeout. An object being deleted still
    grants what it grants; the unjoin releases it once no Work is left (``release_work_access``).
    """
    obj["metadata"]["finalizers"] = [WORK_ACCESS_FINALIZER]
    return obj


def work_access(cluster: str) -> list[dict]:
    """The agent's Role and RoleBinding in its execution namespace (the held objects)."""
    return [obj for obj in karmada_agent_rbac(cluster) if obj["metadata"].get("finalizers")]


def member_agent_access(cluster: str) -> list[dict]:
    """The agent's identity in the member: a service account with every verb (and a token for Host placement)."""
    return [
        namespace(AGENT_NAMESPACE),
        service_account("karmada-agent", AGENT_NAMESPACE, cluster),
        all_access_role("karmada-agent", cluster),
        binding("ClusterRoleBinding", "karmada-agent", "ClusterRole", "karmada-agent",
                [sa_subject("karmada-agent", AGENT_NAMESPACE)], cluster),
        token_secret("karmada-agent", AGENT_NAMESPACE, cluster),
    ]


def agent_args(spec: MemberSpec, member_server: str, member_kubeconfig: bool) -> list[str]:
    args = [
        "/bin/karmada-agent",
        "--karmada-kubeconfig=/etc/karmada/kubeconfig",
        f"--cluster-name={spec.name}",
        f"--cluster-api-endpoint={member_server}",
        f"--cluster-provider={spec.provider}",
        f"--cluster-region={spec.region}",
        f"--cluster-zones={','.join(spec.zones)}",
        "--controllers=*",
        f"--leader-elect-resource-namespace={AGENT_NAMESPACE}",
        f"--cluster-namespace={CLUSTER_NAMESPACE}",
        "--cluster-status-update-frequency=10s",
        "--metrics-bind-address=:8080",
        "--health-probe-bind-address=0.0.0.0:10357",
        "--v=2",
    ]
    if member_kubeconfig:
        args.insert(2, "--kubeconfig=/etc/member/kubeconfig")
    return args


def agent_deployment(spec: MemberSpec, agent: AgentSettings, name: str, ns: str, secret: str,
                     member_server: str, host: bool, config_hash: str) -> dict:
    labels = {"app": name, MEMBER_LABEL: spec.name}
    mounts = [dict(pod_security.TMP_MOUNT),
              {"name": "karmada-kubeconfig", "mountPath": "/etc/karmada", "readOnly": True}]
    volumes = [dict(pod_security.TMP_VOLUME), {"name": "karmada-kubeconfig", "secret": {
        "secretName": secret, "items": [{"key": "karmada-kubeconfig", "path": "kubeconfig"}]}}]
    if host:
        mounts.append({"name": "member-kubeconfig", "mountPath": "/etc/member", "readOnly": True})
        items = [{"key": "member-kubeconfig", "path": "kubeconfig"}]
        volumes.append({"name": "member-kubeconfig", "secret": {"secretName": secret, "items": items}})
    pod: dict[str, Any] = {
        "containers": [{
            "name": "karmada-agent",
            "image": agent.image,
            "imagePullPolicy": agent.pull_policy,
            "command": agent_args(spec, member_server, host),
            "ports": [{"name": "metrics", "containerPort": 8080}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 10357}, "initialDelaySeconds": 15,
                              "periodSeconds": 15, "failureThreshold": 3},
            "volumeMounts": mounts,
            # measured on the test bed (components.AGENT_REQUESTS): never BestEffort
            "resources": {"requests": dict(karmada_components.AGENT_REQUESTS)},
            "securityContext": pod_security.container(),
        }],
        # Pod Security "restricted" (kube/pod_security.py)
        "securityContext": pod_security.pod(),
        "volumes": volumes,
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
    }
    if not host:
        pod["serviceAccountName"] = "karmada-agent"
    else:
        pod["automountServiceAccountToken"] = False
    if agent.pull_secrets:
        pod["imagePullSecrets"] = [dict(s) for s in agent.pull_secrets]
    meta = _meta(name, ns, spec.name, agent.owner if host else None)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels,
                                               "annotations": {"operator.karmada.io/config-hash": config_hash}},
                                  "spec": pod}}}


def token_kubeconfig(cluster: str, server: str, ca: bytes, token: str, tls_server_name: str = "") -> dict:
    entry: dict[str, Any] = {"server": server, "certificate-authority-data": base64.b64encode(ca).decode()}
    if tls_server_name:
        entry["tls-server-name"] = tls_server_name
    return {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": cluster, "cluster": entry}],
            "users": [{"name": "karmada-agent", "user": {"token": token}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "karmada-agent"}}],
            "current-context": cluster}


# --------------------------------------------------------------------------- cluster state


def cluster_ready(obj: dict | None) -> tuple[bool, str]:
    """(Ready, message) from a Cluster's status."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True", cond.get("message") or cond.get("reason") or ""
    return False, "Karmada has not reported the cluster's state yet"


# --------------------------------------------------------------------------- the flows


@dataclass
class Clients:
    """How to reach the three clusters involved (made lazily, closed at the end)."""

    host: Kube
    karmada_factory: Callable[[], Kube]
    member_kubeconfig: Callable[[], dict]  # raises MemberProblem
    timeout: float = 20
    _karmada: Kube | None = None
    _member: Kube | None = None

    def karmada(self) -> Kube:
        if self._karmada is None:
            self._karmada = self.karmada_factory()
        return self._karmada

    def member(self) -> Kube:
        if self._member is None:
            data = self.member_kubeconfig()
            try:
                self._member = Kube.from_kubeconfig(data, timeout=self.timeout, where="the member's kubeconfig")
            except KubeConfigError as exc:
                raise MemberProblem("InvalidKubeconfig", str(exc)) from None
        return self._member

    def is_member(self, server: str) -> bool:
        """Whether ``server`` is the member's API server (as its client, once made, names it)."""
        return bool(server) and self._member is not None and self._member.server == server

    def close(self) -> None:
        for client in (self._karmada, self._member):
            if client is not None:
                client.close()


class Joiner:
    """One member's join or unjoin. ``wait`` bounds every wait in seconds."""

    def __init__(self, spec: MemberSpec, clients: Clients, agent: AgentSettings | None = None,
                 ca: tuple[str, str] | None = None, wait: float = 180, poll: float = 2,
                 sleep: Callable[[float], None] = time.sleep, teardown: bool = False):
        self.spec = spec
        # The whole Karmada is being deleted: once Karmada has withdrawn the work (the execution
        # namespace is gone), its remaining bookkeeping (bindings still naming the cluster) is
        # not waited for.
        self.teardown = teardown
        self.clients = clients
        self.agent = agent
        self.ca = ca  # (ca.crt PEM, ca.key PEM) of the Karmada CA, for the Pull agent's certificate
        self.wait = wait
        self.poll = poll
        self.sleep = sleep
        self.result = Result(state="Joining")
        self._mark = time.monotonic()

    def _lap(self, step: str) -> None:
        now = time.monotonic()
        self.result.seconds[step] = round(self.result.seconds.get(step, 0.0) + now - self._mark, 2)
        self._mark = now

    # ---- helpers

    def _apply(self, kube: Kube, obj: dict, where: str) -> dict:
        if obj["kind"] == "Namespace":
            self._namespace_not_terminating(kube, obj["metadata"]["name"], where)
            existing = kube.get("v1", "Namespace", obj["metadata"]["name"])
            if existing is not None:
                # Never take over a namespace that is there already (karmada-system of a member
                # that runs other things, or the host cluster joined as a member): only the ones
                # this operator created carry its label, and only those are deleted on unjoin.
                return existing
        out, changed = kube.apply(obj)
        if changed:
            meta = obj["metadata"]
            self.result.changed = True
            self.result.changes.append(f"{where}: {obj['kind']} {meta.get('namespace', '') and meta['namespace'] + '/'}"
                                       f"{meta['name']}")
        return out

    def _namespace_not_terminating(self, kube: Kube, name: str, where: str) -> None:
        """Wait for a namespace an earlier unjoin deleted to be gone before using it again."""
        def settled():
            ns = kube.get("v1", "Namespace", name)
            return ns is None or ((ns.get("status") or {}).get("phase") != "Terminating")

        timeout = min(self.wait, 60)
        if not self._until(settled, timeout):
            raise MemberProblem("NamespaceTerminating",
                                f"{where} namespace {name} is still being deleted (an earlier unjoin) after "
                                f"{timeout:.0f}s; retried at the next reconcile", state="Joining")

    def _delete(self, kube: Kube, obj: dict, where: str) -> None:
        meta = obj["metadata"]
        if kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")):
            self.result.changed = True
            self.result.changes.append(f"{where}: deleted {obj['kind']} {meta['name']}")

    def _delete_ours(self, kube: Kube, obj: dict, where: str) -> None:
        """Delete ``obj`` only if this operator made it (its managed-by label, today's value or the
        one it used before): a well-known name (karmada-agent, karmada-system) in a member may
        belong to someone else."""
        meta = obj["metadata"]
        current = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        labels = ((current or {}).get("metadata") or {}).get("labels") or {}
        if current is not None and labels.get(ownership.MANAGED_BY_LABEL) in (ownership.MANAGED_BY,
                                                                             ownership.LEGACY_MANAGED_BY):
            self._delete(kube, obj, where)

    def _until(self, check: Callable[[], Any], timeout: float) -> Any:
        """Poll ``check`` until it returns something true or ``timeout`` passes. The first polls
        come quickly (0.25 s, doubling up to ``poll``): a token or a Cluster's Ready condition is
        often there within a second, and every member waits on a few of them in turn."""
        deadline = time.monotonic() + timeout
        delay = min(0.25, self.poll)
        while True:
            value = check()
            if value or time.monotonic() >= deadline:
                return value
            self.sleep(delay)
            delay = min(delay * 2, self.poll)

    def _member_reachable(self) -> Kube:
        member = self.clients.member()
        try:
            member.version()
        except KubeError as exc:
            raise MemberProblem("MemberUnreachable", f"the member's API server does not answer: {exc.message}") from exc
        return member

    def _token(self, member: Kube, sa: str, ns: str) -> tuple[bytes, bytes]:
        """(ca.crt, token) from a service-account token Secret, once the token controller filled it."""
        def filled():
            secret = member.get("v1", "Secret", f"{sa}-token", ns) or {}
            data = secret.get("data") or {}
            return data if data.get("token") and data.get("ca.crt") else None

        data = self._until(filled, min(self.wait, 60))
        if not data:
            raise MemberProblem("TokenNotIssued", f"the member issued no token for service account {ns}/{sa} in "
                                f"{min(self.wait, 60):.0f}s: is its kube-controller-manager running?")
        return base64.b64decode(data["ca.crt"]), base64.b64decode(data["token"])

    def _wait_ready(self) -> None:
        karmada = self.clients.karmada()
        last: dict[str, Any] = {}

        def ready():
            obj = karmada.get(CLUSTER_API, "Cluster", self.spec.name)
            last["obj"] = obj
            return obj is not None and cluster_ready(obj)[0]

        if self._until(ready, self.wait):
            self.result.state, self.result.ready = "Joined", True
            self.result.reason = "ClusterReady"
            self.result.message = f"Karmada reports cluster {self.spec.name} Ready"
            return
        obj = last.get("obj")
        self.result.state, self.result.ready = "Joining", False
        if obj is None:
            self.result.reason = "ClusterNotRegistered"
            self.result.message = (f"karmada-agent has not registered cluster {self.spec.name} within "
                                   f"{self.wait:.0f}s; check the agent's pod and log")
        else:
            self.result.reason = "ClusterNotReady"
            self.result.message = f"cluster {self.spec.name} not Ready after {self.wait:.0f}s: {cluster_ready(obj)[1]}"

    def _record(self, exc: MemberProblem | KubeError, api_state: str) -> None:
        """Put a problem into the result: a MemberProblem as it says, an API error as ``api_state``."""
        self.result.ready = False
        if isinstance(exc, MemberProblem):
            self.result.state, self.result.reason = exc.state, exc.reason
        else:
            self.result.state = api_state
            self.result.reason = f"Api{exc.reason}" if exc.status else self._unreachable(exc)
        self.result.message = exc.message

    def _unreachable(self, exc: KubeError) -> str:
        """Which API server a call that reached none was for: the member's or Karmada's."""
        return "MemberUnreachable" if self.clients.is_member(exc.server) else "KarmadaUnreachable"

    # ---- join

    def join(self) -> Result:
        try:
            existing = self.clients.karmada().get(CLUSTER_API, "Cluster", self.spec.name)
            self._lap("karmada reachable")
            if existing and (existing.get("spec") or {}).get("syncMode", "Push") != self.spec.sync_mode:
                # The sync mode cannot change in place: take the member out first.
                self.unjoin()
                if self.result.state != "Unjoined":
                    return self.result
                self.result = Result(state="Joining", changed=True, changes=list(self.result.changes))
            if self.spec.sync_mode == "Pull":
                self._join_pull()
            else:
                self._join_push()
        except (MemberProblem, KubeError) as exc:
            self._record(exc, api_state="Failed")
        return self.result

    def _join_push(self) -> None:
        member = self._member_reachable()
        self._lap("member reachable")
        for obj in member_push_objects(self.spec.name):
            self._apply(member, obj, "member")
        self._lap("member objects")
        ca, token = self._token(member, push_sa(self.spec.name), CLUSTER_NAMESPACE)
        _, imp_token = self._token(member, "karmada-impersonator", CLUSTER_NAMESPACE)
        kube_system = member.get("v1", "Namespace", "kube-system") or {}
        cluster_id = (kube_system.get("metadata") or {}).get("uid") or ""
        self.result.cluster_id = cluster_id
        self._lap("tokens")
        entry = kubeconfig_cluster(self.clients.member_kubeconfig())
        karmada = self.clients.karmada()
        self._apply(karmada, namespace(CLUSTER_NAMESPACE), "karmada")
        for obj in karmada_push_secrets(self.spec.name, ca, token, imp_token):
            self._apply(karmada, obj, "karmada")
        self._apply(karmada, cluster_object(self.spec, member.server, cluster_id, push=True,
                                            proxy_url=entry.get("proxy-url") or ""), "karmada")
        self._lap("karmada objects")
        self._wait_ready()
        self._lap("cluster ready")

    def _join_pull(self) -> None:
        if self.agent is None or self.ca is None:
            raise MemberProblem("NoAgentSettings", "Pull mode needs the agent image and the Karmada CA")
        host_placed = self.spec.agent_placement == "Host"
        karmada_server = (self.agent.karmada_server_in_cluster if host_placed
                          else self.agent.karmada_server_external)
        if not karmada_server:
            raise MemberProblem(
                "NoReachableKarmadaEndpoint",
                "a Pull member's agent runs in the member and needs an address of karmada-apiserver it can reach: "
                "set spec.apiServer.externalLoadBalancer (or serviceType LoadBalancer/NodePort with it), or "
                "agentPlacement: Host")
        member = self._member_reachable()
        karmada = self.clients.karmada()
        for obj in karmada_agent_rbac(self.spec.name):
            self._apply(karmada, obj, "karmada")
        for obj in member_agent_access(self.spec.name):
            self._apply(member, obj, "member")
        where, kube = ("host", self.clients.host) if host_placed else ("member", member)
        name = host_agent_name(self.agent.owner.get("app.kubernetes.io/instance", "karmada"), self.spec.name) \
            if host_placed else "karmada-agent"
        ns = self.agent.host_namespace if host_placed else AGENT_NAMESPACE
        secret_name = f"{name}-kubeconfig" if host_placed else "karmada-agent-kubeconfig"
        current = kube.get("v1", "Secret", secret_name, ns) or {}
        data = dict(current.get("data") or {})
        karmada_conf = self._agent_kubeconfig(data.get("karmada-kubeconfig"), karmada_server)
        want = {"karmada-kubeconfig": karmada_conf}
        if host_placed:
            ca, token = self._token(member, "karmada-agent", AGENT_NAMESPACE)
            entry = kubeconfig_cluster(self.clients.member_kubeconfig())
            conf = token_kubeconfig(self.spec.name, member.server, ca, token.decode(),
                                    entry.get("tls-server-name") or "")
            want["member-kubeconfig"] = base64.b64encode(yaml.safe_dump(conf).encode()).decode()
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": _meta(secret_name, ns, self.spec.name, self.agent.owner if host_placed else None),
                  "data": want}
        self._apply(kube, secret, where)
        digest = hashlib.sha256("".join(want[k] for k in sorted(want)).encode()).hexdigest()[:16]
        self._apply(kube, agent_deployment(self.spec, self.agent, name, ns, secret_name, member.server,
                                           host_placed, digest), where)
        self._wait_ready()
        if self.result.ready:
            # The agent made the Cluster (and owns the rest of it); the labels and taints from
            # the spec are ours to keep. A merge patch (never creates a Cluster the agent has just
            # removed); changed when the Cluster's content moved (its status is written all the time).
            before = karmada.get(CLUSTER_API, "Cluster", self.spec.name) or {}
            want_obj = cluster_object(self.spec, member.server, push=False)
            after = karmada.merge_patch(CLUSTER_API, "Cluster", self.spec.name,
                                        {"metadata": {"labels": want_obj["metadata"]["labels"]},
                                         "spec": {"taints": want_obj["spec"]["taints"]}})
            if content_changed(before, after):
                self.result.changed = True
                self.result.changes.append("karmada: labels and taints on Cluster")

    def _agent_kubeconfig(self, existing_b64: str | None, server: str) -> str:
        """The agent's kubeconfig for Karmada (base64), reused while its certificate is good.

        ``self.ca`` is the PKI Secret's ``ca.crt`` (the trust bundle: two CAs during a CA rotation)
        and ``ca.key`` (the CA that signs now). The kubeconfig trusts the bundle, so it follows a
        rotation's phases: the bundle old+new, then a certificate from the new CA, then the new CA
        alone (karmada_ca_rotation); a changed kubeconfig restarts the agent (its digest).
        """
        ca_pem, ca_key_pem = self.ca  # type: ignore[misc]
        ca_cert = pki.signer_of(ca_pem, ca_key_pem)
        user = agent_user(self.spec.name)
        if existing_b64:
            try:
                conf = yaml.safe_load(base64.b64decode(existing_b64))
                creds = conf["users"][0]["user"]
                crt = base64.b64decode(creds["client-certificate-data"]).decode()
                cert = pki.load_cert(crt)
                fresh = (pki.issued_by(cert, ca_cert)
                         and cert.not_valid_after_utc - dt.timedelta(days=AGENT_RENEW_DAYS) > _now()
                         and pki.common_name(cert) == user)
                if fresh:
                    # the same certificate, with the bundle and server of now (same text when unchanged)
                    key = base64.b64decode(creds["client-key-data"]).decode()
                    text = pki.render_kubeconfig("karmada", server, user, ca_pem, crt, key)
                    return base64.b64encode(text.encode()).decode()
            except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError, yaml.YAMLError):
                pass
        key = pki.generate_key(pki.key_params_of(pki.load_key(ca_key_pem)) or pki.KeyParams("ECDSA", 256))
        profile = pki.LeafProfile(name="karmada-agent", ca="ca", common_name=user,
                                  usages=pki.CLIENT, organizations=(AGENT_GROUP,))
        now = _now()
        not_after = min(now + dt.timedelta(days=AGENT_CERT_DAYS), ca_cert.not_valid_after_utc)
        cert = pki.issue_leaf(profile, key, ca_cert, pki.load_key(ca_key_pem), now, not_after)
        text = pki.render_kubeconfig("karmada", server, user, ca_pem, pki.cert_pem(cert), pki.key_pem(key))
        return base64.b64encode(text.encode()).decode()

    # ---- unjoin

    def unjoin(self) -> Result:
        self.result.state = "Unjoining"
        try:
            self._unjoin()
        except (MemberProblem, KubeError) as exc:
            self._record(exc, api_state="Unjoining")
        return self.result

    def _unjoin(self) -> None:
        karmada = self.clients.karmada()
        name = self.spec.name
        notes: list[str] = []
        if karmada.get(CLUSTER_API, "Cluster", name) is not None:
            karmada.delete(CLUSTER_API, "Cluster", name)
            self.result.changed = True
            self.result.changes.append(f"karmada: deleted Cluster {name}")
            def gone() -> bool:
                self.release_work_access(karmada, only_when_withdrawn=True)
                if karmada.get(CLUSTER_API, "Cluster", name) is None:
                    return True
                return self.teardown and karmada.get("v1", "Namespace", execution_namespace(name)) is None

            if not self._until(gone, self.wait):
                # Karmada could not withdraw its work (typically: the member is unreachable).
                karmada.merge_patch(CLUSTER_API, "Cluster", name, {"metadata": {"finalizers": None}})
                notes.append(f"Karmada did not finish withdrawing work from {name} within {self.wait:.0f}s; "
                             f"the Cluster was removed anyway and workloads may remain in the member")
            elif karmada.get(CLUSTER_API, "Cluster", name) is not None:
                # teardown: the work is withdrawn; release the Cluster from Karmada's bookkeeping
                karmada.merge_patch(CLUSTER_API, "Cluster", name, {"metadata": {"finalizers": None}})
                self.result.changes.append(f"karmada: released Cluster {name} (work withdrawn, Karmada is "
                                           f"being deleted)")
        self.release_work_access(karmada, only_when_withdrawn=False)
        for obj in karmada_push_secrets(name, b"", b"", b"") + karmada_agent_rbac(name)[2:]:
            self._delete(karmada, obj, "karmada")
        # Member side (and a Host-placed agent): best effort, reported.
        if self.agent is not None and self.agent.host_namespace:
            agent_name = host_agent_name(self.agent.owner.get("app.kubernetes.io/instance", "karmada"), name)
            for kind, obj_name in (("Deployment", agent_name), ("Secret", f"{agent_name}-kubeconfig")):
                api = "apps/v1" if kind == "Deployment" else "v1"
                if self.clients.host.delete(api, kind, obj_name, self.agent.host_namespace):
                    self.result.changed = True
                    self.result.changes.append(f"host: deleted {kind} {obj_name}")
        try:
            self.clean_member(self._member_reachable())
        except MemberProblem as exc:
            if exc.reason in CREDENTIALS_GONE:
                # No usable kubeconfig is left for a member taken out of spec: nothing can ever
                # clean it, so finish (and say so) instead of retrying forever.
                self.result.state = "Unjoined"
                self.result.reason = "MemberNotCleaned"
                self.result.message = "; ".join(notes + [f"removed from Karmada; the member side (namespace "
                                                         f"{CLUSTER_NAMESPACE}, service accounts, RBAC) was not "
                                                         f"cleaned: {exc.message}"])
                return
            self._not_cleaned(notes, exc.message)
            return
        except KubeError as exc:
            self._not_cleaned(notes, exc.message)
            return
        self.result.state = "Unjoined"
        self.result.reason = "ForcedRemoval" if notes else "Unjoined"
        self.result.message = "; ".join(notes) or f"cluster {name} removed from Karmada and the member cleaned"

    def release_work_access(self, karmada: Kube, only_when_withdrawn: bool) -> None:
        """Remove our finalizer from the agent's Role and RoleBinding in the execution namespace:
        at once (``only_when_withdrawn`` False), or once that namespace is being deleted and no
        Work is left in it (Karmada withdrew them all: the agent needs nothing more)."""
        es = execution_namespace(self.spec.name)
        if only_when_withdrawn:
            ns = karmada.get("v1", "Namespace", es)
            if ns is None or not ns["metadata"].get("deletionTimestamp") or karmada.list(WORK_API, "Work", es):
                return
        for obj in work_access(self.spec.name):
            meta = obj["metadata"]
            current = karmada.get(obj["apiVersion"], obj["kind"], meta["name"], es)
            finalizers = ((current or {}).get("metadata") or {}).get("finalizers") or []
            if WORK_ACCESS_FINALIZER not in finalizers:
                continue
            try:
                karmada.merge_patch(obj["apiVersion"], obj["kind"], meta["name"],
                                    {"metadata": {"finalizers": [f for f in finalizers if f != WORK_ACCESS_FINALIZER],
                                                  "resourceVersion": current["metadata"]["resourceVersion"]}}, es)
            except KubeError as exc:
                if exc.status in (404, 409):  # gone, or changed since read: the next poll reads again
                    continue
                raise
            self.result.changed = True
            self.result.changes.append(f"karmada: released {obj['kind']} {es}/{meta['name']}")

    def clean_member(self, member: Kube) -> None:
        """Remove from the member what a join put there: the agent, service accounts, RBAC, token
        Secrets, and the namespaces this operator created (labelled by it; never one that was
        there before the join, such as a karmada-system holding other things)."""
        name = self.spec.name
        agent = {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "karmada-agent", "namespace": AGENT_NAMESPACE}}
        # the agent's kubeconfig (a client certificate and key of Karmada's CA): it must not stay
        # behind in a karmada-system namespace that was there before the join
        agent_secret = {"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "karmada-agent-kubeconfig", "namespace": AGENT_NAMESPACE}}
        for obj in [agent, agent_secret, *reversed(member_push_objects(name) + member_agent_access(name))]:
            if obj["kind"] != "Namespace":
                self._delete_ours(member, obj, "member")
        for ns_name in (CLUSTER_NAMESPACE, AGENT_NAMESPACE):
            self._delete_ours(member, namespace(ns_name), "member")

    def _not_cleaned(self, notes: list[str], message: str) -> None:
        self.result.state = "Unjoining"
        self.result.reason = "MemberNotCleaned"
        self.result.message = "; ".join(notes + [f"removed from Karmada, but the member-side objects (namespace "
                                                 f"{CLUSTER_NAMESPACE}, service accounts, RBAC) are left: "
                                                 f"{message}; retried at the next reconcile"])


# --------------------------------------------------------------------------- many members at once
#
# Every member of a KarmadaDeployment is joined or unjoined in one process, a thread each: the
# work is waiting on three API servers, so threads overlap it as well as processes would, without
# starting a Python interpreter and a Kubernetes client per member (docs/members.md, "Speed").
# Each member has its own clients and its own Joiner; whatever goes wrong with one member ends as
# that member's result and never reaches the others.


@dataclass
class Target:
    """What every member's join shares: the host namespace, how to reach karmada-apiserver, the
    Karmada CA (Pull members) and the agent's settings."""

    namespace: str
    karmada_secret: str  # the admin kubeconfig Secret (key ``kubeconfig``) in ``namespace``
    karmada_server: str = ""  # overrides the kubeconfig's address
    tls_server_name: str = ""
    pki_secret: str = ""  # ca.crt and ca.key of the Karmada CA
    agent: AgentSettings | None = None
    wait: float = 180
    teardown: bool = False
    request_timeout: float = 20


@dataclass
class MemberJob:
    spec: MemberSpec
    present: bool = True  # join (True) or unjoin (False)
    kubeconfig_secret: dict[str, str] = field(default_factory=dict)  # {name, key, namespace}


def secret_value(host: Kube, namespace: str, name: str, key: str, what: str) -> str:
    """A Secret's value as text; MemberProblem naming the Secret when it is missing or empty."""
    try:
        secret = host.get("v1", "Secret", name, namespace)
    except KubeError as exc:
        raise MemberProblem("HostUnreachable", f"reading Secret {namespace}/{name}: {exc.message}") from exc
    if secret is None:
        raise MemberProblem(f"{what}SecretMissing", f"Secret {namespace}/{name} ({what.lower()}) does not exist")
    raw = (secret.get("data") or {}).get(key)
    if not raw:
        raise MemberProblem(f"{what}SecretMissing", f"Secret {namespace}/{name} has no key {key!r}")
    try:
        return base64.b64decode(raw).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise MemberProblem(f"Invalid{what}", f"Secret {namespace}/{name} key {key!r} is not text: {exc}") from exc


def problem_result(present: bool, reason: str, message: str) -> dict[str, Any]:
    return Result(state="Failed" if present else "Unjoining", reason=reason, message=message).as_dict()


def run_member(job: MemberJob, target: Target, host_factory: Callable[[], Kube]) -> dict[str, Any]:
    """One member's join or unjoin with clients of its own; the result as a dict, never raised."""
    started = time.monotonic()
    try:
        host = host_factory()
    except KubeConfigError as exc:
        return problem_result(job.present, "HostCredentials", f"cannot load credentials for the host cluster: {exc}")
    ref = job.kubeconfig_secret or {}

    def member_kubeconfig() -> dict:
        if not ref.get("name"):
            raise MemberProblem("KubeconfigSecretMissing", "no kubeconfig Secret is known for this member")
        text = secret_value(host, ref.get("namespace") or target.namespace, ref["name"], ref.get("key") or
                            "kubeconfig", "Kubeconfig")
        try:
            return load_kubeconfig_text(text)
        except ValueError as exc:
            raise MemberProblem("InvalidKubeconfig", f"Secret {ref['name']} does not hold a usable kubeconfig: "
                                f"{exc}") from exc

    def karmada_client() -> Kube:
        text = secret_value(host, target.namespace, target.karmada_secret, "kubeconfig", "KarmadaKubeconfig")
        try:
            return Kube.from_kubeconfig(text, timeout=target.request_timeout, server=target.karmada_server,
                                        tls_server_name=target.tls_server_name,
                                        where=f"Secret {target.namespace}/{target.karmada_secret}")
        except KubeConfigError as exc:
            raise MemberProblem("InvalidKarmadaKubeconfig", str(exc)) from None

    clients = Clients(host=host, karmada_factory=karmada_client, member_kubeconfig=member_kubeconfig,
                      timeout=target.request_timeout)
    try:
        ca = None
        if job.spec.sync_mode == "Pull" and job.present:
            ca = (secret_value(host, target.namespace, target.pki_secret, "ca.crt", "Pki"),
                  secret_value(host, target.namespace, target.pki_secret, "ca.key", "Pki"))
        joiner = Joiner(job.spec, clients, agent=target.agent, ca=ca, wait=target.wait, teardown=target.teardown)
        joiner.result.seconds["host secrets"] = round(time.monotonic() - started, 2)
        return (joiner.join() if job.present else joiner.unjoin()).as_dict()
    except MemberProblem as exc:
        return problem_result(job.present, exc.reason, exc.message)
    finally:
        clients.close()
        host.close()


def run_members(jobs: list[MemberJob], target: Target, host_factory: Callable[[], Kube],
                workers: int = 32, run: Callable[..., dict[str, Any]] = run_member) -> dict[str, dict[str, Any]]:
    """Every job at once (at most ``workers`` threads): member name -> result. A crash in one
    member's code becomes that member's result (reason OperatorError) and the others go on."""
    def guarded(job: MemberJob) -> dict[str, Any]:
        try:
            return run(job, target, host_factory)
        except Exception as exc:  # noqa: BLE001 - one member's bug must not stop the others
            return problem_result(job.present, "OperatorError", f"{type(exc).__name__}: {exc}")

    if not jobs:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs))), thread_name_prefix="member") as pool:
        results = list(pool.map(guarded, jobs))
    return {job.spec.name: result for job, result in zip(jobs, results, strict=True)}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# --------------------------------------------------------------------------- the karmada_member task
#
# plugins/modules/karmada_member.py documents the options; plugins/action/karmada_member.py runs
# this in the controller process (karmada_operator/runtime/adapter.py).

MEMBER_OPTIONS: dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "sync_mode": {"type": "str", "choices": ["Push", "Pull"], "default": "Push"},
    "provider": {"type": "str", "default": ""},
    "region": {"type": "str", "default": ""},
    "zones": {"type": "list", "elements": "str", "default": []},
    "labels": {"type": "dict", "default": {}},
    "taints": {"type": "list", "elements": "dict", "default": []},
    "agent_placement": {"type": "str", "choices": ["Member", "Host"], "default": "Member"},
    "kubeconfig_secret": {"type": "dict", "required": True},
}

ARGUMENT_SPEC: dict[str, Any] = {
    "members": {"type": "list", "elements": "dict", "required": True, "options": MEMBER_OPTIONS},
    "namespace": {"type": "str", "required": True},
    "karmada": {"type": "dict", "required": True},
    "pki_secret": {"type": "str", "default": ""},
    "agent": {"type": "dict", "default": {}},
    "wait_timeout": {"type": "int", "default": 180},
    "teardown": {"type": "bool", "default": False},
    "request_timeout": {"type": "int", "default": 20},
    "workers": {"type": "int", "default": 32},
}


def member_job(m: dict) -> MemberJob:
    spec = MemberSpec(name=m["name"], sync_mode=m["sync_mode"], provider=m["provider"] or "",
                      region=m["region"] or "", zones=list(m["zones"] or []),
                      labels={str(k): str(v) for k, v in (m["labels"] or {}).items()},
                      taints=[{k: str(v) for k, v in t.items() if v not in (None, "")} for t in m["taints"] or []],
                      agent_placement=m["agent_placement"])
    return MemberJob(spec=spec, present=m["state"] == "present", kubeconfig_secret=dict(m["kubeconfig_secret"]))


def run(p: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = lambda msg: None) -> dict[str, Any]:
    """Every member of ``p["members"]`` joined or unjoined at once: {changed, members: {name: result}}."""
    ns, karmada, agent_opts = p["namespace"], p["karmada"], p.get("agent") or {}
    agent = AgentSettings(image=agent_opts.get("image") or "", pull_policy=agent_opts.get("pull_policy") or
                          "IfNotPresent", pull_secrets=list(agent_opts.get("pull_secrets") or []),
                          host_namespace=ns,
                          karmada_server_in_cluster=agent_opts.get("karmada_server_in_cluster") or "",
                          karmada_server_external=agent_opts.get("karmada_server_external") or "",
                          owner={str(k): str(v) for k, v in (agent_opts.get("owner_labels") or {}).items()})
    target = Target(namespace=ns, karmada_secret=karmada["admin_kubeconfig_secret"],
                    karmada_server=karmada.get("server") or "", tls_server_name=karmada.get("tls_server_name") or "",
                    pki_secret=p.get("pki_secret") or "", agent=agent, wait=p["wait_timeout"],
                    teardown=p["teardown"], request_timeout=p["request_timeout"])
    jobs = [member_job(m) for m in p["members"]]
    results = run_members(jobs, target, lambda: Kube.default(timeout=p["request_timeout"]), workers=p["workers"])
    return {"changed": any(r.get("changed") for r in results.values()), "members": results}
