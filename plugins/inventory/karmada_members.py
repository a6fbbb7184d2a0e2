"""Ansible inventory plugin karmada_members: one host per KarmadaDeployment member cluster."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: karmada_members
short_description: Member clusters of KarmadaDeployment objects, grouped by what the operator would do
description:
  - Lists C(KarmadaDeployment) objects (operator.karmada.io/v1alpha1) from the Kubernetes API
    and yields one host per member cluster, named C(<namespace>/<deployment>/<member>).
  - Members in C(spec.members) that are not Joined in C(status.members), or whose spec changed
    since they joined (C(status.members[].specHash) differs), go to group C(add_member).
    Members still registered in status (Joined, Joining, Unjoining, Failed) but gone from spec
    go to C(del_member). Joined and unchanged members go to C(members_joined).
  - A KarmadaDeployment being deleted (C(metadata.deletionTimestamp) set) puts every member still
    registered in status into C(del_member), spec or not, so its finalizer can unjoin them.
  - Every host is also in C(karmada_<namespace>_<name>) (its deployment, non-alphanumerics
    replaced by C(_)) and in C(push) or C(pull) (its sync mode).
  - The configuration file name must end with C(karmada_members.yml) or C(karmada_members.yaml).
version_added: "0.1.0"
author: Karmada-Operator maintainers
extends_documentation_fragment:
  - constructed
requirements:
  - kubernetes (Python client)
options:
  plugin:
    description: Marks the file as this plugin's configuration.
    required: true
    choices: [karmada_members]
  kubeconfig:
    description:
      - Kubeconfig file of the host cluster (where the KarmadaDeployment objects live).
      - Without it, E(KUBECONFIG) is used (it may list several files), then the in-cluster
        service account, then C(~/.kube/config).
    type: path
    env:
      - name: K8S_AUTH_KUBECONFIG
  context:
    description: Kubeconfig context to use (default the current context).
    type: str
    env:
      - name: K8S_AUTH_CONTEXT
  namespaces:
    description: Only KarmadaDeployments in these namespaces (default all namespaces).
    type: list
    elements: str
    default: []
  name:
    description: Only the KarmadaDeployment(s) with this name.
    type: str
  label_selector:
    description: Only KarmadaDeployments matching this label selector (V(env=prod,tier!=test)).
    type: str
  request_timeout:
    description: Seconds to wait for each API answer.
    type: float
    default: 20
  local_connection:
    description:
      - Set C(ansible_connection=local) and the controller's Python on every host, because the
        plays reach member clusters through their API from the machine running Ansible.
    type: bool
    default: true
"""

EXAMPLES = r"""
# karmada_members.yml: every member of every KarmadaDeployment, with the current kubeconfig
plugin: karmada_members
---
# prod.karmada_members.yaml: one deployment in one namespace, extra groups by region
plugin: karmada_members
kubeconfig: ~/.kube/host-cluster
namespaces: [karmada-system]
name: karmada
label_selector: env=prod
keyed_groups:
  - key: karmada_member_region
    prefix: region

# See what the operator would do:
#   ansible-inventory -i karmada_members.yml --graph
#   ansible-inventory -i karmada_members.yml --host karmada-system/karmada/member1
"""

from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from karmada_operator.kube.client import Kube, KubeConfigError, KubeError

# Controller-side plugins cannot import custom module_utils through ansible.module_utils
# (only modules get them, packed by AnsiballZ), so load the same files as plain Python.
from karmada_operator.members import plan as members_plan

GROUP = "operator.karmada.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "KarmadaDeployment"
PLURAL = "karmadadeployments"


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "karmada_members"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith(("karmada_members.yml", "karmada_members.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        deployments = self.fetch_deployments()
        self.populate(members_plan.build_inventory(deployments))

    def populate(self, plan: members_plan.MemberInventory) -> None:
        for group in plan.groups:
            self.inventory.add_group(group)
        extra = {}
        if self.get_option("local_connection"):
            extra = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
        strict = self.get_option("strict")
        compose, groups, keyed = self.get_option("compose"), self.get_option("groups"), self.get_option("keyed_groups")
        for host, hostvars in plan.hosts.items():
            self.inventory.add_host(host)
            for key, value in {**extra, **hostvars}.items():
                self.inventory.set_variable(host, key, value)
            if compose or groups or keyed:
                self._set_composite_vars(compose, hostvars, host, strict=strict)
                self._add_host_to_composed_groups(groups, hostvars, host, strict=strict)
                self._add_host_to_keyed_groups(keyed, hostvars, host, strict=strict)
        for group, hosts in plan.groups.items():
            for host in hosts:
                self.inventory.add_child(group, host)

    def fetch_deployments(self) -> list[dict[str, Any]]:
        """KarmadaDeployment objects as dicts, filtered by namespaces, name and labels."""
        try:
            kube = Kube.default(self.get_option("kubeconfig"), context=self.get_option("context"),
                                timeout=float(self.get_option("request_timeout")))
        except KubeConfigError as exc:
            raise AnsibleParserError(f"karmada_members: {exc}. Point the kubeconfig option or KUBECONFIG at a "
                                     f"valid kubeconfig.") from None
        name, labels = self.get_option("name"), self.get_option("label_selector") or ""
        items: list[dict[str, Any]] = []
        with kube:
            try:
                for namespace in self.get_option("namespaces") or [None]:
                    items.extend(kube.list(API_VERSION, KIND, namespace, label_selector=labels,
                                           field_selector=f"metadata.name={name}" if name else ""))
            except KubeError as exc:
                raise AnsibleParserError(_api_error(exc, kube)) from None
        return items


def _api_error(exc: KubeError, kube: Kube) -> str:
    if exc.status == 0:
        return (f"karmada_members: {exc.message} (credentials from {kube.where}). Check that the API server is up "
                f"and that the kubeconfig names it.")
    hint = {
        401: "the credentials were refused; renew the kubeconfig",
        403: f"grant list on {PLURAL}.{GROUP} to this identity",
        404: f"the {PLURAL}.{GROUP} CRD is not installed (make install)",
    }.get(exc.status, "see the API server's message")
    return (f"karmada_members: listing {PLURAL}.{GROUP} at {kube.server} (credentials from {kube.where}) failed "
            f"with HTTP {exc.status}: {exc.message}. {hint[0].upper()}{hint[1:]}.")
