"""Every view of a LangGraph run's state shows the graph's values (not Hazel's pointer state): ``hazel show
--seq``, the REST state endpoint, the run pages' state and diff; ``hazel rewind --set`` edits graph values and
the fork's graph state has them. Native runs and a run whose workflow is not deployed show the stored tree.
SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, TypedDict

import pytest

from bot.inbound.api import api_router
from bot.inbound.web import Signer, web_router
from bot.server.http import create_app
from bot.settings import Settings
from hazel.langgraph import HazelSaver
from tests.bot.test_api import TOKENS, Api
from tests.bot.web.conftest import Browserless
from tests.bot.web.scenario import web_settings
from tests.langgraph.graphs import review_graph, workflow
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer

class Odd(TypedDict, total=False):
    """Values JSON cannot hold as they are (``test_values_json_cannot_hold_…``)."""

    topic: str
    when: datetime
    dec: Decimal
    blob: bytes
    tags: set


POINTER_FIELDS = {"lg_input", "lg_checkpoint", "lg_asks", "lg_resume", "lg_update", "lg_fork"}


def _started(db_url: str) -> tuple[Any, Any, str]:
    """A ``lg-review`` run on ``tides`` waiting at review: checkpoints #0 start, #1 draft, #2 review."""
    wf = workflow(review_graph())
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert [c.step for c in hz.checkpoints(run_id=run.id)] == ["__start__", "draft", "review"]
    return wf, hz, run.id


DRAFTED = {"topic": "tides", "draft": "Draft about tides", "log": ["draft"]}


def test_state_tree_at_is_the_graph_values_and_state_at_the_pointer(db_url: str) -> None:
    wf, hz, run_id = _started(db_url)
    assert hz.state_tree_at(run_id=run_id, seq=0) == {"topic": "tides"}  # before the first super-step: the input
    assert hz.state_tree_at(run_id=run_id, seq=1) == DRAFTED
    assert hz.state_tree_at(run_id=run_id) == DRAFTED  # the head (#2: the interrupt changed no value)
    assert hz.state_at(run_id=run_id).lg_checkpoint is not None  # the engine's own model: the pointer
    assert hz.shown(request_id=hz.pending_request(run_id=run_id).id).value == "Draft about tides"


def test_fallback_to_the_stored_tree(db_url: str) -> None:
    wf, hz, run_id = _started(db_url)
    with hz.store.read() as tx:
        stored = tx.checkpoints.load(run_id, 1).tree
    undeployed = make_hazel(db_url)  # the same database, the workflow not registered here
    assert undeployed.state_tree_at(run_id=run_id, seq=1) == stored and stored["lg_checkpoint"]
    lost = {**stored, "lg_checkpoint": "1f000000-0000-6000-8000-000000000000"}  # no such graph checkpoint
    assert wf.state_view(lost, run_id=run_id) == lost


def test_native_runs_show_the_stored_tree(db_url: str) -> None:
    from tests.workflows.doc import doc_workflow

    hz = make_hazel(db_url, doc_workflow())
    run = hz.start(workflow="doc", input={"topic": "backups"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    checkpoints = hz.checkpoints(run_id=run.id)
    assert len(checkpoints) > 1
    with hz.store.read() as tx:
        stored = {c.seq: tx.checkpoints.load(run.id, c.seq).tree for c in checkpoints}
    assert {c.seq: hz.state_tree_at(run_id=run.id, seq=c.seq) for c in checkpoints} == stored


def test_rest_state_endpoint_shows_the_graph_values(db_url: str) -> None:
    wf, hz, run_id = _started(db_url)
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        for seq, values in ((0, {"topic": "tides"}), (1, DRAFTED), (2, DRAFTED)):
            response = api.call("GET", f"/api/runs/{run_id}/checkpoints/{seq}/state")
            assert response.status_code == 200, response.text
            assert response.json() == {"run_id": run_id, "seq": seq, "state": values}


def test_run_pages_state_and_diff_show_the_graph_values(db_url: str) -> None:
    wf, hz, run_id = _started(db_url)
    settings = web_settings()
    with LiveServer(create_app(hz, routers=[web_router(hz, settings)])) as server:
        client = Browserless(server.url)
        assert client.get(f"/runs/{run_id}?t={Signer(settings).token(run_id, None)}").status_code == 303
        diff = client.get(f"/runs/{run_id}/diff?a=0&b=1")
        assert diff.status_code == 200, diff.text
        assert '<code>draft</code> <span class="badge">added</span>' in diff.text
        assert '<code>log</code> <span class="badge">added</span>' in diff.text
        assert "Unchanged: <code>topic</code>" in diff.text
        assert not any(name in diff.text for name in POINTER_FIELDS)
        same = client.get(f"/runs/{run_id}/diff?a=1&b=2")  # the interrupt changed no graph value
        assert same.status_code == 200 and "The two states are the same." in same.text
        state = client.get(f"/runs/{run_id}/checkpoints/1")
        assert state.status_code == 200 and "Draft about tides" in state.text
        assert not any(name in state.text for name in POINTER_FIELDS)


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Any]:
    """``cli(*args, code=0)``: ``hazel ARGS`` in-process on ``db_url`` with ``examples.langgraph_review``."""
    return in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows="examples.langgraph_review")


