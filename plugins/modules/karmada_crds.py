#!/usr/bin/python
"""Fetch, verify and render Karmada's CRDs (crds.tar.gz) for karmada-apiserver."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_crds
short_description: Karmada's CRDs from a release tarball, with the conversion-webhook patches merged in
description:
  - Fetches C(crds.tar.gz) (the release asset of the Karmada version, or a mirror), caching it under
    I(cache_dir) by URL and expected checksum, checks its sha256, reads it in memory with a safe
    tar reader (no absolute paths, no C(..), no links; top-level C(crds/) with C(bases/) and
    C(patches/)), renders the C(patches/webhook_in_*.yaml) conversion-webhook patches and merges them
    into the CRDs they name.
  - Returns the CRD objects sorted by name. Without I(kubeconfig) it talks to no cluster and
    never reports a change.
  - With I(kubeconfig), also applies them to that API server and waits until every one is
    Established: one list says what is there; a CRD carrying the digest of its definition, not
    edited since, is left alone; the others are created or replaced whole. Reports a change
    when it wrote one; C(applied) names them.
  - On failure, C(reason) is a condition reason (C(CrdSourceUnreachable), C(CrdChecksumMismatch),
    C(InvalidCrdTarball), C(InvalidCrdSource), C(InvalidCaBundle), C(CrdCacheUnwritable),
    C(CrdApplyFailed), C(CrdsNotEstablished)).
options:
  version:
    description: Karmada version; builds the default URL when I(url) is empty.
    type: str
  url:
    description: URL of C(crds.tar.gz) (C(http://), C(https://) or C(file://)); a mirror for air-gapped sites.
    type: str
  url_template:
    description:
      - Default URL with C({version}) in it, used when I(url) is empty; default the release
        asset (C(CRDS_URL_TEMPLATE) in plugins/module_utils/karmada_operator/components.py).
    type: str
  sha256:
    description: Expected sha256 (hex) of the tarball; a mismatch fails.
    type: str
  cache_dir:
    description: Directory for the cached tarballs (one sub-directory per URL and checksum).
    type: path
    required: true
  ca_bundle:
    description: Base64 of the PEM Karmada CA certificate, for the conversion webhooks' C(caBundle).
    type: str
    required: true
  webhook_service:
    description: Name of the karmada-webhook Service (C({{name}}) in the patches).
    type: str
    required: true
  webhook_namespace:
    description: Namespace of the karmada-webhook Service in the host cluster (C({{namespace}}) in the patches).
    type: str
    required: true
  timeout:
    description: Seconds to wait for the download.
    type: int
    default: 60
  validate_certs:
    description: Verify the TLS certificate of an C(https://) URL.
    type: bool
    default: true
  proxy:
    description: HTTP(S) proxy URL for the download.
    type: str
  kubeconfig:
    description: Kubeconfig of the API server to apply the CRDs to (karmada-apiserver); none, no apply.
    type: path
  established_timeout:
    description: Seconds the applied CRDs may take to be Established.
    type: int
    default: 120
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Karmada's CRDs, rendered
  karmada_crds:
    url: "{{ plan.crds.url }}"
    sha256: "{{ cr.spec.crds.sha256 | default(omit) }}"
    cache_dir: /tmp/karmada-operator/crds-cache
    ca_bundle: "{{ pki.files['ca.crt'] | b64encode }}"
    webhook_service: karmada-webhook
    webhook_namespace: karmada-system
  register: karmada_crds

- name: Karmada's CRDs, applied to karmada-apiserver and Established
  karmada_crds:
    url: "{{ plan.crds.url }}"
    cache_dir: /tmp/karmada-operator/crds-cache
    ca_bundle: "{{ pki.files['ca.crt'] | b64encode }}"
    webhook_service: karmada-webhook
    webhook_namespace: karmada-system
    kubeconfig: /tmp/karmada-apiserver.conf
"""

RETURN = r"""
crds:
  description: The CustomResourceDefinition objects, patches merged, sorted by name.
  returned: success, without I(kubeconfig)
  type: list
  elements: dict
names:
  description: Their names, in the same order.
  returned: success
  type: list
  elements: str
count:
  description: How many CRDs.
  returned: success
  type: int
url:
  description: The URL the tarball came from.
  returned: success
  type: str
sha256:
  description: sha256 of the tarball.
  returned: success
  type: str
from_cache:
  description: Whether the tarball came from the cache.
  returned: success
  type: bool
applied:
  description: With I(kubeconfig), the names of the CRDs created or replaced (none when all were as defined).
  returned: success, with I(kubeconfig)
  type: list
  elements: str
reason:
  description: Condition reason of the failure.
  returned: failure
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import karmada_crds as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
