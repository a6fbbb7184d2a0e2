"""The audit log of karmada-apiserver and karmada-aggregated-apiserver (spec.apiServer.audit,
docs/security.md#audit): the policy, where the events go, and what that adds to both pods.

On by default with the policy below, one JSON event per line on the container's stdout (what a
node's log collector ships). The policy lives in a ConfigMap of the operator's, mounted into both
pods; its hash is a pod-template annotation, so a policy change rolls them (kube-apiserver reads
the file once). Pure: nothing here talks to a cluster.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

FIELD = "spec.apiServer.audit"
TARGETS = ("Stdout", "File", "Off")
WEBHOOK_MODES = ("batch", "blocking", "blocking-strict")
LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
DEFAULTS: dict[str, Any] = {"enabled": True, "log": {"target": "Stdout", "maxSizeMB": 100, "maxBackups": 5,
                                                     "maxAgeDays": 7},
                            "webhook": {"mode": "batch"}}

POLICY_DIR = "/etc/kubernetes/audit"
POLICY_FILE = "policy.json"
LOG_DIR = "/var/log/kubernetes/audit"
LOG_FILE = "audit.log"
WEBHOOK_DIR = "/etc/kubernetes/audit-webhook"
WEBHOOK_FILE = "kubeconfig"
HASH_ANNOTATION = "operator.karmada.io/audit-hash"

# The default policy: who did what, when, to which object, for every request; the request body of
# every change to Karmada's policies and cluster registrations; never a body of a Secret,
# ConfigMap or token (they carry keys); nothing for health probes, leader-election Leases and
# Events, which would drown the rest (a Karmada at rest renews a Lease every 2 s per component).
DEFAULT_RULES: list[dict[str, Any]] = [
    {"level": "None", "nonResourceURLs": ["/healthz*", "/livez*", "/readyz*", "/version", "/metrics"]},
    {"level": "None", "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]},
    {"level": "None", "resources": [{"group": "", "resources": ["events"]},
                                    {"group": "events.k8s.io", "resources": ["events"]}]},
    {"level": "Metadata", "resources": [
        {"group": "", "resources": ["secrets", "configmaps", "serviceaccounts/token"]},
        {"group": "authentication.k8s.io", "resources": ["tokenreviews"]}]},
    {"level": "Request", "verbs": ["create", "update", "patch", "delete", "deletecollection"],
     "resources": [{"group": "policy.karmada.io"}, {"group": "config.karmada.io"},
                   {"group": "autoscaling.karmada.io"}, {"group": "apps.karmada.io"},
                   {"group": "networking.karmada.io"},
                   {"group": "cluster.karmada.io", "resources": ["clusters"]}]},
    {"level": "Metadata"},
]
DEFAULT_POLICY: dict[str, Any] = {"omitStages": ["RequestReceived"], "rules": DEFAULT_RULES}


class AuditError(ValueError):
    """What the schema cannot refuse; ``field`` names the spec path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def settings(api: dict[str, Any]) -> dict[str, Any]:
    """spec.apiServer.audit with the defaults filled in (the CRD fills them too)."""
    audit = api.get("audit") or {}
    log = {**DEFAULTS["log"], **(audit.get("log") or {})}
    webhook = audit.get("webhook") or {}
    if webhook:
        webhook = {**DEFAULTS["webhook"], **webhook,
                   "kubeconfigSecretRef": {"key": "kubeconfig", **(webhook.get("kubeconfigSecretRef") or {})}}
    out = {"enabled": bool(audit.get("enabled", DEFAULTS["enabled"])), "log": log, "webhook": webhook,
           "policy": copy.deepcopy(audit.get("policy") or DEFAULT_POLICY)}
    if out["enabled"] and log["target"] == "Off" and not webhook:
        raise AuditError(f"{FIELD}.log.target", "Off needs a webhook (spec.apiServer.audit.webhook): "
                                                "the audit log would go nowhere")
    return out


def policy_document(policy: dict[str, Any]) -> str:
    """The policy file (JSON, which kube-apiserver reads as YAML)."""
    doc = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", **policy}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def plan(api: dict[str, Any], config_map: str) -> dict[str, Any]:
    """What audit adds to karmada-apiserver and karmada-aggregated-apiserver: ``args`` (flags),
    ``volumes`` and ``mounts`` of their pods, ``annotations`` of their pod templates, and
    ``configMap`` (name and data) the apiserver step applies. Disabled: nothing but the ConfigMap
    (kept, so turning audit back on finds it)."""
    cfg = settings(api)
    document = policy_document(cfg["policy"])
    out: dict[str, Any] = {"enabled": cfg["enabled"], "target": cfg["log"]["target"],
                           "configMap": {"name": config_map, "data": {POLICY_FILE: document}},
                           "args": {}, "volumes": [], "mounts": [], "annotations": {}}
    if not cfg["enabled"]:
        return out
    log, webhook = cfg["log"], cfg["webhook"]
    args = {"audit-policy-file": f"{POLICY_DIR}/{POLICY_FILE}"}
    volumes: list[dict[str, Any]] = [{"name": "audit-policy", "configMap": {
        "name": config_map, "items": [{"key": POLICY_FILE, "path": POLICY_FILE}]}}]
    mounts: list[dict[str, Any]] = [{"name": "audit-policy", "mountPath": POLICY_DIR, "readOnly": True}]
    if log["target"] == "Stdout":
        args.update({"audit-log-path": "-", "audit-log-format": "json"})
    elif log["target"] == "File":
        size, backups = int(log["maxSizeMB"]), int(log["maxBackups"])
        args.update({"audit-log-path": f"{LOG_DIR}/{LOG_FILE}", "audit-log-format": "json",
                     "audit-log-maxsize": str(size), "audit-log-maxbackup": str(backups),
                     "audit-log-maxage": str(int(log["maxAgeDays"]))})
        # the live file and its backups, plus one file of room: the kubelet evicts a pod whose
        # emptyDir passes its limit
        volumes.append({"name": "audit-log", "emptyDir": {"sizeLimit": f"{size * (backups + 2)}Mi"}})
        mounts.append({"name": "audit-log", "mountPath": LOG_DIR})
    if webhook:
        ref = webhook["kubeconfigSecretRef"]
        args.update({"audit-webhook-config-file": f"{WEBHOOK_DIR}/{WEBHOOK_FILE}",
                     "audit-webhook-mode": webhook["mode"]})
        volumes.append({"name": "audit-webhook", "secret": {
            "secretName": ref["name"], "defaultMode": 0o400, "items": [{"key": ref["key"], "path": WEBHOOK_FILE}]}})
        mounts.append({"name": "audit-webhook", "mountPath": WEBHOOK_DIR, "readOnly": True})
    out.update(args=args, volumes=volumes, mounts=mounts,
               annotations={HASH_ANNOTATION: hashlib.sha256(document.encode()).hexdigest()[:16]})
    return out
