"""``HazelSaver`` as LangGraph uses it, on SQLite and PostgreSQL: what it stores (changes since the parent, with
snapshots), that every checkpoint reads back whole (from a new saver, across forks, after deleting, pruning
and copying the rows its changes hang on), and graphs paused by ``interrupt()`` resumed through it, sync and
async."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
import operator
from datetime import datetime, timezone
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from sqlalchemy import event, select

from hazel.langgraph import AsyncHazelSaver, HazelSaver
from store import Store
from store.checkpoints import SnapshotPolicy
from store.schema import lg_checkpoints
from tests.langgraph.graphs import chain


def run_async(coro):  # noqa: ANN001, ANN201
    """``asyncio.run(coro)`` in a thread of its own: another test of the session may have left an event loop
    running in this one (Playwright's sync API does), and ``asyncio.run`` refuses to start inside it."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class S(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    note: str
    stamp: datetime
    blob: bytes
    messages: Annotated[list, add_messages]


def chain_graph(n: int):  # noqa: ANN201
    """n nodes in a row; node i appends an item, rewrites ``note`` (a string that grows), and on every third
    step a message (add_messages) and a bytes value."""
    builder = StateGraph(S)
    previous = START
    for i in range(n):
        def node(state: S, i: int = i) -> dict:
            out: dict = {"items": [f"item {i} " + "x" * 200], "note": state.get("note", "") + f"<{i}>"}
            if i % 3 == 0:
                out["messages"] = [HumanMessage(content=f"m{i}", id=f"m{i}")]
                out["blob"] = bytes([i % 256]) * 10
                out["stamp"] = datetime(2026, 1, 1, i % 24, tzinfo=timezone.utc)
            return out
        builder.add_node(f"n{i}", node)
        builder.add_edge(previous, f"n{i}")
        previous = f"n{i}"
    builder.add_edge(previous, END)
    return builder


def cfg(thread: str, n: int = 10) -> dict:
    return {"configurable": {"thread_id": thread}, "recursion_limit": n + 10}


def expected_after(k: int) -> dict:
    """The state after nodes 0..k-1 ran."""
    out: dict = {"items": [f"item {i} " + "x" * 200 for i in range(k)], "note": "".join(f"<{i}>" for i in range(k))}
    last3 = [i for i in range(k) if i % 3 == 0]
    if last3:
        out["messages"] = [HumanMessage(content=f"m{i}", id=f"m{i}") for i in last3]
        out["blob"] = bytes([last3[-1] % 256]) * 10
        out["stamp"] = datetime(2026, 1, 1, last3[-1] % 24, tzinfo=timezone.utc)
    return out


def rows(url: str, thread: str) -> list[dict]:
    store = Store(url)
    try:
        with store.read() as tx:
            return [dict(r._mapping) for r in tx.conn.execute(
                select(lg_checkpoints.c.checkpoint_id, lg_checkpoints.c.parent_checkpoint_id,
                       lg_checkpoints.c.chain_len, lg_checkpoints.c.stored_bytes)
                .where(lg_checkpoints.c.thread_id == thread).order_by(lg_checkpoints.c.checkpoint_id))]
    finally:
        store.dispose()


def assert_history_whole(saver: HazelSaver, thread: str, n: int) -> list:
    """Every checkpoint of the thread reads back as the state after the nodes before it (through ``list`` and,
    from a cold saver, through ``get_tuple``)."""
    graph = chain_graph(n).compile(checkpointer=saver)
    history = list(graph.get_state_history(cfg(thread, n)))
    assert len(history) == n + 2
    for snap in history:
        k = len(snap.values.get("items", []))
        if k:  # (the input checkpoint and the first one hold the reducers' empty lists)
            assert snap.values == expected_after(k), k
    [newest] = saver.list({"configurable": {"thread_id": thread}}, limit=1)  # its chain's rows read with it
    assert newest.checkpoint["channel_values"]["items"] == history[0].values["items"]
    saver._cache.clear()
    for snap in history[::7]:
        tup = saver.get_tuple(snap.config)
        assert tup is not None and tup.checkpoint["channel_values"].get("items", []) == snap.values.get("items", [])
    return history


def test_a_run_stores_changes_and_reads_back_every_checkpoint_whole(db_url: str) -> None:
    n = 40
    with HazelSaver.from_conn_string(db_url) as saver:
        graph = chain_graph(n).compile(checkpointer=saver)
        out = graph.invoke({}, cfg("t1", n), durability="sync")
        assert out == expected_after(n)
        stored = rows(db_url, "t1")
        assert len(stored) == n + 2
        deltas = [r for r in stored if r["chain_len"] > 0]
        assert len(deltas) >= n - 5  # a few snapshots while the state is small, then changes
        # a change holds the new item (~200 bytes), the grown note's end and a small patch; the last snapshot
        # holds everything: the bytes follow the change, not the state
        assert max(r["stored_bytes"] for r in deltas) < 1500
        assert sum(r["stored_bytes"] for r in stored) < 0.25 * n * (n * 220) / 2
        assert_history_whole(saver, "t1", n)
        # a cold saver (another process) continues the thread: its first put is a snapshot, then changes
        with HazelSaver.from_conn_string(db_url) as cold:
            graph2 = chain_graph(n).compile(checkpointer=cold)
            graph2.update_state(cfg("t1"), {"items": ["more"]})
            graph2.update_state(cfg("t1"), {"items": ["and more"]})
            values = graph2.get_state(cfg("t1")).values
        assert values["items"][-2:] == ["more", "and more"] and len(values["items"]) == n + 2
        # (it read the head first, as LangGraph does before writing: its writes are changes of it)
        last3 = [r["chain_len"] for r in rows(db_url, "t1")[-3:]]
        assert last3[0] > 0 and last3 == [last3[0], last3[0] + 1, last3[0] + 2]
        # a put whose parent the saver has not read is a snapshot; the next one a change of it
        with HazelSaver.from_conn_string(db_url) as cold:
            head = cold.get_tuple(cfg("t1"))
            cold._cache.clear()
            child = _put(cold, "t1", head.config, {"items": ["x"]}, run_id="r", step=99)
            _put(cold, "t1", child, {"items": ["x", "y"]}, run_id="r", step=100)
        assert [r["chain_len"] for r in rows(db_url, "t1")[-2:]] == [0, 1]


def test_a_thread_id_or_namespace_holding_a_nul_is_refused_before_any_sql(db_url: str) -> None:
    with HazelSaver.from_conn_string(db_url) as saver:
        graph = chain_graph(2).compile(checkpointer=saver)
        graph.invoke({}, cfg("ok", 2), durability="sync")
        with pytest.raises(ValueError, match=r"^thread_id holds a NUL character \(\\x00\), which Hazel's database"):
            graph.invoke({}, cfg("t\x00x", 2), durability="sync")
        with pytest.raises(ValueError, match="^thread_id holds a NUL"):
            list(saver.list(cfg("t\x00x")))
        with pytest.raises(ValueError, match="^checkpoint_ns holds a NUL"):
            saver.get_tuple({"configurable": {"thread_id": "ok", "checkpoint_ns": "n\x00"}})
        assert len(rows(db_url, "ok")) == 4 and rows(db_url, "t") == [] and list(saver.list(cfg("t"))) == []
        # every other method too (s22 F3: psycopg's DataError quoting the SQL on PostgreSQL, nothing on SQLite)
        for call, name in [(lambda: saver.delete_thread("a\x00b"), "thread_id"),
                           (lambda: saver.copy_thread("a\x00b", "c"), "thread_id"),
                           (lambda: saver.copy_thread("ok", "a\x00"), "thread_id"),
                           (lambda: saver.prune(["a\x00"]), "thread_id"),
                           (lambda: saver.delete_for_runs(["r\x00"]), "run_id"),
                           (lambda: list(saver.list({"configurable": {"thread_id": "ok", "checkpoint_ns": "\x00"}})),
                            "checkpoint_ns"),
                           (lambda: list(saver.list(None, filter={"k": ["v\x00"]})), "filter")]:
            with pytest.raises(ValueError, match=f"^{name} holds a NUL character"):
                call()
        assert len(rows(db_url, "ok")) == 4


def test_the_snapshot_policy_bounds_every_chain(db_url: str) -> None:
    n = 30
    policy = SnapshotPolicy(max_chain=4, delta_ratio=1000.0)
    with HazelSaver.from_conn_string(db_url, snapshot_policy=policy) as saver:
        chain_graph(n).compile(checkpointer=saver).invoke({}, cfg("t", n), durability="sync")
        lens = [r["chain_len"] for r in rows(db_url, "t")]
        assert max(lens) == 4 and lens.count(0) >= n // 5
        assert_history_whole(saver, "t", n)


def test_a_fork_from_an_old_checkpoint_reads_both_branches_whole(db_url: str) -> None:
    n = 12
    with HazelSaver.from_conn_string(db_url) as saver:
        graph = chain_graph(n).compile(checkpointer=saver)
        graph.invoke({}, cfg("t", n), durability="sync")
        target = next(s for s in graph.get_state_history(cfg("t", n)) if len(s.values.get("items", [])) == 5)
        forked = graph.update_state(target.config, {"items": ["fork"]})
        graph.invoke(None, {**forked, "recursion_limit": n + 10}, durability="sync")
        head = graph.get_state(cfg("t")).values
        assert head["items"][:6] == expected_after(5)["items"] + ["fork"] and len(head["items"]) == n + 1
        saver._cache.clear()
        assert saver.get_tuple(cfg("t")).checkpoint["channel_values"]["items"] == head["items"]
        old_branch = [s for s in graph.get_state_history(cfg("t", n)) if "fork" not in s.values.get("items", [])]
        for snap in old_branch:
            if snap.values.get("items"):
                assert snap.values == expected_after(len(snap.values["items"]))


def _put(saver: HazelSaver, thread: str, parent: dict | None, values: dict, *, run_id: str, step: int) -> dict:
    """A checkpoint put as LangGraph does: a child of ``parent`` with the given channel values."""
    versions = {k: saver.get_next_version(None, None) for k in values}
    checkpoint = {"v": 4, "id": str(uuid6(clock_seq=step)), "ts": datetime.now(timezone.utc).isoformat(),
                  "channel_values": values, "channel_versions": versions, "versions_seen": {}, "updated_channels": None}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": "",
                               **({"checkpoint_id": parent["configurable"]["checkpoint_id"]} if parent else {})}}
    return saver.put(config, checkpoint, {"source": "loop", "step": step, "run_id": run_id}, versions)


