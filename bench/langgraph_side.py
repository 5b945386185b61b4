"""Item 8: the same workloads on LangGraph (when the ``bench`` extra is installed).

The graph mirrors Hazel's: ``StateGraph`` over ``items: Annotated[list[str], operator.add]`` (LangGraph's usual
way to append to a list), one node per step appending ``step_text(i)``, compiled with ``SqliteSaver`` (WAL as
its ``setup()`` sets, plus ``synchronous=FULL`` like Hazel's default) or ``PostgresSaver``. Every invocation
uses ``durability="sync"``: each checkpoint is written before the next step starts, which is what Hazel
guarantees. Pause and resume use ``interrupt()`` in the review node and ``Command(resume=...)``; resume latency
runs from the call of ``invoke(Command(resume=...))`` (LangGraph records the answer inside that call) to the
start of the node after the review. History is ``get_state_history`` (it returns each checkpoint's values; Hazel's
``checkpoints`` returns metadata only); rewind is ``invoke(None, config_of_checkpoint_100)`` with
``interrupt_after`` the one node it runs, the median of one rewind on each of ``REWIND_SAMPLES`` runs.
"""

from __future__ import annotations

import gc
import operator
import sqlite3
import time
import uuid
from contextlib import contextmanager
from statistics import median
from typing import Annotated, Any, Iterator, TypedDict

from bench.databases import LANGGRAPH_TABLES, file_size_bytes
from bench.hazel_side import REWIND_SAMPLES, WARM_UP_STEPS, HistoryCost, StepCost, cost_of
from bench.pause_resume import PauseResume, _summary
from bench.workload import PAUSE_STEPS, RESUMED_STEP, step_text


def available() -> str | None:
    """None when LangGraph and both savers import, else what is missing."""
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
        import langgraph.checkpoint.sqlite  # noqa: F401
        import langgraph.graph  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or exc} not installed (pip install -e '.[bench]')"
    return None


class LGState(TypedDict):
    items: Annotated[list[str], operator.add]


