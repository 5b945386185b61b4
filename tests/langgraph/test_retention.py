"""Retention of LangGraph runs (``hazel prune``, ``store.retention``): an ended run's graph history
(``hazel_lg_checkpoints``, ``hazel_lg_writes``) goes down to what its kept head needs, on SQLite and
PostgreSQL; its final state still loads, through the engine and through ``HazelSaver.get_tuple``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select, update
from typer.testing import CliRunner

from hazel import StepContext, Workflow
from hazel.langgraph import HazelSaver
from bot.ops.retention import prune
from bot.ops.scheduler import Scheduler
from store import Store
from store.checkpoints import SnapshotPolicy
from store.models import RunStatus
from store.schema import lg_checkpoints, lg_writes
from tests.langgraph.graphs import review_graph, revised_once, workflow
from tests.support.clock import FakeClock
from tests.support.engine import make_hazel, person

DAY = 86_400.0


class Count(BaseModel):
    n: int = 0


def _thread(run_id: str) -> dict:
    return {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}


def _rows(store: Store, run_id: str) -> list:
    """``(checkpoint_ns, checkpoint_id, parent_checkpoint_id, chain_len)`` of the thread's graph checkpoints."""
    with store.read() as tx:
        return [tuple(r) for r in tx.conn.execute(
            select(lg_checkpoints.c.checkpoint_ns, lg_checkpoints.c.checkpoint_id,
                   lg_checkpoints.c.parent_checkpoint_id, lg_checkpoints.c.chain_len)
            .where(lg_checkpoints.c.thread_id == run_id).order_by(lg_checkpoints.c.checkpoint_id))]


def _writes(store: Store, run_id: str) -> list:
    with store.read() as tx:
        return [tuple(r) for r in tx.conn.execute(
            select(lg_writes.c.checkpoint_id, lg_writes.c.task_id, lg_writes.c.idx)
            .where(lg_writes.c.thread_id == run_id).order_by(lg_writes.c.checkpoint_id, lg_writes.c.task_id,
                                                              lg_writes.c.idx))]


def _pointer(hz, run_id: str) -> str:  # noqa: ANN001
    return hz.state_at(run_id=run_id).lg_checkpoint


def completed(hz) -> str:  # noqa: ANN001
    """A run of the review graph through feedback, a revision and an approval: 6+ super-steps."""
    run_id = revised_once(hz)
    hz.decide(run_id=run_id, action="approve", actor=person("ana"))
    assert hz.drive(run_id=run_id).run.status is RunStatus.COMPLETED
    return run_id