def _chain(saver: HazelSaver, thread: str, runs: list[str]) -> list[dict]:
    configs, parent, items = [], None, []
    for step, run in enumerate(runs):
        items = items + [f"{run}-{step}"]
        parent = _put(saver, thread, parent, {"items": items, "n": step}, run_id=run, step=step)
        configs.append(parent)
    return configs


def _items(saver: HazelSaver, config: dict) -> list[str] | None:
    saver._cache.clear()
    tup = saver.get_tuple(config)
    return None if tup is None else tup.checkpoint["channel_values"]["items"]


def test_deleting_a_run_rewrites_the_checkpoints_that_hang_on_it(db_url: str) -> None:
    with HazelSaver.from_conn_string(db_url) as saver:
        configs = _chain(saver, "t", ["r1", "r1", "r1", "r2", "r2"])
        assert [r["chain_len"] for r in rows(db_url, "t")] == [0, 1, 2, 3, 4]
        saver.delete_for_runs(["r1"])
        assert [r["chain_len"] > 0 for r in rows(db_url, "t")] == [False, True]  # the orphan is a snapshot
        assert _items(saver, configs[3]) == ["r1-0", "r1-1", "r1-2", "r2-3"]
        assert _items(saver, configs[4]) == ["r1-0", "r1-1", "r1-2", "r2-3", "r2-4"]
        tup = saver.get_tuple(configs[3])
        assert tup.parent_config is None and tup.metadata["run_id"] == "r2"
        assert _items(saver, configs[0]) is None


