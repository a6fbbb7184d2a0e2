"""karmada_pki: the PKI set of a KarmadaDeployment, made or kept (plugins/modules/karmada_pki.py).

Given the plan (``plan``), it is the whole certificates step of a pass: it reads the stored
Secrets and a bring-your-own CA, makes or keeps every certificate, writes the three Secrets
(keys no longer issued dropped) and the users' admin kubeconfig Secret, and returns the hashes
that decide which pods restart (plan/pass_plan.pki_hashes), whether karmada-apiserver restarts
for them now or after the components (pki/cert_rollout.py), the CA-rotation phase's status, and
the CA certificates (public) the later steps publish. It returns no key: the steps that need
one read it from its Secret. Without ``plan`` it only computes, from what it is given.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from karmada_operator.kube import ownership
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.pki import ca_rotation as karmada_ca_rotation
from karmada_operator.pki import volume_refresh
from karmada_operator.pki.cert_rollout import apiserver_pki_hash
from karmada_operator.pki.pki import PkiInputError, files_from_secret_groups, reconcile_pki, secret_groups
from karmada_operator.plan.pass_plan import pki_hashes
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "namespace": {"type": "str", "default": "karmada-system"},
    "name": {"type": "str", "default": "karmada"},
    "cluster_domain": {"type": "str", "default": "cluster.local"},
    "etcd": {"type": "dict", "default": {}},
    "api_server": {"type": "dict", "default": {}},
    "serving_services": {"type": "dict", "default": {}},
    "components": {"type": "list", "elements": "str"},
    "certificates": {"type": "dict", "default": {}},
    # not no_log: Ansible would then mask the same PEM text in the returned files; callers use no_log
    "existing": {"type": "dict", "default": {}, "no_log": False},
    "existing_groups": {"type": "dict", "default": {}, "no_log": False},
    "existing_groups_base64": {"type": "bool", "default": False},
    "force_renew": {"type": "list", "elements": "str", "default": []},
    "force_renew_issued_before": {"type": "str"},
    "ca_rotation": {"type": "dict"},
    # the certificates step of a pass: the plan, this pass's CA rotation and the recorded one
    "plan": {"type": "dict"},
    "rotation": {"type": "dict", "default": {}},
    "recorded_rotation": {"type": "dict", "default": {}},
    "kubeconfig": {"type": "path"},
}
# The Secrets the set is stored in: group -> the plan's name for the Secret.
SECRETS = {"pki": "pkiSecret", "etcd": "etcdPkiSecret", "kubeconfig": "kubeconfigSecret"}
# The users' admin kubeconfig (key "kubeconfig"): pointing at the external balancer when there is
# one, else at the in-cluster Service (plan.endpoints.kubeconfigServer, as every kubeconfig we make).
ADMIN_SECRET, ADMIN_KEY = "adminKubeconfigSecret", "kubeconfig"
# The CA certificates later steps publish (the APIServices' caBundle, kube-apiserver's client CAs).
CA_BUNDLE = ("ca.crt", "front-proxy-ca.crt")
SUPPORTS_CHECK_MODE = True


def pki_input(params: dict) -> dict:
    """Module parameters (snake_case) to the library's input dict (the CR's camelCase)."""
    groups = params["existing_groups"] or {}
    if params["existing_groups_base64"]:
        groups = {
            g: {k: base64.b64decode(v).decode() for k, v in (d or {}).items()} for g, d in groups.items()
        }
    existing = files_from_secret_groups(groups)
    existing.update(params["existing"] or {})
    return {
        "namespace": params["namespace"],
        "name": params["name"],
        "clusterDomain": params["cluster_domain"],
        "etcd": params["etcd"],
        "apiServer": params["api_server"],
        "servingServices": params["serving_services"],
        "components": params["components"],
        "certificates": params["certificates"],
        "forceRenew": params["force_renew"],
        "forceRenewIssuedBefore": params["force_renew_issued_before"],
        "caRotation": params["ca_rotation"] or None,
        "existing": existing,
    }


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    if params.get("plan"):
        return certificates_step(params, warn)
    return compute(params, warn)


def compute(params: dict[str, Any], warn: Callable[[str], None]) -> dict[str, Any]:
    """The PKI set from what ``params`` gives (the module's options without ``plan``)."""
    try:
        result = reconcile_pki(pki_input(params))
    except PkiInputError as exc:
        raise ModuleFailed(str(exc), field=exc.field) from exc
    for warning in result.warnings:
        warn(warning)
    removed_groups = secret_groups(dict.fromkeys(result.removed, ""))
    return {
        "changed": result.changed,
        "certificates": result.certificates,
        "changes": result.changes,
        "removed": result.removed,
        "pki_warnings": result.warnings,
        "rotation": result.rotation,
        "files": result.files,
        "secret_groups": secret_groups(result.files),
        # JSON merge patches (key: null) that drop removed files from the stored Secrets
        "secret_removals": {g: dict.fromkeys(keys) for g, keys in removed_groups.items()},
    }


def _decoded(secret: dict[str, Any] | None) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in ((secret or {}).get("data") or {}).items()}


