"""Run a module's code in the controller process, as an action plugin of the same name.

A module is a new Python per task: AnsiballZ packs it with its module_utils, the interpreter
starts, imports the Kubernetes client (about 1-2 s on the 2-core test bed) and then does its
few API calls. The modules every reconcile runs (status writes, the fast-path check, the member
task) keep their code here in module_utils as ``run(params, check_mode, warn) -> result`` and
both adapters call it: ``plugins/modules/<name>.py`` (documentation, and usable on its own) and
``plugins/action/<name>.py`` (what the roles run). Ansible loads an action plugin's file in its
main process before it forks the task's worker, so the Kubernetes client imported at load time
(``preload_kubernetes``) is imported once per run, not once per task.

Controller side only: it imports ansible.plugins, which a module never gets.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from typing import Any

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.action import ActionBase
from module_run import ModuleFailed, Run  # module_utils on sys.path (the plugin puts it there)


def preload_kubernetes() -> None:
    """Import the Kubernetes client (and its dynamic client) now, in the process loading the plugin."""
    import karmada_kube  # noqa: PLC0415 - the plugin put module_utils on sys.path

    karmada_kube._kubernetes()
    karmada_kube._dynamic_client_class()


def in_process_action(argument_spec: dict[str, Any], run: Run, supports_check_mode: bool = False,
                      kubernetes: bool = True) -> type:
    """An ActionModule class that validates its arguments against ``argument_spec`` (as
    AnsibleModule would) and returns ``run(params, check_mode=, warn=)``; ModuleFailed becomes a
    failed result. ``kubernetes``: the task talks to a cluster, so the client is imported now
    (preload_kubernetes), while Ansible loads the plugin in its main process."""
    if kubernetes:
        preload_kubernetes()

    class ActionModule(ActionBase):
        TRANSFERS_FILES = False
        _requires_connection = False

        def run(self, tmp=None, task_vars=None):
            result = super().run(tmp, task_vars)
            _, params = self.validate_argument_spec(argument_spec=argument_spec)
            # Plain JSON types, as a module gets them: Ansible's templated values are its own
            # str subclasses (AnsibleUnsafeText), which yaml.safe_dump, say, refuses.
            params = json.loads(json.dumps(params, cls=AnsibleJSONEncoder))
            check_mode = bool(self._task.check_mode)
            if check_mode and not supports_check_mode:
                result.update(skipped=True, msg="this task does not support check mode")
                return result
            notes: list[str] = []
            # Nothing may reach this process's stdout or stderr while ``run`` goes on: Ansible
            # forks the task's worker holding its Display lock, which also guards writes to
            # them, so in the worker the main thread owns it for good and any other thread (the
            # member task runs one per member) that writes would wait forever. Python warnings
            # (urllib3's about an unverified HTTPS request, say) and stray output are collected
            # and come back as the result's warnings.
            out, err = io.StringIO(), io.StringIO()
            with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                    contextlib.redirect_stderr(err):
                warnings.simplefilter("default")
                try:
                    result.update(run(params, check_mode=check_mode, warn=notes.append))
                except ModuleFailed as exc:
                    result.update(failed=True, msg=exc.msg, **exc.extra)
            notes += sorted({f"{w.category.__name__}: {w.message}" for w in caught})
            notes += [f"output: {text.strip()[-2000:]}" for text in (out.getvalue(), err.getvalue()) if text.strip()]
            if notes:
                result["warnings"] = notes
            return result

    return ActionModule
