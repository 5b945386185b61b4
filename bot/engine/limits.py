"""Size limits on what a person sends, checked in the engine so that every channel (REST, Slack, Jira, CLI)
gets them from one place, before anything is written.

- A state that a person makes (a run's input, the state an edit or a rewind's edits produce) is at most
  ``HAZEL_MAX_STATE_BYTES`` bytes of compact UTF-8 JSON (``Settings.max_state_bytes``, default 1 MiB), and
  nested at most about ``MAX_STATE_DEPTH`` levels (pydantic cannot serialise deeper values: its limit is
  255 levels, the state model's own included).
- A decision's text (feedback, a reason) is at most the same number of bytes.

The request body limit (``HAZEL_MAX_BODY_BYTES``) is the HTTP boundary's (``bot.server.http``); the CLI
checks its input files against ``HAZEL_MAX_STATE_BYTES`` before reading them.

The measure costs one ``json.dumps`` of the state at a start and at an edit; a step's checkpoint is not
measured (states written by a workflow's own code are not limited).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel

from bot.engine.errors import HazelError
from bot.engine.workflow import Workflow
from store.codec import is_text

DEFAULT_MAX_STATE_BYTES = 1024 * 1024
"""``Settings.max_state_bytes``'s default: 1 MiB."""
MAX_STATE_DEPTH = 250
"""Levels of JSON objects and arrays a state may nest (pydantic refuses to serialise past 255)."""
LIMIT_SETTING = "HAZEL_MAX_STATE_BYTES"




def not_text(text: str) -> str:
    """Why ``text`` (which ``is_text`` refused) is not Unicode text, naming its first lone surrogate: U+DC80..U+DCFF
    is what a byte 0x80..0xFF that is not UTF-8 becomes (Python's ``surrogateescape``: the command line, the
    environment, a file read as UTF-8); any other is a lone surrogate (``\\ud83d`` without its pair, in JSON).
    The message never quotes the text itself."""
    code = next((ord(c) for c in text if 0xD800 <= ord(c) <= 0xDFFF), None)
    if code is None:
        found = "a lone surrogate"
    elif 0xDC80 <= code <= 0xDCFF:
        found = f"U+{code:04X}, what the byte 0x{code - 0xDC00:02X} becomes where it is not UTF-8"
    else:
        found = f"U+{code:04X}, a lone surrogate (half of a UTF-16 pair)"
    return f"holds a character that is not Unicode text ({found}); send it as UTF-8"

_UNSTORABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")


def channel_text(text: str) -> str:
    """``text`` a channel gave about a person (a Slack user name or id, a Jira display name or account id), fit
    to store and show: each control character (a line break, NUL, C1; not a tab) and lone surrogate as U+FFFD.
    PostgreSQL refuses NUL in text and UTF-8 has no surrogate (either made every action of that person a 500
    there, while SQLite stored them), and a line break forged a row of ``hazel audit``'s table (s30 F3, F1,
    F9). Such an identity is nobody's: no Slack or Jira id holds one."""
    return _UNSTORABLE.sub("\ufffd", text) if _UNSTORABLE.search(text) else text


NOT_FINITE = ("holds a number that is not finite (NaN, Infinity, or one too large for a float, such as 1e400, "
              "which Python's JSON reads as Infinity): JSON has none, and a state would store it as null")
NUL = ("holds a NUL character (U+0000, \\u0000 in JSON), which is not text a database stores (PostgreSQL "
       "refuses it); take it out")
_NUL_IN_JSON = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
"""A NUL as compact JSON writes it (``\\u0000``), not preceded by an escaping backslash (``\\\\u0000`` is the
text backslash, ``u0000``)."""


