"""The module side of a module that also runs in the controller (karmada_operator/runtime/adapter.py).

Its code is ``run(params, check_mode, warn) -> result`` in module_utils; a failure is
ModuleFailed. ``module_main`` is what plugins/modules/<name>.py calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Run = Callable[..., dict[str, Any]]


class ModuleFailed(Exception):
    """A failed run: ``msg`` and any extra keys of the result (e.g. ``field``)."""

    def __init__(self, msg: str, **extra: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.extra = extra


def module_main(module: Any, run: Run) -> None:
    """``run`` with an AnsibleModule's params, then exit_json or fail_json."""
    try:
        out = run(module.params, check_mode=module.check_mode, warn=module.warn)
    except ModuleFailed as exc:
        module.fail_json(msg=exc.msg, **exc.extra)
    module.exit_json(**out)
