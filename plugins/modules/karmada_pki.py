#!/usr/bin/python
"""Ansible module: compute the PKI set of a KarmadaDeployment (logic in module_utils/karmada_operator/pki/pki.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_pki
short_description: Generate, check and rotate the certificates of one KarmadaDeployment
description:
  - Computes the whole PKI of a Karmada control plane with the C(cryptography) package
    (no openssl) - a separate etcd CA, the Karmada CA, the front-proxy CA, the service-account
    key pair, every leaf (karmada-apiserver serving, etcd client/server/peer/healthcheck,
    front-proxy client, admin and per-component clients, aggregated-apiserver and webhook serving)
    and kubeconfigs (C(admin.conf) and one per component). File names follow kubeadm
    (C(ca.crt), C(apiserver.crt), C(etcd/server.crt), C(sa.key)...).
  - Idempotent. Pass what is stored today in O(existing); a certificate is re-issued only when it is
    missing, inside the renew window, signed by another CA, its SANs or subject changed, or its key
    parameters changed. A (re)generated or replaced CA re-issues all of its leaves.
  - The module never writes anything itself; the calling role stores RV(files) (or
    RV(secret_groups)) in Secrets.
  - B(Key material) is in the RV(files) and RV(secret_groups) return values. Every task that runs this
    module, registers its result or uses those values must set C(no_log=true). Inputs are not marked
    C(no_log) on purpose, because Ansible would then mask the same PEM text inside the returned files.
  - See docs/certificates.md for the full set, the file names and the rotation rules.
version_added: "0.1.0"
author: Karmada-Operator maintainers
options:
  namespace:
    description: Namespace of the KarmadaDeployment; goes into every service DNS SAN.
    type: str
    default: karmada-system
  name:
    description:
      - Name of the KarmadaDeployment; default prefix of the service names and kubeconfig cluster name.
    type: str
    default: karmada
  cluster_domain:
    description: Cluster DNS domain of the host cluster (C(spec.clusterDomain)).
    type: str
    default: cluster.local
  etcd:
    description:
      - "etcd names: C(replicas) (default 1), C(statefulSetName) (default C(<name>-etcd)),
        C(memberNames) (default C(<statefulSetName>-<i>)), C(headlessServiceName) (default
        C(<name>-etcd)), C(clientServiceName) (default C(<name>-etcd-client))."
      - etcd server and peer certificates carry every member's pod DNS name in all its forms.
    type: dict
    default: {}
  api_server:
    description:
      - "C(spec.apiServer): C(serviceName) (default C(<name>-apiserver)), C(port) (default 5443),
        C(externalLoadBalancer) C({addresses, dnsNames, port}), C(certSANs), and optional
        C(adminServerURL) / C(componentServerURL) to override the kubeconfig server URLs."
      - C(admin.conf) points at the first external balancer DNS name (else address) when there is one,
        else at the in-cluster service URL; component kubeconfigs always use the in-cluster URL.
    type: dict
    default: {}
  serving_services:
    description:
      - Service name per serving component (C(karmada-aggregated-apiserver), C(karmada-webhook),
        C(karmada-search), C(karmada-metrics-adapter); default C(<name>-<component without karmada->)).
      - A serving certificate is issued only for the components in C(components) that serve
        (see plugins/module_utils/karmada_operator/components.py).
    type: dict
    default: {}
  components:
    description: Components that get a client certificate and a kubeconfig. Default all known components.
    type: list
    elements: str
  certificates:
    description:
      - "C(spec.certificates): C(caValidityDays) (3650), C(leafValidityDays) (365), C(renewBeforeDays)
        (30), C(keyAlgorithm) C(RSA)|C(ECDSA) (RSA), C(keySize) (RSA 2048/3072/4096, ECDSA 256/384)."
      - "Bring your own CA: C(ca), C(etcdCA), C(frontProxyCA), each C({cert, key}) PEM text (Secret keys
        C(tls.crt)/C(tls.key) or C(ca.crt)/C(ca.key) are accepted too), read by the role from
        C(spec.certificates.caSecretRef)."
    type: dict
    default: {}
  existing:
    description:
      - What is stored today, kubeadm file name to PEM text (for example C(etcd/ca.crt)).
      - Build it from the Secrets' data with the C(secret_groups) layout (C(pki), C(etcd), C(kubeconfig)).
    type: dict
    default: {}
  existing_groups:
    description: Alternative to O(existing) in the RV(secret_groups) layout (group to data dict).
    type: dict
    default: {}
  existing_groups_base64:
    description: The values in O(existing_groups) are base64 (a Secret's C(.data) as the API returns it).
    type: bool
    default: false
  force_renew:
    description:
      - Names to re-issue (C(apiserver), C(etcd/server), C(ca), C(etcd/ca), C(front-proxy-ca), C(sa)...).
        Re-issuing a CA re-issues its leaves. C(leaves) names every leaf (not the CAs, not C(sa)).
        Unknown names are an error.
      - Without O(force_renew_issued_before) this is one-shot (every call re-issues); pass it once.
    type: list
    elements: str
    default: []
  force_renew_issued_before:
    description:
      - RFC 3339 time. Makes O(force_renew) declarative and idempotent - a listed certificate is
        re-issued only if it was issued before this time (for example the time a user asked for rotation).
      - C(sa) has no issue time and stays one-shot.
    type: str
  ca_rotation:
    description:
      - "One phase of a CA rotation with a trust transition: C({ca: ca|etcd/ca|front-proxy-ca,
        phase: Trusting|Reissuing|Dropping}) (from C(spec.certificates.caRotation) and
        C(status.caRotation), plugins/module_utils/karmada_operator/pki/ca_rotation.py)."
      - C(Trusting) stores a new CA beside the old one (C(<ca>-next.key)) and makes C(<ca>.crt) the bundle
        old+new; C(Reissuing) makes the new CA sign (the old key kept as C(<ca>-previous.key)) and re-issues
        every leaf of that CA; C(Dropping) leaves the new CA alone in the bundle and drops the old key.
        A phase asked for again keeps what is stored.
    type: dict
  plan:
    description:
      - The KarmadaDeployment's plan (the karmada_plan task's RV(plan)). Given it, the module is
        the certificates step of a pass: the options above come from C(plan.pki); it reads the
        stored Secrets and C(spec.certificates.caSecretRef) itself, writes the three Secrets
        (labels from the plan; keys no longer issued dropped) and returns RV(hashes),
        RV(written) and RV(caRotation).
    type: dict
  rotation:
    description: With O(plan), the CA rotation this pass works on (the pass's C(caRotation)).
    type: dict
    default: {}
  recorded_rotation:
    description: With O(plan), C(status.caRotation) as the pass started.
    type: dict
    default: {}
  kubeconfig:
    description: With O(plan), the cluster to read and write the Secrets in (default as every task).
    type: path
notes:
  - Check mode is supported; the result is computed but nothing is stored by this module anyway.
"""

