"""Modals for the decisions that need words or a value: edit, reject, feedback, rewind; and reading what the
SME submitted.

Slack limits (https://docs.slack.dev/reference/views and the element pages): 100 blocks per modal; title,
submit and close texts 24 characters; ``private_metadata`` 3000 characters; ``plain_text_input`` holds at most
3000 characters; input labels 2000; a ``static_select`` lists at most 100 options, each text 75 and value
150 characters. Submitted values arrive in ``view.state.values[block_id][action_id]``.

An edit modal has one input per field of a structured value (one per key of a mapping; text as it is, other
values as JSON) and splits text longer than 3000 characters over consecutive inputs. Inputs are optional: an
emptied input submits ``null``, and the state model decides whether that is valid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from integrations.slack import text as T
from integrations.slack.blocks import context, plain_text
from store.models import CheckpointInfo, RequestView, node_label

MAX_VIEW_BLOCKS = 100
MAX_TITLE_CHARS = 24
MAX_INPUT_CHARS = 3000
MAX_LABEL_CHARS = 2000
MAX_OPTIONS = 100
MAX_OPTION_TEXT_CHARS = 75
MAX_OPTION_VALUE_CHARS = 150
MAX_METADATA_CHARS = 3000
VALUE = "value"
"""``action_id`` of every input element in Hazel's modals."""
CALLBACK = {"edit": "hazel_edit", "reject": "hazel_reject", "feedback": "hazel_feedback", "rewind": "hazel_rewind"}


class TooLargeToEditError(ValueError):
    """The value needs more inputs than a modal can hold (100 blocks)."""


