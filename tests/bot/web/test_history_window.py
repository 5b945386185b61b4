"""Which checkpoints the run pages list (``bot.inbound.web.history``), on histories built in memory: the tree's
pages and the rows they leave out, the checkpoint fields' choices, the state page's strip; and the tree's
drawing of a page (``graph.layout``): an empty row for each gap, the head's line from the whole history."""

from __future__ import annotations

from datetime import datetime, timezone

from bot.inbound.web import history
from bot.inbound.web.graph import ROW_PX, layout
from store.models import CheckpointInfo, line_of

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def cp(seq: int, next_step: str | None, *, parent: int | None = -1, branch: int = 0) -> CheckpointInfo:
    return CheckpointInfo(run_id="r", seq=seq, parent_seq=seq - 1 if parent == -1 else parent, branch=branch,
                          step="s", next_step=next_step, workflow_version=1, created_at=T0, is_snapshot=seq == 0,
                          stored_bytes=10)


def looped(n: int) -> list[CheckpointInfo]:
    """#0 -> prepare, #1 -> loop, #2..#n-2 -> loop, #n-1 -> review (the head, waiting)."""
    return [cp(0, "prepare", parent=None), cp(1, "loop"), *[cp(s, "loop") for s in range(2, n - 1)],
            cp(n - 1, "review")]


def seqs(cps: list[CheckpointInfo]) -> list[int]:
    return [c.seq for c in cps]


def test_the_newest_page_keeps_the_input_and_each_steps_start_then_older_pages_by_position() -> None:
    cps = looped(302)
    w = history.window(cps, head_seq=301, rows=50)
    assert (w.page, w.pages, w.total, w.cut) == (0, 7, 302, True)
    assert seqs(w.shown) == [0, 1, *range(252, 302)]
    assert list(w.gaps) == [252] and w.gaps[252] == history.Gap(first=2, last=251, count=250, page=1)
    assert (w.newer, w.older) == (None, 1)
    one = history.window(cps, head_seq=301, page=1, rows=50)
    assert seqs(one.shown) == list(range(202, 252)) and one.gaps == {} and (one.newer, one.older) == (0, 2)
    last = history.window(cps, head_seq=301, page=6, rows=50)
    assert seqs(last.shown) == [0, 1] and last.older is None
    past = history.window(cps, head_seq=301, page=9, rows=50)
    assert past.shown == [] and past.newer == 6
    assert [history.page_of(cps, s, rows=50) for s in (301, 252, 251, 202, 1, 0)] == [0, 0, 1, 1, 6, 6]


def test_a_short_history_is_one_page_not_cut() -> None:
    w = history.window(looped(8), head_seq=7, rows=50)
    assert seqs(w.shown) == list(range(8)) and not w.cut and w.gaps == {} and w.pages == 1
    assert w.older is None and w.newer is None


def test_a_pruned_history_pages_by_what_is_stored() -> None:
    kept = [c for c in looped(300) if c.seq >= 200]  # #0..#199 pruned
    w = history.window(kept, head_seq=299, page=1, rows=40)
    assert seqs(w.shown) == list(range(220, 260)) and w.pages == 3
    assert seqs(history.window(kept, head_seq=299, page=2, rows=40).shown) == list(range(200, 220))


def test_the_rewind_field_offers_all_but_the_head_until_it_must_cut_them() -> None:
    few = history.rewind_targets(looped(8), head_seq=7, limit=50)
    assert seqs(few.listed) == [6, 5, 4, 3, 2, 1, 0] and not few.cut and few.total == 7
    many = history.rewind_targets(looped(302), head_seq=301, limit=50)
    assert many.cut and many.total == 301 and len(many.listed) == 50 and 301 not in seqs(many.listed)
    assert seqs(many.listed)[-2:] == [1, 0] and seqs(many.listed)[:3] == [300, 299, 298]
    ended = [*looped(302)[:-1], cp(301, None)]  # the run ended at #301: no place taken by it
    assert len(history.rewind_targets(ended, head_seq=301, limit=50).listed) == 50


def test_the_diff_fields_keep_the_two_compared() -> None:
    cps = looped(302)
    assert not history.diff_choices(cps[:40], head_seq=39, limit=50).cut
    choices = history.diff_choices(cps, head_seq=301, keep=(7, 120), limit=50)
    listed = seqs(choices.listed)
    assert choices.cut and {0, 1, 7, 120, 301} <= set(listed) and listed == sorted(listed) and len(listed) <= 103


def test_the_state_pages_strip_holds_the_first_the_neighbours_and_the_newest() -> None:
    strip = history.strip(looped(302), 150, around=2)
    assert [c.seq if c is not None else None for c in strip] == [0, None, 148, 149, 150, 151, 152, None, 301]
    assert [c.seq for c in history.strip(looped(4), 1, around=2) if c is not None] == [0, 1, 2, 3]


def test_a_page_of_the_tree_draws_a_row_for_each_gap_and_the_heads_line_of_the_whole_history() -> None:
    # branch 0 #0..#9 abandoned after a rewind to #2: branch 1 #10 (parent 2) .. #12, the head
    cps = [cp(0, "a", parent=None), *[cp(s, "b") for s in range(1, 10)], cp(10, "b", parent=2, branch=1),
           cp(11, "b", branch=1), cp(12, "c", branch=1)]
    shown = [c for c in cps if c.seq in (0, 1, 11, 12)]
    g = layout(shown, head_seq=12, decisions=[], line=line_of(cps, 12), gaps_before={11})
    by = {n.cp.seq: n for n in g.nodes}
    assert [by[s].row for s in (0, 1, 11, 12)] == [0, 1, 3, 4] and g.height_px == 5 * ROW_PX
    assert all(by[s].live for s in (0, 1, 11, 12))  # on the head's line, though #2 and #10 are not drawn
    [stub] = [e for e in g.edges if e.off]  # #11's parent (#10) is on another page
    assert stub.d == f"M{by[11].x},{by[11].y - ROW_PX // 2} L{by[11].x},{by[11].y}" and stub.live
