"""The Rewind modal lists the checkpoints the engine offers (``RequestView.rewind``: ``bot.engine.choices``) and
says when the run can continue from more than it lists, and how to reach the rest (fresh-user finding F6)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from integrations.slack import modals as M
from store.models import CheckpointInfo, RewindChoices
from tests.support.fake_slack import view_problems
from tests.support.slack_views import T0, make_view

META = {"request_id": 7, "run_id": "abcdef123456", "channel": None}


def offered(seqs: list[int], total: int) -> RewindChoices:
    return RewindChoices(checkpoints=tuple(
        CheckpointInfo(run_id="abcdef123456", seq=s, parent_seq=s - 1 if s else None, branch=0, step="loop",
                       next_step="prepare" if s == 0 else "loop", workflow_version=1,
                       created_at=T0 + timedelta(minutes=s), is_snapshot=s == 0, stored_bytes=10)
        for s in seqs), total=total)


def test_the_modal_says_when_its_list_is_cut_and_how_to_reach_the_rest() -> None:
    few = M.rewind_modal(make_view(), META)
    assert not view_problems(few) and "Showing" not in str(few)
    view = make_view(rewind=offered([*range(151, 53, -1), 1, 0], total=152))
    modal = M.rewind_modal(view, META)
    assert not view_problems(modal)
    options = next(b for b in modal["blocks"] if b.get("block_id") == "target")["element"]["options"]
    assert len(options) == 100 and [o["value"] for o in options[-2:]] == ["1", "0"]
    assert options[-1]["text"]["text"].startswith("#0 → prepare")
    note = str(modal)
    assert "Showing 100 of 152 checkpoints the run can continue from" in note
    assert "`/hazel rewind abcdef123456 N`" in note and "`hazel rewind abcdef123456 --to N`" in note


def test_a_view_without_rewind_choices_opens_no_modal() -> None:
    with pytest.raises(ValueError, match="no rewind choices"):
        M.rewind_modal(make_view(actions=("approve",)), META)
    with pytest.raises(ValueError, match="no rewind choices"):  # (more than a select lists: not the engine's)
        M.rewind_modal(make_view(rewind=offered(list(range(101)), total=101)), META)
