"""The tree's layout (lanes, forks, the head's line) and the field-by-field diff, on hand-made data."""

from __future__ import annotations

from datetime import datetime, timezone

from bot.inbound.web.diff import line_diff, state_diff
from bot.inbound.web.graph import layout
from store.models import REWIND_NODE, START, CheckpointInfo

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def cp(seq: int, parent: int | None, branch: int, step: str = "draft") -> CheckpointInfo:
    return CheckpointInfo(run_id="r", seq=seq, parent_seq=parent, branch=branch, step=step, next_step="review",
                          workflow_version=1, created_at=NOW, is_snapshot=True, stored_bytes=1)


def test_layout_puts_each_live_branch_in_its_lane_and_marks_the_head_line() -> None:
    # 0 - 1 - 2 - 3           (branch 0, abandoned after #3)
    #      \- 4 - 5           (branch 1: a rewind to #1, abandoned)
    #              \- 6 - 7   (branch 2: a rewind to #5, the head)
    cps = [cp(0, None, 0, START), cp(1, 0, 0), cp(2, 1, 0, "review"), cp(3, 2, 0), cp(4, 1, 1, REWIND_NODE),
           cp(5, 4, 1), cp(6, 5, 2, REWIND_NODE), cp(7, 6, 2)]
    g = layout(list(reversed(cps)), head_seq=7, decisions=[], points={"review"})
    by = {n.cp.seq: n for n in g.nodes}
    assert [n.cp.seq for n in g.nodes] == list(range(8))
    assert {s for s, n in by.items() if n.live} == {0, 1, 4, 5, 6, 7}
    assert [by[s].lane for s in range(8)] == [0, 0, 0, 0, 1, 1, 0, 0]  # lane 0 is free again after #3
    assert by[7].head and not any(n.head for s, n in by.items() if s != 7)
    assert (by[0].kind, by[2].kind, by[4].kind, by[3].kind) == ("start", "steer", "rewind", "step")
    assert sum(e.fork for e in g.edges) == 2 and len(g.edges) == 7
    assert g.height_px == 8 * g.row_px and g.width_px > 2 * 18


def test_a_lane_is_reused_once_its_branch_has_ended() -> None:
    # branch 1 forks from #1 and ends at #3; branch 2 forks from #4 (after #3): it reuses lane 1
    cps = [cp(0, None, 0, START), cp(1, 0, 0), cp(2, 1, 1, REWIND_NODE), cp(3, 2, 1), cp(4, 1, 0),
           cp(5, 4, 2, REWIND_NODE)]
    lanes = {n.cp.seq: n.lane for n in layout(cps, head_seq=5, decisions=[]).nodes}
    assert lanes == {0: 0, 1: 0, 2: 1, 3: 1, 4: 0, 5: 1}


def test_state_diff_field_by_field_with_line_diffs_of_text() -> None:
    old = {"topic": "backups", "plan": "step one\nstep two\nstep three\n", "n": 1, "gone": True}
    new = {"topic": "backups", "plan": "step one\nstep 2\nstep three\n", "n": 2, "added": [1, 2]}
    fields = {f.name: f for f in state_diff(old, new)}
    assert {k: f.status for k, f in fields.items()} == {"topic": "same", "plan": "changed", "n": "changed",
                                                         "added": "added", "gone": "removed"}
    lines = [(line.tag, line.old, line.new, line.text) for line in fields["plan"].hunks[0]]
    assert lines == [("same", 1, 1, "step one"), ("del", 2, None, "step two"), ("add", None, 2, "step 2"),
                     ("same", 3, 3, "step three")]
    assert fields["plan"].counts == (1, 1) and fields["added"].counts == (0, 4)  # JSON, indented


def test_line_diff_keeps_three_lines_of_context_per_hunk() -> None:
    old = "\n".join(f"line {i}" for i in range(20))
    new = old.replace("line 2\n", "line two\n").replace("line 17", "line seventeen")
    hunks = line_diff(old, new)
    assert len(hunks) == 2 and [line.text for line in hunks[0] if line.tag == "same"][-1] == "line 5"
