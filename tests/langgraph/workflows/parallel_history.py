"""Graphs whose super-steps run several nodes, for the history tests
(``HAZEL_WORKFLOWS=tests.langgraph.workflows.parallel_history``): ``lg-intake`` (intake, then draft and legal in
one super-step, legal asking, then publish) and ``lg-pair`` (legal and security asking at once, then a join)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from hazel.langgraph import register
from tests.langgraph.graphs import pair_graph


def intake_graph(checkpointer: Any = None):
    """intake -> (draft, legal: ``interrupt()``) in one super-step -> publish."""

    class S(TypedDict, total=False):
        topic: str
        draft: str
        log: Annotated[list[str], operator.add]

    def intake(state: S) -> dict:
        return {"log": ["intake"]}

    def draft(state: S) -> dict:
        return {"draft": f"About {state['topic']}", "log": ["draft"]}

    def legal(state: S) -> dict:
        return {"log": [f"legal: {interrupt({'ask': 'legal'})['action']}"]}

    def publish(state: S) -> dict:
        return {"log": ["publish"]}

    g = StateGraph(S)
    for fn in (intake, draft, legal, publish):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "intake")
    g.add_edge("intake", "draft")
    g.add_edge("intake", "legal")
    g.add_edge(["draft", "legal"], "publish")
    g.add_edge("publish", END)
    return g.compile(checkpointer=checkpointer)


register(intake_graph(), name="lg-intake")
register(pair_graph(), name="lg-pair")
