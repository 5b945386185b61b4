"""Edits: the one place a person's new version of a shown field is parsed and validated.

An edit arrives in one of three shapes (``Hazel.decide(action="edit", payload=...)``):

- ``{"value": v}``: the new value as JSON (the REST API, a Slack modal's whole-field input);
- ``{"text": "..."}``: the new value as typed (a Jira ``/edit`` comment, ``hazel edit --file``): text as it is
  for a text field, JSON for anything else (a ``{code}`` / ``{noformat}`` block around it is fine);
- ``{"entries": {key: "..." | None}}``: new texts for some entries of a mapping field (a Slack modal with one
  input per entry, ``hazel edit --set field.key=...``): each entry parsed as ``text`` is, against its current
  value (None: the entry emptied, ``null``).

Any shape may add ``"allow_empty": bool``. False (the CLI and the REST API send it, False unless asked): an
empty or blank new text (the value, the typed text, or an entry), or an empty mapping or list (``{}``, ``[]``,
given as a value or as JSON text), is refused, since it would replace the field with nothing. True: blank typed text is stored as it is. Absent (a Slack modal, a Jira ``/edit``): empty typed
text is refused as no value given (``an edit needs a new value for field 'plan'``), text of only whitespace as
blank (``the edit leaves field 'plan' blank (only whitespace): …``), JSON text of an empty mapping or list (or
``null``) as empty, and a value is taken as it is. Unless True, an entry of a mapping or an item
of a list that the edit leaves empty or blank (text, or an empty mapping or list) is refused too, whichever
shape gave it (a whole value ``{"value": {"b": "  "}}``, JSON text, a modal's entries), unless it was so
already in the shown value.

A rewind's edits (``{field: value}``) follow the same rule (``refuse_empty_edits``), with ``allow_empty`` in
the rewind's payload (``hazel rewind --allow-empty``); without it (False) an empty or blank field or entry (text,
or an empty mapping or list) is refused, on every channel.

Whatever the shape, the result is validated against the workflow's state model; a value that fails is refused
with pydantic's message and nothing changes, except null put where a value was (a Slack modal's emptied input:
the field, or an entry) that the model needs a value for: that is refused as the edit leaving it empty (``the
edit leaves field 'plan' empty: …``), not with pydantic's ``Input should be a valid string``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from bot.engine.errors import EmptyEditError, InvalidDecisionError, MissingEditValueError
from bot.engine.limits import strict_json
from bot.engine.workflow import Workflow
from bot.settings import INVISIBLE

_JIRA_BLOCK = re.compile(r"^\s*\{(code|noformat)(?::[^}]*)?\}\s*\n?(.*?)\n?\s*\{\1\}\s*$", re.DOTALL)


def format_validation_error(exc: ValidationError) -> str:
    """pydantic's errors on one line: ``field: message; other: message``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err.get("loc", ())) or "value"
        parts.append(f"{loc}: {err.get('msg')}")
    return "; ".join(parts)


def named(field: str | None, key: str | None = None) -> str:
    """How an edit's messages name what it changes: ``field 'plan'``, ``entry 'b' of field 'parts'``; with the
    whole state shown (``field`` None), ``the state``, or ``field 'b'`` for its entry ``b``."""
    if field is None:
        return "the state" if key is None else f"field {key!r}"
    return f"field {field!r}" if key is None else f"entry {key!r} of field {field!r}"


def value_from_text(current: Any, text: str, *, field: str | None = None, key: str | None = None) -> Any:
    """A typed value, shaped like ``current``: text as it is for a text field; JSON otherwise (a Jira
    ``{code}`` or ``{noformat}`` block around the JSON is taken off). ``field`` (and ``key``, for an entry of
    a mapping) name the value in the error (``named``); neither: the whole state.

    Raises:
        InvalidDecisionError: ``current`` is not text and ``text`` is not JSON (``invalid edit: field 'cfg'
            must be given as JSON here (…)``).
    """
    if isinstance(current, str):
        return text
    inner = _JIRA_BLOCK.match(text)
    raw = inner.group(2) if inner else text
    try:
        return strict_json(raw)
    except ValueError as exc:
        raise InvalidDecisionError(f"invalid edit: {named(field, key)} must be given as JSON here ({exc})") from None