@dataclass(frozen=True)
class EditField:
    """One edited field: ``key`` of a mapping (None: the whole shown value), read as ``text`` or ``json``,
    spread over ``parts`` inputs with block ids ``edit_<index>_<part>``."""

    index: int
    key: str | None
    kind: Literal["text", "json"]
    initial: str
    label: str

    @property
    def parts(self) -> int:
        return max(1, -(-len(self.initial) // MAX_INPUT_CHARS))

    def block_id(self, part: int) -> str:
        return f"edit_{self.index}_{part}"


def _field(index: int, key: str | None, value: Any, label: str) -> EditField:
    if isinstance(value, str):
        return EditField(index, key, "text", value, label)
    return EditField(index, key, "json", json.dumps(value, indent=2, ensure_ascii=False, default=str),
                     f"{label} (JSON)")


def edit_layout(value: Any, show: str | None) -> list[EditField]:
    """The inputs for editing ``value``: one per key of a mapping, else one for the value."""
    if isinstance(value, dict) and value:
        return [_field(i, str(k), v, str(k)) for i, (k, v) in enumerate(value.items())]
    return [_field(0, None, value, show or "state")]


def _metadata(meta: dict[str, Any]) -> str:
    text = json.dumps(meta, separators=(",", ":"))
    if len(text) > MAX_METADATA_CHARS:
        raise ValueError("private_metadata over 3000 characters")
    return text


def _modal(kind: str, title: str, blocks: list[dict[str, Any]], meta: dict[str, Any], submit: str) -> dict[str, Any]:
    return {"type": "modal", "callback_id": CALLBACK[kind], "private_metadata": _metadata(meta),
            "title": plain_text(title, MAX_TITLE_CHARS), "submit": plain_text(submit, MAX_TITLE_CHARS),
            "close": plain_text("Cancel", MAX_TITLE_CHARS), "blocks": blocks}


def _input(block_id: str, label: str, *, multiline: bool = True, initial: str | None = None,
           optional: bool = False, hint: str | None = None, placeholder: str | None = None) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": VALUE, "multiline": multiline,
                               "max_length": MAX_INPUT_CHARS}
    if initial:
        element["initial_value"] = initial
    if placeholder:
        element["placeholder"] = plain_text(placeholder, 150)
    block: dict[str, Any] = {"type": "input", "block_id": block_id, "optional": optional,
                             "label": plain_text(label, MAX_LABEL_CHARS), "element": element}
    if hint:
        block["hint"] = plain_text(hint, 2000)
    return block


def _about(view: RequestView) -> dict[str, Any]:
    return context(f"*{T.escape(view.title)}* · {T.escape(view.workflow)} run `{view.run.id}` · "
                   f"step `{T.escape(view.point)}`")


def edit_modal(view: RequestView, meta: dict[str, Any]) -> dict[str, Any]:
    """The edit modal, pre-filled with the shown value.

    Raises:
        TooLargeToEditError: the value needs more than 99 inputs.
    """
    fields = edit_layout(view.shown_value, view.show)
    blocks = [_about(view)]
    for f in fields:
        for p in range(f.parts):
            label = f.label if f.parts == 1 else f"{f.label} (part {p + 1} of {f.parts})"
            blocks.append(_input(f.block_id(p), label, initial=f.initial[p * MAX_INPUT_CHARS:(p + 1) * MAX_INPUT_CHARS],
                                 optional=True))
            if len(blocks) > MAX_VIEW_BLOCKS:
                raise TooLargeToEditError(f"{view.show or 'the state'} is too large to edit in Slack "
                                          f"({len(T.plain(view.shown_value)):,} characters)")
    return _modal("edit", f"Edit {view.show or 'state'}", blocks, meta, "Save")


def _value(values: dict[str, Any], block_id: str) -> str | None:
    element = (values.get(block_id) or {}).get(VALUE) or {}
    return element.get("value")


def edit_payload(original: Any, show: str | None, values: dict[str, Any]) -> dict[str, Any]:
    """The edit an edit modal's ``state.values`` ask for, laid out as ``edit_layout(original)``, as the
    engine takes it (``Hazel.decide(action="edit", payload=...)``, which parses and validates it): the text
    typed (parts joined) of the whole value as ``{"text": …}``, or of each entry of a mapping as
    ``{"entries": {key: …}}``; an input left empty (all its parts) means ``null``.

    Raises:
        ValueError: an input of the layout is missing from ``values`` (Slack sends every input block of a
            submitted modal, an empty one with ``"value": null``: a form without one is not the form Hazel
            laid out, and reading it as empty would set that entry to null).
    """
    entries: dict[str, Any] = {}
    for f in edit_layout(original, show):
        missing = [f.block_id(p) for p in range(f.parts) if not isinstance(values.get(f.block_id(p)), dict)]
        if missing:
            raise ValueError(f"this form is not the one Hazel laid out (its input {missing[0]!r} is missing); "
                             "nothing was changed: open the form again")
        parts = [_value(values, f.block_id(p)) for p in range(f.parts)]
        typed = None if all(p is None for p in parts) else "".join(p or "" for p in parts)
        if f.key is None:
            return {"value": None} if typed is None else {"text": typed}
        entries[f.key] = typed
    return {"entries": entries}


def block_for_error(original: Any, show: str | None, message: str) -> str:
    """The input to flag for a validation message: the one whose key the message names, else the first. The
    engine names an entry ``entry 'KEY' of field 'SHOW'`` (with the whole state shown, a field ``field 'KEY'``:
    ``bot.engine.steering.edits.named``), pydantic's messages ``SHOW.KEY: …``."""
    fields = edit_layout(original, show)
    for f in fields:
        if f.key is None:
            continue
        named = f"field {f.key!r}" if show is None else f"entry {f.key!r} of field {show!r}"
        if named in message or f"{show}.{f.key}" in message or f"{show}.{f.key}" in message.replace(" ", ""):
            return f.block_id(0)
    return fields[0].block_id(0)


def reason_modal(kind: Literal["reject", "feedback"], view: RequestView, meta: dict[str, Any]) -> dict[str, Any]:
    """The modal asking for a rejection's reason or the feedback text (required)."""
    if kind == "reject":
        blocks = [_about(view), _input("reason", "Why do you reject it?",
                                       hint="The reason is recorded and handed to the workflow.")]
        return _modal("reject", "Reject", blocks, meta, "Reject")
    blocks = [_about(view), _input("text", "What should change?",
                                   hint="The drafting step runs again with your words.")]
    return _modal("feedback", "Feedback", blocks, meta, "Send")


def checkpoint_label(cp: CheckpointInfo) -> str:
    """``#3 → write_scripts · 11-29 14:05 · branch 0`` (at most 75 characters)."""
    return T.truncate(f"#{cp.seq} → {node_label(cp.next_step or '')} · {cp.created_at:%m-%d %H:%M} UTC · branch "
                      f"{cp.branch}",
                      MAX_OPTION_TEXT_CHARS)


def rewind_modal(view: RequestView, meta: dict[str, Any]) -> dict[str, Any]:
    """The rewind modal: pick a checkpoint (newest first; those the run can continue from), optional
    feedback for the step that runs next.

    The select offers the engine's choice (``view.rewind``, ``bot.engine.choices``: at most 100, the most a
    ``static_select`` lists); when the run can continue from more (#0, where each step starts and the newest are
    offered), a context block under it says so and how to reach any other: ``Showing 100 of 151 checkpoints
    the run can continue from: …; to continue from another, `/hazel rewind RUN N`, `hazel rewind RUN --to N`
    or the run's page.`` (the commands as the README names them).

    Raises:
        ValueError: the view offers no rewind (``view.rewind`` is None: its point does not offer it), or more
            than 100 checkpoints.
    """
    choices = view.rewind
    if choices is None or len(choices.checkpoints) > MAX_OPTIONS:
        raise ValueError("the request's view offers no rewind choices a select can list")
    targets, total = choices.checkpoints, choices.total
    options = [{"text": plain_text(checkpoint_label(cp), MAX_OPTION_TEXT_CHARS), "value": str(cp.seq)}
               for cp in targets]
    blocks = [
        _about(view),
        context("Rewinding forks the run from the chosen checkpoint; the current branch stays in the history."),
        {"type": "input", "block_id": "target", "label": plain_text("Continue from", MAX_LABEL_CHARS),
         "element": {"type": "static_select", "action_id": VALUE, "options": options,
                     "placeholder": plain_text("Choose a checkpoint", 150)}},
    ]
    if choices.cut:  # (under the select it is about)
        run = view.run.id
        blocks.append(context(
            f"Showing {len(targets)} of {total} checkpoints the run can continue from: #0 (the run's input), "
            f"where each step starts, and the newest. To continue from another, `/hazel rewind {run} N` (N: its "
            f"number, see `/hazel history {run}`), `hazel rewind {run} --to N` on the command line, or the run's "
            "page."))
    blocks.append(_input("feedback", "Feedback for the step that runs next", optional=True))
    return _modal("rewind", "Rewind", blocks, meta, "Rewind")


def read_text(values: dict[str, Any], block_id: str) -> str:
    """A text input's value ('' when empty)."""
    return (_value(values, block_id) or "").strip()


def read_selected(values: dict[str, Any], block_id: str) -> str | None:
    """A ``static_select``'s chosen value."""
    element = (values.get(block_id) or {}).get(VALUE) or {}
    return (element.get("selected_option") or {}).get("value")


def read_checkpoint(values: dict[str, Any], block_id: str) -> int | None:
    """The checkpoint number chosen in the rewind modal's select (its options' values are ``str(seq)``), or
    None when none was chosen.

    Raises:
        ValueError: the chosen value is not a whole number in decimal digits, or is longer than an option's
            value may be (150 characters): no select of Hazel's offered it (the message says so).
    """
    chosen = read_selected(values, block_id)
    if chosen is None or chosen == "":
        return None
    digits = chosen.removeprefix("-")
    if not (digits.isascii() and digits.isdigit() and len(chosen) <= MAX_OPTION_VALUE_CHARS):
        raise ValueError(f"the chosen checkpoint {T.truncate(chosen, 40)!r} is not a checkpoint number")
    return int(chosen)


