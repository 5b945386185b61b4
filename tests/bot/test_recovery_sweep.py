"""A worker pool looks for runs left ``running`` by a dead process once per sweep (``HAZEL_SWEEP_SEC``), not
once per half lease: a process killed on this host has its run ready again within about a second (README:
"or at once, when the dead process was on the same host"); it used to wait up to ``lease_sec / 2`` (30 s)."""

from __future__ import annotations

import time

from sqlalchemy import update

from bot.engine.leases import local_host
from bot.ops.logs import ContextFilter
from bot.ops.worker import WorkerPool
from store.models import RunStatus
from store.schema import runs
from tests.support.engine import make_hazel
from tests.workflows.sample import docs


def test_a_run_left_by_a_dead_process_on_this_host_is_resumed_within_a_sweep(db_url: str) -> None:
    hazel = make_hazel(db_url, docs, lease_sec=60.0)
    pool = WorkerPool(hazel, threads=2, sweep_sec=0.2)
    pool.start()
    try:
        time.sleep(0.5)  # the pool has looked once already, with nothing to recover
        run = hazel.start(workflow="doc-review", input={"topic": "t"}, actor=hazel.operator(), claim=True)
        with hazel.store.transaction() as tx:  # leased (60 s) by a process of this host that no longer exists
            tx.conn.execute(update(runs).where(runs.c.id == run.id)
                            .values(lease_owner=f"{local_host()}:999999:x"))
        deadline = time.monotonic() + 5.0
        while hazel.get(run_id=run.id).status is not RunStatus.WAITING and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hazel.get(run_id=run.id).status is RunStatus.WAITING  # recovered and executed to its point
        assert [e.detail.get("reason") for e in hazel.audit(run_id=run.id)
                if e.action == "run.recovered"] == ["owner died"]
    finally:
        pool.stop()


def test_recovery_names_a_lapsed_lease_as_such_not_as_a_dead_process(db_url: str, caplog) -> None:  # noqa: ANN001
    """A lease that ran out may belong to a process that lives on (paused, cut off): the log says which kind
    of recovery it was, as the audit's ``reason`` does."""
    from datetime import timedelta

    hazel = make_hazel(db_url, docs, lease_sec=60.0)
    run = hazel.start(workflow="doc-review", input={"topic": "t"}, actor=hazel.operator(), claim=True)
    with hazel.store.transaction() as tx:  # a live process elsewhere, whose lease ran out a minute ago
        tx.conn.execute(update(runs).where(runs.c.id == run.id).values(
            lease_owner="another-host:1:x", lease_expires_at=hazel.clock() - timedelta(minutes=1)))
    with caplog.at_level("WARNING"):
        assert hazel.recover() == [run.id]
    said = [r.getMessage() for r in caplog.records if "recovered" in r.getMessage()]
    assert said == [f"recovered 1 run(s) whose lease ran out: {run.id}"], said  # (ids, not a Python list)