def test_pruning_keeps_the_latest_checkpoint_whole(db_url: str) -> None:
    with HazelSaver.from_conn_string(db_url) as saver:
        configs = _chain(saver, "t", ["r"] * 6)
        other = _chain(saver, "u", ["r"] * 3)
        saver.put_writes(configs[-1], [("items", ["pending"])], "task-1")
        saver.prune(["t"], strategy="keep_latest")
        assert [r["chain_len"] for r in rows(db_url, "t")] == [0]
        tup = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert tup.checkpoint["channel_values"] == {"items": [f"r-{i}" for i in range(6)], "n": 5}
        assert tup.parent_config is None and tup.pending_writes == [("task-1", "items", ["pending"])]
        assert _items(saver, other[-1]) == ["r-0", "r-1", "r-2"]


def test_a_copied_thread_reads_back_whole_and_continues(db_url: str) -> None:
    with HazelSaver.from_conn_string(db_url) as saver:
        configs = _chain(saver, "src", ["r"] * 5)
        saver.copy_thread("src", "dst")
        dst = [t.checkpoint["channel_values"]["items"] for t in saver.list({"configurable": {"thread_id": "dst"}})]
        assert dst == [[f"r-{i}" for i in range(k)] for k in range(5, 0, -1)]
        saver.delete_thread("src")
        head = {"configurable": {"thread_id": "dst", "checkpoint_ns": "",
                                 "checkpoint_id": configs[-1]["configurable"]["checkpoint_id"]}}
        assert _items(saver, head) == [f"r-{i}" for i in range(5)]


