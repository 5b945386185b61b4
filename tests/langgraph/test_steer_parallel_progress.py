"""The progress a LangGraph run reports when a parallel super-step's nodes stop at ``interrupt()``: they paused
to ask for steering, they did not finish (a node of the same super-step that finished is done). The Jira
comment and the Slack thread reply say so, in the thread of the request before them; the issue of a request
asked in the same super-step gets no progress comment about its sibling. On SQLite and PostgreSQL."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from hazel import Approvers
from integrations.jira import render
from integrations.slack import blocks as B
from store.models import ProgressView
from tests.langgraph.graphs import pair_graph, workflow
from tests.langgraph.on_jira import graph_on_jira
from tests.support.engine import person
from tests.support.slack_views import make_view


def draft_then_pair(*, notes: bool):
    """``draft`` asks, then ``legal`` and ``security`` ask in one super-step (with ``notes``, which finishes)."""

    class S(TypedDict, total=False):
        topic: str
        log: Annotated[list[str], operator.add]

    def ask(name: str):  # noqa: ANN202
        return lambda state: {"log": [f"{name}: {interrupt({'ask': name})['action']}"]}

    g = StateGraph(S)
    for name in ("draft", "legal", "security"):
        g.add_node(name, ask(name))
    g.add_node("join", lambda state: {"log": ["join"]})
    parallel = ["legal", "security"]
    if notes:
        g.add_node("notes", lambda state: {"log": ["notes"]})
        parallel.append("notes")
    g.add_edge(START, "draft")
    for name in parallel:
        g.add_edge("draft", name)
    g.add_edge(parallel, "join")
    g.add_edge("join", END)
    return g.compile()


@pytest.mark.parametrize("notes", [False, True], ids=["all-paused", "one-finished"])
def test_the_jira_comment_says_the_parallel_nodes_paused_to_ask(db_url: str, notes: bool) -> None:
    def on_jira(who: dict[str, str]) -> Any:
        return workflow(draft_then_pair(notes=notes), name="lg-draft-pair", channel="jira:DOC",
                        approvers=Approvers(jira_users=(who["sme"],)))

    with graph_on_jira(db_url, on_jira) as (env, _wf):
        hazel = env.hazel
        run = hazel.start(workflow="lg-draft-pair", input={"topic": "launch"}, actor=person("olga"))
        env.drive(run.id)
        [draft] = hazel.pending_requests_of(run_id=run.id)
        draft_issue = env.fake.issue(draft.message_ref["issue_id"])
        assert env.send(env.comment(draft_issue, "/approve")).json()["decided"] == "approve"
        env.drive(run.id)
        hazel.deliverer.deliver_due()
        legal, security = hazel.pending_requests_of(run_id=run.id)
        said = [b for b in env.fake.bodies(draft_issue["key"]) if b.startswith(f"Run {run.id}:")]
        done = "Done: draft, notes." if notes else "Done: draft."
        assert said == [f"Run {run.id}: {done} Paused to ask for steering: legal, security. Now waiting at "
                        f"*{title}* (jira\\:DOC)." for title in (legal.title, security.title)], said
        legal_issue = env.fake.issue(legal.message_ref["issue_id"])
        assert not any(b.startswith(f"Run {run.id}:") for b in env.fake.bodies(legal_issue["key"]))


def test_a_first_parallel_ask_comments_nothing_on_the_siblings_issues(db_url: str) -> None:
    def on_jira(who: dict[str, str]) -> Any:
        return workflow(pair_graph(), name="lg-pair", channel="jira:DOC", approvers=Approvers(jira_users=(who["sme"],)))

    with graph_on_jira(db_url, on_jira) as (env, _wf):
        hazel = env.hazel
        run = hazel.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
        env.drive(run.id)
        hazel.deliverer.deliver_due()
        for request in hazel.pending_requests_of(run_id=run.id):  # (it said "Done: legal + security" on legal's)
            issue = env.fake.issue(request.message_ref["issue_id"])
            assert env.fake.bodies(issue["key"]) == [], (request.point, env.fake.bodies(issue["key"]))


def test_slack_and_jira_word_paused_nodes_apart_from_done_steps() -> None:
    view = make_view()
    nxt = view.request.model_copy(update={"title": "Legal", "channel": "jira:DOC"})
    progress = ProgressView(run=view.run, workflow="lg", event="waiting", request=view.request, next_request=nxt,
                            steps=("draft",), paused=("legal", "security"))
    assert render.progress_comment(progress) == (f"Run {view.run.id}: Done: draft. Paused to ask for steering: "
                                                 "legal, security. Now waiting at *Legal* (jira\\:DOC).")
    assert B.progress_text(progress).startswith("Ran `draft`. Paused to ask for steering: `legal`, `security`. Run ")
