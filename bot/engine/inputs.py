"""Checking what comes in before anything is written: a run's input against its state model, and the hook
settings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from bot.engine.errors import ConfigurationError, InvalidInputError, quoted
from bot.engine.lgraph import LangGraphWorkflow, fits
from bot.engine.limits import not_text
from bot.engine.workflow import Workflow, unknown_fields
from bot.settings import Settings


def validate_input(wf: Workflow, data: dict[str, Any] | BaseModel | None) -> BaseModel:
    """``data`` as ``wf``'s state (None: the model's defaults).

    Raises:
        InvalidInputError: a field the model does not have (a typo must not start a run with a default in its
            place), or a value it refuses (pydantic's message). A LangGraph graph's run: the same against the
            graph's input schema (``LangGraphWorkflow.input_adapter``), before its first super-step.
    """
    if isinstance(wf, LangGraphWorkflow):
        _check_graph_input(wf, data)
    unknown = unknown_fields(wf.state, data)
    if unknown:
        raise _unknown(wf, unknown, list(wf.state.model_fields))
    try:
        return wf.codec.validate(data if data is not None else {})
    except ValidationError as exc:
        raise _invalid(wf, exc) from None


def _invalid(wf: Workflow, exc: ValidationError) -> InvalidInputError:
    """pydantic's refusal as an ``InvalidInputError``; a string that is not Unicode text (``string_unicode``:
    a byte that is not UTF-8 on the command line) is said as every other channel says it (``limits.not_text``)."""
    for error in exc.errors():
        if error["type"] == "string_unicode" and isinstance(error.get("input"), str):
            where = ".".join(map(str, error["loc"]))
            return InvalidInputError(f"invalid input for {wf.label}: {where} {not_text(error['input'])}")
    from bot.engine.steering.edits import format_validation_error  # (on this error's path only: a process that
    # only reads, as `hazel runs`, does not import steering)

    return InvalidInputError(f"invalid input for {wf.label}: {format_validation_error(exc)}")


def _unknown(wf: Workflow, unknown: list[str], fields: list[str]) -> InvalidInputError:
    named = ", ".join(map(quoted, unknown[:10])) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
    return InvalidInputError(f"invalid input for {wf.label}: unknown field {named} (fields: {', '.join(fields)})")


def _check_graph_input(wf: LangGraphWorkflow, data: object) -> None:
    """A LangGraph run's input against its graph's input schema (its keys, then its types: ``lgraph.fits``,
    strictly for a schema LangGraph converts nothing of, a ``TypedDict``); the value itself is handed to the
    graph as it came.

    Raises:
        InvalidInputError: a key the schema does not declare, or a value it refuses.
    """
    if isinstance(data, BaseModel) or (data is not None and not isinstance(data, dict)):
        return  # (a model instance is the caller's own; not an object: the codec says so)
    adapter, fields = wf.input_adapter, wf.input_fields()
    if adapter is None:
        return
    if fields is not None:
        unknown = sorted(str(k) for k in (data or {}) if k not in fields)
        if unknown:
            raise _unknown(wf, unknown, fields)
    problems = fits(adapter, data if data is not None else {}, strict=wf.input_strict)
    if problems:
        raise InvalidInputError(f"invalid input for {wf.label}: {'; '.join(problems)}")


def check_hooks(settings: Settings) -> None:
    """Refuse hook settings that cannot work (each URL is checked where the settings are read:
    ``Settings._hook_urls``).

    Raises:
        ConfigurationError: ``HAZEL_HOOK_URLS`` without ``HAZEL_HOOK_SECRET`` (events are always signed).
    """
    if settings.hook_url_list and settings.hook_secret is None:
        raise ConfigurationError("HAZEL_HOOK_URLS is set but HAZEL_HOOK_SECRET is not: hook events are always "
                                 "signed")