def test_a_parent_deleted_by_another_saver_makes_the_next_checkpoint_a_snapshot(db_url: str) -> None:
    with HazelSaver.from_conn_string(db_url) as saver, HazelSaver.from_conn_string(db_url) as other:
        configs = _chain(saver, "t", ["r1", "r1", "r2"])
        other.delete_for_runs(["r2"])  # the head this saver holds as the base of its next change
        child = _put(saver, "t", configs[-1], {"items": ["r1-0", "r1-1", "r2-2", "r3-3"], "n": 3}, run_id="r3",
                     step=3)
        assert [r["chain_len"] for r in rows(db_url, "t")] == [0, 1, 0]
        assert _items(saver, child) == ["r1-0", "r1-1", "r2-2", "r3-3"]


def test_a_re_put_checkpoint_keeps_its_children_readable(db_url: str) -> None:
    with HazelSaver.from_conn_string(db_url) as saver:
        configs = _chain(saver, "t", ["r"] * 4)
        first = saver.get_tuple(configs[1])
        # the same id again, with other values (LangGraph's savers overwrite): its child was a change of the old
        again = dict(first.checkpoint, channel_values={"items": ["replaced"], "n": -1})
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                    "checkpoint_id": configs[0]["configurable"]["checkpoint_id"]}},
                  again, first.metadata, {})
        assert _items(saver, configs[1]) == ["replaced"]
        assert _items(saver, configs[2]) == ["r-0", "r-1", "r-2"]
        assert _items(saver, configs[3]) == ["r-0", "r-1", "r-2", "r-3"]


def test_a_parent_re_put_by_another_saver_makes_the_next_checkpoint_a_snapshot(db_url: str) -> None:
    """Saver A holds its thread's head as the base of its next change; saver B (another process, or a second
    saver on the database) puts that checkpoint id again with other values. A's next checkpoint must not be a
    change of the values A held read back against B's (it read ``[7, 7, 7, 3]`` for ``[1, 2, 3]``)."""
    with HazelSaver.from_conn_string(db_url) as saver, HazelSaver.from_conn_string(db_url) as other:
        head = _put(saver, "t", None, {"items": [1, 2], "n": 1}, run_id="r", step=1)
        held = saver.get_tuple(head)
        again = dict(held.checkpoint, channel_values={"items": [7, 7, 7], "n": 1})
        other.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, again, held.metadata, {})
        child = _put(saver, "t", head, {"items": [1, 2, 3], "n": 2}, run_id="r", step=2)
        assert [r["chain_len"] for r in rows(db_url, "t")] == [0, 0]  # written whole, not as a change
        grandchild = _put(saver, "t", child, {"items": [1, 2, 3, 4], "n": 3}, run_id="r", step=3)
        assert [r["chain_len"] for r in rows(db_url, "t")] == [0, 0, 1]  # and its own child a change of it
        assert _items(saver, head) == [7, 7, 7]
        assert _items(saver, child) == [1, 2, 3]
        assert _items(saver, grandchild) == [1, 2, 3, 4]


