"""Text Hazel could not store is refused where it arrives, in one clear answer, with nothing written: a lone
surrogate (what a byte that is not UTF-8 becomes on the command line, or ``\\udc9b`` in JSON) in a decision's
text, an edit, a start's input, a rewind's edits, a cancel's reason, a setting or ``.env``; numbers beyond what
the database's integer columns hold; and the REST API takes an edit as typed text (``{"text"}``) and texts as
long as ``HAZEL_MAX_STATE_BYTES`` allows, as the CLI does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.cli.common import read_file
from bot.engine import InvalidDecisionError, InvalidInputError
from bot.inbound.api_models import FeedbackPayload, RejectPayload
from store.models import Actor
from tests.bot.test_api_limits import error_of, served, snapshot  # noqa: F401  (served: the fixture)

NOT_TEXT = "not Unicode text"


def raw(api: Any, method: str, path: str, body: dict[str, Any]) -> Any:
    """``body`` as JSON with every non-ASCII character escaped (a lone surrogate as ``\\udc9b``)."""
    return api.call(method, path, content=json.dumps(body).encode("ascii"),
                    headers={"Content-Type": "application/json"})


def test_lone_surrogates_are_refused_on_the_api_and_nothing_is_written(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    assert error_of(raw(api, "POST", "/api/runs", {"workflow": "doc", "input": {"topic": "ab\udc9b"}}), 422,
                    "InvalidInputError").endswith(  # (the state model's own str field refuses it: said as ours)
        "topic holds a character that is not Unicode text (U+DC9B, what the byte 0x9B becomes where it is not "
        "UTF-8); send it as UTF-8")
    assert NOT_TEXT in error_of(raw(api, "POST", "/api/runs", {"workflow": "loose", "input": {"data": ["\udc9b"]}}),
                                422, "InvalidInputError")
    assert hazel.runs() == []
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    path = f"/api/runs/{run_id}/decisions"
    for body in ({"action": "edit", "payload": {"value": {"steps": ["x \udc9b"], "minutes": 5}}},
                 {"action": "feedback", "payload": {"text": "bad\udc9b"}},
                 {"action": "reject", "payload": {"reason": "no\udc9b"}},
                 {"action": "rewind", "payload": {"to": 1, "feedback": "f\udc9b"}}):
        refused = raw(api, "POST", path, body)  # the request's model or the engine: 422, never a 500
        assert refused.status_code == 422, (body, refused.text)  # said alike, whichever refused it
        assert refused.json()["error"]["message"].endswith(
            "holds a character that is not Unicode text (U+DC9B, what the byte 0x9B becomes where it is not "
            "UTF-8); send it as UTF-8"), (body, refused.text)
    pair = raw(api, "POST", path, {"action": "feedback", "payload": {"text": "half \ud83d"}})
    assert error_of(pair, 422, "InvalidDecisionError") == (  # (the engine's: once it checked who may)
        "the feedback holds a character that is not Unicode text (U+D83D, a lone surrogate (half of a "
        "UTF-16 pair)); send it as UTF-8")
    # an unknown field named with a lone surrogate: refused, its name shown escaped (the answer is valid JSON)
    refused = raw(api, "POST", path, {"action": "rewind", "payload": {"to": 1, "edits": {"req\udc9b": "abc"}}})
    assert refused.status_code == 422, refused.text
    assert "\\udc9b" in refused.json()["error"]["message"]
    # an unknown action: named as the engine names text that is not Unicode (it was echoed as U+FFFD), and a long
    # one cut short (it was echoed whole)
    assert error_of(raw(api, "POST", path, {"action": "appr\udc9bove"}), 422, "InvalidRequestError") == (
        "action holds a character that is not Unicode text (U+DC9B, what the byte 0x9B becomes where it is not "
        "UTF-8); send it as UTF-8")
    said = error_of(raw(api, "POST", path, {"action": "x" * 5000}), 422, "InvalidRequestError")
    assert said.startswith('action: "xxx') and "…" in said and len(said) < 200 and said.endswith("'rewind'"), said
    assert snapshot(hazel, run_id) == before


def test_numbers_beyond_the_database_are_invalid_requests(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    huge = 2**63
    error_of(api.call("GET", f"/api/runs?offset={huge}"), 422, "InvalidRequestError")
    error_of(api.call("GET", f"/api/runs/{run_id}/checkpoints/{huge}/state"), 422, "InvalidRequestError")
    error_of(api.decide(run_id, {"action": "approve", "request_id": huge}), 422, "InvalidRequestError")
    error_of(api.decide(run_id, {"action": "rewind", "payload": {"to": huge}}), 422, "InvalidRequestError")
    assert snapshot(hazel, run_id) == before


def test_an_edit_as_typed_text_and_one_of_value_or_text(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    both = {"action": "edit", "payload": {"value": {"steps": ["a"], "minutes": 5}, "text": "x"}}
    assert "either value" in error_of(api.decide(run_id, both), 422, "InvalidRequestError")
    neither = {"action": "edit", "payload": {}}  # (the engine's to refuse, once it checked who may)
    assert "an edit needs a new value" in error_of(api.decide(run_id, neither), 422, "InvalidDecisionError")
    typed = {"action": "edit", "payload": {"text": json.dumps({"steps": ["typed"], "minutes": 7})}}
    response = api.decide(run_id, typed)
    assert response.status_code == 201, response.text
    head = hazel.state_tree_at(run_id=run_id) if hasattr(hazel, "state_tree_at") else None
    assert head is None or "typed" in json.dumps(head)


def test_api_texts_are_bounded_by_the_state_limit_only() -> None:
    long = "t" * 50_000  # the API capped texts at 20,000 characters, the CLI at HAZEL_MAX_STATE_BYTES
    assert FeedbackPayload(text=long).text == long and RejectPayload(reason=long).reason == long


def test_the_engine_refuses_lone_surrogates_from_any_channel(served) -> None:  # noqa: ANN001,F811
    """What the CLI hands the engine as it came from argv (``$'bad\\x9b'`` is ``'bad\\udc9b'``): refused before
    anything is written (on SQLite it was stored, and the step that copied it into the state failed to write its
    checkpoint at every attempt)."""
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    olga = Actor(channel="api", id="alice")  # an approver: the text is what is refused
    for action, payload, named in (("feedback", {"text": "bad\udc9b"}, r"\(U\+DC9B, what the byte 0x9B becomes"),
                                   ("reject", {"reason": "no\ud83d"}, r"\(U\+D83D, a lone surrogate \(half of")):
        with pytest.raises(InvalidDecisionError, match=named):
            hazel.decide(run_id=run_id, action=action, actor=olga, payload=payload)
    with pytest.raises(InvalidDecisionError, match=NOT_TEXT):
        hazel.cancel(run_id=run_id, actor=olga, reason="c\udc9b")
    with pytest.raises(InvalidDecisionError, match=r"the rewind's target holds .* \(U\+DCFF, what the byte 0xFF"):
        hazel.rewind(run_id=run_id, actor=olga, to="dr\udcffaft")  # not "never reached 'dr\udcffaft'"
    with pytest.raises(InvalidInputError, match="--as: the name is not UTF-8 text"):
        hazel.operator(acting_for="x\udc9b")  # the console's --as, as it came from argv
    assert snapshot(hazel, run_id) == before


def test_settings_and_env_files_that_are_not_utf8_are_one_line(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HAZEL_DATABASE_URL", f"sqlite:///{tmp_path / 'h.db'}")
    runner = CliRunner()
    monkeypatch.setenv("HAZEL_OPERATOR", "ol\udc9bga")
    result = runner.invoke(app, ["runs"])
    assert result.exit_code == 1 and "HAZEL_OPERATOR: not UTF-8 text" in result.output, result.output
    monkeypatch.delenv("HAZEL_OPERATOR")
    (tmp_path / ".env").write_bytes(b"HAZEL_LOG_LEVEL=INFO\nHAZEL_OPERATOR=\x9b\n")
    result = runner.invoke(app, ["runs"])
    assert result.exit_code == 1 and "cannot read .env: not UTF-8 text" in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("value", ["abc\r", "x\r\r", "a\r\nb\r", "plain", "ends\n", "a\r\nb"])
def test_show_raw_then_read_file_keeps_a_final_carriage_return(value: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_DATABASE_URL", f"sqlite:///{tmp_path / 'h.db'}")
    shown = tmp_path / "v.txt"
    shown.write_bytes((value + "\n").encode())  # what `hazel show --raw` writes
    expected = value if value != "a\r\nb\r" else "a\r\nb"  # all-CRLF files: the last CRLF is the line end
    assert read_file(str(shown)) == expected


def test_a_windows_file_loses_its_final_crlf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_DATABASE_URL", f"sqlite:///{tmp_path / 'h.db'}")
    f = tmp_path / "w.txt"
    f.write_bytes(b"line one\r\nline two\r\n")
    assert read_file(str(f)) == "line one\r\nline two"
