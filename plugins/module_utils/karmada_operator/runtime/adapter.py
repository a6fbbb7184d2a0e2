"""Run a task's code in the controller process, as an action plugin of the same name.

A module is a new Python per task: AnsiballZ packs it, the interpreter starts, imports the
Kubernetes client (about 1-2 s on the 2-core test bed) and then does its few API calls. Every
task of ours therefore has one convention: ``karmada_operator.tasks.<name>`` (or, for the older
ones, the domain module named in its action plugin) holds ``ARGUMENT_SPEC`` and
``run(params, check_mode, warn) -> result``; ``plugins/action/<name>.py`` runs it here
(``in_process_action``) and ``plugins/modules/<name>.py`` documents it and runs the same ``run``
as a module process (``task.module_main``). Ansible loads an action plugin's file in its main
process before it forks the task's worker, so the Kubernetes client imported at load time
(``preload_kubernetes``) is imported once per run, not once per task.

Controller side only: it imports ansible.plugins, which a module never gets.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ansible.module_utils import basic
from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.action import ActionBase
from ansible.vars.clean import remove_internal_keys

from karmada_operator.task import ModuleFailed, Run


def preload_kubernetes() -> None:
    """Import the Kubernetes client (and its dynamic client) now, in the process loading the plugin."""
    from karmada_operator.kube import client as karmada_kube  # noqa: PLC0415 - imported when a plugin asks

    karmada_kube._kubernetes()
    karmada_kube._dynamic_client_class()


@contextlib.contextmanager
def _quiet(notes: list[str]) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Collect Python warnings and whatever is printed while the task runs.

    Nothing may reach this process's stdout or stderr meanwhile: Ansible forks the task's
    worker holding its Display lock, which also guards writes to them, so in the worker the main
    thread owns it for good and any other thread (the member task runs one per member) that
    writes would wait forever. Python warnings (urllib3's about an unverified HTTPS request, say)
    are added to ``notes``; the caller decides what the output is."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("default")
        yield out, err
    notes += sorted({f"{w.category.__name__}: {w.message}" for w in caught})


def _plain(value: Any) -> Any:
    """Plain JSON types, as a module gets them: Ansible's templated values are its own str
    subclasses (AnsibleUnsafeText), which yaml.safe_dump, say, refuses."""
    return json.loads(json.dumps(value, cls=AnsibleJSONEncoder))


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
            params = _plain(params)
            check_mode = bool(self._task.check_mode)
            if check_mode and not supports_check_mode:
                result.update(skipped=True, msg="this task does not support check mode")
                return result
            notes: list[str] = []
            # Stray output and warnings come back as the result's warnings (_quiet).
            with _quiet(notes) as (out, err):
                try:
                    result.update(run(params, check_mode=check_mode, warn=notes.append))
                except ModuleFailed as exc:
                    result.update(failed=True, msg=exc.msg, **exc.extra)
            notes += [f"output: {text.strip()[-2000:]}" for text in (out.getvalue(), err.getvalue()) if text.strip()]
            if notes:
                result["warnings"] = notes
            return result

    return ActionModule


def run_module_main(main: Callable[[], Any], args: dict[str, Any]) -> tuple[str, str]:
    """Run an AnsibleModule-based module's ``main()`` here, with ``args`` (internal ``_ansible_*``
    keys included) as its arguments, as ``ansible.module_utils.basic`` reads them in a module
    process. Returns (stdout, stderr): the module's JSON answer is on stdout. ``exit_json`` and
    ``fail_json`` end with sys.exit, which ends ``main`` here, not the process."""
    out, err = io.StringIO(), io.StringIO()
    saved = basic._ANSIBLE_ARGS
    basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}, cls=AnsibleJSONEncoder).encode()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
            main()
    finally:
        basic._ANSIBLE_ARGS = saved
    return out.getvalue(), err.getvalue()


def module_in_process_action(module: str, kubernetes: bool = True) -> type:
    """An ActionModule that runs a collection's AnsibleModule-based module (an import path:
    ``ansible_collections.kubernetes.core.plugins.modules.k8s``) in the task's worker instead of a
    new Python: the same code, options and result, without the process start and the imports.
    Only kubernetes.core's ``k8s`` and ``k8s_info`` go this way (``karmada_k8s``,
    ``karmada_k8s_info``): their code is not ours to give a ``run(params)``. Ours use
    ``in_process_action``.

    It sets ``basic._ANSIBLE_ARGS`` (where an AnsibleModule reads its arguments in a module
    process) for the call and turns the module's ``exit_json``/``fail_json`` (a SystemExit) back
    into a result. The module is imported now, while Ansible loads the plugin in its main process,
    so every worker it forks has it. Its arguments get the internal keys Ansible gives any module
    (check mode, diff, no_log, verbosity) and its answer is parsed as a module's would be."""
    if kubernetes:
        preload_kubernetes()
    main = importlib.import_module(module).main
    name = module.rsplit(".", 1)[-1]

    class ActionModule(ActionBase):
        TRANSFERS_FILES = False

        def run(self, tmp=None, task_vars=None):
            result = super().run(tmp, task_vars)
            args = _plain(dict(self._task.args))
            self._update_module_args(name, args, task_vars or {})
            # As from a module process: stderr and Python warnings (urllib3's about an
            # unverified HTTPS request, say) are dropped when the answer parses, and are the
            # failure's module_stderr when it does not.
            with _quiet([]):
                stdout, stderr = run_module_main(main, args)
            data = self._parse_returned_data({"stdout": stdout, "stderr": stderr})
            remove_internal_keys(data)
            result.update(data)
            return result

    return ActionModule