def test_a_value_changed_in_place_after_put_does_not_change_the_next_change() -> None:
    """The base of the next change is the saver's own copy of a list, not the caller's list."""
    from hazel.langgraph.encoding import decode_chain, encode
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from store.lgraph import StoredRow

    serde, policy = JsonPlusSerializer(), SnapshotPolicy()
    items = ["a", "b"]
    cp1 = {"v": 4, "id": "1", "ts": "t1", "channel_values": {"items": items}, "channel_versions": {"items": "1"},
           "versions_seen": {}}
    enc1, pos1 = encode(cp1, None, {"items": "1"}, serde, policy)
    items.append("c")  # the caller keeps appending to the same list object
    cp2 = dict(cp1, id="2", ts="t2", channel_values={"items": items}, channel_versions={"items": "2"})
    enc2, _ = encode(cp2, pos1, {"items": "2"}, serde, policy)

    def row(cid: str, parent: str | None, enc) -> StoredRow:  # noqa: ANN001
        return StoredRow("t", "", cid, parent, enc.chain_len, enc.compressed, enc.payload, enc.channel_type,
                         enc.channel_blob, {})

    assert enc2.chain_len == 1
    assert decode_chain([row("1", None, enc1), row("2", "1", enc2)], serde).values == {"items": ["a", "b", "c"]}


def test_versions_are_ordered_strings_unique_per_call() -> None:
    saver = HazelSaver.__new__(HazelSaver)
    first = HazelSaver.get_next_version(saver, None, None)
    second = HazelSaver.get_next_version(saver, first, None)
    assert first.startswith("0" * 31 + "1.") and second > first
    assert HazelSaver.get_next_version(saver, 7, None).startswith(f"{8:032}.")
    assert HazelSaver.get_next_version(saver, first, None) != second


class Review(TypedDict, total=False):
    draft: str
    answer: str
    log: Annotated[list[str], operator.add]


def review_builder():  # noqa: ANN201
    def write(state: Review) -> dict:
        return {"draft": "v1", "log": ["write"]}

    def review(state: Review) -> dict:
        answer = interrupt({"title": "Approve?", "show": state["draft"]})
        return {"answer": answer, "log": [f"review: {answer}"]}

    def publish(state: Review) -> dict:
        return {"log": ["publish"]}

    builder = StateGraph(Review)
    builder.add_node("write", write)
    builder.add_node("review", review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder


def test_a_sync_graph_paused_by_interrupt_resumes_through_a_new_saver(db_url: str) -> None:
    config = {"configurable": {"thread_id": "review-1"}}
    with HazelSaver.from_conn_string(db_url) as saver:
        out = review_builder().compile(checkpointer=saver).invoke({}, config, durability="sync")
        [pending] = out["__interrupt__"]
        assert pending.value == {"title": "Approve?", "show": "v1"}
    with HazelSaver.from_conn_string(db_url) as saver:  # another process: nothing but the database
        graph = review_builder().compile(checkpointer=saver)
        state = graph.get_state(config)
        assert state.next == ("review",) and state.tasks[0].interrupts[0].value["show"] == "v1"
        out = graph.invoke(Command(resume="approved"), config, durability="sync")
    assert out["log"] == ["write", "review: approved", "publish"] and out["answer"] == "approved"


def test_an_async_graph_paused_by_interrupt_resumes_through_a_new_saver(db_url: str) -> None:
    config = {"configurable": {"thread_id": "review-2"}}

    async def scenario() -> dict:
        async with AsyncHazelSaver.from_conn_string(db_url) as saver:
            out = await review_builder().compile(checkpointer=saver).ainvoke({}, config, durability="sync")
            assert out["__interrupt__"][0].value["show"] == "v1"
        async with AsyncHazelSaver.from_conn_string(db_url) as saver:
            graph = review_builder().compile(checkpointer=saver)
            assert (await graph.aget_state(config)).next == ("review",)
            out = await graph.ainvoke(Command(resume="ok"), config, durability="sync")
            history = [s async for s in graph.aget_state_history(config)]
        assert [len(s.values.get("log", [])) for s in history] == [3, 2, 1, 0, 0]
        return out

    out = run_async(scenario())
    assert out["log"] == ["write", "review: ok", "publish"]


def test_messages_round_trip_through_changes(db_url: str) -> None:
    """add_messages replaces a message with the same id: the list is then no longer a prefix, and is stored
    whole; appends are stored as appended messages."""
    class M(TypedDict):
        messages: Annotated[list, add_messages]

    def a(state: M) -> dict:
        return {"messages": [AIMessage(content="draft", id="x")]}

    def b(state: M) -> dict:
        return {"messages": [AIMessage(content="final", id="x"), HumanMessage(content="thanks", id="y")]}

    builder = chain(M, a, b)
    with HazelSaver.from_conn_string(db_url) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage(content="hi", id="h")]}, cfg("m"), durability="sync")
        saver._cache.clear()
        history = [[(m.id, m.content) for m in s.values["messages"]] for s in graph.get_state_history(cfg("m"))]
    assert history[0] == [("h", "hi"), ("x", "final"), ("y", "thanks")]
    assert history[1] == [("h", "hi"), ("x", "draft")]


