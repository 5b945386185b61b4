"""A graph for the LangGraph crash test: every node records itself in a side-effect log; ``slow`` blocks while
the block file exists (so the test can SIGKILL the process in the middle of it) beside ``fast``, which finishes
in the same super-step; then a review by ``steer()`` and ``last``."""

from __future__ import annotations

import operator
import os
import time
from pathlib import Path
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from hazel.langgraph import register, steer

DIR = Path(os.environ.get("CRASHY_DIR", "."))


class Tally(TypedDict, total=False):
    total: int
    trail: Annotated[list[str], operator.add]


def _record(name: str) -> None:
    with open(DIR / "effects.log", "a", encoding="utf-8") as fh:
        fh.write(f"{name}\n")


def first(state: Tally) -> dict:
    _record("first")
    return {"total": state.get("total", 0) + 1, "trail": ["first"]}


def fast(state: Tally) -> dict:
    _record("fast")
    return {"trail": ["fast"]}


def slow(state: Tally) -> dict:
    _record("slow-start")
    (DIR / "slow.started").touch()
    while (DIR / "block").exists():
        time.sleep(0.05)
    _record("slow-end")
    return {"trail": ["slow"]}


def review(state: Tally) -> dict:
    _record("review")
    answer = steer(title="Check the tally", show=state["total"])
    return {"trail": [f"review {answer['action']}"]}


def last(state: Tally) -> dict:
    _record("last")
    return {"total": state["total"] * 10, "trail": ["last"]}


g = StateGraph(Tally)
for node in (first, fast, slow, review, last):
    g.add_node(node.__name__, node)
g.add_edge(START, "first")
g.add_edge("first", "fast")
g.add_edge("first", "slow")
g.add_edge(["fast", "slow"], "review")
g.add_edge("review", "last")
g.add_edge("last", END)
register(g.compile(), name="crashy-graph", version=1)
