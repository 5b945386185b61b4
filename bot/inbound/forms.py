"""Form bodies (``application/x-www-form-urlencoded``) that are not UTF-8 text, found before they are parsed.

Starlette's form parser (the run pages) and Bolt's (``urllib.parse.parse_qsl``: a slash command, an
interactivity ``payload``) percent-decode a field with ``errors="replace"``: ``feedback=%FF%FE`` became the
text ``"\\ufffd\\ufffd"`` and was recorded as if the person had typed it. The channels ask ``not_utf8`` first
and refuse such a body with one line, writing nothing, as the REST API refuses a body that is not UTF-8. A
U+FFFD the person did type (``%EF%BF%BD``) is UTF-8 and is taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote_plus, unquote_to_bytes

FORM = "application/x-www-form-urlencoded"
MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class NotUtf8:
    """Where a form body stops being UTF-8.

    Attributes:
        field: the name of the field whose name or value decodes to a byte that is not UTF-8 (cut to
            ``MAX_NAME_CHARS``), or None when the raw body itself is not UTF-8.
        byte: the first such byte (0..255).
        at: its offset in the raw body (``field`` None), or in the field's percent-decoded value or name.
    """

    field: str | None
    byte: int
    at: int

    @property
    def what(self) -> str:
        """``a byte that is not UTF-8 (0xFF, sent as %FF)``: the byte, and how it was sent."""
        sent = "as it is" if self.field is None else f"as %{self.byte:02X}"
        return f"a byte that is not UTF-8 (0x{self.byte:02X}, sent {sent})"

    def __str__(self) -> str:
        """The one line a channel answers: ``the form's field feedback holds a byte that is not UTF-8 (0xFF,
        sent as %FF): send the form in UTF-8``, or for the raw body ``the body is not valid UTF-8 (byte 44):
        send the form in UTF-8`` (as the REST API says it of a JSON body)."""
        if self.field is None:
            return f"the body is not valid UTF-8 (byte {self.at}): send the form in UTF-8"
        return f"the form's field {self.field} holds {self.what}: send the form in UTF-8"


def _media(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` header value, lower case, its parameters (``charset``) left out."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_form(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` header value names a URL-encoded form (parameters such as ``charset``
    ignored)."""
    return _media(content_type) == FORM


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` header value names JSON (``application/json``, ``application/*+json``;
    parameters ignored)."""
    media = _media(content_type)
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def not_utf8(body: bytes) -> NotUtf8 | None:
    """Where the URL-encoded form ``body`` is not UTF-8 text, or None when every field's name and value
    percent-decodes to UTF-8 (as ``parse_qsl(..., errors="strict")`` would read it: fields split on ``&``,
    ``+`` a space). The first offending field is named; its value is never quoted."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return NotUtf8(None, body[exc.start], exc.start)
    for pair in text.split("&"):
        name, _, value = pair.partition("=")
        for part in (name, value):
            raw = unquote_to_bytes(part.replace("+", " "))
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                shown = unquote_plus(name)  # (errors="replace": the name itself may be what is not UTF-8)
                if len(shown) > MAX_NAME_CHARS:
                    shown = shown[: MAX_NAME_CHARS - 1] + "…"
                return NotUtf8(shown or "(no name)", raw[exc.start], exc.start)
    return None


def unescaped_at(body: bytes) -> int | None:
    """The offset of the first byte over 0x7F in the URL-encoded form ``body``, or None when it is ASCII, as
    browsers send a form (every other character percent-encoded). Starlette's form parser reads such a byte
    as latin-1 before percent-decoding: ``feedback=café`` sent unescaped would be stored as ``cafÃ©``."""
    for at, byte in enumerate(body):
        if byte > 0x7F:
            return at
    return None


def repeated_field(body: bytes) -> str | None:
    """The first field name a URL-encoded form ``body`` sends more than once (``action=reject&action=approve``),
    else None. ``body`` is UTF-8 (``not_utf8`` said so); names are compared as the form parser reads them
    (percent-decoded, ``+`` as a space)."""
    from urllib.parse import parse_qsl

    seen: set[str] = set()
    for name, _ in parse_qsl(body.decode("utf-8"), keep_blank_values=True):
        if name in seen:
            return name
        seen.add(name)
    return None
