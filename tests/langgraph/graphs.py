"""Small LangGraph graphs the steering tests drive through Hazel (a review loop, two reviews at once)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Callable, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from hazel.langgraph.register import register
from hazel.langgraph.steer import steer
from tests.support.engine import person


def chain(state: type, *nodes: Callable[..., Any]) -> StateGraph:
    """A graph (not compiled) running ``nodes`` one after another, each named after its function."""
    g = StateGraph(state)
    previous = START
    for node in nodes:
        g.add_node(node.__name__, node)
        g.add_edge(previous, node.__name__)
        previous = node.__name__
    g.add_edge(previous, END)
    return g


class ReviewState(TypedDict, total=False):
    topic: str
    draft: str
    feedback: str
    log: Annotated[list[str], operator.add]
    published: bool


def review_graph(checkpointer: Any = None, *, on_node: Callable[[str], None] | None = None, **steer_settings: Any):
    """draft -> review (steer) -> revise on feedback / publish on approve or edit / END on reject."""
    seen = on_node or (lambda name: None)

    def draft(state: ReviewState) -> dict:
        seen("draft")
        text = f"Draft about {state['topic']}"
        if state.get("feedback"):
            text += f" (after: {state['feedback']})"
        return {"draft": text, "log": ["draft"]}

    def review(state: ReviewState) -> dict:
        seen("review")
        answer = steer(title="Approve the draft", show=state["draft"], **steer_settings)
        if answer["action"] == "edit":
            return {"draft": answer["value"], "feedback": "", "log": [f"edited by {answer['by']}"]}
        if answer["action"] == "feedback":
            return {"feedback": answer["text"], "log": [f"feedback: {answer['text']}"]}
        if answer["action"] == "reject":
            return {"feedback": "", "log": [f"rejected: {answer['reason']}"]}
        return {"feedback": "", "log": [f"approved by {answer['by']}"]}

    def revise(state: ReviewState) -> dict:
        seen("revise")
        return {"draft": state["draft"] + f" [revised: {state['feedback']}]", "log": ["revise"]}

    def publish(state: ReviewState) -> dict:
        seen("publish")
        return {"published": True, "log": ["publish"]}

    def route(state: ReviewState) -> str:
        last = state["log"][-1]
        if last.startswith("feedback"):
            return "revise"
        if last.startswith("rejected"):
            return END
        return "publish"

    g = StateGraph(ReviewState)
    for fn in (draft, review, revise, publish):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_conditional_edges("review", route, ["revise", "publish", END])
    g.add_edge("revise", "review")
    g.add_edge("publish", END)
    return g.compile(checkpointer=checkpointer)


def pair_graph(checkpointer: Any = None):
    """Two plain ``interrupt()`` calls in one super-step (legal and security), then a join."""

    class S(TypedDict, total=False):
        topic: str
        log: Annotated[list[str], operator.add]

    def legal(state: S) -> dict:
        return {"log": [f"legal: {interrupt({'ask': 'legal', 'topic': state['topic']})['action']}"]}

    def security(state: S) -> dict:
        answer = interrupt({"ask": "security"})
        return {"log": [f"security: {answer['action']} {answer.get('value', '')}".strip()]}

    def join(state: S) -> dict:
        return {"log": ["join"]}

    g = StateGraph(S)
    g.add_node("legal", legal)
    g.add_node("security", security)
    g.add_node("join", join)
    g.add_edge(START, "legal")
    g.add_edge(START, "security")
    g.add_edge(["legal", "security"], "join")
    g.add_edge("join", END)
    return g.compile(checkpointer=checkpointer)


def revised_once(hz: Any, text: str = "shorter") -> str:
    """A run of ``lg-review`` (``review_graph``'s workflow, registered in ``hz``) started by olga, its first draft
    answered with ana's feedback ``text`` and driven on: it waits at the revised draft's review. Its id."""
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="feedback", actor=person("ana"), payload={"text": text})
    hz.drive(run_id=run.id)
    return run.id


def workflow(graph: Any, name: str = "lg-review", version: int = 1, **settings: Any):
    """``register(graph, ...)`` into this module (the tests add the workflow to their own registry)."""
    return register(graph, name=name, version=version, **settings)


def one_node_graph(node: Callable[..., dict], state: Any, name: str = "ask"):
    """A graph of one node, ``node`` (named ``name``) over ``state``, between START and END, compiled without a
    checkpointer (Hazel gives it one)."""
    g = StateGraph(state)
    g.add_node(name, node)
    g.add_edge(START, name)
    g.add_edge(name, END)
    return g.compile()


def fan_graph(checkpointer: Any = None):
    """Two nodes that finish in one super-step (notes and facts: one graph checkpoint written by both), then
    a join and a review (``steer``)."""

    class S(TypedDict, total=False):
        topic: str
        feedback: str
        log: Annotated[list[str], operator.add]

    def notes(state: S) -> dict:
        return {"log": ["notes"]}

    def facts(state: S) -> dict:
        return {"log": ["facts"]}

    def join(state: S) -> dict:
        return {"log": [f"join ({state.get('feedback') or 'no feedback'})"]}

    def review(state: S) -> dict:
        return {"log": [f"review: {steer(show=state['log'])['action']}"]}

    g = StateGraph(S)
    for fn in (notes, facts, join, review):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "notes")
    g.add_edge(START, "facts")
    g.add_edge(["notes", "facts"], "join")
    g.add_edge("join", "review")
    g.add_edge("review", END)
    return g.compile(checkpointer=checkpointer)
