"""The checkpoint tree as a graph (a "git log --graph" drawn in SVG): one row per checkpoint in sequence
order, one lane per branch (a lane is reused once its branch has ended), a curve from the checkpoint a rewind
forked from to the first checkpoint of the new branch. Checkpoints off the head's line (abandoned branches)
are drawn faint; steering points are diamonds; the head is ringed. A page of a long run's tree draws part of
it (``bot.inbound.web.history``): an empty row where it leaves checkpoints out, and a short dashed stroke into a
checkpoint whose parent is not on the page.

Pure layout: no store, no engine; the page template draws what ``layout`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.models import REWIND_NODE, START, CheckpointInfo, Decision, SteeringRequest, line_of

ROW_PX = 56
"""Height of one row of the tree (the SVG and the HTML rows share it)."""
LANE_PX = 18
PAD_PX = 12


@dataclass(frozen=True)
class Node:
    """One checkpoint as drawn: ``row`` and ``lane`` place it; ``kind`` is ``start``, ``step``, ``steer``
    or ``rewind``; ``live`` when it is on the head's line; ``decisions``: the settling decision and, for a
    quorum, every vote of its request (oldest first)."""

    cp: CheckpointInfo
    row: int
    lane: int
    kind: str
    live: bool
    head: bool
    decisions: tuple[Decision, ...]

    @property
    def x(self) -> int:
        return PAD_PX + self.lane * LANE_PX

    @property
    def y(self) -> int:
        return self.row * ROW_PX + ROW_PX // 2


@dataclass(frozen=True)
class Edge:
    """An SVG path ``d`` from a parent to its child; ``live`` when both are on the head's line; ``off``: the
    parent is not drawn (a stroke from the top of the child's row)."""

    d: str
    live: bool
    fork: bool
    off: bool = False


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    width_px: int
    height_px: int
    row_px: int = ROW_PX


def _kind(cp: CheckpointInfo, points: set[str]) -> str:
    if cp.step == START:
        return "start"
    if cp.step == REWIND_NODE:
        return "rewind"
    return "steer" if cp.step in points or cp.decision_id is not None else "step"


def layout(checkpoints: list[CheckpointInfo], *, head_seq: int, decisions: list[Decision],
           points: set[str] = frozenset(), line: set[int] | None = None,  # type: ignore[assignment]
           gaps_before: set[int] = frozenset()) -> Graph:  # type: ignore[assignment]
    """The drawing of ``checkpoints`` (every branch, or a page of them; any order) with the run's ``decisions``;
    ``points``: the workflow's steering point names. ``line``: the checkpoints on the head's line
    (``store.models.line_of`` of the whole history), for a page that does not hold that whole line; None: walked
    through ``checkpoints``. ``gaps_before``: checkpoints drawn after an empty row (where a page leaves some
    out)."""
    cps = sorted(checkpoints, key=lambda c: c.seq)
    row_of: dict[int, int] = {}
    for c in cps:
        row_of[c.seq] = len(row_of) + sum(1 for g in gaps_before if g <= c.seq)
    live = line_of(cps, head_seq) if line is None else line
    # a lane per branch, from the row it forks at to its last row; reused when free again
    span: dict[int, list[int]] = {}
    for c in cps:
        start = row_of.get(c.parent_seq, row_of[c.seq]) if c.parent_seq is not None else row_of[c.seq]
        if c.branch not in span:
            span[c.branch] = [start, row_of[c.seq]]
        span[c.branch][1] = row_of[c.seq]
    lane_of: dict[int, int] = {}
    lane_end: list[int] = []
    for branch, (start, end) in sorted(span.items(), key=lambda kv: (kv[1][0], kv[0])):
        free = next((i for i, e in enumerate(lane_end) if e < start), None)
        if free is None:
            lane_end.append(end)
            free = len(lane_end) - 1
        lane_end[free] = end
        lane_of[branch] = free
    decision_by_id = {d.id: d for d in decisions}
    votes: dict[int, list[Decision]] = {}
    for d in decisions:
        if d.request_id is not None:
            votes.setdefault(d.request_id, []).append(d)
    nodes: dict[int, Node] = {}
    for c in cps:
        settling = decision_by_id.get(c.decision_id) if c.decision_id is not None else None
        shown = tuple(votes.get(settling.request_id, [settling])) if settling is not None and \
            settling.request_id is not None and settling.action.value != "rewind" else \
            ((settling,) if settling is not None else ())
        nodes[c.seq] = Node(cp=c, row=row_of[c.seq], lane=lane_of[c.branch], kind=_kind(c, set(points)),
                            live=c.seq in live, head=c.seq == head_seq, decisions=shown)
    edges = []
    for c in cps:
        if c.parent_seq is None:
            continue
        b = nodes[c.seq]
        if c.parent_seq not in nodes:  # its parent is on another page (or was pruned)
            edges.append(Edge(d=f"M{b.x},{b.y - ROW_PX // 2} L{b.x},{b.y}", live=b.live, fork=False, off=True))
            continue
        a = nodes[c.parent_seq]
        if a.lane == b.lane:
            d = f"M{a.x},{a.y} L{b.x},{b.y}"
        else:  # curve out of the parent into the new lane, then straight down to the child
            bend = a.y + ROW_PX // 2
            d = f"M{a.x},{a.y} C{a.x},{bend} {b.x},{a.y} {b.x},{bend} L{b.x},{b.y}"
        edges.append(Edge(d=d, live=a.live and b.live, fork=a.lane != b.lane or c.step == REWIND_NODE))
    lanes = max(len(lane_end), 1)
    rows = max(row_of.values(), default=0) + 1
    return Graph(nodes=tuple(nodes[c.seq] for c in cps), edges=tuple(edges),
                 width_px=2 * PAD_PX + (lanes - 1) * LANE_PX, height_px=rows * ROW_PX)


def waiting_at(requests: list[SteeringRequest]) -> dict[int, SteeringRequest]:
    """Pending requests by the checkpoint they were asked at (the head of a waiting run)."""
    return {r.checkpoint_seq: r for r in requests if r.status.value == "pending"}
