"""Karmada-Operator's Python code: what the roles' tasks, the filter and inventory plugins and the
backup and restore Jobs run. Layers, lowest first: ``task`` and ``components`` (no imports of
ours), ``kube`` (the Kubernetes client), ``etcd``, ``pki``, ``controlplane``, ``plan``,
``members``, ``runtime`` (the Ansible side), ``backup`` (EtcdBackup and EtcdRestore, the Jobs'
programs apart from the controllers), ``tasks`` (the tasks the roles run). docs/architecture.md
"The package"."""
