"""The Rewind modal of a run with more checkpoints than a ``static_select`` lists (100 options:
https://docs.slack.dev/reference/block-kit/block-elements/select-menu-element#static_select): it offers #0 (the
run's input) and where each step starts within those 100, with the newest, and says that the list is cut and
how to reach any checkpoint (``/hazel rewind RUN N``, ``hazel rewind RUN --to N``, the run's page). Before, it
listed the newest 100 (#151 … #52) and nothing else, without a word (fresh-user finding F6).

Signed ``block_actions`` and ``view_submission`` payloads over HTTP into ``/slack/events``, the modal opened on
the fake Slack Web API (``views.open``), which refuses a select of more than 100 options; SQLite and
PostgreSQL."""

from __future__ import annotations

from store.models import Action, Approvers
from tests.bot.slack.conftest import PRIYA, SlackEnv
from tests.workflows.looping import looping


def open_rewind_modal(env: SlackEnv, run_id: str) -> dict:
    return env.open_form(PRIYA, "rewind", env.request_message(run_id), name="priya")


def texts(modal: dict) -> str:
    return " ".join(e["text"] for b in modal["blocks"] if b["type"] == "context" for e in b["elements"])


def test_the_rewind_select_keeps_the_input_and_each_steps_start_and_says_it_is_cut(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env(looping(channel="slack:#migrations", approvers=Approvers(slack_users=(PRIYA,))))
    run_id = env.start("looping", {"topic": "t"})
    env.settle()
    checkpoints = env.hazel.checkpoints(run_id=run_id)
    continuable = [cp for cp in checkpoints if cp.next_step]
    assert len(continuable) > 150
    first_at = {step: min(cp.seq for cp in continuable if cp.next_step == step)
                for step in ("prepare", "loop", "review")}
    assert first_at["prepare"] == 0

    modal = open_rewind_modal(env, run_id)
    select = next(b for b in modal["blocks"] if b.get("block_id") == "target")["element"]
    seqs = [int(o["value"]) for o in select["options"]]
    assert len(seqs) == 100 and seqs == sorted(seqs, reverse=True)  # newest first, within Slack's limit
    assert set(first_at.values()) <= set(seqs)  # #0 (the input), where `loop` and `review` start
    assert select["options"][-1]["text"]["text"].startswith("#0 → prepare")
    newest = sorted((cp.seq for cp in continuable), reverse=True)[:97]
    assert seqs[:97] == newest
    note = texts(modal)
    assert f"Showing 100 of {len(continuable)} checkpoints the run can continue from" in note, note
    assert "#0 (the run's input), where each step starts, and the newest" in note
    assert f"`/hazel rewind {run_id} N`" in note and f"`hazel rewind {run_id} --to N`" in note
    assert "the run's page" in note
    blocks = [b.get("block_id") or b["type"] for b in modal["blocks"]]
    assert blocks.index("target") + 1 == blocks.index("context", blocks.index("target"))  # under the select

    # choosing #0 from the modal starts the run over from its input
    response = env.sender.submit(PRIYA, modal, {"target": {"selected": "0"}, "feedback": None}, name="priya")
    assert response.status_code == 200 and response.text in ("", "null"), response.text
    [rewind] = [d for d in env.hazel.decisions(run_id=run_id) if d.action is Action.REWIND]
    fork = env.hazel.get(run_id=run_id)
    [head] = [cp for cp in env.hazel.checkpoints(run_id=run_id) if cp.seq == fork.head_seq]
    assert head.parent_seq == 0 and head.next_step == "prepare" and head.decision_id == rewind.id

    # a checkpoint the select leaves out is reached as the note says: `/hazel rewind RUN N`
    env.settle()
    hidden = next(cp.seq for cp in env.hazel.checkpoints(run_id=run_id)
                  if cp.next_step == "loop" and cp.branch == 0 and cp.seq not in seqs)
    answer = env.sender.command(PRIYA, f"rewind {run_id} {hidden}", name="priya").json()["text"]
    assert f"rewound to checkpoint #{hidden}" in answer, answer

