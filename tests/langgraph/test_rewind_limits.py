"""A rewind's edits meet the engine's size limits (``bot.engine.limits``) on a LangGraph run as on a native
one: a value nested deeper than a state may be is refused over REST (422) and from the CLI, and nothing is
written. A run whose execution fails outside a step (a state Hazel cannot load) is failed, saying why, audited,
rather than handed back by recovery to crash again for ever. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from pydantic import BaseModel

from bot.inbound.api import api_router
from bot.ops.worker import WorkerPool
from bot.server.http import create_app
from bot.settings import Settings
from hazel import StepContext, Workflow
from store.models import RunStatus
from tests.bot.test_api import TOKENS, Api, wait_for
from tests.bot.test_api_limits import error_of, loose_workflow, snapshot
from tests.langgraph.graphs import chain, workflow
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer

TOO_DEEP = "the edited state is nested too deeply: at most 250 levels of JSON objects and arrays"


def deep(levels: int) -> dict[str, Any]:
    """``{'a': [{'a': [... {'v': 0}]}]}``: ``levels`` times an object holding a list."""
    value: dict[str, Any] = {"v": 0}
    for _ in range(levels):
        value = {"a": [value]}
    return value


def notes_graph():  # noqa: ANN201
    """write (a ``notes`` channel of any JSON object) -> review (steer): a channel a deep value fits."""
    from typing import TypedDict

    from hazel.langgraph.steer import steer

    class NotesState(TypedDict, total=False):
        topic: str
        notes: dict

    def write(state: NotesState) -> dict:
        return {"notes": {"about": state["topic"]}}

    def review(state: NotesState) -> dict:
        steer(title="Approve the notes", show=state["notes"])
        return {}

    return chain(NotesState, write, review).compile()


def _events(hz: Any, run_id: str) -> list[str]:
    return [e.action for e in hz.audit(run_id=run_id)]


def test_a_too_deep_rewind_edit_of_a_langgraph_run_is_422_and_writes_nothing(db_url: str) -> None:
    hz = make_hazel(db_url, workflow(notes_graph(), name="lg-notes"), loose_workflow())
    graph_run = hz.start(workflow="lg-notes", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=graph_run.id)
    native_run = hz.start(workflow="loose", input={"data": 1}, actor=person("alice"))
    hz.drive(run_id=native_run.id)
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        for run_id, field in ((graph_run.id, "notes"), (native_run.id, "data")):
            before, events = snapshot(hz, run_id), _events(hz, run_id)
            response = api.decide(run_id, {"action": "rewind", "payload": {"to": 1, "edits": {field: deep(300)}}})
            assert error_of(response, 422, "InvalidDecisionError") == TOO_DEEP
            assert snapshot(hz, run_id) == before  # no decision, no checkpoint, the request still pending
            assert "decision.rewind" not in _events(hz, run_id)[len(events):]
            # a value within the limit still forks the run there
            response = api.decide(run_id, {"action": "rewind", "payload": {"to": 1, "edits": {field: deep(100)}}})
            assert response.status_code == 201, response.text
    # The REST decision continues the run on a background thread: until that lets go, drive() finds it leased.
    def paused_again() -> bool:
        hz.drive(run_id=graph_run.id)
        return hz.get(run_id=graph_run.id).status is RunStatus.WAITING

    wait_for(paused_again, what="the forked LangGraph run to pause at its review again")
    assert hz.state_tree_at(run_id=graph_run.id)["notes"] == deep(100)


def test_a_too_deep_rewind_edit_from_the_cli_is_refused(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    cli: Callable[..., Any] = in_process_cli(monkeypatch, tmp_path, db_url=db_url,
                                             workflows="examples.langgraph_review")
    started = json.loads(cli("run", "langgraph-review", "--input", '{"topic": "deep"}', "--json").stdout)
    run_id = started["run"]["id"] if "run" in started else started["id"]
    before = json.loads(cli("show", run_id, "--json").stdout)
    (tmp_path / "deepval.json").write_text(json.dumps(deep(300)))
    refused = cli("rewind", run_id, "--to", "1", "--set", "revisions=@deepval.json", "--detach", code=1)
    assert "nested too deeply: at most 250 levels" in refused.output
    after = json.loads(cli("show", run_id, "--json").stdout)
    assert after == before
    assert "rewind" not in cli("history", run_id).stdout


class Numbers(BaseModel):
    n: int = 0


class Renamed(BaseModel):
    count: int  # required: a tree stored as ``Numbers`` no longer loads


def _numbers(state: type[BaseModel]) -> Workflow:
    wf = Workflow("numbers", version=1, state=state)

    @wf.step
    def first(s: BaseModel, ctx: StepContext) -> BaseModel:
        return s

    wf.steer("look", show=None)

    @wf.step
    def second(s: BaseModel, ctx: StepContext) -> BaseModel:
        return s
    return wf


def test_a_run_whose_state_cannot_be_loaded_fails_rather_than_crash_for_ever(db_url: str) -> None:
    hz = make_hazel(db_url, _numbers(Numbers))
    run = hz.start(workflow="numbers", input={"n": 1}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.WAITING
    # the same version deployed with a state model its stored state does not fit (a deployment's mistake)
    broken = make_hazel(db_url, _numbers(Renamed), lease_sec=1.0)
    broken.decide(run_id=run.id, action="approve", actor=person("olga"))
    pool = WorkerPool(broken, threads=1, sweep_sec=0.1)
    pool.start()
    try:
        failed = wait_for(lambda: (r := broken.get(run_id=run.id)).status is RunStatus.FAILED and r,
                          timeout_sec=10.0, what="the run failed")
    finally:
        pool.stop()
    assert "ValidationError" in failed.error and "count" in failed.error and failed.error_traceback
    assert failed.lease_token is None and failed.lease_owner is None
    events = [e for e in broken.audit(run_id=run.id) if e.action == "run.failed"]
    assert len(events) == 1 and "ValidationError" in events[0].detail["error"]
    assert not [e for e in broken.audit(run_id=run.id) if e.action == "run.recovered"]
    # a retry after the deployment is fixed continues from the same checkpoint
    fixed = make_hazel(db_url, _numbers(Numbers))
    fixed.retry(run_id=run.id, actor=person("olga"))
    fixed.drive(run_id=run.id)
    assert fixed.get(run_id=run.id).status is RunStatus.COMPLETED


def test_an_edit_or_rewind_of_a_state_that_no_longer_loads_is_refused_as_such(db_url: str) -> None:
    """An edit (or a rewind's edits) on a run whose stored state no longer fits its workflow's state model (the
    model changed under the same version): refused as a run state problem, naming it (REST 409), nothing
    written; it was a 500 (the model's ValidationError) and, on the CLI, an 'invalid edit' of fields nobody
    touched."""
    from bot.engine.errors import RunStateError

    hz = make_hazel(db_url, _numbers(Numbers))
    run = hz.start(workflow="numbers", input={"n": 1}, actor=person("olga"))
    hz.drive(run_id=run.id)
    broken = make_hazel(db_url, _numbers(Renamed))
    before = broken.checkpoints(run_id=run.id)
    for attempt in (lambda: broken.decide(run_id=run.id, action="edit", actor=person("olga"),
                                          payload={"value": {"count": 2}}),
                    lambda: broken.rewind(run_id=run.id, actor=person("olga"), to=1, edits={"count": 2})):
        with pytest.raises(RunStateError, match="stored state no longer loads as numbers v1's state"):
            attempt()
    assert broken.checkpoints(run_id=run.id) == before
    assert broken.get(run_id=run.id).status is RunStatus.WAITING


def test_a_failure_outside_a_step_is_logged_in_one_line(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """The failure is one log line naming where its traceback is (``hazel show RUN --full``): the CLI prints its
    log on stderr, and a traceback there broke the CLI's one-line errors."""
    import logging

    hz = make_hazel(db_url, _numbers(Numbers))
    run = hz.start(workflow="numbers", input={"n": 1}, actor=person("olga"))
    hz.drive(run_id=run.id)
    broken = make_hazel(db_url, _numbers(Renamed))
    broken.decide(run_id=run.id, action="approve", actor=person("olga"), claim=True)
    with caplog.at_level(logging.ERROR, logger="hazel.runner"):
        broken.drive(run_id=run.id)
    assert broken.get(run_id=run.id).status is RunStatus.FAILED
    (record,) = [r for r in caplog.records if r.name == "hazel.runner"]
    assert record.exc_info is None and "\n" not in record.getMessage(), record.getMessage()
    assert f"hazel show {run.id} --full" in record.getMessage()


def test_when_failing_the_run_cannot_be_written_the_log_does_not_say_it_failed(
        db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema changed under a serving process (``hazel db downgrade`` while it runs): the run's failure cannot
    be written either, so the run stays leased and is handed back later; the log says that, not "failed"."""
    import logging

    from store import Store

    hz = make_hazel(db_url, _numbers(Numbers))
    run = hz.start(workflow="numbers", input={"n": 1}, actor=person("olga"))
    hz.drive(run_id=run.id)
    broken = make_hazel(db_url, _numbers(Renamed))
    broken.decide(run_id=run.id, action="approve", actor=person("olga"), claim=True)

    def gone(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        raise RuntimeError("relation hazel_runs has no column error")

    monkeypatch.setattr(Store, "transaction", gone)
    with caplog.at_level(logging.ERROR, logger="hazel.runner"), pytest.raises(RuntimeError):
        broken.drive(run_id=run.id)
    monkeypatch.undo()
    (record,) = [r for r in caplog.records if r.name == "hazel.runner"]
    assert "marking it failed failed too" in record.getMessage() and "the run is failed" not in record.getMessage()
    assert broken.get(run_id=run.id).status is RunStatus.RUNNING  # as the log says: left leased
