"""A field-by-field diff of two states (JSON trees): each top-level field is unchanged, added, removed or
changed; a changed field is shown as a line diff (``difflib``) of its text, or of its JSON (indented) when
it is not text. Pure: no store, no engine."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

CONTEXT_LINES = 3
_NEWLINE = re.compile(r"\r?\n")


@dataclass(frozen=True)
class Line:
    """One line of a hunk: ``tag`` ``same``, ``del`` or ``add``; ``old``/``new``: 1-based line numbers (None
    on the side the line is not on)."""

    tag: str
    old: int | None
    new: int | None
    text: str


@dataclass(frozen=True)
class FieldDiff:
    """``status``: ``same``, ``added``, ``removed`` or ``changed``; ``hunks``: groups of lines around the
    changes (the whole value for an added or removed field)."""

    name: str
    status: str
    hunks: tuple[tuple[Line, ...], ...] = ()

    @property
    def counts(self) -> tuple[int, int]:
        """Lines removed and added."""
        lines = [line for hunk in self.hunks for line in hunk]
        return sum(line.tag == "del" for line in lines), sum(line.tag == "add" for line in lines)


def text_of(value: Any) -> str:
    """A value as the lines a diff compares: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def lines_of(text: str) -> list[str]:
    """``text``'s lines, split at ``\\n`` and ``\\r\\n`` only (``str.splitlines`` also splits at ``\\x0b``,
    ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028/9 and a lone ``\\r``, which would vanish into a line break
    instead of being shown as escapes); a final newline ends the last line, it does not start an empty one."""
    lines = _NEWLINE.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def line_diff(old: str, new: str, *, context: int = CONTEXT_LINES) -> tuple[tuple[Line, ...], ...]:
    """The hunks of a line diff of ``old`` -> ``new`` (``difflib.SequenceMatcher``'s grouped opcodes, the
    groups of ``difflib.unified_diff``)."""
    a, b = lines_of(old), lines_of(new)
    hunks = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        lines: list[Line] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [Line("same", i + 1, j1 + k + 1, a[i]) for k, i in enumerate(range(i1, i2))]
                continue
            if tag in ("replace", "delete"):
                lines += [Line("del", i + 1, None, a[i]) for i in range(i1, i2)]
            if tag in ("replace", "insert"):
                lines += [Line("add", None, j + 1, b[j]) for j in range(j1, j2)]
        hunks.append(tuple(lines))
    return tuple(hunks)


def state_diff(old: Any, new: Any) -> list[FieldDiff]:
    """Field by field, in the order of ``new`` then fields only ``old`` has. States that are not objects
    compare as one field ``state``."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        old, new = {"state": old}, {"state": new}
    out = []
    for name in [*new, *(k for k in old if k not in new)]:
        if name not in old:
            out.append(FieldDiff(name, "added", line_diff("", text_of(new[name]))))
        elif name not in new:
            out.append(FieldDiff(name, "removed", line_diff(text_of(old[name]), "")))
        elif old[name] == new[name]:
            out.append(FieldDiff(name, "same"))
        else:
            out.append(FieldDiff(name, "changed", line_diff(text_of(old[name]), text_of(new[name]))))
    return out
