"""An edit refused for leaving a value empty or blank says how to allow it in the terms of the channel it came
from: the CLI ``--allow-empty``, the REST API ``allow_empty``, a Jira ``/edit`` (which cannot allow it) where it
can be allowed. Every channel said "allow an empty value (allow_empty) if that is what you mean", advice a Jira
comment (or a Slack modal: ``tests/bot/slack/test_slack_empty_edit_advice.py``) cannot follow. The check is the
engine's, one for all (``EmptyEditError``); each channel renders it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from bot.engine.errors import EmptyEditError, InvalidDecisionError
from tests.bot.test_empty_edits import noted_api, waiting
from tests.bot.test_rewind_empty_edits import NOTED
from tests.support.jira_env import JiraEnv, jira_env

REFUSED = "the edit leaves field 'text' empty: that would replace the value with nothing"


def test_the_engines_refusal_names_no_channels_way_and_the_console_adds_its_own(db_url: str) -> None:
    from tests.bot.test_empty_edits import noted
    from tests.support.engine import make_hazel, person

    hazel = make_hazel(db_url, noted())
    run_id = waiting(hazel, "noted-text")
    with pytest.raises(EmptyEditError) as refused:
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={"value": "", "allow_empty": False})
    assert isinstance(refused.value, InvalidDecisionError)
    assert refused.value.message == REFUSED and refused.value.hint == "hazel edit --allow-empty"
    assert str(refused.value) == f"{REFUSED}; add --allow-empty if that is what you mean"
    with pytest.raises(EmptyEditError) as rewound:
        hazel.rewind(run_id=run_id, actor=person("sme"), to=1, edits={"text": ""})
    assert rewound.value.message == REFUSED and rewound.value.hint == "hazel rewind --allow-empty"


def test_the_cli_says_add_allow_empty(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    path = tmp_path / "noted_advice.py"
    path.write_text(NOTED)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(path))
    run_id = cli.json("run", "noted-text", "--input", json.dumps({}))["run"]["id"]
    for command in (["edit", run_id, "--set", "text="], ["rewind", run_id, "--to", "1", "--set", "text=", "--detach"]):
        refused = cli(*command, code=1)
        assert refused.stderr.strip() == f"error: {REFUSED}; add --allow-empty if that is what you mean", refused.stderr


def test_rest_names_its_allow_empty(db_url: str) -> None:
    with noted_api(db_url) as (hazel, http):
        run_id = waiting(hazel, "noted-text")
        for body in ({"action": "edit", "payload": {"value": ""}},
                     {"action": "rewind", "payload": {"to": 1, "edits": {"text": ""}}}):
            refused = http.post(f"/api/runs/{run_id}/decisions", json=body)
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"] == {
                "type": "InvalidDecisionError",
                "message": f'{REFUSED}; send "allow_empty": true in the payload if that is what you mean'}


@pytest.fixture
def jira(db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url) as env:
        yield env


@pytest.mark.usefixtures("offline_example")
def test_a_jira_edit_says_where_an_empty_value_can_be_set(jira: JiraEnv) -> None:
    """The example waits at its scripts review on Jira (``scripts: dict[str, str]``); a ``/edit`` leaves one blank."""
    run_id = jira.start()
    issue = jira.issue(run_id)
    scripts = jira.hazel.state_at(run_id=run_id).scripts
    first, second = list(scripts)
    answer = jira.send(jira.comment(issue, "/edit " + json.dumps({first: scripts[first], second: "   "})))
    refused = answer.json()["refused"]
    assert refused.startswith(f"the edit leaves entry {second!r} of field 'scripts' blank (only whitespace): that "
                              "would replace the value with nothing; an empty value can be set with "
                              "{{hazel edit --allow-empty}} or the REST API's {{allow_empty}}, not from a Jira "
                              "comment. Nothing changed."), refused
    assert "(allow_empty) if" not in refused
    assert jira.hazel.state_at(run_id=run_id).scripts == scripts


@pytest.mark.usefixtures("offline_example")
def test_a_jira_edit_of_an_empty_mapping_is_refused(jira: JiraEnv) -> None:
    """Fresh-user s20 HIGH 1: ``/edit {}`` (bare, in a ``{noformat}`` or ``{code}`` block, spaced) was recorded and
    the run went on with the mapping wiped; a Jira comment cannot allow an empty value, so it is refused as the
    CLI's ``--file`` holding ``{}`` is, and the request stays open."""
    run_id = jira.start()
    issue = jira.issue(run_id)
    scripts = jira.hazel.state_at(run_id=run_id).scripts
    decided = jira.hazel.decisions(run_id=run_id)
    for body in ("/edit {}", "/edit\n{noformat}{}{noformat}", "/edit {code}{}{code}", "/edit\n   {  }   "):
        refused = jira.send(jira.comment(issue, body)).json()["refused"]  # ({} escaped as Jira's wiki markup)
        assert refused.startswith("the edit leaves field 'scripts' empty (\\{\\}): that would replace the value with "
                                  "nothing; an empty value can be set with {{hazel edit --allow-empty}} or the "
                                  "REST API's {{allow_empty}}, not from a Jira comment. Nothing changed."), refused
    assert jira.hazel.state_at(run_id=run_id).scripts == scripts
    assert jira.hazel.decisions(run_id=run_id) == decided
    assert jira.hazel.get(run_id=run_id).status.value == "waiting"