@contextmanager
def saver_for(backend, tag: str) -> Iterator[tuple[Any, str]]:  # noqa: ANN001
    """A set-up checkpointer on a fresh database of ``backend``; yields ``(saver, url)``."""
    if backend.name == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        url = backend.fresh_url(f"langgraph-{tag}", migrate=False)
        conn = sqlite3.connect(backend.file_of(url), check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            conn.execute("PRAGMA synchronous=FULL")
            yield saver, url
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        url = backend.fresh_url(f"langgraph-{tag}")
        with PostgresSaver.from_conn_string(backend.conninfo) as saver:
            saver.setup()
            yield saver, url


def _size(backend, url: str) -> int:  # noqa: ANN001
    return backend.size_bytes(url, LANGGRAPH_TABLES)


def _recorder(name: str, i: int, starts: list[float] | None, on_start=None):  # noqa: ANN001, ANN202
    text = step_text(i)

    def node(state: LGState) -> dict[str, list[str]]:
        if starts is not None:
            starts.append(time.perf_counter())
        if on_start is not None:
            on_start()
        return {"items": [text]}

    node.__name__ = name
    return node


def linear_graph(n_steps: int, starts: list[float] | None):  # noqa: ANN201
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(LGState)
    previous = START
    for i in range(n_steps):
        name = f"s{i:04d}"
        builder.add_node(name, _recorder(name, i, starts))
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


def _config(thread_id: str, n_steps: int = 10) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": n_steps + 20}


def checkpoint_cost(backend, n_steps: int, *, measure_storage: bool = False) -> StepCost:  # noqa: ANN001
    starts: list[float] = []
    with saver_for(backend, "linear") as (saver, url):
        graph = linear_graph(n_steps, starts).compile(checkpointer=saver)
        warm_up = linear_graph(WARM_UP_STEPS, None).compile(checkpointer=saver)  # as Hazel's warm-up run
        gc.collect()  # as Hazel's side, before the warm-up (bench.hazel_side.checkpoint_cost)
        warm_up.invoke({"items": []}, _config("warm-up", WARM_UP_STEPS), durability="sync")
        before = _size(backend, url) if measure_storage and backend.name != "sqlite" else 0
        if measure_storage and backend.name == "sqlite":
            before = file_size_bytes(backend.file_of(url))
        thread = uuid.uuid4().hex
        graph.invoke({"items": []}, _config(thread, n_steps), durability="sync")
        count = sum(1 for _ in saver.list(_config(thread)))
    per_checkpoint = None
    if measure_storage:
        per_checkpoint = (_size(backend, url) - before) / count
    return cost_of(starts, per_checkpoint)


def pause_graph(on_resumed):  # noqa: ANN001, ANN201
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    builder = StateGraph(LGState)
    previous = START
    for i, name in enumerate(PAUSE_STEPS):
        builder.add_node(name, _recorder(name, i, None))
        builder.add_edge(previous, name)
        previous = name

    def review(state: LGState) -> dict[str, list[str]]:
        interrupt({"title": "Bench review"})
        return {"items": []}

    builder.add_node("review", review)
    builder.add_edge(previous, "review")
    builder.add_node(RESUMED_STEP, _recorder(RESUMED_STEP, len(PAUSE_STEPS), None, on_resumed))
    builder.add_edge("review", RESUMED_STEP)
    builder.add_edge(RESUMED_STEP, END)
    return builder


def pause_resume(backend, n_runs: int) -> PauseResume:  # noqa: ANN001
    from langgraph.types import Command

    resumed_at: list[float] = []
    with saver_for(backend, "pause") as (saver, _url):
        graph = pause_graph(lambda: resumed_at.append(time.monotonic())).compile(checkpointer=saver)
        warm_up = _config(uuid.uuid4().hex)  # paused and resumed untimed, as Hazel's side does
        graph.invoke({"items": []}, warm_up, durability="sync")
        graph.invoke(Command(resume="approve"), warm_up, durability="sync")
        threads = [uuid.uuid4().hex for _ in range(n_runs)]
        started = time.monotonic()
        for thread in threads:
            out = graph.invoke({"items": []}, _config(thread), durability="sync")
            assert "__interrupt__" in out, out
        pause_sec = time.monotonic() - started
        latencies = []
        started = time.monotonic()
        for thread in threads:
            decided = time.monotonic()
            graph.invoke(Command(resume="approve"), _config(thread), durability="sync")
            latencies.append((resumed_at[-1] - decided) * 1e3)
        resume_sec = time.monotonic() - started
    return _summary(n_runs, pause_sec, resume_sec, latencies)


def history_and_rewind(backend, n_steps: int = 200, rewind_to: int = 100,  # noqa: ANN001
                       samples: int = REWIND_SAMPLES) -> HistoryCost:
    """Item 6 as Hazel's side measures it (``bench.hazel_side.history_and_rewind``): ``samples`` completed
    runs, the history of the first, and the median of one rewind on each (``invoke`` from checkpoint
    ``rewind_to`` until its next node has run: ``interrupt_after``)."""
    with saver_for(backend, "history") as (saver, _url):
        _history_warm_up(saver)
        graph = linear_graph(n_steps, None).compile(checkpointer=saver)
        configs = [_config(uuid.uuid4().hex, n_steps) for _ in range(samples)]
        for config in configs:
            graph.invoke({"items": []}, config, durability="sync")
        started = time.perf_counter()
        history = list(graph.get_state_history(configs[0]))
        history_ms = (time.perf_counter() - started) * 1e3
        rewinds_ms = []
        for config in configs:
            target = next(s for s in (history if config is configs[0] else graph.get_state_history(config))
                          if len(s.values.get("items", [])) == rewind_to and s.next)
            started = time.perf_counter()
            graph.invoke(None, {**target.config, "recursion_limit": n_steps + 20}, durability="sync",
                         interrupt_after=list(target.next))
            rewinds_ms.append((time.perf_counter() - started) * 1e3)
    return HistoryCost(history_ms, median(rewinds_ms))


def _history_warm_up(saver) -> None:  # noqa: ANN001
    """The history and rewind calls once on a short run, as Hazel's side does."""
    graph = linear_graph(WARM_UP_STEPS, None).compile(checkpointer=saver)
    config = _config("warm-up-history", WARM_UP_STEPS)
    graph.invoke({"items": []}, config, durability="sync")
    history = list(graph.get_state_history(config))
    target = next(s for s in history if len(s.values.get("items", [])) == WARM_UP_STEPS // 2 and s.next)
    graph.invoke(None, {**target.config, "recursion_limit": WARM_UP_STEPS + 20}, durability="sync",
                 interrupt_after=list(target.next))
