"""A LangGraph run from start to completion through Jira comments (signed webhooks into the live app, the fake
Jira site behind the jira library): feedback, /rewind with feedback, /edit, /approve; Cloud; SQLite and
PostgreSQL."""

from __future__ import annotations

from store.models import RunStatus
from tests.langgraph.on_jira import graph_on_jira
from tests.support.engine import person


def test_a_langgraph_run_from_start_to_completion_through_jira_comments(db_url: str) -> None:
    with graph_on_jira(db_url) as (env, wf):
        run = env.hazel.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
        assert env.drive(run.id).status is RunStatus.WAITING
        issue = env.issue(run.id)
        assert issue["key"].startswith("DOC-") and "Draft about tides" in issue["fields"]["description"]

        # a stranger's comment decides nothing; the SME's plain comment is feedback: the graph revises
        assert env.send(env.comment(issue, "/approve", person="stranger")).json().get("decided") is None
        answer = env.send(env.comment(issue, "shorter, please"))
        assert answer.status_code == 200 and answer.json()["decided"] == "feedback"
        assert env.drive(run.id).status is RunStatus.WAITING
        assert "[revised: shorter, please]" in env.issue(run.id)["fields"]["description"]

        # /rewind to the first draft with feedback: the graph forks there
        answer = env.send(env.comment(env.issue(run.id), "/rewind draft about reefs"))
        assert answer.json()["decided"] == "rewind", answer.text
        assert env.drive(run.id).status is RunStatus.WAITING
        assert "(after: about reefs)" in env.issue(run.id)["fields"]["description"]

        # /edit then /approve: published with the SME's text
        answer = env.send(env.comment(env.issue(run.id), "/edit Reefs, by the SME"))
        assert answer.json()["decided"] == "edit", answer.text
        assert env.drive(run.id).status is RunStatus.COMPLETED
        values = wf.graph.get_state({"configurable": {"thread_id": run.id}}).values
        assert values["draft"] == "Reefs, by the SME" and values["published"] is True
        assert values["log"] == ["draft", f"edited by {env.who['sme']}", "publish"]

        other = env.hazel.start(workflow="lg-review", input={"topic": "kelp"}, actor=person("olga"))
        env.drive(other.id)
        assert env.send(env.comment(env.issue(other.id), "/approve")).json()["decided"] == "approve"
        assert env.drive(other.id).status is RunStatus.COMPLETED
        decisions = [(d.action.value, d.channel) for d in env.hazel.decisions(run_id=run.id)]
        assert decisions == [("feedback", "jira"), ("rewind", "jira"), ("edit", "jira")]
