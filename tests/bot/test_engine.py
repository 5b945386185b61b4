"""Executing runs: checkpoints per step, routing, retries, exactly-once under races, nothing per waiting run."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel, Field

from hazel import StepContext, Workflow
from bot.engine.errors import AlreadyDecidedError, RunStateError
from bot.ops.worker import WorkerPool
from store.models import RunStatus
from tests.support.engine import make_hazel, person


class Counted(BaseModel):
    n: int = 0
    log: list[str] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)


def loop_workflow(calls: Counter, lock: threading.Lock) -> Workflow:
    """a -> b (loops back to a until n == 3) -> review -> c"""
    wf = Workflow("looper", version=1, state=Counted)

    @wf.step
    def a(state: Counted, ctx: StepContext) -> Counted:
        with lock:
            calls["a"] += 1
        return state.model_copy(update={"n": state.n + 1, "log": [*state.log, "a"]})

    @wf.step
    def b(state: Counted, ctx: StepContext) -> Counted:
        with lock:
            calls["b"] += 1
        if state.n < 3:
            ctx.goto("a")
        return state.model_copy(update={"log": [*state.log, "b"]})

    wf.steer("review")

    @wf.step
    def c(state: Counted, ctx: StepContext) -> dict:
        with lock:
            calls["c"] += 1
        return {"log": [*state.log, "c"]}

    return wf


def test_routing_loops_and_checkpoints_every_step(db_url: str) -> None:
    calls, lock = Counter(), threading.Lock()
    hazel = make_hazel(db_url, loop_workflow(calls, lock))
    run = hazel.start(workflow="looper", input={}, actor=person("me"))
    result = hazel.drive(run_id=run.id)
    assert result.steps == ["a", "b", "a", "b", "a", "b"] and result.run.status is RunStatus.WAITING
    cps = hazel.checkpoints(run_id=run.id)
    assert [c.seq for c in cps] == list(range(7))
    assert all(c.parent_seq == c.seq - 1 for c in cps[1:])
    assert [c.next_step for c in cps][-1] == "review"
    hazel.decide(run_id=run.id, action="approve", actor=person("sme"))
    hazel.drive(run_id=run.id)
    assert hazel.state_at(run_id=run.id).log == ["a", "b"] * 3 + ["c"]
    # every earlier checkpoint still loads as it was
    assert hazel.state_at(run_id=run.id, seq=2).log == ["a", "b"]


def test_concurrent_decisions_settle_once(db_url: str) -> None:
    calls, lock = Counter(), threading.Lock()
    hazel = make_hazel(db_url, loop_workflow(calls, lock))
    run = hazel.start(workflow="looper", input={}, actor=person("me"))
    hazel.drive(run_id=run.id)
    request = hazel.pending_request(run_id=run.id)
    barrier = threading.Barrier(8)
    results: list[object] = []

    def click(i: int) -> None:
        barrier.wait()
        try:
            action = "approve" if i % 2 else "feedback"
            results.append(hazel.decide(run_id=run.id, action=action, actor=person(f"sme{i}"), request_id=request.id,
                                        payload={"text": "redo"} if action == "feedback" else None))
        except AlreadyDecidedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=click, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, AlreadyDecidedError)]
    assert len(winners) == 1 and len(losers) == 7
    assert {loser.decided_by for loser in losers} == {winners[0].decision.actor_id}
    assert len(hazel.decisions(run_id=run.id)) == 1
    assert len([c for c in hazel.checkpoints(run_id=run.id) if c.step == "review"]) == 1


def test_racing_resumes_never_both_execute(db_url: str) -> None:
    calls, lock = Counter(), threading.Lock()
    hazel = make_hazel(db_url, loop_workflow(calls, lock))
    run = hazel.start(workflow="looper", input={}, actor=person("me"))
    barrier = threading.Barrier(6)

    def resume() -> None:
        barrier.wait()
        hazel.drive(run_id=run.id)

    threads = [threading.Thread(target=resume) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == Counter({"a": 3, "b": 3})
    hazel.decide(run_id=run.id, action="approve", actor=person("sme"))
    pools = [WorkerPool(hazel, threads=3) for _ in range(2)]
    for pool in pools:
        pool.start()
        pool.wake()
    try:
        import time

        deadline = time.monotonic() + 20
        while hazel.get(run_id=run.id).status is not RunStatus.COMPLETED and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        for pool in pools:
            pool.stop()
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    assert calls == Counter({"a": 3, "b": 3, "c": 1})
    assert [c.seq for c in hazel.checkpoints(run_id=run.id)] == list(range(9))


class Flaky(BaseModel):
    attempts_seen: list[int] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)
    ok: bool = False


def flaky_workflow(fail_times: int, attempts: int, side_effects: list[str]) -> Workflow:
    wf = Workflow("flaky", version=1, state=Flaky)
    failures = {"left": fail_times}

    @wf.step
    def prepare(state: Flaky, ctx: StepContext) -> Flaky:
        side_effects.append("prepare")
        return state

    @wf.step(max_attempts=attempts, backoff_sec=0.01, max_backoff_sec=0.02)
    def call_api(state: Flaky, ctx: StepContext) -> Flaky:
        side_effects.append(f"call_api:{ctx.idempotency_key}:{ctx.attempt}")
        if failures["left"] > 0:
            failures["left"] -= 1
            raise ConnectionError("upstream timed out")
        return state.model_copy(update={"ok": True, "attempts_seen": [*state.attempts_seen, ctx.attempt],
                                        "keys": [ctx.idempotency_key]})

    return wf


def test_retries_with_backoff_then_success(db_url: str) -> None:
    effects: list[str] = []
    hazel = make_hazel(db_url, flaky_workflow(fail_times=2, attempts=3, side_effects=effects))
    run = hazel.start(workflow="flaky", input={}, actor=person("me"))
    result = hazel.drive(run_id=run.id)
    assert result.run.status is RunStatus.COMPLETED
    state = hazel.state_at(run_id=run.id)
    assert state.ok and state.attempts_seen == [3]
    keys = {e.split(":", 1)[1].rsplit(":", 1)[0] for e in effects if e.startswith("call_api")}
    assert keys == {f"{run.id}:1:call_api"}  # one idempotency key for every attempt
    assert effects.count("prepare") == 1
    retries = [e for e in hazel.audit(run_id=run.id) if e.action == "step.retry_scheduled"]
    assert [e.detail["attempt"] for e in retries] == [1, 2]
    assert all(0 < e.detail["delay_sec"] <= 0.02 for e in retries)


def test_failed_after_last_attempt_then_retry_resumes_from_last_good_checkpoint(db_url: str) -> None:
    effects: list[str] = []
    hazel = make_hazel(db_url, flaky_workflow(fail_times=3, attempts=2, side_effects=effects))
    run = hazel.start(workflow="flaky", input={}, actor=person("me"))
    result = hazel.drive(run_id=run.id)
    failed = result.run
    assert failed.status is RunStatus.FAILED
    assert failed.error == "ConnectionError: upstream timed out"
    assert "Traceback" in failed.error_traceback and "call_api" in failed.error_traceback
    assert failed.head_seq == 1  # after prepare
    hazel.retry(run_id=run.id, actor=person("me"))
    result = hazel.drive(run_id=run.id)  # one more failure left, then success
    assert result.run.status is RunStatus.COMPLETED
    assert effects.count("prepare") == 1


def test_waiting_runs_hold_no_threads(db_url: str) -> None:
    calls, lock = Counter(), threading.Lock()
    hazel = make_hazel(db_url, loop_workflow(calls, lock))
    run = hazel.start(workflow="looper", input={}, actor=person("me"))
    hazel.drive(run_id=run.id)
    baseline = threading.active_count()
    for _ in range(30):
        r = hazel.start(workflow="looper", input={}, actor=person("me"))
        hazel.drive(run_id=r.id)
    assert len(hazel.runs(statuses=["waiting"], limit=100)) == 31
    assert threading.active_count() == baseline


class _Blocking:
    """A ``slow`` workflow whose one step records its idempotency key in ``calls``, sets ``started`` and waits
    for ``release``; ``cancelled_mid_step`` drives a run of it in a thread and cancels it there."""

    def __init__(self) -> None:
        self.started, self.release, self.calls = threading.Event(), threading.Event(), []
        self.wf = Workflow("slow", version=1, state=Counted)

        @self.wf.step
        def slow(state: Counted, ctx: StepContext) -> Counted:
            self.calls.append(ctx.idempotency_key)
            self.started.set()
            self.release.wait(10)
            return state.model_copy(update={"n": 99})

    def cancelled_mid_step(self, db_url: str) -> tuple[Any, str, threading.Thread]:
        """A hazel, the run cancelled while its step waits for ``release``, and the thread driving it."""
        hazel = make_hazel(db_url, self.wf)
        run = hazel.start(workflow="slow", input={}, actor=person("me"))
        t = threading.Thread(target=hazel.drive, kwargs={"run_id": run.id})
        t.start()
        assert self.started.wait(10)
        hazel.cancel(run_id=run.id, actor=person("me"))
        return hazel, run.id, t


def test_cancel_while_running_discards_the_step(db_url: str) -> None:
    blocking = _Blocking()
    hazel, run_id, t = blocking.cancelled_mid_step(db_url)
    blocking.release.set()
    t.join()
    assert hazel.get(run_id=run_id).status is RunStatus.CANCELLED
    assert [c.seq for c in hazel.checkpoints(run_id=run_id)] == [0]


def test_a_rewind_waits_for_the_step_a_cancel_left_executing(db_url: str) -> None:
    """A run cancelled while a process executes its step keeps that process's lease until the step ends: a
    rewind meanwhile is refused (its own run of the step would execute beside the cancelled one: a fresh-user
    finding, the same side-effecting step twice at once); once the step has ended, the lease is let go and the
    rewind goes ahead."""
    from bot.engine.errors import RunStateError

    blocking = _Blocking()
    hazel, run_id, t = blocking.cancelled_mid_step(db_url)
    held = hazel.get(run_id=run_id)
    assert held.status is RunStatus.CANCELLED and held.lease_owner == hazel.runner.owner
    with pytest.raises(RunStateError, match="cancelled while a step was executing .* rewind when it has"):
        hazel.rewind(run_id=run_id, actor=person("me"), to=0)
    assert len(blocking.calls) == 1 and [c.seq for c in hazel.checkpoints(run_id=run_id)] == [0]
    blocking.release.set()
    t.join()
    after = hazel.get(run_id=run_id)
    assert after.status is RunStatus.CANCELLED and after.lease_owner is None and after.lease_token is None
    hazel.rewind(run_id=run_id, actor=person("me"), to=0, claim=True)
    assert hazel.drive(run_id=run_id).run.status is RunStatus.COMPLETED and len(blocking.calls) == 2


def test_recovery_of_runs_left_running_by_a_dead_process(db_url: str) -> None:
    calls, lock = Counter(), threading.Lock()
    hazel = make_hazel(db_url, loop_workflow(calls, lock))
    run = hazel.start(workflow="looper", input={}, actor=person("me"))
    hazel.runner.owner = "this-host-does-not-matter:1:x"
    claimed = hazel.runner.claim(run.id)
    assert claimed is not None and hazel.get(run_id=run.id).status is RunStatus.RUNNING
    from bot.engine.leases import local_host

    from store.schema import runs
    from sqlalchemy import update

    with hazel.store.transaction() as tx:  # a process on this host that no longer exists held it
        tx.conn.execute(update(runs).where(runs.c.id == run.id).values(lease_owner=f"{local_host()}:999999:x"))
    again = make_hazel(db_url, loop_workflow(calls, lock))
    assert again.get(run_id=run.id).status is RunStatus.READY
    assert any(e.action == "run.recovered" for e in again.audit(run_id=run.id))
    assert again.drive(run_id=run.id).run.status is RunStatus.WAITING


def test_unknown_goto_fails_the_run_with_a_clear_error(db_url: str) -> None:
    wf = Workflow("bad-goto", version=1, state=Counted)

    @wf.step(max_attempts=3)
    def jump(state: Counted, ctx: StepContext) -> Counted:
        ctx.goto("nowhere")
        return state

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="bad-goto", input={}, actor=person("me"))
    result = hazel.drive(run_id=run.id, wait_for_retries=False)
    assert result.run.status is RunStatus.FAILED and "unknown node 'nowhere'" in result.run.error
    assert not [e for e in hazel.audit(run_id=run.id) if e.action == "step.retry_scheduled"], "no retry can help"


@pytest.mark.parametrize("returned", [42, "text"])
def test_a_step_returning_the_wrong_type_fails(db_url: str, returned: object) -> None:
    wf = Workflow("wrong", version=1, state=Counted)

    @wf.step(max_attempts=1)
    def oops(state: Counted, ctx: StepContext):  # noqa: ANN202
        return returned

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="wrong", input={}, actor=person("me"))
    assert "must return Counted" in hazel.drive(run_id=run.id).run.error


def test_a_request_left_pending_on_an_ended_run_does_not_bring_it_back(db_url: str) -> None:
    from sqlalchemy import text

    from bot.engine.errors import RunStateError

    hz = make_hazel(db_url, loop_workflow(Counter(), threading.Lock()))
    run = hz.start(workflow="looper", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    [request] = hz.requests(run_id=run.id)
    hz.cancel(run_id=run.id, actor=person("olga"))
    written = len(hz.checkpoints(run_id=run.id))
    with hz.store.transaction() as tx:  # an inconsistency older code could leave (a graph's second interrupt)
        tx.conn.execute(text("UPDATE hazel_steering_requests SET status = 'pending' WHERE id = :id"),
                        {"id": request.id})
    with pytest.raises(RunStateError, match="is cancelled; nothing to decide"):
        hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=request.id)
    assert hz.get(run_id=run.id).status is RunStatus.CANCELLED
    assert len(hz.checkpoints(run_id=run.id)) == written  # nothing written by the refused decision


def test_a_rewind_target_in_other_scripts_digits_names_no_checkpoint(db_url: str) -> None:
    from bot.engine.errors import HazelError

    hz = make_hazel(db_url, loop_workflow(Counter(), threading.Lock()))
    run = hz.start(workflow="looper", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    before = len(hz.checkpoints(run_id=run.id))
    for target in ("１", "²", "#１"):  # str.isdigit and int() take them; a checkpoint number is ASCII digits
        with pytest.raises(HazelError):
            hz.rewind(run_id=run.id, actor=person("olga"), to=target)
    assert len(hz.checkpoints(run_id=run.id)) == before
    hz.rewind(run_id=run.id, actor=person("olga"), to=" #1 ")  # ASCII digits, padded: still a number
    assert len(hz.checkpoints(run_id=run.id)) == before + 1


def test_a_step_returning_a_field_its_state_does_not_declare_fails_naming_it(db_url: str) -> None:
    """A misspelled key in a returned dict (``{"nn": 1}`` for ``n``) would be dropped by pydantic, and with it
    the step's work: the step fails instead, saying which key, and the state stays as it was."""
    wf = Workflow("typo", version=1, state=Counted)

    @wf.step(max_attempts=3)
    def count(state: Counted, ctx: StepContext) -> dict:
        return {"nn": state.n + 1, "log": ["counted"]}

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="typo", input={}, actor=person("me"))
    result = hazel.drive(run_id=run.id, wait_for_retries=False)
    assert result.run.status is RunStatus.FAILED
    assert "step 'count' returned 'nn', which Counted does not declare (fields: n, log, keys)" in result.run.error
    assert not [e for e in hazel.audit(run_id=run.id) if e.action == "step.retry_scheduled"], "no retry can help"
    assert [c.seq for c in hazel.checkpoints(run_id=run.id)] == [0]


