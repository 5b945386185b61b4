"""Which checkpoints a rewind offers to choose from: one selection for every channel that lists them (Slack's
Rewind modal, Jira's issue and its answers to ``/rewind``), carried by the request's view
(``RequestView.rewind``, built by ``bot.engine.views``).

A run can continue from any checkpoint that has a next step. A long run has more of them than a channel can
list: Slack's ``static_select`` holds at most 100 options
(https://docs.slack.dev/reference/block-kit/block-elements/select-menu-element#static_select), and Jira lists the
same 100 so that both channels offer the same. Any other checkpoint is still reached by its number
(``/hazel rewind RUN N``, a Jira ``/rewind N``, ``hazel rewind RUN --to N``, the run's page).
"""

from __future__ import annotations

from typing import Iterable

from store.models import CheckpointInfo, RewindChoices, line_of

REWIND_CHOICES = 100
"""The most checkpoints a rewind offers (Slack's limit of options in a ``static_select``)."""


def rewind_choices(checkpoints: Iterable[CheckpointInfo], *, head_seq: int | None = None,
                   limit: int = REWIND_CHOICES) -> RewindChoices:
    """The checkpoints a rewind offers, newest first, and how many the run can continue from in all.

    A checkpoint the run can continue from has a ``next_step`` (the one a run ended at has none). When there are
    more than ``limit`` of them, the choice keeps, in this order of priority: the first of them (#0, the run's
    input: "start over"); where each step starts, the first checkpoint at which it runs next, on the line from
    #0 to the run's head (``head_seq``: the branch the run is on) and, for a step that line never reached, on
    any branch; then the newest. So a step that looped 150 times (``ctx.goto`` itself) takes the newest places,
    and #0 and the other steps' starts stay. Fewer places than steps (a workflow of more than 99 steps): #0 and
    the earliest starts.

    Args:
        checkpoints: the run's kept checkpoints (``tx.checkpoints.list``: all of them, any order).
        head_seq: the run's head (``Run.head_seq``); None: the newest checkpoint.
        limit: the most to offer (at least 1).
    """
    every = list(checkpoints)
    targets = sorted((cp for cp in every if cp.next_step), key=lambda cp: cp.seq)
    if len(targets) <= limit:
        return RewindChoices(checkpoints=tuple(targets[::-1]), total=len(targets))
    line = line_of(every, head_seq)
    starts: dict[str, CheckpointInfo] = {}
    for on_line in (True, False):
        for cp in targets:
            if (cp.seq in line) == on_line and cp.next_step not in starts:
                starts[cp.next_step or ""] = cp
    kept = {targets[0].seq: targets[0]}
    for cp in sorted(starts.values(), key=lambda c: c.seq):
        if len(kept) >= limit:
            break
        kept.setdefault(cp.seq, cp)
    for cp in reversed(targets):
        if len(kept) >= limit:
            break
        kept.setdefault(cp.seq, cp)
    return RewindChoices(checkpoints=tuple(sorted(kept.values(), key=lambda cp: -cp.seq)), total=len(targets))
