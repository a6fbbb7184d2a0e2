"""kubernetes.core.k8s, run in the task's worker (module_utils/karmada_operator/runtime/adapter.py).

The same module code, options and result as `kubernetes.core.k8s`, without a new Python per
task (its start and the Kubernetes client's import took 1-2 s of every call on the 2-core test
bed). Options: kubernetes.core.k8s's (plugins/modules/karmada_k8s.py).
"""

from __future__ import annotations

from karmada_operator.runtime.adapter import module_in_process_action

ActionModule = module_in_process_action("ansible_collections.kubernetes.core.plugins.modules.k8s")
