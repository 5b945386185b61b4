"""Which checkpoints a run page lists, so that no page grows with the run's history (a run of 3,000 checkpoints
rendered 2.8 MB of tree, a rewind form per row and a select of every checkpoint; its diff page 0.24 MB):

- the tree, a page at a time: the newest page (``page`` 0) lists the newest ``ROWS`` checkpoints with #0 and
  where each step starts (the engine's ``rewind_choices``, the selection Slack's Rewind modal keeps), each older
  page the ``ROWS`` before the page after it, by position in the stored history (so a pruned run's pages skip
  what was pruned); the checkpoints a page leaves out between two of its rows are one ``Gap`` row;
- the checkpoint fields (rewind's ``to``, the diff's ``a`` and ``b``): a select of every choice while there are
  at most ``CHOICES``, else a number field whose suggestions are #0, where each step starts and the newest;
- the state page's strip of checkpoints: those around the one shown, the first and the newest.

Pure: no store read, no engine call but its selection; the reads are ``bot.inbound.web.pages``'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.engine import rewind_choices
from store.models import CheckpointInfo

ROWS = 50
"""Checkpoints per page of a run's tree (the newest page also lists #0 and where each step starts)."""
CHOICES = 50
"""The most checkpoints a checkpoint field lists (a select of all of them while they are no more)."""
AROUND = 10
"""Checkpoints either side of the one the state page shows, in its strip."""


@dataclass(frozen=True)
class Gap:
    """Checkpoints a page of the tree leaves out between two of its rows: ``first``..``last`` (numbers; ``count``
    of them stored), listed on older page ``page`` (the one holding ``last``)."""

    first: int
    last: int
    count: int
    page: int


@dataclass(frozen=True)
class Window:
    """One page of a run's tree: ``shown`` by number (every branch), ``gaps`` by the number of the row they
    precede; ``total``: checkpoints stored; ``pages``: pages in all (at least 1; ``page`` may be past them,
    then ``shown`` is empty)."""

    page: int
    pages: int
    total: int
    shown: list[CheckpointInfo]
    gaps: dict[int, Gap] = field(default_factory=dict)
    rows: int = ROWS
    """Checkpoints per page."""

    @property
    def cut(self) -> bool:
        """Whether the page leaves any checkpoint out."""
        return len(self.shown) < self.total

    @property
    def older(self) -> int | None:
        """The next older page, if any."""
        return self.page + 1 if self.page + 1 < self.pages else None

    @property
    def newer(self) -> int | None:
        """The next newer page, if any (a page past the last: the last)."""
        return min(self.page, self.pages) - 1 if self.page > 0 else None


def page_of(ordered: list[CheckpointInfo], seq: int, *, rows: int = ROWS) -> int:
    """The page of the tree that lists checkpoint ``seq`` among ``ordered`` (the run's checkpoints by number);
    0 when it is not stored."""
    index = next((i for i, cp in enumerate(ordered) if cp.seq == seq), len(ordered) - 1)
    return (len(ordered) - 1 - index) // rows


def window(checkpoints: list[CheckpointInfo], *, head_seq: int, page: int = 0, rows: int = ROWS) -> Window:
    """Page ``page`` of the tree of a run whose checkpoints are ``checkpoints`` (all of them, metadata, any
    order) and whose head is ``head_seq``: at most ``rows`` checkpoints, plus on page 0 the head and the at most
    ``rows`` checkpoints ``rewind_choices`` keeps (#0, where each step starts), so at most ``2 * rows + 1``."""
    ordered = sorted(checkpoints, key=lambda cp: cp.seq)
    total, pages = len(ordered), max(1, -(-len(ordered) // rows))
    end = total - page * rows
    shown = {cp.seq: cp for cp in ordered[max(0, end - rows):max(0, end)]}
    if page == 0:
        kept = rewind_choices(ordered, head_seq=head_seq, limit=rows).checkpoints
        shown.update({cp.seq: cp for cp in kept})
        shown.update({cp.seq: cp for cp in ordered if cp.seq == head_seq})
    listed = sorted(shown.values(), key=lambda cp: cp.seq)
    position = {cp.seq: i for i, cp in enumerate(ordered)}
    gaps = {}
    for before, after in zip(listed, listed[1:]):
        left_out = ordered[position[before.seq] + 1:position[after.seq]]
        if left_out:
            gaps[after.seq] = Gap(left_out[0].seq, left_out[-1].seq, len(left_out),
                                  (total - 1 - position[left_out[-1].seq]) // rows)
    return Window(page, pages, total, listed, gaps, rows)


@dataclass(frozen=True)
class Choices:
    """What a checkpoint field offers: ``listed``, in the order the field lists them; ``cut``: they are not all,
    so the field is a number field that suggests them (any other number may be typed); ``total``: how many
    there are in all."""

    listed: list[CheckpointInfo]
    cut: bool
    total: int


def rewind_targets(checkpoints: list[CheckpointInfo], *, head_seq: int, limit: int = CHOICES) -> Choices:
    """The rewind field's choices, newest first: the checkpoints the run can continue from but its head
    (``rewind_choices``: #0, where each step starts, the newest, when there are more than ``limit``)."""
    extra = int(any(cp.seq == head_seq and cp.next_step for cp in checkpoints))  # (the head takes no place)
    choice = rewind_choices(checkpoints, head_seq=head_seq, limit=limit + extra)
    chosen, total = choice.checkpoints, choice.total
    if extra and all(cp.seq != head_seq for cp in chosen):
        chosen = rewind_choices(checkpoints, head_seq=head_seq, limit=limit).checkpoints
    listed = [cp for cp in chosen if cp.seq != head_seq]
    return Choices(listed, len(listed) < total - extra, total - extra)


def diff_choices(checkpoints: list[CheckpointInfo], *, head_seq: int, keep: tuple[int, ...] = (),
                 limit: int = CHOICES) -> Choices:
    """The diff fields' choices, by number: every checkpoint while there are at most ``limit``, else those a newest page
    of ``limit`` rows lists (``window``: #0, where each step starts, the newest; at most ``2 * limit + 1``) and
    ``keep`` (the two compared)."""
    ordered = sorted(checkpoints, key=lambda cp: cp.seq)
    if len(ordered) <= limit:
        return Choices(ordered, False, len(ordered))
    newest = window(ordered, head_seq=head_seq, rows=limit).shown
    listed = {cp.seq: cp for cp in newest} | {cp.seq: cp for cp in ordered if cp.seq in keep}
    return Choices(sorted(listed.values(), key=lambda cp: cp.seq), True, len(ordered))


def strip(checkpoints: list[CheckpointInfo], seq: int, *, around: int = AROUND) -> list[CheckpointInfo | None]:
    """The state page's strip of links for checkpoint ``seq``: the first checkpoint, the ``around`` either side
    of ``seq`` and the newest, by number; None where it leaves checkpoints out (shown as "…")."""
    ordered = sorted(checkpoints, key=lambda cp: cp.seq)
    if not ordered:
        return []
    at = next((i for i, cp in enumerate(ordered) if cp.seq == seq), 0)
    keep = sorted({0, len(ordered) - 1, *range(max(0, at - around), min(len(ordered), at + around + 1))})
    out: list[CheckpointInfo | None] = []
    for i, index in enumerate(keep):
        if i and index != keep[i - 1] + 1:
            out.append(None)
        out.append(ordered[index])
    return out