@pytest.mark.parametrize("durable", [False, True])
def test_pending_writes_wait_for_the_disk_only_when_asked(db_url: str, durable: bool, monkeypatch) -> None:  # noqa: ANN001
    """``put_writes`` commits without waiting for the disk unless ``durable_writes`` (SQLite: on the store's
    relaxed pool, whose connections are at NORMAL, while checkpoints stay on connections at FULL that never
    switch; PostgreSQL: ``SET LOCAL synchronous_commit TO OFF`` in its transaction only), read from the
    statements the driver executes."""
    statements: list[str] = []
    relaxed: list[str] = []
    sqlite = db_url.startswith("sqlite")
    with HazelSaver.from_conn_string(db_url, durable_writes=durable, pool_size=1) as saver:
        if sqlite:
            def trace(engine, into: list[str]) -> None:  # noqa: ANN001 (before store.db's own PRAGMAs)
                event.listen(engine, "connect", lambda dbapi, _rec: dbapi.set_trace_callback(into.append),
                             insert=True)
                engine.dispose()  # (connections opened from now on are traced)

            trace(saver.store.engine, statements)
            if not durable:
                assert saver.store.relaxed_engine is not saver.store.engine
                trace(saver.store.relaxed_engine, relaxed)
        else:
            import psycopg

            real = psycopg.Cursor.execute
            monkeypatch.setattr(psycopg.Cursor, "execute",
                                lambda self, query, *a, **k: (statements.append(str(query)), real(self, query, *a, **k))[1])
        config = _put(saver, "t", None, {"items": ["a"]}, run_id="r", step=0)
        first = len(statements)
        saver.put_writes(config, [("items", ["b"])], "task")
        second = len(statements)
        _put(saver, "t", config, {"items": ["a", "b"]}, run_id="r", step=1)
    writes, put = statements[first:second], statements[second:]
    assert any("hazel_lg_checkpoints" in q for q in put)
    if sqlite:
        assert not any("synchronous=NORMAL" in q for q in statements), statements  # checkpoints: FULL, always
        if durable:
            assert any("hazel_lg_writes" in q for q in writes), writes
        else:
            assert not writes, writes
            assert any("hazel_lg_writes" in q for q in relaxed), relaxed
            assert "PRAGMA synchronous=NORMAL" in relaxed and not any("synchronous=FULL" in q for q in relaxed)
    else:
        assert any("hazel_lg_writes" in q for q in writes)
        assert any("synchronous_commit TO OFF" in q for q in writes) is (not durable), writes
        assert not any("synchronous_commit" in q for q in put)


