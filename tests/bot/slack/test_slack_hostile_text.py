"""Stored text in Slack never becomes a mention, a link or a broadcast (issue 11, item 1): a request, a
feedback and a rejection reason holding ``<!channel>``, ``<@U…>``, ``<#C…>``, ``<!subteam^…>`` and
``<http://…|click>`` reach the fake Slack Web API with ``&``, ``<`` and ``>`` escaped in every mrkdwn text
and every message's top-level ``text`` (Slack's "Escaping text":
https://docs.slack.dev/messaging/formatting-message-text#escaping)."""

from __future__ import annotations

import json

from tests.bot.slack.conftest import OUTSIDER, PRIYA, SlackEnv

HOSTILE = ("<!channel> <!here> <@U0HOSTILE1> <#C0HOSTILE> <!subteam^S0HOSTILE> <!date^1^{date}|x> "
           "<http://evil.example|click> & done")
RAW = ("<!channel>", "<!here>", "<@U0HOSTILE1>", "<#C0HOSTILE>", "<!subteam^S0HOSTILE>", "<!date^1^",
       "<http://evil.example")
ESCAPED = "&lt;!channel&gt; &lt;!here&gt; &lt;@U0HOSTILE1&gt;"
POSTING = ("chat.postMessage", "chat.update", "chat.postEphemeral", "views.publish", "views.open")


def posted(env: SlackEnv) -> str:
    """Everything Hazel sent to Slack's posting methods, as one JSON text."""
    return json.dumps([c.params for c in env.fake.calls if c.method in POSTING], ensure_ascii=False)


def never_raw(text: str) -> None:
    for token in RAW:
        assert token not in text, token


def test_hostile_text_reaches_slack_escaped_everywhere(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start(data={"request": HOSTILE})
    env.settle()
    message = env.request_message(run_id, "review_plan")
    assert ESCAPED in json.dumps(message.blocks) and "&amp; done" in json.dumps(message.blocks)
    never_raw(posted(env))
    first = next(c for c in env.fake.calls_to("chat.postMessage") if "blocks" in c.params)
    assert "waits for a decision" in first.params["text"]

    env.sender.click(OUTSIDER, "approve", message, name=HOSTILE)  # refused: "<name> may not approve …"
    refused = env.ephemeral(OUTSIDER, "may not approve")
    assert refused["text"].startswith(f"🚫 {ESCAPED}")
    never_raw(posted(env))

    modal = env.open_form(OUTSIDER, "feedback", message)  # feedback is open to anyone at review_plan
    assert env.sender.submit(OUTSIDER, modal, {"text": f"fix {HOSTILE}"}).status_code == 200
    env.settle()
    redrafted = env.wait(lambda: (m := env.request_message(run_id, "review_plan")).ts != message.ts and m,
                         "the re-drafted plan")
    closed = env.fake.message(message.channel, message.ts)
    assert f">fix {ESCAPED}" in json.dumps(closed.blocks)  # the feedback, quoted in the closed request

    modal = env.open_form(PRIYA, "reject", redrafted)
    assert env.sender.submit(PRIYA, modal, {"reason": f"no {HOSTILE}"}).status_code == 200
    env.settle()
    assert env.hazel.get(run_id=run_id).status.value == "rejected"
    for command in (f"status {run_id}", f"history {run_id}"):
        reply = env.sender.command(PRIYA, command).json()["text"]
        never_raw(reply)
    thread = env.fake.channel_messages(message.channel, thread_ts=redrafted.ts)
    assert any(f"no {ESCAPED}" in (m.text or "") for m in thread)
    never_raw(posted(env))


def test_every_mrkdwn_text_of_a_hostile_request_is_escaped() -> None:
    """Each text a request message, a reminder, a progress reply, a reply and the Home tab build from stored
    text: mrkdwn ones escaped, plain_text ones (never parsed for mentions) as they are."""
    from integrations.slack import blocks as B
    from integrations.slack import modals as M
    from integrations.slack import replies as R
    from store.models import ProgressView, RequestStatus
    from tests.support.slack_views import decision, make_view

    hostile = make_view(shown={HOSTILE: HOSTILE}, show=HOSTILE).model_copy(
        update={"title": HOSTILE, "workflow": HOSTILE, "point": HOSTILE})
    fallback, blocks, _ = B.request_message(hostile)
    never_raw(fallback)
    assert fallback.startswith(ESCAPED)
    assert blocks[0]["text"] == {"type": "plain_text", "text": HOSTILE, "emoji": False}
    never_raw(json.dumps(blocks[1:]))
    done = hostile.model_copy(update={"request": hostile.request.model_copy(update={
        "status": RequestStatus.DECIDED, "decided_action": "reject", "decided_by": HOSTILE}),
        "decisions": (decision("reject", actor_id=HOSTILE, name=HOSTILE, payload={"reason": HOSTILE}),)})
    fallback, blocks, _ = B.request_message(done)
    never_raw(fallback + json.dumps(blocks[1:]))
    never_raw(B.reminder_text(hostile) + json.dumps(B.home_view([hostile], [(hostile.run, hostile.request)])))
    never_raw(json.dumps(M.edit_modal(hostile, {})["blocks"][0]))
    never_raw(R.history_text(hostile.run, list(hostile.checkpoints), list(done.decisions)))
    for event, facts in (("failed", {"error": HOSTILE, "step": HOSTILE}), ("rejected", {"by": HOSTILE,
                                                                                      "reason": HOSTILE})):
        view = ProgressView(run=hostile.run, workflow=HOSTILE, event=event, steps=(HOSTILE,), facts=facts,
                            request=hostile.request)
        never_raw(B.progress_text(view))


def test_control_and_bidi_characters_reach_slack_as_visible_escapes(make_env) -> None:  # noqa: ANN001
    """A fresh-user finding: ``\\u202e`` (right-to-left override), ``\\x1b`` and ``\\x07`` in stored text went
    into Slack's mrkdwn as they were, so a card could read other than it is (``…\\u202egpj.exe`` shows as
    ``…exe.jpg``). They reach Slack as the visible escapes the CLI and the run pages show."""
    env: SlackEnv = make_env()
    run_id = env.start(data={"request": "plan \u202egpj.exe \x1b[2J bell\x07 done"})
    env.settle()
    env.request_message(run_id, "review_plan")
    sent = posted(env)
    for raw in ("\u202e", "\x1b", "\x07"):  # (as JSON writes them: itself, or \u001b for a control character)
        assert raw not in sent and json.dumps(raw, ensure_ascii=False)[1:-1] not in sent, repr(raw)
    assert "\\\\u202egpj.exe" in sent and "\\\\x1b[2J" in sent, sent[:2000]