def json_size_bytes(tree: Any) -> int:
    """Bytes of ``tree`` as compact UTF-8 JSON (lone surrogates counted as their 3 bytes)."""
    return len(json.dumps(tree, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def state_tree(wf: Workflow, state: BaseModel, *, max_bytes: int, what: str,
               refuse: type[HazelError], edited: Any = None) -> dict[str, Any]:
    """``state`` encoded as the store keeps it (``wf.codec.encode``), refused when too large or too deep.

    Args:
        max_bytes: ``Settings.max_state_bytes``.
        what: the state in the message, e.g. ``"the input of doc v1"``, ``"the edited state"``.
        refuse: the error to raise (``InvalidInputError`` at a start, ``InvalidDecisionError`` for an edit).
        edited: for an edit, the stored state it was made on: when that one was over ``max_bytes`` already (a
            step may write a larger state than a person may give), the refusal says so, and that no edit can
            be stored there.

    Raises:
        ``refuse``: over ``max_bytes`` (the message names the size, the limit and its setting, never the
            value), nested deeper than pydantic serialises, holding a number that is not finite (NaN,
            ±Infinity: not JSON), or holding a string (a value or a key) that is not Unicode text (a lone
            surrogate) or holds a NUL.
    """
    try:
        tree = wf.codec.encode(state)
        try:  # (NaN and ±Infinity: Python's JSON extensions, which a REST body may hold; stored as null)
            dumped = json.dumps(tree, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:
            if "Out of range float" not in str(exc):
                raise
            raise refuse(f"{what} {NOT_FINITE}") from None
        if not is_text(dumped):
            raise refuse(f"{what} {not_text(dumped)}")
        if _has_nul(dumped):
            raise refuse(f"{what} {NUL}")
        size = len(dumped.encode("utf-8"))
    except (ValueError, RecursionError) as exc:  # pydantic: "Maximum serialization depth exceeded"
        if isinstance(exc, RecursionError) or "depth" in str(exc):
            raise refuse(f"{what} is nested too deeply: at most {MAX_STATE_DEPTH} levels of JSON objects and "
                         f"arrays") from None
        raise
    if size > max_bytes:
        message = too_large(what, size, max_bytes)
        if edited is not None:
            before = json_size_bytes(edited)
            if before > max_bytes:
                message += (f", and the state it edits was already {before:,} bytes (written by a step): no edit "
                            f"can be stored there; rewind to an earlier, smaller checkpoint, or raise {LIMIT_SETTING}")
        raise refuse(message)
    return tree


def check_text(text: str, *, max_bytes: int, what: str, refuse: type[HazelError]) -> str:
    """``text`` when its UTF-8 is at most ``max_bytes`` bytes.

    Raises:
        ``refuse``: longer (the message names the size and the limit, never the text), or not Unicode text
            (a lone surrogate), or holding a NUL (U+0000).
    """
    if not is_text(text):
        raise refuse(f"{what} {not_text(text)}")
    if "\x00" in text:
        raise refuse(f"{what} {NUL}")
    if len(text) * 4 > max_bytes:  # (a cheap bound first: at most 4 bytes a character)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise refuse(too_large(what, size, max_bytes))
    return text


def refuse_unstorable(tree: Any, *, what: str, refuse: type[HazelError]) -> None:
    """Refuse a JSON tree (a decision's payload, a rewind's edits) holding a NUL (U+0000) in any string, a
    value or a key, at any depth: no database stores it as text (PostgreSQL's JSONB and text columns refuse
    it), so it is refused on every database, before anything is written; or a number that is not finite (a
    REST body's ``NaN``, or ``1e400``, which Python's JSON parser reads as Infinity): a graph's state, whose
    values are not checked as a state model's (``state_tree``), and the recorded decision stored it as null.
    Values JSON cannot hold are written as their ``str`` for the look.

    Raises:
        ``refuse``: ``"{what} holds a NUL character (U+0000, …); take it out"``, ``"{what} holds a number
            that is not finite …"``.
    """
    dumped = _looked_at(tree)
    if dumped is None:
        return
    if _has_nul(dumped):
        raise refuse(f"{what} {NUL}")
    if ("Infinity" in dumped or "NaN" in dumped) and not _finite(tree):
        raise refuse(f"{what} {NOT_FINITE}")


def _finite(tree: Any) -> bool:
    """False when ``tree`` holds a float that is NaN or ±Infinity (json's own check, in C)."""
    try:
        json.dumps(tree, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError as exc:
        if "Out of range float" in str(exc):
            return False
    return True


def refuse_not_text(tree: Any, *, what: str, refuse: type[HazelError]) -> None:
    """Refuse a JSON tree holding a lone surrogate anywhere: called after the checks that name the field of a
    value that holds one, it catches a mapping's KEY that does (pydantic's JSON dump writes such a key as
    U+FFFD: it was stored changed on SQLite, and refused by PostgreSQL as a 500; a fresh-user finding).

    Raises:
        ``refuse``: ``"{what} holds a character that is not Unicode text (U+D800, …); send it as UTF-8"``.
    """
    dumped = _looked_at(tree)
    if dumped is not None and not is_text(dumped):
        raise refuse(f"{what} {not_text(dumped)}")


def _looked_at(tree: Any) -> str | None:
    """``tree`` as compact JSON text for a look at its strings (values JSON cannot hold as their ``str``); None
    when empty, too deep or circular (the checks of the value itself answer those)."""
    if not tree:
        return None
    try:
        return json.dumps(tree, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):
        return None


def _has_nul(dumped: str) -> bool:
    """True when compact JSON ``dumped`` holds a NUL character in a string (one cheap ``in`` when it has none)."""
    return "\\u0000" in dumped and _NUL_IN_JSON.search(dumped) is not None


def too_large(what: str, size: int, max_bytes: int) -> str:
    """``"the edited state is 20,971,520 bytes; the limit is 1,048,576 (HAZEL_MAX_STATE_BYTES)"``: nothing
    of the value itself."""
    return f"{what} is {size:,} bytes; the limit is {max_bytes:,} ({LIMIT_SETTING})"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: a number must be finite")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"{literal} is too large for a number (at most about 1.8e308): a number must be finite")
    return value


def strict_json(text: str) -> Any:
    """``text`` read as JSON (RFC 8259), without Python's extensions ``NaN``, ``Infinity`` and ``-Infinity``,
    which a state would store as null, nor a number too large for a float (``1e400``: Python reads Infinity).

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``), or one of those constants; RecursionError: nested too
            deeply.
    """
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
