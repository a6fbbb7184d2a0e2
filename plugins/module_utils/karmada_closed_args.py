"""Command-line flags a KarmadaDeployment may not set through extraArgs.

The operator wires each of these itself (certificates it generates, the kubeconfig it writes,
the authentication and authorization it relies on); a user value would weaken the control
plane's security or cut a component off from the PKI. Keyed by the spec key whose
``extraArgs`` they close: ``apiServer``, ``etcd`` (``spec.etcd.local``) and the
``spec.components`` keys. Flag names are written without leading dashes, as in extraArgs.

One home for the list: hack/crdgen/schema.py turns it into the CRD's CEL rules (the API
server refuses them) and karmada_plan refuses them too (for objects stored before the rule).
docs/karmadadeployment.md explains each entry. Plain Python, no imports.
"""

from __future__ import annotations

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

_AGGREGATED_SERVER = {
    "kubeconfig": _KUBECONFIG,
    "authentication-kubeconfig": _AUTHN_KUBECONFIG,
    "authorization-kubeconfig": _AUTHZ_KUBECONFIG,
    "client-ca-file": _CLIENT_CA,
    "tls-cert-file": _TLS_CERT,
    "tls-private-key-file": _TLS_KEY,
    "tls-min-version": _TLS_MIN,
    "tls-cipher-suites": _TLS_CIPHERS,
}
_ETCD_CLIENT = {
    "etcd-cafile": _ETCD_CA,
    "etcd-certfile": _ETCD_CERT,
    "etcd-keyfile": _ETCD_KEY,
}

CLOSED_ARGS: dict[str, dict[str, str]] = {
    "apiServer": {
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
        **_ETCD_CLIENT,
    },
    "etcd": {
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
    },
    "aggregatedAPIServer": {**_AGGREGATED_SERVER, **_ETCD_CLIENT},
    "kubeControllerManager": {
        "kubeconfig": _KUBECONFIG,
        "cluster-signing-cert-file": "the CA that signs certificate requests is the operator's Karmada CA",
        "cluster-signing-key-file": "key of the CA that signs certificate requests",
        "service-account-private-key-file": "key that signs service account tokens; it must match "
                                            "karmada-apiserver's service-account-key-file",
        "root-ca-file": "CA put into service account token Secrets; it must be the Karmada CA",
        "use-service-account-credentials": "each controller runs with its own least-privilege service account",
    },
    "controllerManager": {"kubeconfig": _KUBECONFIG},
    "scheduler": {"kubeconfig": _KUBECONFIG},
    "webhook": {
        "kubeconfig": _KUBECONFIG,
        "cert-dir": "directory of the serving certificate the operator issues and mounts",
    },
    "descheduler": {"kubeconfig": _KUBECONFIG},
    "search": {**_AGGREGATED_SERVER, **_ETCD_CLIENT},
    "metricsAdapter": dict(_AGGREGATED_SERVER),
}


def closed_args_used(key: str, extra: dict[str, str] | None) -> list[str]:
    """The flags in ``extra`` (a component's extraArgs) that CLOSED_ARGS[key] refuses, sorted."""
    closed = CLOSED_ARGS.get(key) or {}
    return sorted(flag for flag in (extra or {}) if flag in closed)
