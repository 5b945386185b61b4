"""``bind_log_context``: the run and request bound from a call's arguments, however they are passed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot.engine.logcontext import bind_log_context, request_id_var, run_id_var


class _Deliverer:
    @bind_log_context(run_id="message.run_id", request_id="message.request_id")
    def deliver(self, message: object, *, retry: bool = False) -> tuple[object, object]:
        return run_id_var.get(), request_id_var.get()


class _Engine:
    @bind_log_context(run_id="run_id", request_id="request_id")
    def decide(self, run_id: str, action: str, *, request_id: int | None = None) -> tuple[object, object]:
        return run_id_var.get(), request_id_var.get()


def test_fields_come_from_positional_keyword_and_attribute_arguments_and_are_reset_after() -> None:
    engine = _Engine()
    assert engine.decide("r1", "approve", request_id=7) == ("r1", 7)
    assert engine.decide(run_id="r2", action="approve") == ("r2", None)  # not passed: None, not the default's
    assert engine.decide("r3", action="approve") == ("r3", None)
    message = SimpleNamespace(run_id="r4", request_id=9)
    assert _Deliverer().deliver(message) == ("r4", 9)
    assert _Deliverer().deliver(message=SimpleNamespace(run_id="r5")) == ("r5", None)  # a missing attribute
    assert (run_id_var.get(), request_id_var.get()) == (None, None)


def test_a_field_naming_no_argument_is_refused_when_decorating() -> None:
    with pytest.raises(ValueError, match="no argument 'run'"):
        @bind_log_context(run_id="run.id")
        def step(run_id: str) -> None: ...

    with pytest.raises(ValueError, match="unknown log context fields"):
        bind_log_context(flow_id="run_id")
