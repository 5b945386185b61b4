"""Jira's ``/rewind`` help on a run with more checkpoints than a rewind lists (100): the issue's "How to answer"
names every step (it named the steps of the newest 100 checkpoints only, so a long run's early steps could not be
found from Jira), and a ``/rewind`` without a target, or naming none the run has, is answered with the
checkpoints it can name: the same ones Slack's Rewind modal offers (the engine's choice, ``RequestView.rewind``:
#0, where each step starts, the newest), saying that the list is cut and how to reach any other (``/rewind N``).

Signed webhooks over HTTP into ``/jira/webhook``, the fake Jira (``responses``); SQLite and PostgreSQL."""

from __future__ import annotations

import re
from typing import Iterator

import pytest

from integrations.slack import modals as M
from store.models import Action, Approvers, RequestStatus
from tests.support.jira_env import OPERATOR, JiraEnv, jira_env
from tests.workflows.looping import LOOPS, looping


pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)

LISTED = re.compile(r"^\* #(\d+) → ", re.MULTILINE)
"""A checkpoint's bullet in Hazel's answer: ``* #3 → loop · 2026-12-06 14:05 UTC · branch 0``."""


@pytest.fixture
def env(db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url, workflows=[looping(channel="jira:MIG", approvers=Approvers(jira_users=("557058:sme-sam",)))]
                  ) as e:
        yield e


def long_run(env: JiraEnv) -> str:
    """A run of ``looping`` waiting at its review on a Jira issue, with 152 checkpoints it can continue from."""
    run = env.hazel.start(workflow="looping", input={"topic": "t"}, actor=OPERATOR)
    env.drive(run.id)
    assert len([cp for cp in env.hazel.checkpoints(run_id=run.id) if cp.next_step]) == LOOPS + 2
    return run.id


def test_the_issue_names_every_step_to_rewind_to(env: JiraEnv) -> None:
    run_id = long_run(env)
    description = env.issue(run_id)["fields"]["description"]
    assert "steps: loop, prepare, review; or a checkpoint's number: {{/rewind}} alone lists them" in description


@pytest.mark.parametrize("comment", ["/rewind", "/rewind nowhere", "/rewind 9999"])
def test_a_rewind_without_a_valid_target_lists_what_slacks_modal_offers(env: JiraEnv, comment: str) -> None:
    run_id = long_run(env)
    issue = env.issue(run_id)
    answer = env.send(env.comment(issue, comment))
    assert answer.status_code == 200, answer.text
    refused = answer.json()["refused"]
    assert refused == env.fake.bodies(issue["id"])[-1].split(" ", 1)[1]  # (the comment, after its mention)
    assert "Nothing changed." in refused
    listed = [int(n) for n in LISTED.findall(refused)]
    assert len(listed) == 100 and listed == sorted(listed, reverse=True)
    assert listed[-2:] == [1, 0] and listed[0] == LOOPS + 1  # #0 (prepare), #1 (where loop starts), the newest
    assert "* #0 → prepare · " in refused and "* #1 → loop · " in refused and f"* #{LOOPS + 1} → review · " in refused
    assert (f"Showing 100 of {LOOPS + 2} checkpoints the run can continue from: #0 (the run's input), where each "
            "step starts, and the newest. To continue from another, {{/rewind N}} with its number "
            f"({{{{hazel history {run_id}}}}} lists them all), or the run's page.") in refused

    # the same checkpoints as Slack's Rewind modal offers for this request
    view = env.hazel.request_view(request_id=env.pending(run_id).id)
    assert view is not None
    modal = M.rewind_modal(view, {"request_id": view.request.id, "run_id": run_id, "channel": None})
    select = next(b for b in modal["blocks"] if b.get("block_id") == "target")["element"]
    assert [int(o["value"]) for o in select["options"]] == listed
    assert env.pending(run_id).status is RequestStatus.PENDING and env.hazel.decisions(run_id=run_id) == []


def test_a_checkpoint_not_listed_is_reached_by_its_number(env: JiraEnv) -> None:
    run_id = long_run(env)
    issue = env.issue(run_id)
    listed = {int(n) for n in LISTED.findall(env.send(env.comment(issue, "/rewind")).json()["refused"])}
    hidden = next(seq for seq in range(2, LOOPS) if seq not in listed)
    answer = env.send(env.comment(issue, f"/rewind #{hidden} fewer turns"))
    assert answer.status_code == 200 and answer.json()["decided"] == "rewind", answer.text
    [rewind] = [d for d in env.hazel.decisions(run_id=run_id) if d.action is Action.REWIND]
    assert rewind.payload["to"] == hidden and rewind.payload["feedback"] == "fewer turns"
    run = env.hazel.get(run_id=run_id)
    [head] = [cp for cp in env.hazel.checkpoints(run_id=run_id) if cp.seq == run.head_seq]
    assert head.parent_seq == hidden and head.next_step == "loop" and head.decision_id == rewind.id


def test_someone_who_may_not_rewind_is_not_shown_the_list(env: JiraEnv) -> None:
    run_id = long_run(env)
    refused = env.send(env.comment(env.issue(run_id), "/rewind", person="stranger")).json()["refused"]
    assert "may not rewind" in refused and not LISTED.search(refused)
