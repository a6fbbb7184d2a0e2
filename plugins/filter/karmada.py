"""Jinja filters for the Karmada roles (logic lives in plugins/module_utils)."""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from karmada_operator.backup.restore import restore_gate
from karmada_operator.kube import applied as applied_objects
from karmada_operator.kube.observed import failure_message, running_status
from karmada_operator.members.plan import member_jobs, member_results, members_status
from karmada_operator.plan import operations
from karmada_operator.runtime import templates as role_templates


def _plain(value):
    """Ansible hands filters str subclasses (AnsibleUnsafeText) that yaml.safe_dump refuses."""
    return json.loads(json.dumps(value, default=str))


def render_templates(names: list, role: str, context: dict) -> list:
    """The objects of ``role``'s templates ``names`` with ``context`` (the variables they use)."""
    try:
        return role_templates.render_objects(str(role), list(names or []), dict(context or {}))
    except KeyError as err:
        raise AnsibleFilterError(f"karmada_render: {err.args[0]}") from err


class FilterModule:
    def filters(self):
        return {
            # a day-2 operation's transition as status takes it: {fields, conditions, event}
            # (module_utils/karmada_operator/plan/operations.py)
            "karmada_day2": lambda record, name, transition, *facts: operations.report(
                _plain(record or {}), str(name), str(transition), *_plain(list(facts))),
            # skip applying what is already there (module_utils/karmada_operator/kube/applied.py)
            "karmada_with_digest": lambda objs: applied_objects.with_digest(_plain(objs or [])),
            "karmada_unregistered_apiservices": lambda live, wanted, ca: applied_objects.unregistered_apiservices(
                _plain(live or []), _plain(wanted or []), str(ca)),
            # a role's templates rendered by Jinja2 itself (module_utils/karmada_operator/runtime/templates.py)
            "karmada_render": render_templates,
            # the Running status once every gate passed (module_utils/karmada_operator/kube/observed.py)
            "karmada_running_status": lambda deployments, pods, plan, certificates, health, reports=None:
                running_status(_plain(deployments or []), _plain(pods or []), _plain(plan), _plain(certificates or []),
                               _plain(health or {}), _plain(reports or [])),
            "karmada_failure_message": lambda result, task, pods=None: failure_message(
                _plain(task), _plain(result or {}), pods=_plain(pods or [])),
            "karmada_restore_gate": lambda restores, name, status=None: restore_gate(
                _plain(restores or []), str(name), _plain(status or {})),
            # status.members, readyMembers and MembersReady from the member task's answer (members/plan.py)
            "karmada_members_status": lambda spec, previous, result, jobs: members_status(
                _plain(spec or []), _plain(previous or []), member_results(_plain(result or {}), _plain(jobs or []))),
            "karmada_member_jobs": lambda deployment: member_jobs(_plain(deployment or {})),
        }
