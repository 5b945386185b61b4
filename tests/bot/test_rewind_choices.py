"""Which checkpoints a rewind offers when a run can continue from more than 100 (``bot.engine.choices``, the
one selection Slack's Rewind modal and Jira's issue and ``/rewind`` answers list): #0, where each step starts
(on the run's current line first), then the newest (fresh-user finding F6)."""

from __future__ import annotations

from bot.engine.choices import REWIND_CHOICES, rewind_choices
from store.models import CheckpointInfo
from tests.support.slack_views import T0


def cp(seq: int, next_step: str | None, *, parent: int | None = -1, branch: int = 0) -> CheckpointInfo:
    return CheckpointInfo(run_id="abcdef123456", seq=seq, parent_seq=seq - 1 if parent == -1 else parent,
                          branch=branch, step="s", next_step=next_step, workflow_version=1, created_at=T0,
                          is_snapshot=seq == 0, stored_bytes=10)


def chain(steps: list[str | None]) -> list[CheckpointInfo]:
    """#0 … #n on branch 0, checkpoint i continuing at ``steps[i]``."""
    return [cp(i, step, parent=None if i == 0 else i - 1) for i, step in enumerate(steps)]


def seqs(chosen: tuple[CheckpointInfo, ...]) -> list[int]:
    return [c.seq for c in chosen]


def test_up_to_the_limit_every_checkpoint_the_run_can_continue_from_newest_first() -> None:
    history = chain(["draft", "review", "publish", None])  # the last: the run ended there
    chosen = rewind_choices(history, head_seq=3, limit=3)
    assert seqs(chosen.checkpoints) == [2, 1, 0] and chosen.total == 3 and not chosen.cut


def test_over_the_limit_the_input_and_each_steps_start_stay_the_rest_newest() -> None:
    history = chain(["prepare", *["loop"] * 20, "review"])  # #0 prepare, #1..#20 loop, #21 review
    chosen = rewind_choices(history, head_seq=21, limit=6)
    assert chosen.total == 22 and seqs(chosen.checkpoints) == [21, 20, 19, 18, 1, 0] and chosen.cut
    assert chosen.steps == ["loop", "prepare", "review"]


def test_a_steps_start_on_the_current_line_wins_over_an_abandoned_branch() -> None:
    # branch 0: #0 a, #1 b, #2 b, #3 c (abandoned); a rewind to #0 forked branch 1: #4 (parent 0) a, #5 b, ...
    history = [*chain(["a", "b", "b", "c"]), cp(4, "a", parent=0, branch=1), cp(5, "b", parent=4, branch=1),
               *[cp(s, "b", branch=1) for s in range(6, 12)], cp(12, "d", branch=1)]
    chosen = rewind_choices(history, head_seq=12, limit=6).checkpoints
    # #0 (the input, where a starts); on the line #0-#4-…-#12 b starts at #5 (not #1), d at #12; c only on
    # branch 0: #3; then the newest
    assert seqs(chosen) == [12, 11, 10, 5, 3, 0]


def test_fewer_places_than_steps_keeps_the_input_and_the_earliest_starts() -> None:
    history = chain([f"s{i}" for i in range(10)])
    chosen = rewind_choices(history, head_seq=9, limit=4)
    assert seqs(chosen.checkpoints) == [3, 2, 1, 0] and chosen.total == 10


def test_at_most_the_hundred_a_slack_select_lists() -> None:
    history = chain(["prepare", *["loop"] * 150, "review"])
    chosen = rewind_choices(history)  # (no head given: the newest checkpoint's line)
    assert REWIND_CHOICES == 100 and len(chosen.checkpoints) == 100 and chosen.total == 152
    assert seqs(chosen.checkpoints)[-2:] == [1, 0] and seqs(chosen.checkpoints)[0] == 151


def test_the_steps_named_leave_out_hazels_own_nodes() -> None:
    history = chain(["draft", "__update__", "review + legal"])  # (a LangGraph fork's update; a super-step)
    assert rewind_choices(history).steps == ["draft", "legal", "review"]
