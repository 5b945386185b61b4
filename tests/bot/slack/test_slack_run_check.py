"""A Slack button or modal names the run as well as the request, and the engine acts only on that run's request.

Request ids start again after a database reset (and go back after a restore), while the cards posted before keep
live buttons: a click on such a card, or a modal opened from it, must never decide another run's request that got
the same id. The person is told that the message belongs to a request that no longer exists; nothing is recorded;
the other run and its card are untouched. A card posted by an older Hazel (a button's value is the request id
alone) acts only from a message posted for that request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from store.schema import ALL_TABLES, pending_counts, prunable_runs, run_counts
from tests.bot.slack.conftest import PRIYA, SAM, SlackEnv
from tests.support.fake_slack import Message

GONE = "belongs to a steering request that no longer exists"


def reset_database(url: str) -> None:
    """Every row deleted and the ids started again, as a database dropped and created anew (or an operator's
    reset) leaves it: the next run's first request is #1 again."""
    if url.startswith("postgresql"):
        from tests.conftest import _truncate  # (DELETEs, then each sequence set back to its start)

        _truncate(url)
        return
    engine = create_engine(url, poolclass=NullPool)  # SQLite: rowid ids, no AUTOINCREMENT: they start again
    counters = {run_counts.name, pending_counts.name, prunable_runs.name}  # kept by triggers: emptied last
    names = [t.name for t in ALL_TABLES]
    with engine.begin() as conn:
        for name in [n for n in reversed(names) if n not in counters] + [n for n in names if n in counters]:
            conn.execute(text(f"DELETE FROM {name}"))
    engine.dispose()


def buttons(message: Message) -> dict[str, str]:
    """``action_id`` -> ``value`` of the message's buttons."""
    return {e["action_id"]: e["value"] for b in message.blocks for e in b.get("elements") or ()
            if e.get("type") == "button"}


def legacy_click(env: SlackEnv, user: str, action: str, message: Message, value: str) -> dict[str, Any]:
    """A click on ``message`` as a card an older Hazel posted sends it: the button's value is ``value`` (a bare
    request id)."""
    payload = env.sender.click_payload(user, action, message, name=user.lower())
    payload["actions"][0]["value"] = value
    return payload


def after_a_reset(make_env) -> tuple[SlackEnv, str, Message, dict, str, Message]:  # noqa: ANN001
    """Run A's request posted (its card, and a feedback modal Priya opened from it), then the database reset
    and Hazel started again on it with the same Slack, and run B's request posted with the same request id:
    ``(env, run A, A's card, A's modal, run B, B's card)``."""
    first: SlackEnv = make_env()
    run_a = first.start()
    first.settle()
    card_a = first.request_message(run_a)
    request_a = first.pending(run_a)
    assert buttons(card_a)["hazel_approve"] == f"{run_a}:{request_a.id}"  # the run as well as the request
    modal_a = first.open_form(PRIYA, "feedback", card_a)
    assert json.loads(modal_a["private_metadata"])["run_id"] == run_a
    first.close()  # (hazel serve stopped; the make_env fixture closes it again, harmlessly)
    reset_database(first.settings.database_url)
    env: SlackEnv = make_env(fake=first.fake)
    run_b = env.start()
    env.settle()
    card_b = env.request_message(run_b)
    assert env.pending(run_b).id == request_a.id and run_b != run_a  # the same number, another run
    assert card_b.ts != card_a.ts
    return env, run_a, card_a, modal_a, run_b, card_b


def untouched(env: SlackEnv, run_b: str, card_b: Message, audit_before: int) -> None:
    """Run B still waits on its request, nothing was decided or audited on it, and its card was not updated."""
    assert env.hazel.decisions(run_id=run_b) == []
    assert env.pending(run_b) is not None and env.hazel.get(run_id=run_b).status.value == "waiting"
    assert len(env.hazel.audit(run_id=run_b)) == audit_before
    now = env.fake.message(card_b.channel, card_b.ts)
    assert now.versions == [] and "Approved by" not in json.dumps(now.blocks)


def test_an_old_cards_click_after_a_database_reset_does_not_decide_the_new_runs_request(make_env) -> None:  # noqa: ANN001
    env, run_a, card_a, _, run_b, card_b = after_a_reset(make_env)
    request_id = env.pending(run_b).id
    audit_before = len(env.hazel.audit(run_id=run_b))
    assert env.sender.click(SAM, "approve", card_a, name="sam").status_code == 200
    said = env.ephemeral(SAM, GONE)
    assert f"(request {request_id} of run `{run_a}`)" in said["text"], said
    assert "Nothing was done" in said["text"] and said["channel"] == card_a.channel
    for action in ("edit", "feedback", "reject", "rewind"):  # the buttons that open a form: none opens
        views = len(env.fake.views)
        env.sender.click(PRIYA, action, card_a, name="priya")
        env.wait(lambda a=action: len([e for e in env.fake.ephemerals_for(PRIYA) if GONE in e["text"]])
                 >= ("edit", "feedback", "reject", "rewind").index(a) + 1 or None, f"the answer to {action}")
        assert len(env.fake.views) == views
    untouched(env, run_b, card_b, audit_before)

    # B's own card still decides B
    assert buttons(card_b)["hazel_approve"] == f"{run_b}:{request_id}"
    env.sender.click(SAM, "approve", card_b, name="sam")
    env.wait(lambda: env.pending(run_b) is None, "B approved from its own card")
    assert [(d.actor_id, d.request_id) for d in env.hazel.decisions(run_id=run_b)] == [(SAM, request_id)]


