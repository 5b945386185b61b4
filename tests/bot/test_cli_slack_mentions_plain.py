"""A point whose approvers are Slack ids no person claims (a user, a user group), answered on the console: the
panel and the CLI's refusals name them as ``Slack user U…`` / ``Slack group S…``, not as Slack's mention markup
(``<@U…>``, ``<!subteam^S…>``), which only Slack turns into names."""

from __future__ import annotations

from pathlib import Path

import pytest

FLOW = '''
from pydantic import BaseModel
from bot.engine.workflow import StepContext, Workflow
from store.models import Approvers


class Doc(BaseModel):
    text: str = ""


wf = Workflow("mentions", version=1, state=Doc)


@wf.step
def draft(state: Doc, ctx: StepContext) -> Doc:
    return state


wf.steer("review", title="Review it", approvers=Approvers(people=["priya"], slack_users=["U0000000007"],
                                                          slack_usergroups=["S0000000001"]))
'''


def test_console_texts_name_slack_ids_plainly(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    flow = tmp_path / "mentions_flow.py"
    flow.write_text(FLOW, encoding="utf-8")
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(flow))
    started = cli("run", "mentions", "--input", "{}")
    assert "approvers: priya, Slack user U0000000007, Slack group S0000000001" in started.stdout, started.stdout
    run_id = cli.json("runs")[0]["id"]
    refused = cli("approve", run_id, code=1)  # olga is none of them
    assert "only priya, Slack user U0000000007, Slack group S0000000001 may" in refused.stderr, refused.stderr
    assert "<@" not in started.stdout + refused.stderr and "subteam" not in started.stdout + refused.stderr