def test_a_drive_the_database_cut_short_is_handed_back_when_it_answers_not_when_the_lease_ends(
        db_url: str, monkeypatch, caplog) -> None:  # noqa: ANN001
    """A pool's drive that fails on a lost connection (a fresh-user finding: PostgreSQL backends terminated
    under ``hazel serve``) left its run ``running``, leased by the live process, for the whole lease (60 s):
    retry and rewind refused meanwhile. It is now handed back once the database answers, and continued."""
    from sqlalchemy.exc import OperationalError

    from bot.engine.hazel import Hazel

    hazel = make_hazel(db_url, docs, lease_sec=60.0)
    real, cut = Hazel.execute, []

    def cut_once(self, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if not cut:
            cut.append(kwargs["claim"].run.id)
            raise OperationalError("COMMIT", None, Exception("server closed the connection unexpectedly"))
        return real(self, **kwargs)

    monkeypatch.setattr(Hazel, "execute", cut_once)
    caplog.handler.addFilter(ContextFilter())  # as a served process's handlers have it
    caplog.set_level("WARNING", logger="hazel")
    pool = WorkerPool(hazel, threads=1, sweep_sec=0.2)
    pool.start()
    try:
        run = hazel.start(workflow="doc-review", input={"topic": "t"}, actor=hazel.operator())
        deadline = time.monotonic() + 10.0
        while hazel.get(run_id=run.id).status is not RunStatus.WAITING and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cut == [run.id]  # its first drive was cut short
        assert hazel.get(run_id=run.id).status is RunStatus.WAITING  # handed back and continued within seconds
    finally:
        pool.stop()
    # the outage's one line names the run whose drive it cut short (it had no run tag)
    [line] = [r for r in caplog.records if "the database is unreachable" in r.getMessage()]
    assert getattr(line, "run_id", None) == run.id and line.exc_info is None


def test_a_run_recovered_and_leased_by_another_process_meanwhile_is_not_taken_from_it(db_url: str,
                                                                                       monkeypatch) -> None:  # noqa: ANN001
    """Two processes recovering a dead worker's runs at once (a fresh-user finding: ``hazel serve`` and a
    ``hazel worker``): the one that read the run before the other recovered it and leased it to a live worker
    handed the live lease back to the queue, and the step ran a third time beside it. Recovery now releases
    only the lease it read."""
    from bot.engine import leases

    hazel = make_hazel(db_url, docs, lease_sec=60.0)
    other = make_hazel(db_url, docs, lease_sec=60.0)  # another process's engine on the same database
    run = hazel.start(workflow="doc-review", input={"topic": "t"}, actor=hazel.operator(), claim=True)
    with hazel.store.transaction() as tx:  # leased by a process of this host that no longer exists
        tx.conn.execute(update(runs).where(runs.c.id == run.id)
                        .values(lease_owner=f"{local_host()}:999999:x"))
    real = leases.owner_is_dead
    taken: list[str] = []
    asked: list[str | None] = []

    def dead_and_taken_meanwhile(owner: str | None) -> bool:  # between this process's read and its release,
        asked.append(owner)
        if len(asked) == 1:  # the other one recovers the run and leases it to one of its workers
            taken.extend(other.recover())
            assert other.runner.claim(run_id=run.id) is not None
        return real(owner)

    monkeypatch.setattr(leases, "owner_is_dead", dead_and_taken_meanwhile)
    assert hazel.recover() == []
    assert taken == [run.id]
    now = hazel.get(run_id=run.id)
    assert now.status is RunStatus.RUNNING and now.lease_owner == other.runner.owner  # still the live claim
    assert [e.action for e in hazel.audit(run_id=run.id)].count("run.recovered") == 1


def test_a_run_whose_executing_process_keeps_dying_at_one_checkpoint_fails(db_url: str, caplog) -> None:  # noqa: ANN001
    """A fresh-user finding (s30 F9): a step that ends its process (``os._exit``, the out-of-memory killer) was
    claimed by worker after worker for ever, each dying (under ``hazel serve`` its HTTP with it): a process's
    death is no attempt of the step's. After ``CRASH_LIMIT`` deaths in a row at one checkpoint the run fails,
    saying so; ``hazel retry`` starts the count again."""
    from bot.engine.leases import CRASH_LIMIT

    hazel = make_hazel(db_url, docs, lease_sec=60.0)
    run = hazel.start(workflow="doc-review", input={"topic": "t"}, actor=hazel.operator(), claim=True)

    def died(n: int) -> None:  # a worker of this host claimed it and died mid-step
        with hazel.store.transaction() as tx:
            tx.conn.execute(update(runs).where(runs.c.id == run.id).values(
                status=RunStatus.RUNNING.value, lease_owner=f"{local_host()}:999999:x{n}", lease_token=f"t{n}"))

    for n in range(CRASH_LIMIT - 1):
        died(n)
        assert hazel.recover() == [run.id]
        assert hazel.get(run_id=run.id).status is RunStatus.READY
    died(CRASH_LIMIT)
    with caplog.at_level("ERROR"):
        assert hazel.recover() == []
    failed = hazel.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED, failed
    assert failed.error == (f"the process executing run {run.id} after checkpoint #{failed.head_seq} died "
                            f"{CRASH_LIMIT} times in a row (killed, out of memory, or a crash in native code): not "
                            f"tried again; fix the cause, then `hazel retry {run.id}`"), failed.error
    assert f"failed 1 run(s) whose executing process died {CRASH_LIMIT} times in a row at one checkpoint: " \
        f"{run.id}" in caplog.text
    hazel.retry(run_id=run.id, actor=hazel.operator())
    died(99)
    assert hazel.recover() == [run.id]  # (counted again from the retry)
    assert hazel.get(run_id=run.id).status is RunStatus.READY
