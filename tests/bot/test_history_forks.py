"""The checkpoint tree after two rewinds (``hazel history``, Slack's ``/hazel history`` text, the run page's
graph): every fork is its own branch off the checkpoint it forked from, the old branches kept; a rewind to the
last checkpoint of an abandoned branch is a fork too, not a continuation of that branch."""

from __future__ import annotations

import re

from bot.inbound.web.graph import layout
from integrations.slack.replies import history_text


def _nested_under(tree: str, label: str, line_start: str) -> bool:
    """True when the line starting (after the tree's drawing) with ``line_start`` sits one level below the
    line holding ``label`` (its indentation is deeper) and right after it."""
    lines = tree.splitlines()
    at = next(i for i, x in enumerate(lines) if label in x)
    below = lines[at + 1]
    depth = len(re.match(r"^[│├└─ ]*", lines[at]).group(0))
    return re.sub(r"^[│├└─ ]*", "", below).startswith(line_start) and len(re.match(r"^[│├└─ ]*", below).group(0)) > depth


def test_a_second_rewind_to_an_abandoned_branch_end_is_its_own_branch(cli) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "caching"}')["run"]["id"]
    cli("approve", run_id, "--at", "review")            # #2 review approve, #3 publish → end (branch 0)
    cli("rewind", run_id, "--to", "1")                   # #4 rewind to #1 (branch 1), waiting at review
    cli("rewind", run_id, "--to", "3")                   # #5 rewind to #3: the end of branch 0 (branch 2)
    hist = cli.json("history", run_id)["checkpoints"]
    by_seq = {c["seq"]: c for c in hist}
    assert (by_seq[5]["parent_seq"], by_seq[5]["branch"]) == (3, 2)

    tree = cli("history", run_id).stdout
    assert "fork from #1 → branch 1" in tree
    assert "fork from #3 → branch 2" in tree, tree       # was: #5 drawn on under #3, as branch 0 going on
    assert _nested_under(tree, "fork from #3 → branch 2", "#5 ↩ rewind to #3"), tree
    assert _nested_under(tree, "fork from #1 → branch 1", "#4 ↩ rewind to #1"), tree
    assert "#3 publish → end" in tree and "#2 review approve" in tree  # the old branch is kept
    assert "branch 0, on from #1" in tree and "→ branch 0" not in tree, tree  # the original line is no fork
    assert _nested_under(tree, "branch 0, on from #1", "#2 review approve"), tree

    from bot.engine import Hazel
    from bot.settings import Settings
    from store.models import CheckpointInfo, Run

    hz = Hazel(Settings(), load_workflows=True)
    try:
        run = hz.get(run_id=run_id)
        cps = hz.checkpoints(run_id=run_id)
        decisions = hz.decisions(run_id=run_id)
        assert isinstance(run, Run) and all(isinstance(c, CheckpointInfo) for c in cps)
        text = history_text(run, cps, decisions)
        lines = text.splitlines()
        fork = next(i for i, x in enumerate(lines) if "_fork from #3 → branch 2_" in x)
        assert "#5 ↩ rewind" in lines[fork + 1] and len(lines[fork + 1]) - len(lines[fork + 1].lstrip("\u2003")) > \
            len(lines[fork]) - len(lines[fork].lstrip("\u2003")), text
        assert "_branch 0, on from #1_" in text and "→ branch 0_" not in text, text  # the original line: no fork

        drawn = layout(cps, head_seq=run.head_seq, decisions=decisions)
        lanes = {n.cp.seq: n.lane for n in drawn.nodes}
        assert lanes[5] != lanes[3] and lanes[4] != lanes[1]  # each fork in a lane of its own
    finally:
        hz.close()
