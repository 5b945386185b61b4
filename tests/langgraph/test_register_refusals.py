"""What ``register()`` refuses in a compiled graph, and a resume that finds no graph checkpoint (fresh-user
findings, s27): LangGraph's static breakpoints (``interrupt_before`` / ``interrupt_after``), which Hazel drove
past, so the gated node ran with nobody asked (F2); a graph compiled with its own ``InMemorySaver``, whose
thread a decision taken in another process cannot find (F1); and, whatever the checkpointer, a run whose graph
checkpoint is gone fails at once, saying so, instead of starting the graph again from its beginning (its nodes
run twice, with no input)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy import text

from bot.engine.errors import WorkflowDefinitionError
from bot.engine.registry import Registry
from store.models import RunStatus
from tests.langgraph.graphs import review_graph, workflow
from tests.support.engine import make_hazel, person


@pytest.mark.parametrize("option, named", [("interrupt_before", "'review'"), ("interrupt_after", "'draft'")])
def test_a_graph_with_static_breakpoints_is_refused(option: str, named: str) -> None:
    graph = review_graph()
    compiled = graph.builder.compile(**{option: [named.strip("'")]})
    with pytest.raises(WorkflowDefinitionError) as refused:
        Registry().add(workflow(compiled, name="lg-static"))
    assert (f"its graph is compiled with {option}= ({named}): Hazel does not stop at LangGraph's static "
            f"breakpoints; call interrupt() or hazel.langgraph.steer() in the node where a person must decide"
            in str(refused.value)), str(refused.value)


@pytest.mark.parametrize("settings, said", [
    ({"timeout_sec": -5}, "timeout_sec: Input should be greater than 0"),
    ({"actions": ["approve", "shrug"]}, "actions ['approve', 'shrug']"),
])
def test_a_plain_interrupts_invalid_settings_name_the_workflow(settings: dict, said: str) -> None:
    """A finding of s29 (F8): ``register(graph, name=…, timeout_sec=-5)`` said ``steering point 'interrupt':
    …``, naming neither the workflow nor what the settings are of."""
    from hazel.langgraph import register

    with pytest.raises(WorkflowDefinitionError) as refused:
        register(review_graph().builder.compile(), name="lg-settings", version=2, module=__name__, **settings)
    message = str(refused.value)
    assert message.startswith("workflow lg-settings v2 is invalid: the steering point of a plain interrupt() "
                              "(register()'s title=, actions=, approvers=, …): "), message
    assert said in message and "steering point 'interrupt'" not in message, message


class _MySaver(InMemorySaver):
    """A subclass is still one process's memory (s29 F5: it was taken, its class name not InMemorySaver's)."""


@pytest.mark.parametrize("saver", [InMemorySaver, _MySaver])
def test_a_graph_with_an_in_memory_checkpointer_is_refused(saver: type) -> None:
    with pytest.raises(WorkflowDefinitionError) as refused:
        Registry().add(workflow(review_graph(saver()), name="lg-memory"))
    assert "its graph is compiled with an InMemorySaver, which keeps a run's graph state in one process" \
        in str(refused.value)


def test_a_resume_whose_graph_checkpoint_is_gone_fails_without_running_the_graph_again(db_url: str) -> None:
    seen: list[str] = []
    hz = make_hazel(db_url, workflow(review_graph(on_node=seen.append), max_attempts=3))
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.pending_request(run_id=run.id) is not None and seen == ["draft", "review"]
    with hz.store.transaction() as tx:  # the graph's rows lost (what another process's InMemorySaver never had)
        for table in ("hazel_lg_writes", "hazel_lg_checkpoints"):
            tx.conn.execute(text(f"DELETE FROM {table} WHERE thread_id = :t"), {"t": run.id})
    hz.decide(run_id=run.id, action="approve", actor=person("olga"))
    hz.drive(run_id=run.id)
    failed = hz.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED, failed
    assert f"the graph checkpoint run {run.id} goes on from (" in failed.error, failed.error
    assert "LangGraph would start the graph again from its beginning; rewind the run to checkpoint #0" in failed.error
    assert seen == ["draft", "review"]  # no node ran again


def _renamed_review_graph():
    """``review_graph`` with its node ``review`` renamed ``check`` (the same steer, the same routes)."""
    from langgraph.graph import END, START, StateGraph

    from tests.langgraph.graphs import ReviewState

    old = review_graph()
    g = StateGraph(ReviewState)
    for name in ("draft", "revise", "publish"):
        g.add_node(name, old.builder.nodes[name].runnable)
    g.add_node("check", old.builder.nodes["review"].runnable)
    g.add_edge(START, "draft")
    g.add_edge("draft", "check")
    g.add_conditional_edges("check", lambda s: "publish" if not s["log"][-1].startswith("feedback") else "revise",
                            ["revise", "publish", END])
    g.add_edge("revise", "check")
    g.add_edge("publish", END)
    return g.compile()


def test_an_answer_to_a_node_the_graph_deployed_no_longer_has_fails_the_run(db_url: str) -> None:
    """A fresh-user finding (s32 F1): the node a run's interrupt waits in, renamed under the same version; the
    approval was recorded, LangGraph ran nothing, and the run completed as if the answer had been taken."""
    hz = make_hazel(db_url, workflow(review_graph()))
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.pending_request(run_id=run.id) is not None
    renamed = make_hazel(db_url, workflow(_renamed_review_graph()))  # (the code changed, its version did not)
    renamed.decide(run_id=run.id, action="approve", actor=person("olga"))
    renamed.drive(run_id=run.id)
    failed = renamed.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED, failed
    assert failed.error.startswith(f"StepContractError: the answer run {run.id} resumes with reaches no node: the "
                                   "graph deployed as "
                                   "lg-review v1 has no task waiting on it"), failed.error
    assert failed.attempt == 1  # (not retried: it fails the same way every time)


def test_an_interrupt_value_the_checkpointer_cannot_store_fails_the_run_at_once(db_url: str) -> None:
    """A fresh-user finding (s32 F3): ``interrupt(2**70)`` failed the run after three tries (each running the
    node again) with LangGraph's ``Type is not msgpack serializable: Interrupt``."""
    from typing import TypedDict

    from langgraph.types import interrupt

    class S(TypedDict, total=False):
        topic: str

    ran: list[str] = []

    def ask(state: S) -> dict:
        ran.append("ask")
        interrupt(2 ** 70)
        return {}

    from tests.langgraph.graphs import one_node_graph

    hz = make_hazel(db_url, workflow(one_node_graph(ask, S), name="lg-big", max_attempts=3, backoff_sec=0.01))
    run = hz.start(workflow="lg-big", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    failed = hz.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED and failed.attempt == 1 and ran == ["ask"], (failed, ran)
    assert "the graph wrote a value its checkpointer cannot store (" in failed.error, failed.error
    assert "an integer past 64 bits" in failed.error


def test_a_graph_compiled_with_checkpointer_true_is_refused() -> None:
    """A fresh-user finding (s32 F6): taken at load, every run failed at its first step (``checkpointer=True
    cannot be used for root graphs``)."""
    with pytest.raises(WorkflowDefinitionError) as refused:
        Registry().add(workflow(review_graph().builder.compile(checkpointer=True), name="lg-true"))
    assert "its graph is compiled with checkpointer=True, which LangGraph takes for subgraphs only" \
        in str(refused.value), str(refused.value)
