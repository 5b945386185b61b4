"""``/hazel history`` of a long run fits Slack's reply and keeps what matters (s26 F4: a 402-checkpoint run's tree
was cut after ~3,900 characters, inside a ``<!date^…>`` token, without the head or the newest checkpoints and
without a word; the Rewind modal sent people to it for the numbers it had left out)."""

from __future__ import annotations

from pydantic import BaseModel

from bot.inbound.slack.commands import MAX_REPLY_CHARS
from hazel import StepContext, Workflow
from integrations.slack.replies import history_text
from tests.support.engine import make_hazel, person


class Loop(BaseModel):
    n: int = 0


def looping() -> Workflow:
    wf = Workflow("loop", version=1, state=Loop)

    @wf.step
    def spin(state: Loop, ctx: StepContext) -> Loop:
        if state.n + 1 < 400:
            ctx.goto("spin")
        return Loop(n=state.n + 1)

    wf.steer("check", title="Check", actions=["approve", "rewind"])
    return wf


def test_a_long_history_keeps_its_first_lines_the_head_and_the_newest(db_url: str) -> None:
    hz = make_hazel(db_url, looping())
    run = hz.start(workflow="loop", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    run = hz.get(run_id=run.id)
    checkpoints, decisions = hz.checkpoints(run_id=run.id), hz.decisions(run_id=run.id)
    whole = history_text(run, checkpoints, decisions).splitlines()
    text = history_text(run, checkpoints, decisions, max_chars=MAX_REPLY_CHARS)
    assert len(text) <= MAX_REPLY_CHARS and len(whole) > 400
    lines = text.splitlines()
    shown = [line for line in lines if not line.startswith("_… ")]
    assert all(line in whole for line in shown)  # whole lines only: never cut inside one (a <!date^…> token)
    assert lines[0] == whole[0] and lines[1] == whole[1]  # the title and #0
    assert lines[-1] == whole[-1] and lines[-1].endswith("◀ *head*"), lines[-1]  # the newest: the head
    [gap] = [line for line in lines if line.startswith("_… ")]
    left_out = len(whole) - len(shown)
    assert gap == (f"_… {left_out} lines not shown: the whole tree with `hazel history {run.id}`, or on the run "
                   "page_"), gap
    assert history_text(run, checkpoints[:5], decisions, max_chars=MAX_REPLY_CHARS) == \
        history_text(run, checkpoints[:5], decisions)  # a short tree as it is