def test_a_state_that_allows_extra_fields_takes_them(db_url: str) -> None:
    from pydantic import ConfigDict

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        n: int = 0

    wf = Workflow("open", version=1, state=Open)

    @wf.step()
    def add(state: Open, ctx: StepContext) -> dict:
        return {"note": "kept"}

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="open", input={}, actor=person("me"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    assert hazel.state_tree_at(run_id=run.id)["note"] == "kept"


def test_a_field_with_an_alias_is_set_by_its_name_or_its_alias_and_kept(db_url: str) -> None:
    """``model_dump`` writes names, which pydantic validates by alias only by default: every step returning a
    dict, every edit and every input by name lost an aliased field's value without a word."""
    class Aliased(BaseModel):
        the_count: int = Field(0, alias="theCount")
        note: str = ""

    wf = Workflow("aliased", version=1, state=Aliased)

    @wf.step
    def by_name(state: Aliased, ctx: StepContext) -> dict:
        return {"the_count": state.the_count + 1}

    @wf.step
    def by_alias(state: Aliased, ctx: StepContext) -> dict:
        return {"theCount": state.the_count + 10}

    @wf.step
    def other_field(state: Aliased, ctx: StepContext) -> dict:
        return {"note": "kept the count"}

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="aliased", input={"the_count": 5}, actor=person("me"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run.id).the_count == 16


def test_a_step_that_changed_its_model_off_its_types_fails_and_stores_nothing(db_url: str) -> None:
    """pydantic checks no assignment by default: ``state.n = "lots"`` returned as the model would be stored,
    and the run could then no longer be loaded or edited."""
    wf = Workflow("mutated", version=1, state=Counted)

    @wf.step(max_attempts=3)
    def mutate(state: Counted, ctx: StepContext) -> Counted:
        state.n = "lots"  # type: ignore[assignment]
        return state

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="mutated", input={}, actor=person("me"))
    result = hazel.drive(run_id=run.id, wait_for_retries=False)
    assert result.run.status is RunStatus.FAILED
    assert "step 'mutate' returned a Counted holding a value its field does not take" in result.run.error
    assert "field_name='n'" in result.run.error, result.run.error
    assert not [e for e in hazel.audit(run_id=run.id) if e.action == "step.retry_scheduled"], "no retry can help"
    assert [c.seq for c in hazel.checkpoints(run_id=run.id)] == [0]


