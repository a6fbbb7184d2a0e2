"""karmada_private_file: a file only the operator reads, 0600 in a 0700 directory, or its removal
(plugins/modules/karmada_private_file.py). Its content is given, or (``kubeconfig_from``) a
kubeconfig read from a Secret and pointed at another server: the credentials go from the Secret
to the file without passing through the task's options or facts."""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.kube.kubeconfig import with_server
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "path": {"type": "path", "required": True},
    "content": {"type": "str", "no_log": True},
    # instead of content: {namespace, name, key} of a Secret holding a kubeconfig, and the
    # server (and TLS server name) the file's copy dials
    "kubeconfig_from": {"type": "dict"},
    "kubeconfig": {"type": "path"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
}
SUPPORTS_CHECK_MODE = True


def write_private(path: str, content: str) -> bool:
    """Write ``content`` to ``path`` (0600, in a 0700 directory); False when it already held it."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    data = content.encode()
    try:
        with open(path, "rb") as current:
            if current.read() == data and (os.stat(path).st_mode & 0o777) == 0o600:
                return False
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")  # 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def remove(path: str) -> bool:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
        return True
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def secret_kubeconfig(source: dict[str, Any], kubeconfig: str | None) -> str:
    """The kubeconfig in Secret ``source`` (namespace, name, key) pointed at ``source["server"]``."""
    try:
        with Kube.default(kubeconfig, in_cluster_first=True) as kube:
            secret = kube.get("v1", "Secret", source["name"], source["namespace"])
    except (KubeConfigError, KubeError) as exc:
        raise ModuleFailed(f"Secret {source['namespace']}/{source['name']}: {exc}") from exc
    text = ((secret or {}).get("data") or {}).get(source["key"])
    if not text:
        raise ModuleFailed(f"Secret {source['namespace']}/{source['name']} has no key {source['key']}")
    return with_server(base64.b64decode(text).decode(), source["server"], source.get("tls_server_name") or "")


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    path, state = params["path"], params["state"]
    content = params["content"]
    if state == "present" and content is None and not params["kubeconfig_from"]:
        raise ModuleFailed("state is present but all of the following are missing: content, kubeconfig_from")
    try:
        if check_mode:
            changed = state == "absent" and os.path.lexists(path) or state == "present"
        elif state == "present":
            if content is None:
                content = secret_kubeconfig(params["kubeconfig_from"], params["kubeconfig"])
            changed = write_private(path, content)
        else:
            changed = remove(path)
    except OSError as exc:
        raise ModuleFailed(f"{path}: {exc.strerror or exc}", path=path) from exc
    return {"changed": changed, "path": path}
