"""An invalid ``steer()`` call fails its step with a message naming the steering point: the node it was called
in, or its ``name=``; SQLite and PostgreSQL."""

from __future__ import annotations

import operator
import re
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from bot.engine.errors import WorkflowDefinitionError
from hazel.langgraph import steer
from store.models import RunStatus
from tests.langgraph.graphs import one_node_graph, review_graph, workflow
from tests.support.engine import make_hazel, person


class S(TypedDict, total=False):
    topic: str
    log: Annotated[list[str], operator.add]


def _named_graph():
    def check(state: S) -> dict:
        return {"log": [steer(name="legal_check", show=state["topic"], on_timeout="approve")["action"]]}

    g = StateGraph(S)
    g.add_node("check", check)
    g.add_edge(START, "check")
    g.add_edge("check", END)
    return g.compile()


def test_an_invalid_steer_call_names_its_node_or_its_name(db_url):
    wf = workflow(review_graph(channel="slack:not a channel"), max_attempts=1)
    named = workflow(_named_graph(), name="lg-named", max_attempts=1)
    hz = make_hazel(db_url, wf, named)
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    failed = hz.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED
    assert "steering point 'review': invalid channel 'slack:not a channel'" in failed.error, failed.error

    run = hz.start(workflow="lg-named", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    failed = hz.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED
    assert "steering point 'legal_check': on_timeout without timeout_sec" in failed.error, failed.error


def test_steer_outside_a_graph_names_steer():
    with pytest.raises(WorkflowDefinitionError, match="steering point 'steer': on_timeout without timeout_sec"):
        steer(on_timeout="approve")


@pytest.mark.parametrize("settings, said", [
    ({"timeout_sec": float("nan"), "on_timeout": "approve"}, "timeout_sec: Input should be a finite number"),
    ({"remind_after_sec": float("inf")}, "remind_after_sec: Input should be a finite number"),
    ({"escalate_after_sec": 1e300, "escalate_to": ["ann"]}, "escalate_after_sec: Input should be less than or equal"),
    ({"remind_every_sec": True}, "remind_every_sec: Input should be a valid number"),
    ({"timeout_sec": "10"}, "timeout_sec: Input should be a valid number"),
])
def test_a_duration_no_clock_can_keep_is_refused_where_steer_is_called(settings, said):
    """NaN, infinity, 1e300, True or "10" seconds (a fresh-user finding) passed, and every run then failed at
    the point with ``ValueError: cannot convert float NaN to integer``; refused as any bad setting is."""
    with pytest.raises(WorkflowDefinitionError, match=f"steering point 'steer': {said}"):
        steer(**settings)


@pytest.mark.parametrize("settings, said", [({"backoff_sec": float("nan")}, "backoff_sec must be a finite number"),
                                            ({"backoff_sec": -5}, "backoff_sec must be a finite number"),
                                            ({"max_attempts": True}, "max_attempts must be a whole number")])
def test_a_graphs_retry_settings_no_clock_can_keep_are_refused_when_it_loads(settings, said):
    from bot.engine.registry import Registry

    with pytest.raises(WorkflowDefinitionError, match=said):
        Registry().add(workflow(review_graph(), **settings))


def test_an_invalid_steer_call_fails_at_once_and_a_reserved_name_is_still_asked(db_url):
    """Fresh-user findings (s32 F11): ``steer(name=END)`` passed the point with nobody asked and the run
    completed; an invalid ``steer()`` was tried ``max_attempts`` times, the node's side effects each time."""
    ran: list[str] = []

    def check(state: S) -> dict:
        ran.append(state["topic"])
        kw = {"name": END} if state["topic"] == "end" else {"actions": ["approve", "bogus"]}
        return {"log": [steer(show=state["topic"], **kw)["action"]]}

    hz = make_hazel(db_url, workflow(one_node_graph(check, S, "check"), name="lg-odd", max_attempts=3,
                                     backoff_sec=0.01))
    bad = hz.start(workflow="lg-odd", input={"topic": "bogus"}, actor=person("olga"))
    hz.drive(run_id=bad.id)
    failed = hz.get(run_id=bad.id)
    assert failed.status is RunStatus.FAILED and failed.attempt == 1 and ran == ["bogus"], (failed, ran)
    end = hz.start(workflow="lg-odd", input={"topic": "end"}, actor=person("olga"))
    hz.drive(run_id=end.id)
    [asked] = hz.pending_requests_of(run_id=end.id)
    assert asked.point == "ask___end__" and hz.get(run_id=end.id).status is RunStatus.WAITING
    hz.decide(run_id=end.id, action="approve", actor=person("ana"))
    hz.drive(run_id=end.id)
    assert hz.get(run_id=end.id).status is RunStatus.COMPLETED


@pytest.mark.parametrize("settings, said", [
    ({"approver": {"people": ["priya"]}}, "unknown setting 'approver' (did you mean approvers?)"),
    ({"timeout": 5}, "unknown setting 'timeout' (did you mean timeout_sec?)"),
    ({"colour": "red"}, "unknown setting 'colour': neither a setting of steer (see Workflow.steer) nor a "
                        "channel's option (jira_approve_status, "),
])
def test_a_misspelled_setting_is_refused_where_steer_is_called(settings, said):
    """s33 F3 (HIGH): ``steer(approver=…)`` went into the point's channel options, unread, and left the point
    open to anyone (mallory's approval was taken)."""
    with pytest.raises(WorkflowDefinitionError, match=f"steering point 'steer': {re.escape(said)}"):
        steer(**settings)
    with pytest.raises(WorkflowDefinitionError, match=r"^steering point 'steer': on_timeout without timeout_sec$"):
        steer(jira_issue_type="Story", on_timeout="approve")  # (a Jira option is an option: only the other refused)
