"""karmada_private_file: a file only the operator reads, 0600 in a 0700 directory, or its removal
(plugins/modules/karmada_private_file.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "path": {"type": "path", "required": True},
    "content": {"type": "str", "no_log": True},
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


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    path, state = params["path"], params["state"]
    if state == "present" and params["content"] is None:
        raise ModuleFailed("state is present but all of the following are missing: content")
    try:
        if check_mode:
            changed = state == "absent" and os.path.lexists(path) or state == "present"
        elif state == "present":
            changed = write_private(path, params["content"])
        else:
            changed = remove(path)
    except OSError as exc:
        raise ModuleFailed(f"{path}: {exc.strerror or exc}", path=path) from exc
    return {"changed": changed, "path": path}