def test_a_modal_opened_before_a_reset_is_refused_after_it(make_env) -> None:  # noqa: ANN001
    env, run_a, _, modal_a, run_b, card_b = after_a_reset(make_env)
    request_id = env.pending(run_b).id
    audit_before = len(env.hazel.audit(run_id=run_b))
    response = env.sender.submit(PRIYA, modal_a, {"text": "more detail please"}, name="priya")
    assert response.status_code == 200, response.text
    assert response.json()["response_action"] == "errors", response.text
    [(block, error)] = response.json()["errors"].items()
    assert block == "text" and GONE in error and f"(request {request_id} of run {run_a})" in error, error
    untouched(env, run_b, card_b, audit_before)


@pytest.mark.parametrize("other", ["ffffffffffff", "another run"])
def test_a_modal_whose_run_id_was_changed_is_refused(make_env, other: str) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    other_run = env.start(data={"request": "another"}) if other == "another run" else other
    env.settle()
    card = env.request_message(run_id)
    request = env.pending(run_id)
    modal = env.open_form(PRIYA, "feedback", card, name="priya")
    meta = json.loads(modal["private_metadata"])
    assert meta["run_id"] == run_id and meta["request_id"] == request.id
    forged = {**modal, "private_metadata": json.dumps({**meta, "run_id": other_run})}
    audit_before = len(env.hazel.audit(run_id=run_id))
    response = env.sender.submit(PRIYA, forged, {"text": "more detail please"}, name="priya")
    assert response.status_code == 200, response.text
    [(block, error)] = response.json()["errors"].items()
    assert block == "text" and GONE in error and f"(request {request.id} of run {other_run})" in error, error
    assert env.hazel.decisions(run_id=run_id) == [] and env.pending(run_id) == request
    assert len(env.hazel.audit(run_id=run_id)) == audit_before
    if other == "another run":
        assert env.hazel.decisions(run_id=other_run) == [] and env.pending(other_run) is not None

    # the form as Hazel opened it is taken
    response = env.sender.submit(PRIYA, modal, {"text": "more detail please"}, name="priya")
    assert response.status_code == 200 and response.text in ("", "null"), response.text
    [decision] = env.hazel.decisions(run_id=run_id)
    assert (decision.action.value, decision.request_id, decision.payload) == ("feedback", request.id,
                                                                            {"text": "more detail please"})


def test_an_older_cards_bare_request_id_acts_only_from_a_message_posted_for_that_request(make_env) -> None:  # noqa: ANN001
    env, run_a, card_a, _, run_b, card_b = after_a_reset(make_env)
    request_id = env.pending(run_b).id
    audit_before = len(env.hazel.audit(run_id=run_b))

    # an older Hazel's card of run A (value: the request id alone), clicked after the reset: refused
    env.sender.send_payload(legacy_click(env, SAM, "approve", card_a, str(request_id)))
    said = env.ephemeral(SAM, GONE)
    assert f"(request {request_id}; this button of an earlier Hazel names no run" in said["text"], said
    env.sender.send_payload(legacy_click(env, PRIYA, "edit", card_a, str(request_id)))
    env.ephemeral(PRIYA, GONE)
    assert env.fake.views == [] or all(json.loads(v["private_metadata"])["run_id"] != run_b for v in env.fake.views)
    untouched(env, run_b, card_b, audit_before)

    # the same bare id on B's own message: that message was posted for request #1 of B, so it decides it
    modal = env.open_form(PRIYA, "feedback", card_b,
                          payload=lambda: legacy_click(env, PRIYA, "feedback", card_b, str(request_id)))
    assert json.loads(modal["private_metadata"])["run_id"] == run_b
    assert json.loads(modal["private_metadata"])["request_id"] == request_id
    env.sender.send_payload(legacy_click(env, SAM, "approve", card_b, str(request_id)))
    env.wait(lambda: env.pending(run_b) is None, "B approved from its own (older) card")
    assert [(d.actor_id, d.request_id) for d in env.hazel.decisions(run_id=run_b)] == [(SAM, request_id)]


def test_an_older_home_tabs_bare_request_id_is_refused_and_the_tab_published_again(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    request = env.pending(run_id)
    published = len(env.fake.calls_to("views.publish"))  # (the request's post refreshed her tab already: the
    env.sender.home_opened(PRIYA)  # one the event publishes, after its ack, must not come after the answer)
    home = env.wait(lambda: len(env.fake.calls_to("views.publish")) > published
                    and "Waiting on you (1)" in str(env.fake.homes.get(PRIYA)) and env.fake.homes[PRIYA],
                    "Priya's Home tab")
    payload = env.sender.home_click_payload(PRIYA, "approve", home, request.id)
    assert payload["actions"][0]["value"] == f"{run_id}:{request.id}"
    payload["actions"][0]["value"] = str(request.id)  # an App Home an older Hazel published: no message to match
    env.sender.send_payload(payload)
    home = env.wait(lambda: GONE in str(env.fake.homes[PRIYA]) and env.fake.homes[PRIYA],
                    "the answer atop Priya's Home tab")
    assert env.hazel.decisions(run_id=run_id) == [] and env.pending(run_id) == request
    env.sender.send_payload(env.sender.home_click_payload(PRIYA, "approve", home, request.id))  # as published now
    env.wait(lambda: env.pending(run_id) is None, "the approval from the Home tab published again")
    assert [d.actor_id for d in env.hazel.decisions(run_id=run_id)] == [PRIYA]

