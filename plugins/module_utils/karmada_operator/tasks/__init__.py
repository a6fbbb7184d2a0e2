"""The tasks the roles run, one module each, named as the task: ``ARGUMENT_SPEC``,
``SUPPORTS_CHECK_MODE`` and ``run(params, check_mode=False, warn=...) -> result`` (a failure is
``task.ModuleFailed``). ``plugins/action/<name>.py`` runs it in the task's worker
(``runtime.adapter.in_process_action``); ``plugins/modules/<name>.py`` holds its documentation
and runs the same ``run`` as a module process (``task.module_main``). The top layer: it may
import any other."""