def cancelled(hz) -> str:  # noqa: ANN001
    """A run cancelled while it waits at its second review (the interrupt's pending writes at its head)."""
    run = hz.start(workflow="lg-review", input={"topic": "reefs"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="feedback", actor=person("ana"), payload={"text": "longer"})
    hz.drive(run_id=run.id)
    hz.cancel(run_id=run.id, actor=person("olga"))
    assert hz.get(run_id=run.id).status is RunStatus.CANCELLED
    return run.id


def _saved(store: Store, run_id: str):  # noqa: ANN202
    """The thread's newest checkpoint, read by a fresh saver (nothing cached)."""
    return HazelSaver(store).get_tuple(_thread(run_id))


def test_pruning_a_completed_run_keeps_only_the_graph_checkpoint_its_head_points_at(db_url):
    clock = FakeClock()
    wf = workflow(review_graph())
    hz = make_hazel(db_url, wf, clock=clock)
    run_id = completed(hz)
    pointer = _pointer(hz, run_id)
    final = wf.graph.get_state(_thread(run_id)).values
    rows = _rows(hz.store, run_id)
    assert len(rows) >= 6 and final["published"] is True
    [head_row] = [r for r in rows if r[1] == pointer]
    assert head_row[3] > 0  # stored as a change of its parent: it must be rewritten to stand alone
    history = hz.checkpoints(run_id=run_id)

    clock.advance(31 * DAY)
    report = Scheduler(hz, retention_days=30).prune()
    assert report.runs == [run_id]
    assert _rows(hz.store, run_id) == [("", pointer, None, 0)]  # a standalone snapshot
    assert report.graph_checkpoints_deleted == len(rows) - 1
    assert report.checkpoints_deleted == len(history) - 1
    assert all(w[0] == pointer for w in _writes(hz.store, run_id))
    event = hz.audit(run_id=run_id)[-1]
    assert event.action == "run.pruned" and event.detail["graph_checkpoints_deleted"] == len(rows) - 1

    reopened = make_hazel(db_url, workflow(review_graph()), clock=clock)  # from the database alone
    [kept] = reopened.checkpoints(run_id=run_id)
    assert kept.seq == history[-1].seq and reopened.get(run_id=run_id).status is RunStatus.COMPLETED
    assert reopened.state_at(run_id=run_id).lg_checkpoint == pointer
    graph = reopened.registry.find("lg-review", 1).graph
    assert graph.get_state(_thread(run_id)).values == final
    saved = _saved(reopened.store, run_id)
    assert saved.config["configurable"]["checkpoint_id"] == pointer and saved.parent_config is None
    assert saved.checkpoint["channel_values"]["log"] == final["log"]
    assert Scheduler(reopened, retention_days=30).prune().runs == []  # nothing left to do


def test_a_cancelled_run_keeps_its_final_state_and_pending_interrupt(db_url):
    clock = FakeClock()
    wf = workflow(review_graph())
    hz = make_hazel(db_url, wf, clock=clock)
    run_id = cancelled(hz)
    pointer = _pointer(hz, run_id)
    before = HazelSaver(hz.store).get_tuple({"configurable": {**_thread(run_id)["configurable"],
                                                              "checkpoint_id": pointer}})
    assert before.pending_writes  # the interrupt the run waited at
    count = len(_rows(hz.store, run_id))

    clock.advance(2 * DAY)
    report = Scheduler(hz, retention_days=1).prune()
    assert report.runs == [run_id] and report.graph_checkpoints_deleted == count - 1
    assert [r[1] for r in _rows(hz.store, run_id)] == [pointer]
    after = _saved(hz.store, run_id)
    assert after.checkpoint["channel_values"] == before.checkpoint["channel_values"]
    assert after.pending_writes == before.pending_writes
    graph = make_hazel(db_url, workflow(review_graph()), clock=clock).registry.find("lg-review", 1).graph
    state = graph.get_state(_thread(run_id))
    assert state.values["log"] == ["draft", "feedback: longer", "revise"]
    assert [i.value for t in state.tasks for i in t.interrupts]  # still shows what it waited on


def test_a_run_not_yet_due_and_a_native_run_keep_their_rows(db_url):
    clock = FakeClock()

    native = Workflow("native", version=1, state=Count)

    @native.step
    def one(state: Count, ctx: StepContext) -> dict:
        return {"n": 1}

    @native.step
    def two(state: Count, ctx: StepContext) -> dict:
        return {"n": 2}

    hz = make_hazel(db_url, workflow(review_graph()), native, clock=clock)
    old = completed(hz)
    plain = hz.start(workflow="native", input={}, actor=person("olga"))
    assert hz.drive(run_id=plain.id).run.status is RunStatus.COMPLETED
    saver = HazelSaver(hz.store)  # a thread of the saver used on its own, named as the native run: written
    cfg = {"configurable": {"thread_id": "standalone", "checkpoint_ns": ""}}  # under another id and renamed, as
    for i in range(3):  # the saver refuses a write into a run's thread (an older one did not)
        cfg = saver.put(cfg, {"v": 1, "id": f"1ef-{i}", "ts": "", "channel_values": {"x": i},
                              "channel_versions": {"x": i + 1}, "versions_seen": {}}, {}, {"x": i + 1})
    with hz.store.transaction() as tx:
        tx.conn.execute(update(lg_checkpoints).where(lg_checkpoints.c.thread_id == "standalone")
                        .values(thread_id=plain.id))
    clock.advance(10 * DAY)
    recent = completed(hz)
    kept = {r: _rows(hz.store, r) for r in (recent, plain.id)}
    kept_writes = {r: _writes(hz.store, r) for r in (recent, plain.id)}

    report = Scheduler(hz, retention_days=5).prune()
    assert sorted(report.runs) == sorted([old, plain.id])
    assert len(_rows(hz.store, old)) == 1  # the run that was due
    assert {r: _rows(hz.store, r) for r in kept} == kept
    assert {r: _writes(hz.store, r) for r in kept} == kept_writes
    assert len(hz.checkpoints(run_id=plain.id)) == 1 and hz.state_at(run_id=plain.id).n == 2
    assert "graph_checkpoints_deleted" not in hz.audit(run_id=plain.id)[-1].detail
    assert len(hz.checkpoints(run_id=recent)) > 1


def test_without_the_graphs_serializer_the_head_keeps_its_chain(db_url):
    """``prune(store)`` with no ``graph_snapshots`` (the workflow is not deployed here) cannot rewrite a
    change as a snapshot: it keeps the head's chain back to its snapshot, and drops the rest."""
    clock = FakeClock()
    wf = workflow(review_graph())
    store = Store(db_url, snapshot_policy=SnapshotPolicy(max_chain=2))  # several snapshots in the thread
    hz = make_hazel(db_url, wf, clock=clock, store=store)
    run_id = completed(hz)
    pointer = _pointer(hz, run_id)
    final = wf.graph.get_state(_thread(run_id)).values
    rows = _rows(hz.store, run_id)
    assert [r[3] for r in rows].count(0) > 1
    clock.advance(2 * DAY)
    report = prune(hz.store, older_than_days=1, now=clock())
    left = _rows(hz.store, run_id)
    assert pointer in [r[1] for r in left] and left[0][3] == 0 and left[0][2] is None
    assert len(left) < len(rows) and report.graph_checkpoints_deleted == len(rows) - len(left)
    assert _saved(hz.store, run_id).checkpoint["channel_values"]["log"] == final["log"]


def test_dry_run_counts_graph_rows_and_changes_nothing(db_url):
    clock = FakeClock()
    hz = make_hazel(db_url, workflow(review_graph()), clock=clock)
    run_id = completed(hz)
    rows, writes = _rows(hz.store, run_id), _writes(hz.store, run_id)
    clock.advance(2 * DAY)
    report = prune(hz.store, older_than_days=1, now=clock(), dry_run=True)
    assert report.runs == [run_id]
    assert report.graph_checkpoints_deleted == len(rows) - 1 and report.graph_writes_deleted == len(writes)
    assert (_rows(hz.store, run_id), _writes(hz.store, run_id)) == (rows, writes)


def test_prune_command_says_what_it_removed(db_url, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bot.cli import app

    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(Path(__file__).resolve().parent / "workflows" / "retained.py"))
    monkeypatch.chdir(tmp_path)
    hz = make_hazel(db_url, workflow(review_graph()),
                    clock=FakeClock(start=datetime(2020, 3, 1, tzinfo=timezone.utc)))
    run_id = completed(hz)
    count = len(_rows(hz.store, run_id))
    runner = CliRunner()
    dry = runner.invoke(app, ["prune", "--older-than", "30", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    dry = json.loads(dry.stdout)
    assert dry["runs"] == [run_id] and dry["graph_checkpoints_deleted"] == count - 1
    done = runner.invoke(app, ["prune", "--older-than", "30"])
    assert done.exit_code == 0, done.output
    said = " ".join(done.stdout.split())
    assert f"{count - 1} LangGraph checkpoint(s) and " in said and " pending write(s), " in said
    assert _rows(hz.store, run_id) == [("", _pointer(hz, run_id), None, 0)]  # rewritten: the CLI had the serde
    shown = runner.invoke(app, ["show", run_id, "--json"])
    assert shown.exit_code == 0, shown.output
    history = runner.invoke(app, ["history", run_id])
    assert history.exit_code == 0, history.output
    with hz.store.read() as tx:
        assert tx.conn.execute(select(func.count()).select_from(lg_checkpoints)).scalar_one() == 1


def test_deleting_the_thread_of_a_run_that_has_not_ended_is_refused(db_url):  # noqa: ANN001
    """``delete_thread`` (and ``prune(strategy="delete")``) of a waiting run's thread deleted its graph state:
    its next step started from nothing. Refused, nothing deleted; an ended run's thread, or a thread that is
    no Hazel run, is deleted as before."""
    from bot.engine.errors import RunStateError

    hz = make_hazel(db_url, workflow(review_graph()))
    run = hz.start(workflow="lg-review", input={"topic": "kelp"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.WAITING
    rows = _rows(hz.store, run.id)
    saver = HazelSaver(hz.store)
    with pytest.raises(RunStateError, match=f"run {run.id} is waiting: deleting or pruning its thread .*hazel cancel"):
        saver.delete_thread(run.id)
    for strategy in ("delete", "keep_latest"):  # (keep_latest: a rewind then forked from nothing, the run failed)
        with pytest.raises(RunStateError, match="is waiting"):
            saver.prune([run.id, "not-a-run"], strategy=strategy)
    assert _rows(hz.store, run.id) == rows and rows
    ended = cancelled(hz)
    saver.delete_thread(ended)
    assert _rows(hz.store, ended) == []
    saver.delete_thread("not-a-run")  # (LangGraph's own thread: nothing to refuse)


def test_copying_a_thread_into_a_runs_thread_is_refused(db_url):  # noqa: ANN001
    """s22 F7: ``copy_thread`` into a waiting run's thread mixed another thread's checkpoints into the run's
    graph history (``get_state_history``), where its next step or a rewind could start from one of them.
    Refused for any Hazel run's thread, nothing copied; from a run's thread into a new one it copies as before."""
    from bot.engine.errors import RunStateError

    hz = make_hazel(db_url, workflow(review_graph()))
    run = hz.start(workflow="lg-review", input={"topic": "kelp"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    ended = cancelled(hz)
    rows = _rows(hz.store, run.id)
    saver = HazelSaver(hz.store)
    for target in (run.id, ended):
        with pytest.raises(RunStateError, match=f"^thread {target} is the graph thread of Hazel run {target} "
                                                r"\((waiting|cancelled)\): copying another thread into it"):
            saver.copy_thread(ended if target == run.id else run.id, target)
    assert _rows(hz.store, run.id) == rows and rows
    saver.copy_thread(run.id, "a-copy")
    assert len(_rows(hz.store, "a-copy")) == len(rows)


def test_a_rewind_to_a_checkpoint_whose_graph_checkpoint_was_deleted_is_refused(db_url):  # noqa: ANN001
    """``delete_thread`` of a completed run (allowed), then a rewind to #1: the fork started the graph from
    nothing, the first node ran again on an empty state and the completed run ended ``failed``. Refused,
    nothing written; a rewind to #0 (the run's input, kept by Hazel) still runs it again."""
    from bot.engine.errors import CheckpointNotFoundError

    hz = make_hazel(db_url, workflow(review_graph()))
    run_id = completed(hz)
    before = (len(hz.checkpoints(run_id=run_id)), hz.get(run_id=run_id).status)
    HazelSaver(hz.store).delete_thread(run_id)
    with pytest.raises(CheckpointNotFoundError, match="points at a graph checkpoint that was deleted"):
        hz.rewind(run_id=run_id, actor=person("olga"), to=1, feedback="again")
    assert (len(hz.checkpoints(run_id=run_id)), hz.get(run_id=run_id).status) == before
    hz.rewind(run_id=run_id, actor=person("olga"), to=0, claim=True)
    assert hz.drive(run_id=run_id).run.status is RunStatus.WAITING


def test_a_view_of_a_checkpoint_whose_graph_checkpoint_was_deleted_says_so(db_url, caplog):  # noqa: ANN001
    """After ``delete_thread`` of an ended run (allowed), ``hazel show RUN`` printed Hazel's pointer state
    (``lg_input``, ``lg_checkpoint``, …) as the run's state without a word (a fresh-user finding, s27 F7): a
    WARNING says it, which a CLI command prints on stderr."""
    import logging

    hz = make_hazel(db_url, workflow(review_graph()))
    run_id = completed(hz)
    HazelSaver(hz.store).delete_thread(run_id)
    with caplog.at_level(logging.INFO):
        shown = hz.state_tree_at(run_id=run_id)
    assert "lg_checkpoint" in shown
    [said] = [r for r in caplog.records if r.levelno == logging.WARNING and run_id in r.getMessage()]
    assert "is gone (HazelSaver.delete_thread or prune, or a checkpointer this process cannot read): showing " \
           "Hazel's pointer state (lg_*) instead of the graph's values" in said.getMessage()