def test_the_same_retry_sent_twice_at_once_queues_the_run_once_and_answers_both(db_url: str) -> None:
    """Both retries read the run failed; the one whose update loses the race finds it ready and returns it, as a
    retry of a ready run does (no 'nothing to retry'); one ``run.retried`` in the audit log."""
    from bot.engine.steering.run_actions import RunActions

    hazel = make_hazel(db_url, flaky_workflow(fail_times=3, attempts=1, side_effects=[]))
    run = hazel.start(workflow="flaky", input={}, actor=person("me"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.FAILED
    both_read = threading.Barrier(2)
    real = RunActions._check_run_action

    def read_then_wait(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        checked = real(self, *args, **kwargs)
        both_read.wait(timeout=10)  # each saw it failed before either moved it
        return checked

    results: list[object] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RunActions, "_check_run_action", read_then_wait)
        threads = [threading.Thread(target=lambda: results.append(hazel.retry(run_id=run.id, actor=person("me"))))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert [r.status for r in results] == [RunStatus.READY, RunStatus.READY]  # type: ignore[attr-defined]
    assert [e.action for e in hazel.audit(run_id=run.id)].count("run.retried") == 1


def test_the_same_retry_sent_twice_answers_both_after_a_worker_took_the_run_between_them(db_url: str) -> None:
    """The second retry read the run failed; before its update, the first queued it and a worker ran it to its
    end. It answered 409 "is completed: nothing to retry" (or "is running"): it answers with the run, as the
    first did. A retry of a failure newer than the other retry is still a retry of its own."""
    from bot.engine.steering.run_actions import RunActions

    hazel = make_hazel(db_url, flaky_workflow(fail_times=1, attempts=1, side_effects=[]))
    run = hazel.start(workflow="flaky", input={}, actor=person("me"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.FAILED
    real = RunActions._check_run_action

    def the_other_first(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        checked = real(self, *args, **kwargs)
        with pytest.MonkeyPatch.context() as inner:
            inner.setattr(RunActions, "_check_run_action", real)
            assert hazel.retry(run_id=run.id, actor=person("me")).status is RunStatus.READY
        assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED  # a worker took it
        return checked

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RunActions, "_check_run_action", the_other_first)
        assert hazel.retry(run_id=run.id, actor=person("me")).status is RunStatus.COMPLETED
    assert [e.action for e in hazel.audit(run_id=run.id)].count("run.retried") == 1
    with pytest.raises(RunStateError, match="is completed: nothing to retry"):
        hazel.retry(run_id=run.id, actor=person("me"))


@pytest.mark.parametrize("broken", ["wrong type", "undeclared field", "bad in-place assignment"])
def test_a_contract_error_is_recorded_and_logged_as_the_one_attempt_it_was(
        db_url: str, broken: str, caplog: pytest.LogCaptureFixture) -> None:
    """A broken contract is not retried; the run said ``attempt 3/3 failed`` and stored attempt=3 all the same
    (the runner jumped to the last attempt to skip the retries). It says what happened: attempt 1, not retried."""
    import logging

    wf = Workflow("contract", version=1, state=Counted)
    calls: list[int] = []

    @wf.step(max_attempts=3)
    def step(state: Counted, ctx: StepContext):  # noqa: ANN202
        calls.append(ctx.attempt)
        if broken == "wrong type":
            return 42
        if broken == "undeclared field":
            return {"nn": 1}
        state.n = "lots"  # type: ignore[assignment]
        return state

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="contract", input={}, actor=person("me"))
    with caplog.at_level(logging.WARNING, logger="hazel.runner"):
        result = hazel.drive(run_id=run.id, wait_for_retries=False)
    assert result.run.status is RunStatus.FAILED and calls == [1]
    assert result.run.attempt == 1
    [failed] = [e for e in hazel.audit(run_id=run.id) if e.action == "step.failed"]
    assert failed.detail["attempts"] == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "hazel.runner"]
    assert len(lines) == 1 and f"run {run.id} step step attempt 1 failed, not retried (a contract error): " \
        "StepContractError: step 'step' " in lines[0], lines
    assert "/3" not in lines[0]


@pytest.mark.parametrize("code", [3, None, "bye"])
def test_a_step_that_calls_sys_exit_fails_like_any_other_error(db_url: str, code: object) -> None:
    """``sys.exit()`` in a step (a library's) raised SystemExit through the runner: a worker's thread ended
    (the process ran nothing more), ``serve`` left the run ``running`` for ever, ``hazel run`` exited with the
    step's code. It is the step's error: retried, then the run fails, and the caller goes on."""
    import sys

    wf = Workflow("exits", version=1, state=Counted)

    @wf.step(max_attempts=2, backoff_sec=0)
    def leave(state: Counted, ctx: StepContext) -> Counted:
        sys.exit(code)

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="exits", input={}, actor=person("me"))
    result = hazel.drive(run_id=run.id)
    assert result.run.status is RunStatus.FAILED
    assert result.run.error == ("SystemExit" if code is None else f"SystemExit: {code}"), result.run.error
    assert [e.action for e in hazel.audit(run_id=run.id)].count("step.retry_scheduled") == 1


def in_one_worker_thread(hazel, *workflows: str) -> list:  # noqa: ANN001
    """Start a run of each of ``workflows`` for one worker thread (``WorkerPool(threads=1)``, as a small ``hazel
    serve``) and wait, up to 20 s, until every one has ended; returns the runs as started."""
    import time

    pool = WorkerPool(hazel, threads=1, sweep_sec=0.05, outage_pauses_sec=(0.05,))
    pool.start()
    try:
        runs = []
        for name in workflows:
            runs.append(hazel.start(workflow=name, input={}, actor=person("me")))
            pool.wake()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(hazel.get(run_id=r.id).status.ended for r in runs):
            time.sleep(0.02)
    finally:
        pool.stop()
    return runs


class _StrRaises(BaseException):
    def __str__(self) -> str:
        raise _StrRaises()


class _StrFails(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str blew up")


@pytest.mark.parametrize("error, stored", [
    (asyncio.CancelledError("llm call cancelled"), "CancelledError: llm call cancelled"),
    (KeyboardInterrupt("llm call cancelled"), "KeyboardInterrupt: llm call cancelled"),
    (GeneratorExit("llm call cancelled"), "GeneratorExit: llm call cancelled"),
    (_StrRaises(), "_StrRaises: (its text could not be read: its __str__ raised)"),
    (_StrFails(), "_StrFails: (its text could not be read: its __str__ raised)"),
    (RuntimeError("bad\x00nul"), "RuntimeError: bad\\x00nul"),
    (RuntimeError("bad\udcffsurrogate"), "RuntimeError: bad\\udcffsurrogate"),
], ids=["cancelled-error", "keyboard-interrupt", "generator-exit", "base-exception-str-raises",
        "exception-str-raises", "nul", "lone-surrogate"])
def test_a_step_error_of_any_kind_is_the_steps_and_the_worker_thread_goes_on(db_url: str, error: BaseException,
                                                                            stored: str) -> None:
    """A step whose LLM client raised ``asyncio.CancelledError`` (a ``BaseException``, not an ``Exception``), or
    that raised ``KeyboardInterrupt`` / ``GeneratorExit`` itself, ended the ``hazel serve`` worker thread that
    executed it: the run stayed ``running`` for ever (its lease renewed), and once every thread was gone the
    server executed nothing. So did an error whose ``str()`` raises (an ``Exception`` one failed the run "outside
    a step", not retried), or whose text holds a NUL or a lone surrogate (no database stored it: "marking it
    failed failed too"). Each is the step's error: retried, then the run fails with it (written with escapes),
    and the thread takes the next run."""
    wf = Workflow("hard", version=1, state=Counted)

    @wf.step(max_attempts=2, backoff_sec=0)
    def call(state: Counted, ctx: StepContext) -> Counted:
        raise error

    ok = Workflow("fine", version=1, state=Counted)

    @ok.step
    def work(state: Counted, ctx: StepContext) -> Counted:
        return state

    hazel = make_hazel(db_url, wf, ok)
    hard, fine = in_one_worker_thread(hazel, "hard", "fine")
    failed = hazel.get(run_id=hard.id)
    assert failed.status is RunStatus.FAILED and failed.attempt == 2, failed
    assert failed.error == stored, failed.error
    actions = [e.action for e in hazel.audit(run_id=hard.id)]
    assert actions.count("step.retry_scheduled") == 1 and "step.failed" in actions and "run.failed" not in actions
    assert hazel.get(run_id=fine.id).status is RunStatus.COMPLETED


def test_a_worker_thread_outlives_a_base_exception_outside_a_step(db_url: str) -> None:
    """A ``BaseException`` raised around a step rather than by it (here a step listener's
    ``asyncio.CancelledError``) ended the worker's thread, which ran nothing more: the loop logs it and goes on; the
    run it was executing is handed back when its lease runs out and completes."""
    wf = Workflow("listened", version=1, state=Counted)

    @wf.step
    def work(state: Counted, ctx: StepContext) -> Counted:
        return state.model_copy(update={"n": state.n + 1})

    hazel = make_hazel(db_url, wf, lease_sec=1.0)
    raised: list[str] = []

    def listener(run_id: str, step: str) -> None:
        if not raised:
            raised.append(run_id)
            raise asyncio.CancelledError("a listener's task was cancelled")

    hazel.on_step(listener)
    first, second = in_one_worker_thread(hazel, "listened", "listened")
    assert raised == [first.id]
    assert [hazel.get(run_id=r.id).status for r in (first, second)] == [RunStatus.COMPLETED] * 2


def test_a_keyboard_interrupt_in_the_main_thread_is_ctrl_c(db_url: str) -> None:
    """In the main thread (a CLI command executing the run) a KeyboardInterrupt is Ctrl-C: it goes through, and
    the command says which run it left; the run is not failed for it."""
    wf = Workflow("interrupted", version=1, state=Counted)

    @wf.step
    def slow(state: Counted, ctx: StepContext) -> Counted:
        raise KeyboardInterrupt

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="interrupted", input={}, actor=person("me"))
    with pytest.raises(KeyboardInterrupt):
        hazel.drive(run_id=run.id)
    assert hazel.get(run_id=run.id).status is RunStatus.RUNNING  # (handed back by recovery, or `hazel retry`)


def test_a_retry_of_a_run_a_retry_set_running_answers_with_it(db_url: str) -> None:
    """``hazel retry R & hazel retry R``: the second read the run already running (the first queued it and a
    worker took it) and was refused "is running", exit 1. What set the run going was a retry: the same one,
    answered with the run. A run running for another cause (its start, a decision) is still refused."""
    import threading

    gate, inside = threading.Event(), threading.Event()
    failures = {"left": 1}
    wf = Workflow("gated", version=1, state=Counted)

    @wf.step(max_attempts=1)
    def work(state: Counted, ctx: StepContext) -> Counted:
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("first try fails")
        inside.set()
        assert gate.wait(10)
        return state

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="gated", input={}, actor=person("me"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.FAILED
    assert hazel.retry(run_id=run.id, actor=person("me")).status is RunStatus.READY
    worker = threading.Thread(target=hazel.drive, kwargs={"run_id": run.id})
    worker.start()
    try:
        assert inside.wait(10)
        assert hazel.retry(run_id=run.id, actor=person("me")).status is RunStatus.RUNNING  # the same retry again
        other = hazel.start(workflow="gated", input={}, actor=person("me"))
        started = threading.Thread(target=hazel.drive, kwargs={"run_id": other.id})
        inside.clear()
        started.start()
        assert inside.wait(10)
        with pytest.raises(RunStateError, match=f"run {other.id} is running: it is being continued"):
            hazel.retry(run_id=other.id, actor=person("me"))
    finally:
        gate.set()
        worker.join(10)
    started.join(10)
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    assert [e.action for e in hazel.audit(run_id=run.id)].count("run.retried") == 1


def test_two_retries_of_a_ready_run_at_once_both_answer_with_it(db_url: str) -> None:
    """A fresh-user finding: ``hazel retry R & hazel retry R`` on a ``ready`` run (a rewind ``--detach`` queued
    it): the first claimed and drove it, the second read it running and was refused "is running", exit 1 (for a
    failed run both answered). A retry of a ready run is audited as one (``run.retried``), so what set the run
    going is a retry, and the second is answered with the run."""
    import threading

    gate, inside = threading.Event(), threading.Event()
    wf = Workflow("gated-ready", version=1, state=Counted)

    @wf.step
    def work(state: Counted, ctx: StepContext) -> Counted:
        inside.set()
        assert gate.wait(10)
        return state

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="gated-ready", input={}, actor=person("me"))
    assert hazel.retry(run_id=run.id, actor=person("me")).status is RunStatus.READY  # queued: the first retry
    worker = threading.Thread(target=hazel.drive, kwargs={"run_id": run.id})  # its process drives it
    worker.start()
    try:
        assert inside.wait(10)
        assert hazel.retry(run_id=run.id, actor=person("me")).status is RunStatus.RUNNING  # the second
    finally:
        gate.set()
        worker.join(10)
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    assert [e.action for e in hazel.audit(run_id=run.id)].count("run.retried") == 1
    # (a run another cause set going is still refused: the test above)


def test_a_resume_commits_each_transaction_with_its_statements(db_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the start, the decision and the write that ends the run each send their COMMIT with their
    statements (``store.Tx.pipeline(commit=True)``): no transaction asks the driver for a commit of its own,
    a round trip each (on SQLite, in process, there is none to save)."""
    from tests.workflows.doc import doc_workflow

    hazel = make_hazel(db_url, doc_workflow())
    if hazel.store.dialect != "postgresql":
        pytest.skip("PostgreSQL's round trips")
    import psycopg

    import traceback

    commits: list[str] = []
    commit = psycopg.Connection.commit

    def counted(self):  # noqa: ANN001, ANN202 (the outbox's deliveries after them are transactions of their own)
        if not any(f.filename.endswith("bot/ops/outbox.py") for f in traceback.extract_stack()):
            commits.append(traceback.format_stack(limit=8)[0])
        return commit(self)

    monkeypatch.setattr(psycopg.Connection, "commit", counted)
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=person("author"), claim=True)
    assert hazel.drive(run_id=run.id).status is RunStatus.WAITING
    alice = hazel.identify(channel="api", id="alice", name="alice")
    assert hazel.decide(run_id=run.id, action="approve", actor=alice, claim=True).run_status is RunStatus.RUNNING
    assert hazel.drive(run_id=run.id).status is RunStatus.COMPLETED
    assert commits == []


def test_a_workers_claim_commits_with_its_statement(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL a worker's claim (``Hazel.claim_next``), one that leases a run and one that finds none,
    sends BEGIN, its UPDATE and COMMIT in one round trip, and so does the read of the claimed run's head
    checkpoint that starts its drive: the driver is never asked for a commit of its own (the claim through
    SQLAlchemy's ``Connection`` took three round trips, the read two)."""
    hazel = make_hazel(db_url, loop_workflow(Counter(), threading.Lock()))
    if hazel.store.dialect != "postgresql":
        pytest.skip("PostgreSQL's round trips")
    import traceback

    import psycopg

    run = hazel.start(workflow="looper", input={}, actor=person("me"))
    commits: list[str] = []
    commit = psycopg.Connection.commit

    def counted(self):  # noqa: ANN001, ANN202 (the outbox's deliveries are transactions of their own)
        if not any(f.filename.endswith("bot/ops/outbox.py") for f in traceback.extract_stack()):
            commits.append(traceback.format_stack(limit=8)[0])
        return commit(self)

    monkeypatch.setattr(psycopg.Connection, "commit", counted)
    claim = hazel.claim_next()
    assert claim is not None and claim.run.id == run.id and claim.run.status is RunStatus.RUNNING
    assert hazel.claim_next() is None
    assert commits == []
    # its drive reads the head checkpoint the same way (BEGIN, the query, COMMIT), and writes its steps too
    assert hazel.execute(claim=claim).status is RunStatus.WAITING  # the lease it took is the one it drives
    assert commits == []


def test_a_step_logs_to_its_own_logger_named_by_workflow_and_step(db_url: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    wf = Workflow("logged", version=1, state=Counted)

    @wf.step
    def first(state: Counted, ctx: StepContext) -> Counted:
        ctx.log.info("first says %d", state.n)
        return state

    @wf.step
    def second(state: Counted, ctx: StepContext) -> Counted:
        ctx.log.warning("second says hi")
        return state

    hazel = make_hazel(db_url, wf)
    caplog.set_level("INFO", logger="hazel.step")
    for _ in range(2):  # the loggers are made once, with the workflow, and the same ones serve every run
        run = hazel.start(workflow="logged", input={}, actor=person("me"))
        assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    said = [(r.name, r.getMessage()) for r in caplog.records if r.name.startswith("hazel.step")]
    assert said == [("hazel.step.logged.first", "first says 0"), ("hazel.step.logged.second", "second says hi")] * 2
    assert wf.step_log("first") is wf.step_log("first")