EXAMPLES = r"""
- name: Compute the PKI set
  karmada_pki:
    namespace: "{{ ansible_operator_meta.namespace }}"
    name: "{{ ansible_operator_meta.name }}"
    cluster_domain: "{{ cluster_domain | default('cluster.local') }}"
    etcd: {replicas: 3}
    api_server: "{{ api_server | default({}) }}"
    certificates: "{{ certificates | default({}) }}"
    # the Secrets' .data as read by kubernetes.core.k8s_info (base64 values)
    existing_groups:
      pki: "{{ pki_secret.resources[0].data | default({}) }}"
      etcd: "{{ etcd_secret.resources[0].data | default({}) }}"
      kubeconfig: "{{ kubeconfig_secret.resources[0].data | default({}) }}"
    existing_groups_base64: true
  register: karmada_pki_result
  no_log: true

- name: Store the etcd certificates apart from Karmada's
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Secret
      metadata:
        name: "{{ ansible_operator_meta.name }}-etcd-pki"
        namespace: "{{ ansible_operator_meta.namespace }}"
      stringData: "{{ karmada_pki_result.secret_groups.etcd }}"
  no_log: true

- name: Report expiry dates (no key material in here)
  ansible.builtin.debug:
    msg: "{{ karmada_pki_result.certificates | items2dict(key_name='name', value_name='notAfter') }}"
"""

RETURN = r"""
hashes:
  description:
    - (with O(plan)) The pod-template hashes that decide which pods restart - C(components) (one
      per enabled component), C(apiserver), C(apiserverSpec), C(etcd) - and C(apiserverRestart)
      C({now, later}), the hash karmada-apiserver gets in its step and after the components.
  returned: with plan
  type: dict
written:
  description: (with O(plan)) The Secrets this run created or changed.
  returned: with plan
  type: list
caRotation:
  description: (with O(plan)) C(status.caRotation) for the phase this pass does; C({}) without a rotation.
  returned: with plan
  type: dict
changed:
  description: Whether any file was created or replaced (or an obsolete one dropped).
  type: bool
  returned: always
certificates:
  description: Metadata of every certificate (CAs first), safe to log and to put into status.
  type: list
  elements: dict
  returned: always
  sample:
    - {name: apiserver, file: apiserver.crt, subject: CN=karmada-apiserver, issuer: ca,
       notBefore: "2026-01-01T00:00:00Z", notAfter: "2027-01-01T00:00:00Z",
       sans: [localhost, 127.0.0.1], keyAlgorithm: RSA, keySize: 3072, serial: 1f3a}
changes:
  description: >-
    What was (re)issued and why. Reasons are missing, unparseable, key-mismatch, renew-window,
    wrong-issuer, san-mismatch, subject-mismatch, ca-rotated, ca-replaced, forced, content-changed.
  type: list
  elements: dict
  returned: always
  sample: [{name: apiserver, reasons: [san-mismatch]}, {name: admin.conf, reasons: [content-changed]}]
removed:
  description: File names present in O(existing) that are no longer part of the set.
  type: list
  elements: str
  returned: always
pki_warnings:
  description: Non-fatal findings (a leaf clamped to its CA's notAfter, a BYO CA near expiry).
  type: list
  elements: str
  returned: always
files:
  description: KEY MATERIAL. The full set, kubeadm file name to PEM/YAML text. Use no_log.
  type: dict
  returned: always
secret_removals:
  description: >-
    Per Secret group, the data keys of files no longer in the set (e.g. the certificates of a
    component switched off) mapped to null: a JSON merge patch that removes them from the Secret.
  type: dict
  returned: always
rotation:
  description: >-
    With O(ca_rotation): the rotated CA's C(oldSerial) and C(newSerial) (hex) and its stored
    C(state) (single, trusting, reissuing) after this run; empty otherwise.
  type: dict
  returned: always
secret_groups:
  description: >-
    KEY MATERIAL. The same set split for Secrets with valid data keys: C(pki) (Karmada and front-proxy
    CAs, leaves, sa.*), C(etcd) (the etcd/ files without the prefix), C(kubeconfig) (*.conf). Use no_log.
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import karmada_pki as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
