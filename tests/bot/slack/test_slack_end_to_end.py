"""A run of the example workflow from start to completion entirely through Slack: ``/hazel start``, Approve,
Feedback, Edit (an invalid value first, refused inline with nothing changed, then a valid one), Rewind, and
the sign-off; on SQLite and PostgreSQL, with workers and outbox delivery in background threads as in
``hazel serve``."""

from __future__ import annotations

from tests.bot.slack.conftest import DEPLOYS, MIGRATIONS, OUTSIDER, PRIYA, SAM, SlackEnv


def inputs(view: dict) -> dict[str, str]:
    return {b["block_id"]: b["element"].get("initial_value", "") for b in view["blocks"] if b["type"] == "input"}


def label_of(view: dict, block_id: str) -> str:
    return next(b["label"]["text"] for b in view["blocks"] if b.get("block_id") == block_id)


def edit_modal(env: SlackEnv, run_id: str, point: str) -> tuple[dict, dict[str, str]]:
    """Priya clicks Edit on the run's request at ``point``: the modal that opens, and its inputs' values."""
    modal = env.open_form(PRIYA, "edit", env.request_message(run_id, point), name="priya")
    return modal, inputs(modal)


def test_a_run_goes_from_start_to_completion_through_slack(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    env.run_in_background()
    fake, hazel = env.fake, env.hazel
    run_id = env.start()

    # 1. the plan is posted in #migrations; Priya approves it
    plan_msg = env.request_message(run_id, "review_plan")
    assert plan_msg.channel == MIGRATIONS
    assert [e["action_id"] for e in plan_msg.blocks[-1]["elements"]] == [
        "hazel_approve", "hazel_edit", "hazel_reject", "hazel_feedback", "hazel_rewind"]
    assert env.sender.click(PRIYA, "approve", plan_msg, name="priya").status_code == 200
    scripts_msg = env.request_message(run_id, "review_artefacts")
    closed = fake.message(MIGRATIONS, plan_msg.ts)
    assert "✅ Approved by <@U0000000001>" in str(closed.blocks)
    assert not any(b["type"] == "actions" for b in closed.blocks)
    thread = env.wait(lambda: fake.channel_messages(MIGRATIONS, thread_ts=plan_msg.ts), "progress in the thread")
    assert "`write_scripts`, `write_test_strategy`" in thread[0].text and "Review the migration scripts" in thread[0].text

    # 2. someone in the channel (not an approver) sends feedback on the scripts: they are re-drafted
    modal = env.open_form(OUTSIDER, "feedback", scripts_msg)
    response = env.sender.submit(OUTSIDER, modal, {"text": "add a rollback check for the backfill"})
    assert response.status_code == 200 and response.text in ("", "null")
    scripts_msg = env.wait(lambda: (m := env.request_message(run_id, "review_artefacts")).ts != scripts_msg.ts
                           and m, "the re-drafted scripts")
    state = hazel.state_at(run_id=run_id)
    assert state.script_revisions == 1 and "rollback check" in next(iter(state.scripts.values()))

    # 3. Sam (an approver through his user group) edits one script: an emptied file is refused inline first
    modal = env.open_form(SAM, "edit", scripts_msg, name="sam")
    fields = inputs(modal)
    assert [label_of(modal, b) for b in fields] == list(state.scripts)
    first, second = list(fields)
    request = env.pending(run_id)
    decisions_before, checkpoints_before = len(hazel.decisions(run_id=run_id)), len(hazel.checkpoints(run_id=run_id))
    response = env.sender.submit(SAM, modal, {first: fields[first], second: None}, name="sam")
    assert response.status_code == 200
    body = response.json()
    assert body["response_action"] == "errors"
    assert list(body["errors"]) == [second]
    assert body["errors"][second].startswith(f"the edit leaves entry {label_of(modal, second)!r} of field 'scripts' empty: ")
    assert env.pending(run_id) == request  # nothing changed
    assert len(hazel.decisions(run_id=run_id)) == decisions_before and len(hazel.checkpoints(run_id=run_id)) == checkpoints_before
    edited = fields[first].replace("BEGIN;", "BEGIN;\nSET lock_timeout = '5s';", 1)
    response = env.sender.submit(SAM, modal, {first: edited, second: fields[second]}, name="sam")
    assert response.status_code == 200 and response.text in ("", "null")
    signoff_msg = env.request_message(run_id, "sign_off")
    assert signoff_msg.channel == DEPLOYS
    assert "SET lock_timeout = '5s'" in hazel.state_at(run_id=run_id).scripts[label_of(modal, first)]
    assert "✏️ Edited by <@U0000000003>" in str(fake.message(MIGRATIONS, scripts_msg.ts).blocks)

    # 4. at sign-off Priya rewinds to the plan with feedback: the run forks and the plan is re-drafted
    assert [e["action_id"] for e in signoff_msg.blocks[-1]["elements"]] == [
        "hazel_approve", "hazel_reject", "hazel_rewind"]
    modal = env.open_form(PRIYA, "rewind", signoff_msg)
    options = modal["blocks"][2]["element"]["options"]
    to_plan = next(o for o in options if "→ draft_plan" in o["text"]["text"])
    env.sender.submit(PRIYA, modal, {"target": {"selected": to_plan["value"]},
                                     "feedback": "backfill in batches of 5,000"})
    plan2 = env.request_message(run_id, "review_plan")
    assert plan2.ts != plan_msg.ts and "batches of 5,000" in hazel.state_at(run_id=run_id).plan
    assert "↩️ Rewound by <@U0000000001>" in str(fake.message(DEPLOYS, signoff_msg.ts).blocks)

    # 5. the new branch is approved through, and Sam signs off: the run deploys and completes
    env.sender.click(PRIYA, "approve", plan2)
    env.sender.click(PRIYA, "approve", env.request_message(run_id, "review_artefacts"))
    signoff2 = env.request_message(run_id, "sign_off")
    env.sender.click(SAM, "approve", signoff2, name="sam")
    env.wait(lambda: hazel.get(run_id=run_id).status.value == "completed", "the run to complete")
    final = hazel.state_at(run_id=run_id)
    assert final.deployed_to and final.plan_revisions == 1
    done = env.wait(lambda: [m for m in fake.channel_messages(DEPLOYS, thread_ts=signoff2.ts)
                             if "completed" in (m.text or "")], "the completion in the sign-off thread")
    assert done

    decisions = hazel.decisions(run_id=run_id)
    assert [(d.action.value, d.actor_id) for d in decisions] == [
        ("approve", PRIYA), ("feedback", OUTSIDER), ("edit", SAM), ("rewind", PRIYA), ("approve", PRIYA),
        ("approve", PRIYA), ("approve", SAM)]
    assert {d.channel for d in decisions} == {"slack"}
    assert len({cp.branch for cp in hazel.checkpoints(run_id=run_id)}) == 2  # the abandoned branch stays

    # 6. App Home: nothing waits on Sam any more; the run is among the recent runs
    published = len([c for c in fake.calls_to("views.publish") if c.params["user_id"] == SAM])
    assert env.sender.home_opened(SAM).status_code == 200
    env.wait(lambda: len([c for c in fake.calls_to("views.publish") if c.params["user_id"] == SAM]) > published,
             "Sam's Home tab to be published")
    text = env.wait(lambda: "completed" in str(fake.homes[SAM]) and str(fake.homes[SAM]), "the run completed")
    assert "Waiting on you (0)" in text and run_id in text
