"""Atlassian Document Format (ADF): the text of a comment body that arrives as a JSON document.

Jira Cloud's REST API v3 (and apps or automation built on it) carries comment bodies as ADF rather than wiki
markup: ``{"type": "doc", "version": 1, "content": [...]}``, a tree of block nodes (``paragraph``,
``heading``, ``codeBlock``, ``bulletList`` / ``orderedList`` of ``listItem``, ``blockquote``, ``panel``,
``table``, ``rule``…) holding inline nodes (``text``, ``hardBreak``, ``mention``, ``emoji``, ``inlineCard``,
``date``, ``status``). Source: https://developer.atlassian.com/cloud/jira/platform/apis/document/structure/
and the node pages under it.

``adf_text`` reads it as plain text, so commands (``/approve``, ``/edit`` followed by a code block) and feedback
are read the same way from either format (a command only from the author's own first line:
``opens_with_own_words``): blocks separated by a blank line, ``hardBreak`` as a newline, a
code block's text verbatim, list items as ``- item`` / ``1. item``, a mention as its display text
(``@Sam``), marks (bold, links…) dropped.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100
"""Deepest nesting of ADF nodes read (real documents nest a few levels; lists in lists in tables perhaps 10)."""
_INLINE_ATTR = {"mention": "text", "emoji": "text", "status": "text", "inlineCard": "url", "date": "timestamp"}


class ADFError(ValueError):
    """Not an ADF document Hazel can read (the message says why)."""


def is_adf(value: Any) -> bool:
    """True when ``value`` is an ADF document: a mapping with ``"type": "doc"``."""
    return isinstance(value, dict) and value.get("type") == "doc"


def adf_text(doc: Any) -> str:
    """The plain text of an ADF document (see the module's docstring for the rules); unknown nodes give the
    text they contain, media and rules give nothing.

    Raises:
        ADFError: ``doc`` is not a document, its ``content`` is not a list, or it nests deeper than
            ``MAX_DEPTH``.
    """
    if not is_adf(doc):
        raise ADFError('not an ADF document (no "type": "doc")')
    if not isinstance(doc.get("content", []), list):  # (read as no text, it was ignored as an empty comment)
        raise ADFError("its content is not a list of nodes")
    return _blocks(doc.get("content"), 0).strip("\n")


def opens_with_own_words(doc: Any) -> bool:
    """True when the document's first block with any text is a paragraph or a heading (the author's own
    line), False when it is anything else: a ``blockquote`` (someone's words quoted), a ``codeBlock`` (text
    shown), a list, a table, a panel. Only the author's own first line can be a command (``/approve``): in wiki
    markup a quote or a code block starts with ``{quote}``, ``bq.`` or ``{code}`` and is never one either.

    Raises:
        ADFError: as ``adf_text``.
    """
    if not is_adf(doc):
        raise ADFError('not an ADF document (no "type": "doc")')
    for node in _children(doc.get("content")):
        if _block(node, 1).strip():
            return node.get("type") in ("paragraph", "heading", "text", "hardBreak", *_INLINE_ATTR)
    return True


def _children(content: Any) -> list[dict[str, Any]]:
    return [n for n in content if isinstance(n, dict)] if isinstance(content, list) else []


def _blocks(content: Any, depth: int) -> str:
    parts = [_block(node, depth + 1) for node in _children(content)]
    return "\n\n".join(p for p in parts if p)


def _check(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ADFError(f"the comment's document nests deeper than {MAX_DEPTH} levels")


def _block(node: dict[str, Any], depth: int) -> str:
    """One block node at ``depth`` (the document's own blocks are at 1; every node inside another, a list's
    item or a table's row and cell included, one more)."""
    _check(depth)
    kind = node.get("type")
    if kind in ("paragraph", "heading"):
        return _inline(node.get("content"), depth)
    if kind == "codeBlock":  # its text verbatim: what /edit reads as the new value
        return "".join(str(n.get("text") or "") for n in _children(node.get("content")) if n.get("type") == "text")
    if kind in ("bulletList", "orderedList"):
        start = (node.get("attrs") or {}).get("order", 1) if kind == "orderedList" else None
        number = start if isinstance(start, int) and not isinstance(start, bool) else 1
        lines = []
        for i, item in enumerate(_children(node.get("content"))):  # an item is a level, its blocks the next
            _check(depth + 1)
            marker = f"{number + i}. " if kind == "orderedList" else "- "
            text = _blocks(item.get("content"), depth + 1).replace("\n\n", "\n")
            lines.append(marker + text.replace("\n", "\n" + " " * len(marker)))
        return "\n".join(lines)
    if kind == "table":
        rows = []
        for row in _children(node.get("content")):  # a row and a cell are a level each
            _check(depth + 2)
            cells = [_blocks(cell.get("content"), depth + 2).replace("\n", " ") for cell in _children(row.get("content"))]
            rows.append(" | ".join(cells))
        return "\n".join(rows)
    if kind in ("rule", "mediaSingle", "mediaGroup", "media"):
        return ""
    if kind in ("text", "hardBreak", *_INLINE_ATTR):  # an inline node where a block is expected
        return _inline([node], depth)
    return _blocks(node.get("content"), depth)  # blockquote, panel, expand, layouts, unknown blocks


def _inline(content: Any, depth: int) -> str:
    out = []
    for node in _children(content):
        kind = node.get("type")
        if kind == "text":
            out.append(str(node.get("text") or ""))
        elif kind == "hardBreak":
            out.append("\n")
        elif kind in _INLINE_ATTR:
            attrs = node.get("attrs") or {}
            value = attrs.get(_INLINE_ATTR[kind]) or (f"@{attrs['id']}" if kind == "mention" and attrs.get("id")
                                                      else attrs.get("shortName", ""))
            out.append(str(value))
        elif node.get("content"):
            out.append(_blocks(node.get("content"), depth + 1))
    return "".join(out)