def _graph_values(db_url: str, run_id: str) -> dict:
    from examples.langgraph_review import build

    with HazelSaver.from_conn_string(db_url) as saver:
        return build().compile(checkpointer=saver).get_state({"configurable": {"thread_id": run_id}}).values


def _start(cli: Callable[..., Any]) -> str:
    started = json.loads(cli("run", "langgraph-review", "--input", '{"topic": "tide pools"}', "--json").stdout)
    return started["run"]["id"] if "run" in started else started["id"]


def test_show_seq_from_the_cli(cli: Callable[..., Any], db_url: str) -> None:
    run_id = _start(cli)
    first = _graph_values(db_url, run_id)
    assert first["history"] == ["draft"]
    shown = json.loads(cli("show", run_id, "--seq", "1", "--json").stdout)
    assert shown["seq"] == 1 and shown["state"] == first  # the graph's values, no pointer
    assert "Tide pools in three points" in cli("show", run_id, "--seq", "1").stdout
    assert "lg_checkpoint" not in cli("show", run_id, "--seq", "1").stdout
    assert "Tide pools in three points" in cli("show", run_id, "--raw").stdout  # (the interrupt's value)
    assert "Tide pools in three points" in cli("show", run_id).stdout


def test_rewind_set_round_trip_from_the_cli(cli: Callable[..., Any], db_url: str) -> None:
    run_id = _start(cli)
    # --set edits a graph value at #1; the fork's graph state has it, and the review shows it
    cli("rewind", run_id, "--to", "1", "--set", "draft=My own draft", "--set", "topic=rock pools")
    values = _graph_values(db_url, run_id)
    assert (values["draft"], values["topic"], values["history"]) == ("My own draft", "rock pools", ["draft"])
    assert cli("show", run_id, "--raw").stdout == "My own draft\n"
    head = json.loads(cli("show", run_id, "--json").stdout)
    assert head["state"] == values and head["run"]["branch"] == 1
    cli("approve", run_id)
    values = _graph_values(db_url, run_id)
    assert values["published"] is True and values["draft"] == "My own draft" and values["topic"] == "rock pools"
    assert values["history"] == ["draft", "approved by olga", "publish"]

    # a field the graph's state lacks is refused, naming the graph's fields
    refused = cli("rewind", run_id, "--to", "1", "--set", "lg_checkpoint=x", code=1)
    assert "no field 'lg_checkpoint'" in refused.output and "draft" in refused.output


def test_values_json_cannot_hold_are_shown_as_the_request_view_shows_them(db_url: str) -> None:
    """Fresh-user s21 M3: a graph's ``datetime``, ``Decimal`` and ``bytes`` values were shown in the state views as
    Python reprs (``"datetime.datetime(2026, 1, 1, …)"``), where the request view of the same values shows ISO 8601,
    the decimal's text and ``{"$bytes": …}``."""
    from langgraph.graph import END, START, StateGraph

    from hazel.langgraph import steer

    def make(state: Odd) -> dict:
        return {"when": datetime(2026, 1, 1, tzinfo=timezone.utc), "dec": Decimal("1.10"), "blob": b"\x00\xff",
                "tags": {"x"}}

    def ask(state: Odd) -> dict:
        steer(title="Look", show={"when": state["when"], "dec": state["dec"], "blob": state["blob"]})
        return {}

    graph = StateGraph(Odd)
    graph.add_node("make", make)
    graph.add_node("ask", ask)
    graph.add_edge(START, "make")
    graph.add_edge("make", "ask")
    graph.add_edge("ask", END)
    hz = make_hazel(db_url, workflow(graph.compile(), name="odd"))
    run = hz.start(workflow="odd", input={"topic": "t"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    shown = hz.state_tree_at(run_id=run.id, seq=1)
    assert shown == {"topic": "t", "when": "2026-01-01T00:00:00Z", "dec": "1.10", "blob": {"$bytes": "AP8="},
                     "tags": ["x"]}, shown
    asked = hz.shown(request_id=hz.pending_request(run_id=run.id).id).value
    assert asked == {"when": shown["when"], "dec": shown["dec"], "blob": shown["blob"]}, asked
