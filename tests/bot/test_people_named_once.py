"""The engine's messages name each person once, by the people file's name: a start refused names the
workflow's starters so (Priya listed by name and by her Slack id is ``priya``), and a refused actor known to the
file is named as that person, not by the channel's user name."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from hazel import StepContext, Workflow
from bot.engine.errors import NotAllowedError
from store.models import Approvers
from tests.support.engine import make_hazel

PRIYA, SAM = "U0000000001", "U0000000002"


class Doc(BaseModel):
    text: str = ""


def guarded() -> Workflow:
    wf = Workflow("guarded", version=1, state=Doc,
                  starters=Approvers(people=["priya"], slack_users=[PRIYA], users=["pk"]))

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    return wf


def test_a_refused_start_names_the_starters_once_and_the_person_refused(db_url: str, tmp_path,
                                                                        monkeypatch) -> None:  # noqa: ANN001
    people = tmp_path / "people.toml"
    people.write_text(f'[people.priya]\nslack = ["{PRIYA}"]\nconsole = ["pk"]\n\n[people.sam]\nslack = ["{SAM}"]\n',
                      encoding="utf-8")
    monkeypatch.setenv("HAZEL_PEOPLE_FILE", str(people))
    hazel = make_hazel(db_url, guarded())
    sam = hazel.identify(channel="slack", id=SAM, name="u")
    with pytest.raises(NotAllowedError, match=r"^sam may not start guarded v1: only priya may$"):
        hazel.start(workflow="guarded", input={}, actor=sam)
    priya = hazel.identify(channel="slack", id=PRIYA, name="p")
    assert hazel.start(workflow="guarded", input={}, actor=priya).started_by_person == "priya"


def test_the_console_panel_names_the_starter_and_each_approver_once(db_url: str, tmp_path,
                                                                    monkeypatch) -> None:  # noqa: ANN001
    people = tmp_path / "people.toml"
    people.write_text(f'[people.priya]\nslack = ["{PRIYA}"]\n\n[people.sam]\nslack = ["{SAM}"]\n', encoding="utf-8")
    monkeypatch.setenv("HAZEL_PEOPLE_FILE", str(people))
    wf = Workflow("asked", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state.model_copy(update={"text": "a draft"})

    wf.steer("review", show="text", approvers=Approvers(people=["priya"], slack_users=[PRIYA]))
    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="asked", input={}, actor=hazel.identify(channel="slack", id=SAM, name="u"))
    hazel.drive(run_id=run.id)
    hazel.deliverer.deliver_due()
    panel = hazel.console_buffer.getvalue()  # type: ignore[attr-defined]
    assert "started by sam · approvers: priya" in panel, panel