def _encoded(data: dict[str, str]) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


def certificates_step(params: dict[str, Any], warn: Callable[[str], None]) -> dict[str, Any]:
    """The certificates step of a pass (module docstring). Reads are live (not the runtime's
    cache, a moment behind a write); writes go where the runtime's other writes go, so a Secret
    it creates gets the KarmadaDeployment as its owner, as before."""
    plan = params["plan"]
    pki, names, ns = plan["pki"], plan["names"], plan["namespace"]
    rotation = params["rotation"] or {}
    try:
        kube = Kube.default(params["kubeconfig"])
        live = Kube.default(params["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(str(exc)) from exc
    with kube, live:
        try:
            stored = {group: live.get("v1", "Secret", names[name], ns) for group, name in SECRETS.items()}
            certificates = dict(pki["certificates"])
            if pki.get("ca_secret"):
                byo = live.get("v1", "Secret", pki["ca_secret"], ns)
                if byo is None:
                    raise ModuleFailed(f"spec.certificates.caSecretRef: Secret {pki['ca_secret']} not found in "
                                       f"namespace {ns}", field="spec.certificates.caSecretRef")
                certificates["ca"] = _decoded(byo)
            made = compute({"name": pki["name"], "namespace": pki["namespace"],
                            "cluster_domain": pki["cluster_domain"], "etcd": pki["etcd"],
                            "api_server": pki["api_server"], "serving_services": pki["serving_services"],
                            "components": pki["components"], "certificates": certificates, "existing": {},
                            "existing_groups": {g: _decoded(s) for g, s in stored.items()},
                            "existing_groups_base64": False, "force_renew": pki["force_renew"],
                            "force_renew_issued_before": pki.get("force_renew_issued_before") or None,
                            "ca_rotation": karmada_ca_rotation.pki_input(rotation)}, warn)
            written = [names[name] for group, name in SECRETS.items()
                       if _store(kube, stored[group], names[name], ns, plan["labels"],
                                 made["secret_groups"][group], made["secret_removals"].get(group) or {})]
            admin = live.get("v1", "Secret", names[ADMIN_SECRET], ns)
            if _store(kube, admin, names[ADMIN_SECRET], ns, plan["labels"],
                      {ADMIN_KEY: made["files"]["admin.conf"]}, {}):
                written.append(names[ADMIN_SECRET])
            refreshed, behind = _refresh_volumes(live, plan, written, made["secret_groups"])
            hashes = pki_hashes(plan, made["secret_groups"], rotation, params["recorded_rotation"] or {})
            # karmada-apiserver restarts for its certificates now, or after the components when
            # only they changed (pki/cert_rollout.py): from the Deployment running now
            running = live.get("apps/v1", "Deployment", plan["apiserver"]["name"], ns)
            hashes["apiserverRestart"] = apiserver_pki_hash(running, hashes["apiserver"], hashes["apiserverSpec"])
        except KubeError as exc:
            raise ModuleFailed(f"{exc.status} {exc.reason}: {exc.message}") from exc
    return {
        "changed": made["changed"] or bool(written),
        "certificates": made["certificates"],
        "changes": made["changes"],
        "removed": made["removed"],
        "pki_warnings": made["pki_warnings"] + [
            f"karmada-apiserver pod {b} {volume_refresh.SERVED_WAIT:.0f}s after its Secret was written "
            "(the kubelet's own sync brings it within about 90s)" for b in behind],
        "written": written,
        # running pods annotated so the kubelet syncs their certificate volumes now (pki/volume_refresh.py)
        "refreshed": refreshed,
        # the CA certificates (public; the steps needing a key read it from its Secret)
        "caBundle": {name: made["files"][name] for name in CA_BUNDLE},
        # pod-template hashes (plan/pass_plan.py: pki_hashes) and apiserverRestart: {now, later}
        "hashes": hashes,
        # status.caRotation while this pass does its phase ({} without a rotation)
        "caRotation": karmada_ca_rotation.in_progress(rotation, made["rotation"]) if rotation else {},
    }


def _refresh_volumes(live: Kube, plan: dict[str, Any], written: list[str],
                     groups: dict[str, dict[str, str]]) -> tuple[list[str], list[str]]:
    """Running karmada-apiserver and etcd pods whose Secret was written now read it now (they
    reload their pairs from disk; pki/volume_refresh.py); then wait for karmada-apiserver to
    serve the stored certificate. The pods annotated and the apiserver pods still behind."""
    names, ns = plan["names"], plan["namespace"]
    api = plan["apiserver"]
    # only this KarmadaDeployment's pods: its selector and the label naming its UID
    uid = plan["labels"].get(ownership.OWNER_UID_LABEL)
    ours = {ownership.OWNER_UID_LABEL: uid} if uid else {}
    refreshed: list[str] = []
    behind: list[str] = []
    if names["pkiSecret"] in written:
        value = volume_refresh.mounted_hash(groups["pki"], api["pkiFiles"])
        refreshed += volume_refresh.annotate(live, ns, {**api["pod"]["selector"], **ours}, value)
        if refreshed:
            behind = volume_refresh.wait_served(live, ns, {**api["pod"]["selector"], **ours}, api["port"],
                                                groups["pki"]["apiserver.crt"])
    etcd = plan["etcd"]
    if names["etcdPkiSecret"] in written and etcd.get("mode") != "external":
        value = volume_refresh.mounted_hash(groups["etcd"])
        refreshed += volume_refresh.annotate(live, ns, {**etcd["pod"]["selector"], **ours}, value)
    return refreshed, behind


def _store(kube: Kube, current: dict[str, Any] | None, name: str, namespace: str, labels: dict[str, str],
           data: dict[str, str], removals: dict[str, None]) -> bool:
    """Create the Secret, or patch what differs in it (dropping ``removals``); True when written."""
    encoded = _encoded(data)
    if current is None:
        kube.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": encoded})
        return True
    have = current.get("data") or {}
    patch_data: dict[str, Any] = {k: v for k, v in encoded.items() if have.get(k) != v}
    patch_data.update({k: None for k in removals if k in have})
    have_labels = (current.get("metadata") or {}).get("labels") or {}
    patch_labels = {k: v for k, v in labels.items() if have_labels.get(k) != v}
    if not patch_data and not patch_labels:
        return False
    patch: dict[str, Any] = {}
    if patch_data:
        patch["data"] = patch_data
    if patch_labels:
        patch["metadata"] = {"labels": patch_labels}
    kube.merge_patch("v1", "Secret", name, patch, namespace=namespace)
    return True
