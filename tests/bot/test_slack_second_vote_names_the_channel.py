"""Slack's answer to a second vote says through which channel the first one came and the rule (one person, one
vote), as the audit log and Jira/REST do, in the ephemeral and in a modal's field error (plain text): the REST
API and Slack over real HTTP (signed Slack payloads, Slack's Web API faked on loopback), one people file."""

from __future__ import annotations

from tests.bot.test_one_person_one_vote import (PRIYA_SLACK, Deployment, already_voted, deploy,  # noqa: F401
                                                still_one_of_two, wait_for)


def test_a_modal_submitted_after_a_rest_vote_names_the_api_and_the_rule(deploy) -> None:  # noqa: ANN001, F811
    d: Deployment = deploy()
    run_id = d.api_start("slack-pair", token="alice")
    request = d.waiting(run_id)
    message = d.slack_message(run_id)
    d.sender.click(PRIYA_SLACK, "reject", message, name="priya.s")  # the reason form opens
    modal = wait_for(lambda: next((v for v in d.slack.views if v["callback_id"] == "hazel_reject"), None),
                     "the reject modal")
    assert d.api_approve(run_id, token="priya").status_code == 201  # meanwhile she approves through the API
    [first] = d.hazel.decisions(run_id=run_id)
    block = next(b["block_id"] for b in modal["blocks"] if b["type"] == "input")
    response = d.sender.submit(PRIYA_SLACK, modal, {block: "not yet"}, name="priya.s")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["response_action"] == "errors", body
    [error] = body["errors"].values()
    assert error == (f"You already approved this request through the API (priya) at {first.created_at:%Y-%m-%d %H:%M}"
                     " UTC: one person has one vote, whichever channel they use; it still needs more approvals."), error
    still_one_of_two(d, run_id, request)


def test_a_click_after_a_rest_vote_names_the_api_and_the_rule(deploy) -> None:  # noqa: ANN001, F811
    d: Deployment = deploy()
    run_id = d.api_start("slack-pair", token="alice")
    message = d.slack_message(run_id)
    assert d.api_approve(run_id, token="priya").status_code == 201
    [first] = d.hazel.decisions(run_id=run_id)
    d.sender.click(PRIYA_SLACK, "approve", message, name="priya.s")
    told = d.ephemeral(PRIYA_SLACK, "already")["text"]
    assert "through the API (priya)" in told and "one person has one vote" in told, told
    assert told == already_voted(first), told
