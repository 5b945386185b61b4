"""A LangGraph run from start to completion through signed Slack requests: ``/hazel start``, Feedback (a
modal), Rewind (the rewind modal, with feedback, and ``/hazel rewind``), Edit (a modal), Approve; workers and outbox delivery in
background threads as in ``hazel serve``; SQLite and PostgreSQL."""

from __future__ import annotations

from hazel import Approvers
from tests.bot.slack.conftest import DBA, MIGRATIONS, OUTSIDER, PRIYA, SAM, STARTER, SlackEnv, make_env  # noqa: F401
from tests.langgraph.graphs import review_graph, workflow


def _next_message(env: SlackEnv, run_id: str, after_ts: str):  # noqa: ANN202
    return env.wait(lambda: (m := env.request_message(run_id, "review")).ts != after_ts and m,
                    "the next review to be posted")


def test_a_langgraph_run_from_start_to_completion_through_slack(make_env) -> None:  # noqa: ANN001, F811
    wf = workflow(review_graph(channel="slack:#migrations",
                               approvers=Approvers(slack_users=(PRIYA,), slack_usergroups=(DBA,))))
    env: SlackEnv = make_env(wf)
    env.run_in_background()
    hazel = env.hazel
    run_id = env.start("lg-review", {"topic": "tides"}, by=STARTER)

    # 1. the draft is posted in #migrations with the point's buttons; an outsider may not approve it
    first = env.request_message(run_id, "review")
    assert first.channel == MIGRATIONS and "Draft about tides" in str(first.blocks)
    assert [e["action_id"] for e in first.blocks[-1]["elements"]] == [
        "hazel_approve", "hazel_edit", "hazel_reject", "hazel_feedback", "hazel_rewind"]
    env.sender.click(OUTSIDER, "approve", first)
    env.ephemeral(OUTSIDER, "may not")

    # 2. Priya sends feedback (a modal): the graph revises and asks again
    env.sender.submit(PRIYA, env.open_form(PRIYA, "feedback", first, name="priya"), {"text": "shorter"},
                      name="priya")
    second = _next_message(env, run_id, first.ts)
    assert "[revised: shorter]" in str(second.blocks)

    # 3. Priya rewinds to the first draft with feedback (the rewind modal): the graph forks there
    modal = env.open_form(PRIYA, "rewind", second, name="priya")
    options = modal["blocks"][2]["element"]["options"]
    to_draft = next(o for o in options if "→ draft" in o["text"]["text"])
    env.sender.submit(PRIYA, modal, {"target": {"selected": to_draft["value"]}, "feedback": "about reefs"},
                      name="priya")
    third = _next_message(env, run_id, second.ts)
    assert "(after: about reefs)" in str(third.blocks) and "revised" not in str(third.blocks)

    # 4. Sam (an approver through his user group) edits the draft (a modal): the graph publishes it
    modal = env.open_form(SAM, "edit", third, name="sam")
    [field] = [b["block_id"] for b in modal["blocks"] if b["type"] == "input"]
    env.sender.submit(SAM, modal, {field: "Reefs, by Sam"}, name="sam")
    env.wait(lambda: hazel.get(run_id=run_id).status.value == "completed", "the run to complete")
    values = wf.graph.get_state({"configurable": {"thread_id": run_id}}).values
    assert values["draft"] == "Reefs, by Sam" and values["published"] is True
    assert values["log"] == ["draft", "edited by sam", "publish"]  # the fork's own history

    # 5. another run: `/hazel rewind` to its draft with feedback, then approved by Priya with one click
    other = env.start("lg-review", {"topic": "kelp"}, by=STARTER)
    asked = env.request_message(other, "review")
    reply = env.sender.command(PRIYA, f"rewind {other} draft forests too", name="priya")
    assert reply.status_code == 200, reply.text
    again = env.wait(lambda: (m := env.request_message(other, "review")).ts != asked.ts and m, "the new draft")
    assert "(after: forests too)" in str(again.blocks)
    env.sender.click(PRIYA, "approve", again, name="priya")
    env.wait(lambda: hazel.get(run_id=other).status.value == "completed", "the second run to complete")
    assert wf.graph.get_state({"configurable": {"thread_id": other}}).values["log"][-2:] == [
        "approved by priya", "publish"]

    decisions = hazel.decisions(run_id=run_id)
    assert [(d.action.value, d.actor_id, d.channel) for d in decisions] == [
        ("feedback", PRIYA, "slack"), ("rewind", PRIYA, "slack"), ("edit", SAM, "slack")]
    assert len({cp.branch for cp in hazel.checkpoints(run_id=run_id)}) == 2
