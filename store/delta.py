"""Changes between two JSON trees as RFC 6902 JSON Patch operations (``add``, ``remove``, ``replace``).

This is Hazel's own because it is the checkpoint hot path: the diff works in time proportional to the
state's shape plus the change (C-level equality on unchanged subtrees, list appends detected as
``add …/-``), and its output is sized by the change, never by the state or the run's history.
Inside containers, numbers Python holds equal (``1``, ``1.0``, ``True``) count as unchanged: pydantic
validates them back to the field's type anyway.
"""

from __future__ import annotations

import copy
from typing import Any

Op = dict[str, Any]


def _escape(key: str) -> str:
    """RFC 6901 reference token escaping."""
    return key.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def diff(old: Any, new: Any) -> list[Op]:
    """Return the operations that turn ``old`` into ``new`` (both JSON trees: dict, list, str, int, float,
    bool, None). Equal trees give ``[]``. The result shares values with ``new``; do not mutate either after."""
    ops: list[Op] = []
    _diff(old, new, "", ops)
    return ops


def _diff(old: Any, new: Any, path: str, ops: list[Op]) -> None:
    if old is new:
        return
    if type(old) is dict and type(new) is dict:
        if old == new:
            return
        for key, value in new.items():
            sub = f"{path}/{_escape(key)}"
            if key not in old:
                ops.append({"op": "add", "path": sub, "value": value})
            else:
                _diff(old[key], value, sub, ops)
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        return
    if type(old) is list and type(new) is list:
        n_old, n_new = len(old), len(new)
        if n_new >= n_old and new[:n_old] == old:
            ops.extend({"op": "add", "path": f"{path}/-", "value": v} for v in new[n_old:])
            return
        if n_new == n_old:
            changed = [i for i in range(n_new) if old[i] != new[i]]
            if len(changed) * 2 <= n_new:
                for i in changed:
                    _diff(old[i], new[i], f"{path}/{i}", ops)
                return
        if n_new < n_old and old[:n_new] == new and n_old - n_new <= 8:
            ops.extend({"op": "remove", "path": f"{path}/{i}"} for i in range(n_old - 1, n_new - 1, -1))
            return
        ops.append({"op": "replace", "path": path, "value": new})
        return
    if type(old) is type(new) and old == new:
        return
    ops.append({"op": "replace", "path": path, "value": new})


def apply(doc: Any, ops: list[Op], *, copy_values: bool = True) -> Any:
    """Apply ``ops`` to ``doc`` in place where possible and return the result (a new root for a root
    ``replace``). Values from ``ops`` are copied so that a later in-place apply never aliases them;
    pass ``copy_values=False`` when ``ops`` were freshly decoded and are used once.

    Raises:
        ValueError: an operation is malformed or its path does not exist in ``doc``.
    """
    for op in ops:
        kind, path = op.get("op"), op.get("path")
        if kind not in ("add", "remove", "replace") or not isinstance(path, str):
            raise ValueError(f"unsupported patch operation: {op!r}")
        if path == "":
            if kind == "remove":
                raise ValueError("cannot remove the document root")
            doc = copy.deepcopy(op["value"]) if copy_values else op["value"]
            continue
        tokens = path.split("/")[1:]
        if "~" in path:  # escapes are rare: most paths are plain keys and indexes
            tokens = [_unescape(t) for t in tokens]
        parent = doc
        try:
            for token in tokens[:-1]:
                parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ValueError(f"patch path {path!r} does not exist") from exc
        last = tokens[-1]
        value = None if kind == "remove" else (copy.deepcopy(op["value"]) if copy_values else op["value"])
        if isinstance(parent, list):
            if last == "-" and kind == "add":
                parent.append(value)
                continue
            try:
                index = int(last)
                if kind == "add":
                    parent.insert(index, value)
                elif kind == "remove":
                    del parent[index]
                else:
                    parent[index] = value
            except (ValueError, IndexError) as exc:
                raise ValueError(f"patch path {path!r} does not exist") from exc
        elif isinstance(parent, dict):
            if kind == "remove":
                if last not in parent:
                    raise ValueError(f"patch path {path!r} does not exist")
                del parent[last]
            else:
                parent[last] = value
        else:
            raise ValueError(f"patch path {path!r} does not exist")
    return doc
