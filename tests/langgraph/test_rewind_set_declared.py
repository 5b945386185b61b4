"""``hazel rewind RUN --to N --set CHANNEL=VALUE`` of a channel the graph declares but no node has written yet
at checkpoint #N sets it (through ``update_state``, as every ``--set``), text as typed for a text channel; a
channel the graph does not declare is refused naming the declared ones, on the CLI and in REST (where
LangGraph would drop it without a word). On SQLite and PostgreSQL."""

from __future__ import annotations

import json

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.test_api import TOKENS, Api
from tests.langgraph.graphs import workflow
from tests.langgraph.workflows.parallel_history import intake_graph
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer


def test_rewind_sets_a_declared_channel_no_node_wrote_yet(db_url, tmp_path, monkeypatch):
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url,
                           workflows="tests.langgraph.workflows.parallel_history")
    run_id = json.loads(hazel("run", "lg-intake", "--input", '{"topic": "tides"}', "--json").stdout)["run"]["id"]
    before = json.loads(hazel("show", run_id, "--seq", "1", "--json").stdout)["state"]
    assert before == {"topic": "tides", "log": ["intake"]}  # draft: declared, not written yet

    refused = hazel("rewind", run_id, "--to", "1", "--set", "nope=1", code=1)
    assert "the state has no field 'nope' (fields: topic, draft, log)" in refused.stderr, refused.stderr

    rewound = json.loads(hazel("rewind", run_id, "--to", "1", "--set", "draft=My own draft", "--json").stdout)
    assert rewound["decision"]["payload"]["edits"] == {"draft": "My own draft"}  # text as typed, not JSON
    fork = rewound["decision"]["payload"]["to"]
    assert fork == 1
    history = json.loads(hazel("history", run_id, "--json").stdout)["checkpoints"]
    [mark] = [c["seq"] for c in history if c["step"] == "__rewind__"]
    after = json.loads(hazel("show", run_id, "--seq", str(mark + 1), "--json").stdout)["state"]
    assert after["draft"] == "My own draft" and after["topic"] == "tides", after


def test_rest_refuses_an_edit_of_a_channel_the_graph_does_not_declare(db_url):
    hz = make_hazel(db_url, workflow(intake_graph(), name="lg-intake"))
    run = hz.start(workflow="lg-intake", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        before = api.run(run.id)
        answer = api.decide(run.id, {"action": "rewind", "payload": {"to": 1, "edits": {"nope": 1}}})
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["type"] == "InvalidDecisionError", error
        assert "has no channel 'nope' (channels: topic, draft, log)" in error["message"], error
        assert api.run(run.id) == before
        answer = api.decide(run.id, {"action": "rewind", "payload": {"to": 1, "edits": {"draft": "Mine"}}})
        assert answer.status_code == 201, answer.text


def test_a_rewinds_feedback_is_refused_where_the_graph_has_no_feedback_channel(db_url):
    """``update_state`` would drop it without a word (the fork's view showed it, the graph never held it)."""
    hz = make_hazel(db_url, workflow(intake_graph(), name="lg-intake"))
    run = hz.start(workflow="lg-intake", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        before = api.run(run.id)
        answer = api.decide(run.id, {"action": "rewind", "payload": {"to": 1, "feedback": "shorter"}})
        assert answer.status_code == 422, answer.text
        message = answer.json()["error"]["message"]
        assert "has no channel 'feedback' for a rewind's feedback (channels: topic, draft, log)" in message, message
        assert api.run(run.id) == before


def test_a_rewinds_edits_are_checked_against_the_channels_types(db_url):
    """As the run's input is: a value the graph's state schema does not take is refused before anything is
    written (stored, it failed the step that read it); a fitting one is taken as it was given."""
    from bot.engine import InvalidDecisionError
    from tests.langgraph.graphs import review_graph

    hz = make_hazel(db_url, workflow(review_graph()))
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    before = [c.seq for c in hz.checkpoints(run_id=run.id)]
    for edits, says in (({"published": "maybe"}, "published: Input should be a valid boolean"),
                        ({"log": [1, 2]}, "log.0: Input should be a valid string"),
                        ({"draft": {"not": "text"}}, "draft: Input should be a valid string")):
        try:
            hz.rewind(run_id=run.id, actor=person("olga"), to=1, edits=edits)
        except InvalidDecisionError as exc:
            assert str(exc).startswith("invalid edit: ") and says in str(exc), exc
        else:
            raise AssertionError(f"{edits} was taken")
    assert [c.seq for c in hz.checkpoints(run_id=run.id)] == before  # nothing written
    hz.rewind(run_id=run.id, actor=person("olga"), to=1, edits={"draft": "Mine", "published": False})
    assert hz.drive(run_id=run.id).run.status.value == "waiting"


def test_a_typeddict_graph_takes_its_values_as_they_are(db_url):
    """LangGraph converts nothing in a ``TypedDict`` state, so a value must already be of its channel's type:
    ``"3"`` for an ``int`` (or ``"yes"`` for a ``bool``) would be stored as text and fail the node that reads
    it; an integer past 64 bits would fail the graph's serializer at every attempt. Refused in the input and
    in a rewind's edits alike, before anything is written."""
    import importlib

    from bot.engine import InvalidDecisionError, InvalidInputError

    wf = importlib.import_module("examples.langgraph_review").__hazel_workflows__[-1]
    hz = make_hazel(db_url, wf)
    for given, says in (({"topic": "t", "revisions": "4"}, "revisions: Input should be a valid integer"),
                        ({"topic": "t", "published": "yes"}, "published: Input should be a valid boolean"),
                        ({"topic": "t", "revisions": 2 ** 70}, "revisions: 1180591620717411303424 is past the "
                                                                "64-bit integers")):
        try:
            hz.start(workflow=wf.name, input=given, actor=person("olga"))
        except InvalidInputError as exc:
            assert says in str(exc), exc
        else:
            raise AssertionError(f"{given} was taken")
    assert hz.runs() == []
    run = hz.start(workflow=wf.name, input={"topic": "t", "revisions": 0}, actor=person("olga"))
    hz.drive(run_id=run.id)
    before = [c.seq for c in hz.checkpoints(run_id=run.id)]
    for edits, says in (({"revisions": "3"}, "revisions: Input should be a valid integer"),
                        ({"revisions": True}, "revisions: Input should be a valid integer"),
                        ({"history": ["ok", 2]}, "history.1: Input should be a valid string"),
                        ({"revisions": 99999999999999999999999}, "past the 64-bit integers")):
        try:
            hz.rewind(run_id=run.id, actor=person("olga"), to=1, edits=edits)
        except InvalidDecisionError as exc:
            assert says in str(exc), exc
        else:
            raise AssertionError(f"{edits} was taken")
    assert [c.seq for c in hz.checkpoints(run_id=run.id)] == before
    hz.rewind(run_id=run.id, actor=person("olga"), to=1, edits={"revisions": 3})
    assert hz.drive(run_id=run.id).run.status.value == "waiting"