UNDECLARED = object()
"""``entry_value``'s ``declared`` when the state model says nothing of the mapping's entries."""


def entry_value(mapping: dict[str, Any], key: str, declared: Any = UNDECLARED) -> Any:
    """What ``value_from_text`` shapes a new text for entry ``key`` of ``mapping`` like: its value; for a key it
    does not have yet, ``declared`` when the state model declares the entries' type (``""``: text, None: JSON;
    ``Workflow.declared_entries``), else text (``""``) when every entry it has is text (a mapping of texts takes
    a new text as it is, as its other entries do), else None (JSON)."""
    if key in mapping:
        return mapping[key]
    if declared is not UNDECLARED:
        return declared
    values = list(mapping.values())
    return "" if values and all(isinstance(v, str) for v in values) else None


_ABSENT = object()
"""``_refuse_empty``'s ``was`` when the value it replaces is not known (or there was none)."""


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: empty once its spaces and the characters that print as nothing
    (``bot.settings.INVISIBLE``: a zero-width space, U+FEFF, a soft hyphen, …) are left out. The one test of a
    blank edit, reason and feedback."""
    return not text.strip() or not INVISIBLE.sub("", text).strip()


def _refuse_empty(what: str, value: Any, *, hint: str = "hazel edit --allow-empty", was: Any = _ABSENT) -> None:
    """Raise when ``value`` is empty or blank text, or an empty mapping or list (``{}``, ``[]``), or null
    replacing a value ``was`` that was not null, for an edit with ``allow_empty`` false: ``EmptyEditError``, ``the
    edit leaves field 'plan' empty: …`` (``what``: ``named``'s phrase; ``hint``: the console's way to allow it;
    each channel says its own way after the message)."""
    if isinstance(value, str) and blank(value):
        how = "empty" if not value else ("blank (only whitespace)" if not value.strip() else
                                         "blank (only whitespace and characters that print as nothing)")
    elif isinstance(value, (dict, list)) and not value:
        how = f"empty ({json.dumps(value)})"
    elif value is None and was is not None and was is not _ABSENT:  # ``--set limits=null`` clears as ``{}`` would
        how = "empty (null)"
    else:
        return
    raise EmptyEditError(f"the edit leaves {what} {how}: that would replace the value with nothing", hint=hint)


def _refuse_blank_entries(field: str | None, value: Any, shown: Any, *,
                          hint: str = "hazel edit --allow-empty") -> None:
    """Raise when an entry of ``value`` (a mapping's value by key, a list's item by index; with the whole state
    shown, ``field`` None, a field) is empty or blank text, or an empty mapping or list, that was not so in
    ``shown`` (the value as it was): a whole-field edit (``{"value": {...}}``, JSON text) that leaves an entry
    blank replaces it with nothing as an entry edit would (``the edit leaves entry 'b' of field 'scripts'
    blank (only whitespace): …``); an entry already so is left as it is."""
    if isinstance(value, dict):
        was = shown if isinstance(shown, dict) else {}
        for key, entry in value.items():
            if key not in was or was[key] != entry:
                _refuse_empty(named(field, str(key)), entry, hint=hint)
    elif isinstance(value, list):
        before = shown if isinstance(shown, list) else []
        for index, entry in enumerate(value):
            if index >= len(before) or before[index] != entry:
                _refuse_empty(named(field, str(index)), entry, hint=hint)


def refuse_empty_edits(edits: dict[str, Any] | None, current: Any) -> None:
    """A rewind's ``edits`` (``{field: new whole value}``) under the edit's empty-value rule, for a rewind
    without ``allow_empty``: a field given empty or blank text (or an empty mapping or list) is refused, and so
    is an entry of a mapping field given one that was not so in ``current`` (the target checkpoint's state tree, or
    None when its fields are not at hand, as a LangGraph graph's: then only whole fields are looked at), since
    ``hazel rewind --set parts.b=…`` hands the whole mapping, its other entries as they were.

    Raises:
        EmptyEditError: ``the edit leaves field 'plan' empty: …`` / ``… entry 'b' of field 'parts' …`` (a
            rewind checks first whether its state model refuses the value anyway: ``rewind``).
    """
    hint = "hazel rewind --allow-empty"
    for field, value in (edits or {}).items():
        _refuse_empty(named(field), value, hint=hint,
                      was=current.get(field, _ABSENT) if isinstance(current, dict) else _ABSENT)
        if isinstance(current, dict):
            _refuse_blank_entries(field, value, current.get(field), hint=hint)


def edited_value(shown: Any, field: str | None, payload: dict[str, Any], *, entry_blank: Any = UNDECLARED) -> Any:
    """The new value of the shown field from an edit payload (see the module docstring). ``entry_blank``: what a
    new entry of the field is parsed like when the state model declares it (``entry_value``'s ``declared``).

    Raises:
        MissingEditValueError: no value given (none of ``value``, ``text``, ``entries``; empty ``text`` with
            ``allow_empty`` absent), said in no channel's terms (``an edit needs a new value for field 'plan'``).
        EmptyEditError: a value, an entry or an item left empty or blank without ``allow_empty``.
        InvalidDecisionError: text that should be JSON, entries of something not a mapping.
    """
    what = named(field)
    allow_empty = payload.get("allow_empty")
    if "value" in payload:
        if allow_empty is False:
            _refuse_empty(what, payload["value"], was=shown)
        if not allow_empty:  # (a blank entry of a mapping or list too: every channel, REST and Slack alike)
            _refuse_blank_entries(field, payload["value"], shown)
        return payload["value"]
    if "text" in payload:
        text = str(payload["text"])
        if blank(text):
            if allow_empty is None and not text:  # (a Slack modal, a Jira /edit: they cannot allow it)
                raise MissingEditValueError(f"an edit needs a new value for {what}")
            if not allow_empty:  # only whitespace: ``the edit leaves field 'plan' blank (only whitespace): …``
                _refuse_empty(what, text)
            return text  # as it is
        value = value_from_text(shown, text, field=field)
        if not allow_empty:  # JSON text of an empty mapping or list (``--set scripts={}``, a Jira ``/edit {}``, a
            _refuse_empty(what, value, was=shown)  # Slack modal's ``{}``: s20, stored, the field wiped), or of one
            _refuse_blank_entries(field, value, shown)  # with a blank entry (a Jira ``/edit``)
        return value
    if "entries" in payload:
        entries = payload["entries"]
        if shown is None and entry_blank is not UNDECLARED:  # an unset optional mapping: its first entries
            shown = {}
        if not isinstance(shown, dict) or not isinstance(entries, dict):
            raise InvalidDecisionError(f"invalid edit: {what} is not a mapping: it has no entries to set")
        if any(not str(key).strip() for key in entries):
            raise InvalidDecisionError(f"invalid edit: an entry of {what} needs a key (not empty or blank)")
        if allow_empty is False:
            for key, raw in entries.items():
                _refuse_empty(named(field, key), raw, was=shown.get(key, _ABSENT))
        elif allow_empty is None:  # (a Slack modal: an entry typed blank, unless it was so already; None: null)
            _refuse_blank_entries(field, {k: v for k, v in entries.items() if v is not None}, shown)
        out = dict(shown)
        for key, raw in entries.items():  # None: the entry was emptied, which means null
            out[key] = None if raw is None else value_from_text(entry_value(shown, key, entry_blank), str(raw),
                                                                field=field, key=key)
            if allow_empty is False and raw is not None:  # JSON text of an empty mapping or list, or null
                _refuse_empty(named(field, key), out[key], was=shown.get(key, _ABSENT))
        return out
    raise MissingEditValueError(f"an edit needs a new value for {what}")  # (in no channel's terms: each says its own)


def edited_state(wf: Workflow, state: BaseModel, shown: Any, field: str | None, payload: dict[str, Any], *,
                 entry_blank: Any = UNDECLARED) -> tuple[Any, BaseModel]:
    """``edited_value`` then ``apply_edit``: ``(new value, edited state)``. An empty value refused for want of
    ``allow_empty`` that the state model refuses anyway (null or ``{}`` for an ``int`` field) is refused in the
    model's words: allowing it would not help, so no channel advises it (a fresh-user finding: ``hazel edit
    --set n=null`` advised ``--allow-empty``, which then failed on the model).

    Raises:
        MissingEditValueError, EmptyEditError, InvalidDecisionError: as ``edited_value`` and ``apply_edit``.
    """
    if field is None and isinstance(payload.get("entries"), dict):  # a typo named as such, whatever its value
        _refuse_undeclared(wf, {str(k).partition(".")[0]: None for k in payload["entries"]})  # (s34 F5: not
        # "must be given as JSON here" for a text value)
    declared = getattr(wf.state, "model_fields", {}).get(field) if field is not None else None
    model = _model_of(getattr(declared, "annotation", None)) if field is not None else _model_of(wf.state)
    if model is not None and isinstance(payload.get("entries"), dict) and _dotted(model, payload["entries"]):
        payload = {**payload, "value": _nested_entries(model, shown, field, payload)}
        del payload["entries"]
    try:
        value = edited_value(shown, field, payload, entry_blank=entry_blank)
    except EmptyEditError as refused:
        try:
            allowed = edited_value(shown, field, {**payload, "allow_empty": True}, entry_blank=entry_blank)
        except InvalidDecisionError:
            raise refused from None
        try:
            apply_edit(wf, state, field, allowed)  # the model's refusal, when it has one
        except InvalidDecisionError:  # an empty or blank text where the model takes no text (a mapping: an
            if isinstance(allowed, str) and blank(allowed):  # empty --file, ``--set cfg=``): said as the edit
                raise InvalidDecisionError(f"{refused.message}, and the state model needs a value there") from None
            raise  # leaving it empty, as null is (s20 L3; text is no null: the model's words are pydantic's)
        raise
    edited = apply_edit(wf, state, field, value)
    if not payload.get("allow_empty"):
        _refuse_left_out(wf, shown, field, value, edited)
    return value, edited


def _dotted(model: Any, entries: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The entries of an edit of a model's value whose key is a dotted path into a field of it that is not a
    plain key (``leaf.a`` of ``cfg: Cfg`` with ``leaf: Leaf``: ``{"leaf": {"a": …}}``)."""
    fields = getattr(model, "model_fields", {})
    out: dict[str, dict[str, Any]] = {}
    for key, raw in entries.items():
        head, dot, rest = str(key).partition(".")
        if dot and rest and head in fields and key not in fields:
            out.setdefault(head, {})[rest] = raw
    return out


def _nested_entries(model: Any, shown: Any, field: str | None, payload: dict[str, Any]) -> Any:
    """The new value of ``field`` (a model's, ``shown`` as it was) from entries some of which name a field
    inside it by a dotted path (``--set cfg.leaf.a=7``; ``cfg.maybe.a=3`` makes ``maybe`` when it is None):
    each path is set as an entry of the model or mapping it reaches, the others as entries of ``field``, with
    ``edited_value``'s checks at each level (a fresh-user finding, s33 F1: ``leaf.a`` was a key of ``cfg``,
    which the model dropped without a word).

    Raises:
        EmptyEditError, InvalidDecisionError: as ``edited_value``.
    """
    entries = payload["entries"]
    nested = _dotted(model, entries)
    base = shown if isinstance(shown, dict) else {} if shown is None else shown
    direct = {k: v for k, v in entries.items() if str(k).partition(".")[0] not in nested or k in model.model_fields}
    if getattr(model, "model_config", {}).get("extra") != "allow":  # (before parsing: its words, not JSON's)
        unknown = [k for k in direct if k not in model.model_fields]
        if unknown:
            where = "" if field is None else f"{field}."
            raise InvalidDecisionError(f"invalid edit: no field {', '.join(where + str(k) for k in unknown)} "
                                       f"({model.__name__}'s fields: {', '.join(model.model_fields)})")
    out = edited_value(base, field, {**payload, "entries": direct}) if direct else dict(base)
    for head, sub in nested.items():
        inner = model.model_fields[head].annotation
        inner_model = _model_of(inner)
        was = base.get(head) if isinstance(base, dict) else None
        path = head if field is None else f"{field}.{head}"  # (None: the whole state's)
        if inner_model is not None:  # (null: made from its defaults, which say how each entry is read: text for
            # a text field, s35 F1)
            out[head] = _nested_entries(inner_model, _defaults(inner_model) if was is None else was, path,
                                        {**payload, "entries": sub})
        else:
            out[head] = _mapping_entries(inner, was, path, {**payload, "entries": sub})
    return out


def _mapping_entries(annotation: Any, was: Any, path: str, payload: dict[str, Any]) -> Any:
    """The new value of the mapping at ``path`` (``was`` as it was) from entries of it: a key it has (``b.sql``)
    is set as it is; a dotted path whose first part is a key holding a model (``k.a`` of ``dict[str, Leaf]``) goes
    into that model, as ``hazel rewind --set`` goes (s35 F2: the edit refused what the rewind took)."""
    import typing

    args = typing.get_args(annotation)
    item = _model_of(args[-1]) if args else None
    entries = payload["entries"]
    into: dict[str, dict[str, Any]] = {}
    if item is not None and isinstance(was, dict):
        for key, raw in entries.items():
            head, dot, rest = str(key).partition(".")
            if dot and rest and key not in was and isinstance(was.get(head), dict):
                into.setdefault(head, {})[rest] = raw
    direct = {k: v for k, v in entries.items() if str(k).partition(".")[0] not in into or k in (was or {})}
    out = edited_value(was, path, {**payload, "entries": direct}) if direct or not into else dict(was)
    for head, sub in into.items():
        out[head] = _nested_entries(item, was[head], f"{path}.{head}", {**payload, "entries": sub})
    return out


def refuse_left_out_edits(wf: Workflow, before: Any, edits: dict[str, Any], edited: BaseModel) -> None:
    """A rewind's ``edits`` (whole fields, the state ``before`` them a tree) checked as an edit's value is
    (``_refuse_left_out``): one leaving out fields of a model inside a field reset them silently where the same
    value as an edit was refused (a fresh-user finding, s34 F1 HIGH), unless the rewind allows empty values.

    Raises:
        EmptyEditError: naming the fields, with ``hazel rewind --allow-empty``.
    """
    for field, value in edits.items():
        _refuse_left_out(wf, before.get(field) if isinstance(before, dict) else None, field, value, edited,
                         hint="hazel rewind --allow-empty")


def _defaults(model: Any) -> dict[str, Any]:
    """``model``'s value with every field at its default, as JSON (``{}`` when a field has none)."""
    try:
        return model().model_dump(mode="json")
    except (ValidationError, TypeError):
        return {}


def _refuse_left_out(wf: Workflow, shown: Any, field: str | None, value: Any, edited: BaseModel, *,
                     hint: str = "hazel edit --allow-empty") -> None:
    """Raise when an edit leaves out fields of a model (the state, with the whole state shown; a field that is
    a model of its own, ``cfg: Cfg`` or ``Cfg | None``; a model inside either, at any depth) whose value it
    changes (``edited``: back to their defaults), for an edit without ``allow_empty``: an SME pasting part of
    the state, a client sending only the keys it changed, or ``--set 'cfg={"limit": 9}'``, wiped the draft, the
    counters and the lists while the same value given blank was refused (fresh-user findings, s30 F3, s31 F1-F3).
    A mapping's entries left out are not so refused: leaving one out is how a whole-field edit removes it.

    Raises:
        EmptyEditError: ``the edit leaves out field 'n': a whole-state edit gives every field, and it would go
            back to its default`` (``… fields 'name' of 'cfg', 'tags' of 'cfg': an edit of 'cfg' …``).
    """
    declared = getattr(wf.state, "model_fields", {}).get(field) if field is not None else None
    model: Any = wf.state if field is None else _model_of(getattr(declared, "annotation", None))
    if model is None:
        return
    try:
        after: Any = edited.model_dump(mode="json")
    except (ValueError, RecursionError):  # (nested past what JSON can hold: refused by the state's own check,
        return  # ``limits.state_tree``, after this)
    after = after if field is None else after.get(field)
    reset = _left_out(model, shown, value, after, "" if field is None else f"{field}.")
    if reset:
        what = ("field " if len(reset) == 1 else "fields ") + ", ".join(
            f"{path.rpartition('.')[2]!r} of {path.rpartition('.')[0]!r}" if "." in path else repr(path)
            for path in reset)
        whole = "a whole-state edit" if field is None else f"an edit of {field!r}"
        raise EmptyEditError(f"the edit leaves out {what}: {whole} gives every field, and "
                             f"{'it' if len(reset) == 1 else 'those'} would go back to "
                             f"{'its default' if len(reset) == 1 else 'their defaults'}",
                             hint=hint)


def _left_out(model: Any, shown: Any, given: Any, after: Any, path: str, depth: int = 0) -> list[str]:
    """The dotted paths (``cfg.tags``) of ``model``'s fields that ``shown`` (the value as it was) holds, ``given``
    (the edit's value) leaves out, and ``after`` (the edited value) holds otherwise; models inside it looked at
    too, and those of its mappings' entries and lists' items that the edit gives again (``cfg.m.k``, ``cfg.
    leaves.0``: s34 F4). A field given by its alias is given (s34 F3). Nothing for a value that is not a plain
    model's (a model taking extra keys, a mapping)."""
    fields = getattr(model, "model_fields", None)
    if depth > 64 or not (fields and isinstance(shown, dict) and isinstance(given, dict)
                          and isinstance(after, dict)) \
            or not set(shown) <= set(fields) or getattr(model, "model_config", {}).get("extra") == "allow":
        return []
    out = []
    for key, was in shown.items():
        named = next((n for n in (key, *_aliases(fields[key])) if n in given), None)
        if named is None:
            if after.get(key) != was:
                out.append(f"{path}{key}")
            continue
        out += _left_out_inside(fields[key].annotation, was, given[named], after.get(key), f"{path}{key}",
                                depth + 1)
    return out


def _left_out_inside(annotation: Any, was: Any, given: Any, after: Any, path: str, depth: int) -> list[str]:
    """``_left_out`` of the value at ``path``: a model, or the models of a mapping's entries or a list's items
    given again (an entry or item left out is removed, as meant)."""
    import typing

    inner = _model_of(annotation)
    if inner is not None:
        return _left_out(inner, was, given, after, f"{path}.", depth)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated or origin is typing.Union or type(annotation).__name__ == "UnionType":
        members = [a for a in args if a is not type(None)] if origin is not typing.Annotated else args[:1]
        return _left_out_inside(members[0], was, given, after, path, depth) if len(members) == 1 else []
    item = _model_of(args[-1]) if args else None
    if item is None:
        return []
    out: list[str] = []
    if isinstance(origin, type) and issubclass(origin, dict) and isinstance(was, dict) and isinstance(given, dict) \
            and isinstance(after, dict):
        for key in was.keys() & given.keys():
            out += _left_out(item, was[key], given[key], after.get(key), f"{path}.{key}.", depth + 1)
    elif origin in (list, tuple) and isinstance(was, list) and isinstance(given, list) and isinstance(after, list):
        for i, (before, again, now) in enumerate(zip(was, given, after)):
            out += _left_out(item, before, again, now, f"{path}.{i}.", depth + 1)
    return out


def _model_of(annotation: Any) -> Any:
    """The pydantic model a field's annotation holds: ``Cfg``, ``Cfg | None``, ``Optional[Cfg]``,
    ``Annotated[Cfg, …]``; None for anything else (a mapping, a list, a union of several models)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _model_of(typing.get_args(annotation)[0])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        models = [m for m in (_model_of(a) for a in typing.get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def apply_edit(wf: Workflow, state: BaseModel, field: str | None, value: Any) -> BaseModel:
    """The state with ``field`` (None: the whole state) replaced by ``value``, validated.

    Raises:
        InvalidDecisionError: the new value fails the state model's validation: pydantic's message, or, where
            the edit put null in place of a value (a Slack modal's emptied input) and the model needs one there,
            the edit's own words (``the edit leaves field 'plan' empty: …``, ``… entry 'b' of field 'parts' …``).
    """
    before = state.model_dump()
    data = value if field is None else {**before, field: value}
    if field is None and isinstance(data, dict):
        _refuse_undeclared(wf, data)
    refuse_undeclared_inside(wf, {field: value} if field is not None else data)
    try:
        return wf.codec.validate(data)
    except ValidationError as exc:
        emptied = _emptied_refused(exc, _nulled(before, field, value))
        if emptied is not None:
            raise InvalidDecisionError(f"the edit leaves {emptied} empty: that would replace the value with "
                                       "nothing, and the state model needs a value there") from None
        raise InvalidDecisionError(f"invalid edit: {format_validation_error(exc)}") from None


def _refuse_undeclared(wf: Workflow, data: dict[str, Any]) -> None:
    """A whole-state edit (a point that shows the whole state) naming a key the state model does not declare is
    refused, as ``refuse_unknown_fields`` refuses a rewind's: pydantic drops such a key without a word, so a
    typo (``--set N=5`` for ``n``) was recorded as an edit that changed nothing and approved the state as it
    was (a fresh-user finding, s25 F10). A model that takes extra keys (``extra="allow"``) keeps them.

    Raises:
        InvalidDecisionError: ``invalid edit: S has no field N (fields: text, n, notes)``.
    """
    fields = getattr(wf.state, "model_fields", None)
    config = getattr(wf.state, "model_config", {})
    if fields is None or config.get("extra") == "allow":
        return
    names = _names(fields)  # (an alias is a name: s35 F3)
    unknown = [key for key in data if key not in names]
    if unknown:
        raise InvalidDecisionError(f"invalid edit: {wf.state.__name__} has no field {', '.join(map(str, unknown))} "
                                   f"(fields: {', '.join(fields)})")


def refuse_undeclared_inside(wf: Workflow, values: Any) -> None:
    """Refuse ``values`` (state fields by name, as an edit or a rewind's edits give them) when a model inside one
    (a field that is a model, ``Cfg | None``, the models of a mapping or a list, at any depth) is given a key
    it does not declare: pydantic drops such a key without a word, so ``--set cfg.limt=9`` (a typo),
    ``--set cfg.leaf.a=7`` read as the key ``leaf.a`` of ``cfg``, and a REST edit with an extra key were
    recorded as edits that changed nothing (a fresh-user finding, s33 F1). A model that takes extra keys
    (``extra="allow"``) keeps them; a field's alias is one of its names.

    Raises:
        InvalidDecisionError: ``invalid edit: no field cfg.limt (Cfg's fields: name, limit, leaf, maybe)``.
    """
    fields = getattr(wf.state, "model_fields", None)
    if not fields or not isinstance(values, dict):
        return
    unknown: list[tuple[str, Any]] = []
    for name, value in values.items():
        if name in fields:
            unknown += _undeclared(fields[name].annotation, value, f"{name}.")
    if unknown:
        path, model = unknown[0]
        more = f" (and {', '.join(p for p, _ in unknown[1:])})" if len(unknown) > 1 else ""
        raise InvalidDecisionError(f"invalid edit: no field {path}{more} ({model.__name__}'s fields: "
                                   f"{', '.join(model.model_fields)})")


def _undeclared(annotation: Any, value: Any, path: str, depth: int = 0) -> list[tuple[str, Any]]:
    """``(dotted path, model)`` of each key of ``value`` that the model ``annotation`` holds there does not
    declare, looked for inside models, mappings, lists and optionals (see ``refuse_undeclared_inside``)."""
    import types
    import typing

    if depth > 64:  # (a value nested past that is refused by the state's own check, ``limits.state_tree``)
        return []
    model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    if model is not None:
        if not isinstance(value, dict) or getattr(model, "model_config", {}).get("extra") == "allow":
            return []
        declared = model.model_fields
        names = _names(declared)
        out = [(f"{path}{key}", model) for key in value if key not in names]
        for key, inner in value.items():
            if key in declared:
                out += _undeclared(declared[key].annotation, inner, f"{path}{key}.", depth + 1)
        return out
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _undeclared(args[0], value, path, depth + 1)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        return _undeclared(members[0], value, path, depth + 1) if len(members) == 1 else []
    if isinstance(value, dict) and len(args) == 2 and isinstance(origin, type) and issubclass(origin, dict):
        return [u for key, inner in value.items() for u in _undeclared(args[1], inner, f"{path}{key}.", depth + 1)]
    if isinstance(value, list) and args and origin in (list, tuple, set, frozenset):
        item = args[0]
        return [u for i, inner in enumerate(value) for u in _undeclared(item, inner, f"{path}{i}.", depth + 1)]
    return []


def _aliases(field: Any) -> tuple[str, ...]:
    """A model field's other names a value may give it by (its ``alias``, its ``validation_alias`` when a text)."""
    return tuple(dict.fromkeys(a for a in (field.alias, field.validation_alias) if isinstance(a, str)))


def _names(fields: dict[str, Any]) -> set[str]:
    """Every name a model's ``fields`` may be given by: each field's own and its aliases (``_aliases``)."""
    return set(fields) | {a for f in fields.values() for a in _aliases(f)}


def _nulled(before: dict[str, Any], field: str | None, value: Any) -> dict[tuple[str, ...], str]:
    """Where an edit of ``field`` (None: the whole state, ``before`` as dumped) puts null in place of a value
    that was not null, as pydantic's error locations (``("plan",)``, ``("parts", "b")``), each with ``named``'s
    phrase: the field, or an entry of a mapping (a Slack modal's input per entry)."""
    shown = before if field is None else before.get(field)
    prefix = () if field is None else (field,)
    if value is None:
        return {prefix: named(field)} if shown is not None else {}
    if not isinstance(value, dict) or not isinstance(shown, dict):
        return {}
    return {(*prefix, str(key)): named(field, str(key)) for key, entry in value.items()
            if entry is None and shown.get(key) is not None}


def _emptied_refused(exc: ValidationError, nulled: dict[tuple[str, ...], str]) -> str | None:
    """The phrase of the first place in ``nulled`` whose null pydantic refused (an error whose input is None
    at that location or below it: a union's members), else None."""
    for err in exc.errors():
        if err.get("input") is not None:
            continue
        loc = tuple(str(part) for part in err.get("loc", ()))
        for place, phrase in nulled.items():
            if loc[:len(place)] == place:
                return phrase
    return None


def refuse_unknown_fields(wf: Workflow, edits: dict[str, Any]) -> None:
    """Refuse edits of fields the state model does not have; a key written as the CLI's ``--set field.key``
    names the field it meant (``{"scripts": {"a.sql": …}}``).

    Raises:
        InvalidDecisionError: ``invalid edit: MigrationState has no field scripts.a.sql (an entry of a field is
            given inside it: {"scripts": {"a.sql": …}})``.
    """
    unknown = [k for k in edits if k not in wf.state.model_fields]
    if not unknown:
        return
    dotted = next((k for k in unknown if "." in k and k.split(".", 1)[0] in wf.state.model_fields), None)
    hint = ""
    if dotted is not None:
        field, key = dotted.split(".", 1)
        hint = f' (an entry of a field is given inside it: {{"{field}": {{"{key}": …}}}})'
    raise InvalidDecisionError(f"invalid edit: {wf.state.__name__} has no field {', '.join(unknown)}{hint}")


def apply_edits(wf: Workflow, state: BaseModel, edits: dict[str, Any]) -> BaseModel:
    """The state with several fields replaced (a rewind's ``edits``), validated.

    Raises:
        InvalidDecisionError: an unknown field, or a value the state model refuses.
    """
    refuse_unknown_fields(wf, edits)
    refuse_undeclared_inside(wf, edits)
    try:
        return wf.codec.validate({**state.model_dump(), **edits})
    except ValidationError as exc:
        raise InvalidDecisionError(f"invalid edit: {format_validation_error(exc)}") from None