@pytest.mark.parametrize("hint", [{}, {"a": 1}, {"b": 1}, {"a": 1, "z": 1}])
def test_the_versions_patch_is_exact_whatever_put_was_told(hint: dict) -> None:
    """``new_versions`` only narrows where the diff looks when it is the whole truth; a wrong or partial one
    falls back to comparing every entry."""
    from hazel.langgraph.encoding import _apply_tree, tree_diff

    old = {"ts": "1", "channel_versions": {"a": "1", "b": "1", "c": "1"}, "versions_seen": {"n": {"a": "1"}}}
    cases = [
        {"ts": "2", "channel_versions": {"a": "2", "b": "1", "c": "1"}, "versions_seen": {"n": {"a": "1"}}},
        {"ts": "2", "channel_versions": {"a": "2", "b": "2", "c": "1"}, "versions_seen": {"n": {"a": "2"}}},
        {"ts": "2", "channel_versions": {"a": "2", "c": "1"}, "versions_seen": {"m": {"a": "2"}}},
        {"ts": "2", "channel_versions": {"a": "1", "b": "1", "c": "1", "d": "1"}, "versions_seen": {}},
    ]
    for new in cases:
        ops = tree_diff(old, new, hint)
        assert _apply_tree(old, ops, in_place=False) == new, (new, ops)
    assert old["channel_versions"] == {"a": "1", "b": "1", "c": "1"}  # (applied to copies)


def test_a_saver_on_a_schema_downgraded_under_it_says_to_upgrade(db_url: str) -> None:
    """s22 F8: a saver kept open across ``hazel db downgrade 0008`` failed with psycopg's "column stamp does not
    exist" and the whole statement; it says what every command says, and goes on once the schema is upgraded."""
    from store import SchemaNotReadyError
    from store.migrate import downgrade, upgrade

    with HazelSaver.from_conn_string(db_url) as saver:
        configs = _chain(saver, "t", ["r"] * 2)
        downgrade(saver.store.engine, "0008")
        try:
            says = r"^the database is at schema revision 0008, this Hazel needs 0009: run `hazel db upgrade`$"
            for call in (lambda: saver.get_tuple(configs[-1]), lambda: list(saver.list(cfg("t"))),
                         lambda: _put(saver, "t", configs[-1], {"items": ["x"], "n": 2}, run_id="r", step=2)):
                with pytest.raises(SchemaNotReadyError, match=says):
                    call()
        finally:
            upgrade(saver.store.engine)  # (the session's PostgreSQL database: as the other tests need it)
        assert _items(saver, configs[-1]) == ["r-0", "r-1"]


def test_from_conn_string_names_what_keeps_sqlite_from_opening_its_file(tmp_path) -> None:  # noqa: ANN001
    """A fresh-user finding (s27 F11): ``from_conn_string("sqlite:///nodir/x.db")`` raised SQLAlchemy's raw
    ``OperationalError: unable to open database file`` where the CLI says why; ``sqlite://`` was refused in
    words about runs only."""
    from store.errors import DatabaseOpenError, UnsupportedDatabaseError

    url = f"sqlite:///{tmp_path / 'nodir' / 'x.db'}"
    with pytest.raises(DatabaseOpenError) as refused:
        with HazelSaver.from_conn_string(url):
            pass
    assert str(refused.value) == (f"database {url}: unable to open database file (the directory "
                                  f"{tmp_path / 'nodir'} does not exist: create it first)")
    garbage = tmp_path / "notes.txt"
    garbage.write_text("not a database, " * 200)
    with pytest.raises(DatabaseOpenError, match="file is not a database"):  # (s29 F3: raw DatabaseError)
        with HazelSaver.from_conn_string(f"sqlite:///{garbage}"):
            pass
    with pytest.raises(UnsupportedDatabaseError, match=r"keeps nothing past the process \(no run, no checkpoint\)"):
        with HazelSaver.from_conn_string("sqlite://"):
            pass
