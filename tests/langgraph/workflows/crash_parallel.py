"""Graphs for the tests of a crash in the middle of a super-step of two parallel nodes
(``HAZEL_WORKFLOWS=tests.langgraph.workflows.crash_parallel``): ``fast`` finishes at once, ``slow`` blocks while
the file ``block`` exists in ``$CRASHY_DIR`` (so that a test can SIGKILL the process in the middle of it, after
``fast``'s writes are stored), then ``review`` asks (``steer()``).

- ``crash-first``: ``fast + slow`` is the graph's first super-step;
- ``crash-one``: ``first`` alone before it (a rewind with values forks its checkpoint: ``update_state``);
- ``crash-two``: ``notes + facts`` before it (two nodes wrote the checkpoint: a rewind copies it).

Every node appends its name (``slow``: ``slow-start`` and ``slow-end``) to ``$CRASHY_DIR/effects.log``, the
directory read when the node runs, so that one process can drive runs into several directories."""

from __future__ import annotations

import operator
import os
import time
from pathlib import Path
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from hazel.langgraph import register, steer


class Tally(TypedDict, total=False):
    total: int
    trail: Annotated[list[str], operator.add]


def _dir() -> Path:
    return Path(os.environ.get("CRASHY_DIR", "."))


def _record(name: str) -> None:
    with open(_dir() / "effects.log", "a", encoding="utf-8") as fh:
        fh.write(f"{name}\n")


def _plain(name: str):  # noqa: ANN202
    def node(state: Tally) -> dict:
        _record(name)
        return {"trail": [name]}
    node.__name__ = name
    return node


def fast(state: Tally) -> dict:
    _record("fast")
    return {"trail": ["fast"]}


def slow(state: Tally) -> dict:
    _record("slow-start")
    (_dir() / "slow.started").touch()
    while (_dir() / "block").exists():
        time.sleep(0.02)
    _record("slow-end")
    return {"trail": ["slow"]}


def review(state: Tally) -> dict:
    _record("review")
    return {"trail": [f"review {steer(title='Check the tally', show=state.get('total'))['action']}"]}


def crash_graph(before: list[str]):  # noqa: ANN201
    """``START -> before (one super-step) -> fast + slow -> review -> END``."""
    g = StateGraph(Tally)
    for node in (fast, slow, review, *(_plain(name) for name in before)):
        g.add_node(node.__name__, node)
    for name in before:
        g.add_edge(START, name)
    source = before if len(before) > 1 else (before[0] if before else START)  # a list: a join of them all
    for name in ("fast", "slow"):
        g.add_edge(source, name)
    g.add_edge(["fast", "slow"], "review")
    g.add_edge("review", END)
    return g.compile()


FIRST = register(crash_graph([]), name="crash-first")
ONE = register(crash_graph(["first"]), name="crash-one")
TWO = register(crash_graph(["notes", "facts"]), name="crash-two")
