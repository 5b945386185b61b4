"""LangGraph parallel nodes on Slack and Jira, on SQLite and PostgreSQL: a rewind with feedback to a checkpoint
several nodes wrote at once (``/hazel rewind``, a ``/rewind`` comment) is refused with the engine's one-line
reason, the run left as it was; ``/hazel status`` names every request a run waits on."""

from __future__ import annotations

from typing import Any

from hazel import Approvers
from store.models import RunStatus
from tests.bot.slack.conftest import DBA, PRIYA, STARTER, SlackEnv, make_env  # noqa: F401
from tests.langgraph.graphs import fan_graph, pair_graph, workflow
from tests.langgraph.on_jira import graph_on_jira
from tests.support.engine import person

REFUSED = "is at a graph checkpoint facts, notes wrote at once"


def _as_it_is(hazel, run_id):
    run = hazel.get(run_id=run_id)
    return run.status, run.head_seq, run.last_seq, len(hazel.decisions(run_id=run_id))


def test_slack_rewind_to_a_checkpoint_of_parallel_nodes_with_feedback_answers_why(make_env) -> None:  # noqa: ANN001, F811
    wf = workflow(fan_graph(), name="lg-fan", channel="slack:#migrations",
                  approvers=Approvers(slack_users=(PRIYA,), slack_usergroups=(DBA,)))
    env: SlackEnv = make_env(wf)
    env.run_in_background()
    run_id = env.start("lg-fan", {"topic": "tides"}, by=STARTER)
    env.request_message(run_id, "review")
    before = _as_it_is(env.hazel, run_id)
    reply = env.sender.command(PRIYA, f"rewind {run_id} join more please", name="priya")
    assert reply.status_code == 200, reply.text
    assert REFUSED in reply.text and "rewind there without feedback or edits" in reply.text, reply.text
    assert _as_it_is(env.hazel, run_id) == before and before[0] is RunStatus.WAITING


def test_slack_status_names_every_request_the_run_waits_on(make_env) -> None:  # noqa: ANN001, F811
    env: SlackEnv = make_env(workflow(pair_graph(), name="lg-pair", channel="slack:#migrations"))
    env.run_in_background()
    run_id = env.start("lg-pair", {"topic": "launch"}, by=STARTER)
    env.wait(lambda: len(env.hazel.pending_requests_of(run_id=run_id)) == 2, "both requests to be asked")
    status = env.sender.command(PRIYA, f"status {run_id}", name="priya").json()["text"]
    assert "waits at *Legal*" in status and "waits at *Security*" in status, status


def test_jira_rewind_to_a_checkpoint_of_parallel_nodes_with_feedback_answers_why(db_url: str) -> None:
    def fan_on_jira(who: dict[str, str]) -> Any:
        return workflow(fan_graph(), name="lg-fan", channel="jira:DOC", approvers=Approvers(jira_users=(who["sme"],)))

    with graph_on_jira(db_url, fan_on_jira) as (env, _wf):
        hazel = env.hazel
        run = hazel.start(workflow="lg-fan", input={"topic": "tides"}, actor=person("olga"))
        assert env.drive(run.id).status is RunStatus.WAITING
        before = _as_it_is(hazel, run.id)
        answer = env.send(env.comment(env.issue(run.id), "/rewind join more please"))
        assert answer.json().get("decided") is None, answer.text
        assert REFUSED in answer.text, answer.text
        assert _as_it_is(hazel, run.id) == before
        assert "refused" in answer.json()
        [reply] = env.fake.bodies(env.issue(run.id)["key"])  # the reply on the issue, to the person
        assert REFUSED in reply and "Nothing changed." in reply and "\n" not in reply
