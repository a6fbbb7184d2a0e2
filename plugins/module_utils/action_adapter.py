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
import importlib
import importlib.abc
import importlib.util
import io
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from ansible.module_utils import basic
from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.action import ActionBase
from ansible.vars.clean import remove_internal_keys
from module_run import ModuleFailed, Run  # module_utils on sys.path (the plugin puts it there)


def preload_kubernetes() -> None:
    """Import the Kubernetes client (and its dynamic client) now, in the process loading the plugin."""
    import karmada_kube  # noqa: PLC0415 - the plugin put module_utils on sys.path

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


_UTILS = Path(__file__).resolve().parent
_MODULES = _UTILS.parent / "modules"
_UTILS_PREFIX = "ansible.module_utils."


class _OurModuleUtils(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``ansible.module_utils.<name>`` for our module_utils files, in the controller process.

    In a module process AnsiballZ puts our module_utils under ``ansible.module_utils``; here they
    are plain modules on sys.path (the action plugins import them so). This finder, last on
    sys.meta_path (it never shadows Ansible's own), gives the module of that name: one object
    under both names, so an exception class is the same class whichever name raised it."""

    def find_spec(self, fullname, path=None, target=None):
        name = fullname.removeprefix(_UTILS_PREFIX)
        if name == fullname or "." in name or not (_UTILS / f"{name}.py").is_file():
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(spec.name.removeprefix(_UTILS_PREFIX))

    def exec_module(self, module):
        pass  # imported once, by its plain name


def _load_module(module: str) -> ModuleType:
    """``module``: an import path (a collection's module), or the name of one of ours in plugins/modules."""
    if "." in module:
        return importlib.import_module(module)
    if str(_UTILS) not in sys.path:
        sys.path.append(str(_UTILS))
    if not any(isinstance(f, _OurModuleUtils) for f in sys.meta_path):
        sys.meta_path.append(_OurModuleUtils())
    spec = importlib.util.spec_from_file_location(f"karmada_operator_module_{module}", _MODULES / f"{module}.py")
    assert spec is not None and spec.loader is not None, module
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def module_in_process_action(module: str, kubernetes: bool = True) -> type:
    """An ActionModule that runs the AnsibleModule-based module ``module`` in the task's worker
    instead of a new Python: the same code, options and result, without the process start and
    the imports. ``module`` is an import path (a collection's module:
    ``ansible_collections.kubernetes.core.plugins.modules.k8s``) or the name of one of ours
    (``karmada_rollout``: plugins/modules/karmada_rollout.py).

    The module is imported now, while Ansible loads the plugin in its main process, so every
    worker it forks has it. Its arguments get the internal keys Ansible gives any module (check
    mode, diff, no_log, verbosity) and its answer is parsed as a module's would be."""
    if kubernetes:
        preload_kubernetes()
    main = _load_module(module).main
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
