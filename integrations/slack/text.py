"""Artefacts as Slack text: escaping, Markdown to mrkdwn, and splitting into pieces that fit a text object.

Slack facts used here (https://docs.slack.dev/messaging/formatting-message-text):
- ``&``, ``<`` and ``>`` must be sent as ``&amp;``, ``&lt;`` and ``&gt;`` (they are control characters);
- mrkdwn bold is ``*x*``, code blocks are fenced with triple backticks; there are no headings.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from integrations.terminal import for_terminal

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BOLD = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
_FENCE = re.compile(r"^\s*```")
_ENTITY_TAIL = re.compile(r"&[a-z]{0,3}$")


def escape(text: str) -> str:
    """``text`` with Slack's three control characters escaped, and the characters a display acts on (control
    characters but newline and tab, C1, and the bidirectional overrides and isolates U+202A–U+202E,
    U+2066–U+2069, which can make a card read other than it is) shown as visible escapes (``\u202e``), as the
    CLI and the run pages show them (``integrations.terminal.for_terminal``)."""
    return for_terminal(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_keeping(text: str, mentions: Iterable[str]) -> str:
    """``escape(text)`` with Hazel's own ``mentions`` (each exactly as Hazel wrote it, e.g. ``<@U0123>`` of
    an approver, see ``blocks.mentions``) put back: for an engine message that names the approvers in Slack's
    syntax (``Approvers.describe``) and also quotes stored text (a person's name). A stored text can then
    produce only a mention the same message already holds."""
    out = escape(text)
    for mention in sorted(set(mentions), key=len, reverse=True):
        out = out.replace(escape(mention), mention)
    return out


def truncate(text: str, limit: int, *, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters (ending in ``ellipsis`` when cut), never inside an escape
    entity such as ``&amp;``."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - len(ellipsis))]
    tail = _ENTITY_TAIL.search(cut)
    if tail:
        cut = cut[: tail.start()]
    return cut + ellipsis


def plain(value: Any) -> str:
    """The artefact as plain text, complete (what a file attachment holds): a string as it is, a mapping of
    strings as ``── name ──`` sections, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return "\n\n".join(f"── {k} ──\n{v}" for k, v in value.items())
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _markdown_units(text: str) -> list[tuple[str, bool]]:
    """Lines of a Markdown string as ``(mrkdwn line, inside a code block)``; fence lines are dropped (the
    packer writes its own fences so that every piece is balanced)."""
    units: list[tuple[str, bool]] = []
    in_code = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            units.append((escape(line), True))
            continue
        heading = _HEADING.match(line)
        line = escape(heading.group(1) if heading else line)
        line = _BOLD.sub(r"*\1*", line)
        units.append((f"*{line}*" if heading and line else line, False))
    return units


def units_of(value: Any) -> list[tuple[str, bool]]:
    """The artefact as mrkdwn lines ``(line, in code block)``: strings as Markdown, a mapping of strings as a
    bold name followed by its content in a code block, anything else as JSON in a code block."""
    if isinstance(value, str):
        return _markdown_units(value)
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        units: list[tuple[str, bool]] = []
        for i, (name, body) in enumerate(value.items()):
            if i:
                units.append(("", False))
            units.append((f"*{escape(str(name))}*", False))
            units.extend((escape(line), True) for line in body.rstrip("\n").split("\n"))
        return units
    return [(escape(line), True) for line in plain(value).split("\n")]


def _split_long(line: str, size: int) -> list[str]:
    """Cut one over-long line into pieces of at most ``size`` characters, never inside an entity."""
    pieces = []
    while len(line) > size:
        cut = line[:size]
        tail = _ENTITY_TAIL.search(cut)
        if tail and tail.start() > 0:
            cut = cut[: tail.start()]
        pieces.append(cut)
        line = line[len(cut):]
    pieces.append(line)
    return pieces


FENCE_COST = 4
"""Characters one code fence line costs (```` ``` ```` plus a newline)."""


def pack(units: list[tuple[str, bool]], limit: int) -> list[str]:
    """Greedily pack mrkdwn lines into texts of at most ``limit`` characters; a code block cut between two
    texts is closed at the end of one and reopened at the start of the next. Blank texts are dropped."""
    size = limit - 2 * FENCE_COST - 1
    flat: list[tuple[str, bool]] = []
    for line, code in units:
        flat.extend((piece, code) for piece in _split_long(line, size))
    chunks: list[str] = []
    lines: list[str] = []
    length, prev_code = 0, False

    def close() -> None:
        nonlocal lines, length, prev_code
        if prev_code:
            lines.append("```")
        text = "\n".join(lines)
        if text.strip().strip("`").strip():
            chunks.append(text)
        lines, length, prev_code = [], 0, False

    for line, code in flat:
        cost = len(line) + 1 + (FENCE_COST if code != prev_code else 0)
        if lines and length + cost + (FENCE_COST if code else 0) > limit:
            close()
            cost = len(line) + 1 + (FENCE_COST if code else 0)
        if code != prev_code:
            lines.append("```")
        lines.append(line)
        length += cost
        prev_code = code
    if lines:
        close()
    return chunks


def chunks(value: Any, limit: int) -> list[str]:
    """The artefact as mrkdwn texts of at most ``limit`` characters each, in order."""
    return pack(units_of(value), limit)
