"""A LangGraph run's input is validated against its graph's input schema before anything is written, as a
native run's is against its state model: a wrong type, an undeclared key or a missing required key answers
422 ``InvalidInputError`` on ``POST /api/runs`` (it answered 201 and the run then failed inside the graph),
and ``GET /api/workflows`` shows the graph's input JSON schema, not Hazel's pointer state (``lg_input``,
``lg_checkpoint``, …). Real HTTP, SQLite and PostgreSQL; the README's example graph too."""

from __future__ import annotations

import importlib
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from bot.engine import InvalidInputError
from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.bot.test_api_limits import error_of
from tests.langgraph.graphs import review_graph, workflow
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer

POINTER = {"lg_input", "lg_checkpoint", "lg_asks", "lg_resume", "lg_update", "lg_fork"}


class Needs(TypedDict):  # total: both keys required
    topic: str
    pages: int


class Brief(BaseModel):
    topic: str
    pages: int = 1


def one_node(schema: type):  # noqa: ANN201
    g = StateGraph(schema)
    g.add_node("write", lambda state: {})
    g.add_edge(START, "write")
    g.add_edge("write", END)
    return g.compile()


def test_rest_refuses_input_the_graph_does_not_take_and_shows_its_schema(db_url: str) -> None:
    hazel = make_hazel(db_url, workflow(review_graph()), workflow(one_node(Needs), name="lg-needs"),
                       workflow(one_node(Brief), name="lg-brief"))
    with LiveServer(create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        for name, given, says in (
                ("lg-review", {"topic": 5}, "topic: Input should be a valid string"),
                ("lg-review", {"nottopic": 1}, "unknown field 'nottopic' (fields: topic, draft"),
                ("lg-review", {"lg_input": {"topic": "x"}}, "unknown field 'lg_input'"),
                ("lg-review", {"log": "not a list"}, "log: Input should be a valid list"),
                ("lg-needs", {"topic": "x"}, "pages: Field required"),
                ("lg-needs", {"topic": "x", "pages": "many"}, "pages: Input should be a valid integer"),
                ("lg-brief", {"pages": 2}, "topic: Field required"),
                ("lg-brief", {"topic": "x", "other": 1}, "unknown field 'other'")):
            response = api.call("POST", "/api/runs", json={"workflow": name, "input": given}, token=ALICE)
            assert says in error_of(response, 422, "InvalidInputError"), (name, given)
        assert hazel.runs() == []
        assert api.call("POST", "/api/runs", json={"workflow": "lg-needs", "input": {"topic": "x", "pages": 2}},
                        token=ALICE).status_code == 201
        assert api.call("POST", "/api/runs", json={"workflow": "lg-review", "input": {"topic": "tides"}},
                        token=ALICE).status_code == 201
        listed = api.call("GET", "/api/workflows", token=ALICE).json()["workflows"]
    schemas = {w["name"]: w["input_schema"] for w in listed}
    review = schemas["lg-review"]
    assert set(review["properties"]) == {"topic", "draft", "feedback", "log", "published"}, review
    assert review["properties"]["topic"]["type"] == "string" and not POINTER & set(review["properties"])
    assert sorted(schemas["lg-needs"]["required"]) == ["pages", "topic"]
    assert schemas["lg-brief"]["required"] == ["topic"]


def test_the_example_graph_checks_its_input_on_every_channel(db_url: str) -> None:
    example = importlib.import_module("examples.langgraph_review")
    wf = example.__hazel_workflows__[-1]
    hazel = make_hazel(db_url, wf)
    for given, says in (({"topic": 5}, "topic: Input should be a valid string"),
                        ({"nottopic": 1}, "unknown field 'nottopic'"),
                        ({}, "topic: Field required")):  # (s19 L2: started, then failed with KeyError: 'topic')
        with pytest.raises(InvalidInputError, match=says):
            hazel.start(workflow="langgraph-review", input=given, actor=person("author"))
    assert hazel.runs() == []
    assert wf.input_json_schema()["properties"]["topic"]["type"] == "string"
    assert wf.input_json_schema()["required"] == ["topic"]


def test_the_type_check_answers_for_any_json_a_person_can_send() -> None:
    """``lgraph.fits``: an integer past 64 bits named by its path, deep nesting answered (not a RecursionError:
    JSON reaches about 1,000 levels before the state's own depth limit is checked), a lone surrogate said as
    every channel says it."""
    from pydantic import TypeAdapter

    from bot.engine.lgraph import fits

    deep: object = 1
    for _ in range(2000):
        deep = [deep]
    assert fits(TypeAdapter(list), deep, strict=True) == ["value: nested too deeply to be checked"]
    assert fits(TypeAdapter(dict), {"a": [1, {"b": 2 ** 70}]}, strict=False, where=("notes",)) == [
        "notes.a.1.b: 1180591620717411303424 is past the 64-bit integers the graph's checkpoints hold"]
    [said] = fits(TypeAdapter(str), "half \ud83d", strict=True, where=("topic",))
    assert said.startswith("topic holds a character that is not Unicode text (U+D83D"), said
    assert fits(TypeAdapter(int), 3, strict=True) == [] and fits(TypeAdapter(int), "3", strict=True)
