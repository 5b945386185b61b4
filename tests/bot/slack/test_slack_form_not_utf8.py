"""A signed Slack form body whose percent-encoded bytes are not UTF-8 (``text=bad%FF%FE``) is refused with one
line and nothing is written, over real HTTP with real signatures: Bolt's ``parse_qsl`` read the bytes as U+FFFD,
and ``/hazel rewind RUN 0 bad%FF%FEbytes`` was recorded with the feedback ``bad\\ufffd\\ufffdbytes``. A slash
command is answered ephemerally, a modal's submission under the input holding the byte, a click 400; an
unsigned one is still 401, and a U+FFFD the person typed (``%EF%BF%BD``) is taken."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from tests.bot.slack.conftest import PRIYA, SlackEnv

MARK = "XMARKX"  # replaced, in the URL-encoded body, by the bytes under test
NOT_UTF8 = "%FF%FE"
REFUSED = "holds a byte that is not UTF-8 (0xFF, sent as %FF), so nothing was done: send it as UTF-8."


def written(env: SlackEnv, run_id: str) -> tuple:
    """What a refused request must leave as it was: the run, its decisions, its audit log, the runs."""
    run = env.hazel.get(run_id=run_id)
    return (run.status, run.head_seq, run.branch, len(env.hazel.decisions(run_id=run_id)),
            len(env.hazel.audit(run_id=run_id)), [r.id for r in env.hazel.runs()])


def command_with(env: SlackEnv, text: str, sent_as: str) -> str:
    """A ``/hazel`` form body by Priya whose ``text`` has ``MARK`` replaced by ``sent_as`` (URL-encoded)."""
    body = env.sender.command_body(PRIYA, text)
    assert MARK in body
    return body.replace(MARK, sent_as)


def test_a_slash_command_that_is_not_utf8_is_refused_ephemerally_and_writes_nothing(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    env.request_message(run_id)
    before = written(env, run_id)

    for text in (f"rewind {run_id} 0 bad{MARK}bytes", f'start migration-plan {{"request": "a{MARK}b"}}',
                 f"cancel {run_id} because{MARK}"):
        body = command_with(env, text, NOT_UTF8)
        assert env.sender.post(body, secret="not-the-signing-secret").status_code == 401  # unsigned: 401 first
        response = env.sender.post(body)
        assert response.status_code == 200, response.text
        assert response.json() == {"response_type": "ephemeral", "text": f"Your command {REFUSED}"}, text
        assert written(env, run_id) == before, text

    # a U+FFFD the person typed is UTF-8 (%EF%BF%BD), and is taken
    response = env.sender.post(command_with(env, f"rewind {run_id} 0 typed{MARK}", "%EF%BF%BD"))
    assert "rewound to checkpoint #0" in response.json()["text"], response.text
    assert env.hazel.decisions(run_id=run_id)[-1].payload["feedback"] == "typed\ufffd"


def test_a_modal_submission_that_is_not_utf8_is_refused_under_its_input(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)
    modal = env.open_form(PRIYA, "feedback", message)
    before = written(env, run_id)

    body = urlencode({"payload": json.dumps(env.sender.submission_payload(PRIYA, modal, {"text": f"bad{MARK}"}))})
    body = body.replace(MARK, NOT_UTF8)
    assert env.sender.post(body, secret="not-the-signing-secret").status_code == 401
    response = env.sender.post(body)
    assert response.status_code == 200, response.text
    assert response.json() == {"response_action": "errors", "errors": {"text": f"This {REFUSED}"}}
    assert written(env, run_id) == before and env.pending(run_id) is not None

    body = urlencode({"payload": json.dumps(env.sender.submission_payload(PRIYA, modal, {"text": f"typed{MARK}"}))})
    response = env.sender.post(body.replace(MARK, "%EF%BF%BD"))
    assert response.status_code == 200 and not response.content, response.text  # acknowledged: decided
    assert env.hazel.decisions(run_id=run_id)[-1].payload["text"] == "typed\ufffd"


def test_a_click_that_is_not_utf8_is_malformed_and_does_nothing(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    payload = env.sender.click_payload(PRIYA, "approve", env.request_message(run_id), name=f"priya{MARK}")
    before = written(env, run_id)
    body = urlencode({"payload": json.dumps(payload)}).replace(MARK, NOT_UTF8)
    response = env.sender.post(body)
    assert response.status_code == 400, response.text
    assert response.text == ("malformed Slack request: the form's field payload holds a byte that is not UTF-8 "
                             "(0xFF, sent as %FF): send the form in UTF-8")
    assert written(env, run_id) == before and env.pending(run_id) is not None
