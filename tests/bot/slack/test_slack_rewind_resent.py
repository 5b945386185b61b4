"""``/hazel rewind`` sent again under the same ``trigger_id`` (Slack's resend) rewinds once and is answered with
what was recorded: the checkpoint and the step the fork continues at, as the first answer named them (it was
``continues at `?```), and, for another text under the same trigger id, what was recorded rather than what this
text asks."""

from __future__ import annotations

from urllib.parse import parse_qsl

from store.models import Action
from tests.bot.slack.conftest import PRIYA, SlackEnv


def rewinds(env: SlackEnv, run_id: str) -> list:
    return [d for d in env.hazel.decisions(run_id=run_id) if d.action is Action.REWIND]


def test_a_resent_rewind_command_is_answered_with_the_step_the_fork_continues_at(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    body = env.sender.command_body(PRIYA, f"rewind {run_id[:4]} 1 first", name="priya")
    first = env.sender.post(body).json()["text"]
    prefix = f"↩️ Run `{run_id}` rewound to checkpoint #1; it continues at `"
    assert first.startswith(prefix) and first.endswith("` on a new branch."), first
    done = first.removeprefix("↩️ ")
    [rewound] = rewinds(env, run_id)

    again = env.sender.post(body, retry_num=1).json()["text"]
    assert again.startswith(f"↩️ Already recorded for this command (by <@{PRIYA}> <!date^"), again
    assert again.endswith(f"): {done}") and "`?`" not in again, again

    trigger = dict(parse_qsl(body))["trigger_id"]  # another text under that trigger id: what was recorded
    other = env.sender.command(PRIYA, f"rewind {run_id[:4]} 0 second", name="priya", trigger_id=trigger).json()
    assert other["text"] == again, other
    assert rewinds(env, run_id) == [rewound]
    env.settle()
    assert rewinds(env, run_id) == [rewound] and "first" in env.hazel.state_at(run_id=run_id).plan
