"""The Ansible side: the in-process action adapter, status writes, the CR passes and the role templates."""