COUNTED = '''
from pydantic import BaseModel

from hazel import StepContext, Workflow


class Count(BaseModel):
    n: int = 0
    limits: dict[str, int] = {}


counted = Workflow("counted", version=1, state=Count)


@counted.step
def count(state: Count, ctx: StepContext) -> Count:
    return state.model_copy(update={"n": 11, "limits": {"a": 1}})


counted.steer("check", show="n", actions=["approve", "edit", "rewind"])

limited = Workflow("counted-limits", version=1, state=Count)
limited.step(count)
limited.steer("check", show="limits", actions=["approve", "edit", "rewind"])
'''


def test_an_empty_value_the_state_model_refuses_anyway_is_refused_in_its_words(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """A fresh-user finding: ``hazel edit --set n=null`` (or ``n={}``) on an ``int`` field advised ``add
    --allow-empty``, which then failed on the state model. A value the model refuses whatever ``--allow-empty``
    says is refused in the model's words at once, by edit and rewind alike; nothing is recorded."""
    path = tmp_path / "counted.py"
    path.write_text(COUNTED)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(path))
    run_id = cli.json("run", "counted", "--input", "{}")["run"]["id"]
    refusals = {
        ("edit", run_id, "--set", "n=null"):
            "error: the edit leaves field 'n' empty: that would replace the value with nothing, and the state "
            "model needs a value there",
        ("edit", run_id, "--set", "n={}"): "error: invalid edit: n: Input should be a valid integer",
        ("edit", run_id, "--set", "n=[]"): "error: invalid edit: n: Input should be a valid integer",
        ("rewind", run_id, "--to", "1", "--set", "n=null", "--detach"):
            "error: invalid edit: n: Input should be a valid integer",
        ("rewind", run_id, "--to", "1", "--set", "n={}", "--detach"):
            "error: invalid edit: n: Input should be a valid integer",
    }
    for command, said in refusals.items():
        refused = cli(*command, code=1)
        assert refused.stderr.strip() == said, (command, refused.stderr)
    shown = cli.json("show", run_id)
    assert shown["run"]["status"] == "waiting" and shown["state"] == {"n": 11, "limits": {"a": 1}}
    assert cli.json("history", run_id)["decisions"] == []
    # a value the model takes keeps the advice: an empty mapping is a valid dict[str, int]
    run_id = cli.json("run", "counted-limits", "--input", "{}")["run"]["id"]
    refused = cli("edit", run_id, "--set", "limits={}", code=1)
    assert refused.stderr.strip() == ("error: the edit leaves field 'limits' empty ({}): that would replace the "
                                      "value with nothing; add --allow-empty if that is what you mean")
