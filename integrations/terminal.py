"""Text for a terminal: control characters are shown, never obeyed.

Stored text (an artefact an LLM wrote, a reason typed in Slack, a step's error) may hold bytes a terminal
acts on: ESC starts CSI and OSC sequences (``\\x1b[2J`` clears the screen, ``\\x1b]0;…\\x07`` sets the window
title, ``\\x1b]8;;URL\\x07`` makes a hidden link), C1 characters (U+0080-U+009F) are 8-bit forms of the same,
``\\r`` and ``\\b`` overwrite what was printed, and the bidirectional overrides and isolates (U+202A-U+202E,
U+2066-U+2069, "Trojan Source", CVE-2021-42574) reorder what a reader sees. ``for_terminal`` replaces each with
a visible escape (``\\x1b``, ``\\u202e``), so ``fb \\x1b]0;PWNED\\x07`` prints as the 20 characters
``fb \\x1b]0;PWNED\\x07``; everything else, newlines and tabs included, is left as it is.

``SafeConsole`` is a rich ``Console`` that applies it to everything it prints: strings before rich parses
them (markup tags hold no control characters, so markup still works), ``Text`` objects before they are laid
out, and every rendered segment as a last net. Rich's own styling is added after that, so colours still work.
Text meant for a file (``hazel show --raw``) is written to ``sys.stdout`` directly and stays byte-exact.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0 controls but ``\\n`` and ``\\t``, DEL, C1 controls, the Unicode line and paragraph separators (U+2028,
U+2029: line breaks to ``str.splitlines`` and rich), the bidi embeddings/overrides and isolates."""
_UNSAFE_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""``_UNSAFE`` and ``\\n`` and ``\\t`` too: for a value shown on one line."""


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character a terminal would act on replaced by its visible escape (``\\x1b``,
    ``\\x07``, ``\\x9b``, ``\\u202e``). Newlines and tabs stay unless ``one_line``. Idempotent: the output
    holds no such character."""
    pattern = _UNSAFE_ONE_LINE if one_line else _UNSAFE
    return pattern.sub(_visible, text) if pattern.search(text) else text


def indented(text: str) -> str:
    """``text`` with every line after its first indented by four spaces, as the text log shows a record's
    further lines: a step's error printed after ``run ID failed:`` cannot start a line that passes for a log
    record or a line of Hazel's own (``…\n2026-03-01 09:00:00,000 CRITICAL …``). Apply after ``for_terminal``
    (which shows ``\r`` as ``\x0d``)."""
    return text.replace("\n", "\n    ") if "\n" in text else text


def unsafe(text: str, *, one_line: bool = False) -> bool:
    """Whether ``text`` holds a character ``for_terminal`` would replace (besides ``\\n`` and ``\\t``, unless
    ``one_line``)."""
    return (_UNSAFE_ONE_LINE if one_line else _UNSAFE).search(text) is not None


def write_whole(stream: Any, text: str) -> None:
    """Write ``text`` to the text stream ``stream`` whole, through its byte layer (encoded as the stream
    encodes): with ``PYTHONUNBUFFERED=1`` a text stream writes straight to its file descriptor and drops what a
    short write left (a pipe whose reader went away after taking some: the rest was lost, no error, and the
    command ended 0, not 141). A stream without a byte layer (a test's ``StringIO``) is written as it is.

    Raises:
        BrokenPipeError: the reader is gone. UnicodeEncodeError: text the stream's encoding cannot hold.
    """
    out = getattr(stream, "buffer", None)
    if out is None:
        stream.write(text)
        return
    stream.flush()
    data = memoryview(text.encode(getattr(stream, "encoding", None) or "utf-8",
                                  getattr(stream, "errors", None) or "strict"))
    while data:
        written = out.write(data)
        if written is None:  # (a non-blocking stream that is full: wait until it takes more)
            import select

            select.select([], [out], [])
            continue
        data = data[written:]
    out.flush()


class _Whole:
    """``sys.stdout`` (or ``sys.stderr``), looked up at each use as rich's own default is (a test that swaps it
    is written to), whose ``write`` writes whole (``write_whole``); everything else is the stream's."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr

    @property
    def _stream(self) -> Any:
        return sys.stderr if self._stderr else sys.stdout

    def write(self, text: str) -> int:
        write_whole(self._stream, text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class SafeConsole(Console):
    """A rich ``Console`` that never writes a stored control character (see the module docstring). Emoji
    codes (``:warning:``) and rich's highlighter are off by default: stored text prints as it is. Output goes
    to the standard stream whole (``write_whole``), unless ``file`` is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        kwargs.setdefault("highlight", False)
        kwargs.setdefault("file", _Whole(bool(kwargs.get("stderr"))))
        super().__init__(*args, **kwargs)

    @property
    def width_given(self) -> bool:
        """Whether this console's width was given (``COLUMNS``, ``width=``, a later ``console.width = N``) rather
        than found from the terminal, or rich's 80 columns where there is none (``bot.cli.render.print_table``)."""
        return self._width is not None

    def on_broken_pipe(self) -> None:
        """Stdout's reader went away (``hazel show RUN | head -1``): rich goes quiet, points stdout at
        ``/dev/null`` and exits; with status 141 (128 + SIGPIPE, as a Unix tool ends on the signal, and as
        ``bot.cli.common.handle_errors`` ends on a ``BrokenPipeError``), not rich's 1."""
        try:
            super().on_broken_pipe()
        except SystemExit:
            raise SystemExit(141) from None

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """``Console.render_str`` of ``for_terminal(text)``."""
        return super().render_str(for_terminal(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """``Console.render``, a ``Text`` made safe first (so it is laid out at its shown width), and each
        segment's text checked (control segments, rich's own cursor moves, pass)."""
        if isinstance(renderable, Text) and unsafe(renderable.plain):
            renderable = self._safe_text(renderable)
        for segment in super().render(renderable, options):
            if segment.control is None and unsafe(segment.text):
                yield Segment(for_terminal(segment.text), segment.style)
            else:
                yield segment

    def _safe_text(self, text: Text) -> Text:
        """A copy of ``text`` with its characters made safe, keeping its styles."""
        safe = Text(justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, end=text.end,
                    tab_size=text.tab_size)
        for segment in text.render(self, end=""):
            safe.append(for_terminal(segment.text), segment.style)
        return safe
