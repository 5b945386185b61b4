"""``store.heads``: the checkpoint a run paused at, kept by the process that committed it, read back by the
decision instead of the chain query; never what another process wrote, never a rolled-back write, never a
checkpoint other than the one the pending request waits at."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from store import ChainPosition, NewCheckpoint, Store
from store.heads import HeadCache
from store.models import RunStatus
from tests.bot.test_decisions import planner, start_waiting
from tests.support.engine import make_hazel, person


def checkpoint(run_id: str, seq: int) -> NewCheckpoint:
    return NewCheckpoint(run_id=run_id, seq=seq, parent_seq=seq - 1 if seq else None, branch=0, step=f"s{seq}",
                         next_step="x", workflow_version=1, created_at=datetime.now(timezone.utc))


def position(seq: int, weight: int) -> ChainPosition:
    return ChainPosition(seq, {"seq": seq}, seq, weight, 0, 0)


def test_one_entry_per_run_the_exact_seq_and_bounds() -> None:
    cache = HeadCache(max_entries=3, max_bytes=1000, max_entry_bytes=600)
    cache.put(checkpoint("a", 1), position(1, 100), 100)
    cache.put(checkpoint("a", 2), position(2, 100), 100)  # replaces a#1
    assert cache.get("a", 1) is None and cache.get("a", 2).tree == {"seq": 2} and len(cache) == 1
    loaded = cache.get("a", 2)
    assert (loaded.info.seq, loaded.info.parent_seq, loaded.info.is_snapshot, loaded.base_bytes) == (2, 1, True, 100)
    for run_id in "bcd":  # a is the least recently written: dropped for the fourth run
        cache.put(checkpoint(run_id, 0), position(0, 100), 100)
    assert cache.held("a") is None and [cache.held(r) for r in "bcd"] == [0, 0, 0]
    cache.put(checkpoint("e", 0), position(0, 700), 700)  # above max_entry_bytes: not kept
    assert cache.held("e") is None and len(cache) == 3
    cache.put(checkpoint("f", 0), position(0, 550), 550)  # 100 + 100 + 550 + … > 1000: the oldest go
    assert cache.held("f") == 0 and cache.held("b") is None and cache._bytes <= 1000
    cache.put(checkpoint("g", 0), position(0, 550), 550)  # 100 + 100 + 550 + 550 bytes: c and d go, then f
    assert [cache.held(r) for r in "cdfg"] == [None, None, None, 0] and cache._bytes == 550
    cache.drop("g")
    assert cache.held("g") is None and cache._bytes == 0 and len(cache) == 0


def test_a_rolled_back_write_is_not_kept(db_url: str) -> None:
    store = Store(db_url)
    with store.transaction() as tx:
        tx.runs.insert(run_id="r1", workflow="w", workflow_version=1, started_by="me", started_via="console",
                       now=datetime.now(timezone.utc), status=RunStatus.READY)
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.checkpoints.write(checkpoint("r1", 0), {"v": "rolled back"}, None)
        raise RuntimeError("the step failed after writing")
    assert store.heads.held("r1") is None
    with store.transaction() as tx:
        tx.checkpoints.write(checkpoint("r1", 0), {"v": "committed"}, None)
    assert store.heads.get("r1", 0).tree == {"v": "committed"}
    store.dispose()


def test_the_decision_reads_the_state_the_pause_committed(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    heads = hazel.store.heads
    used = heads.hits + heads.taken
    hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={"value": "edited plan"})
    assert heads.hits + heads.taken == used + 1  # the chain query was not sent
    hazel.drive(run_id=run_id)
    other = make_hazel(db_url, planner())  # another process reads the database: the same states
    assert other.state_at(run_id=run_id).plan == "edited plan" and other.state_at(run_id=run_id).done
    assert hazel.get(run_id=run_id).status is RunStatus.COMPLETED


def test_what_another_process_moved_on_is_read_from_the_database(db_url: str) -> None:
    """This process paused the run (and keeps #1); another took feedback, redrafted and paused again at a new
    checkpoint: a decision here reads the new one (the kept entry names an older seq)."""
    here = make_hazel(db_url, planner())
    run_id = start_waiting(here)
    kept = here.store.heads.held(run_id)
    there = make_hazel(db_url, planner())
    there.decide(run_id=run_id, action="feedback", actor=person("sme"), payload={"text": "more"})
    there.drive(run_id=run_id)
    assert there.get(run_id=run_id).head_seq != kept and here.store.heads.held(run_id) == kept
    hits = here.store.heads.hits
    here.decide(run_id=run_id, action="approve", actor=person("sme"))
    assert here.store.heads.hits == hits  # not the kept one: loaded
    here.drive(run_id=run_id)
    state = there.state_at(run_id=run_id)
    assert state.done and state.seen_feedback == ["sme:more"] and state.plan == "plan 1/0 for move"


def test_the_setting_bounds_it_and_zero_keeps_none(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_HEAD_CACHE_BYTES", "0")
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    assert hazel.store.heads.max_bytes == 0 and hazel.store.heads.held(run_id) is None
    hazel.decide(run_id=run_id, action="approve", actor=person("sme"))
    assert hazel.store.heads.hits == 0 and hazel.drive(run_id=run_id).run.status is RunStatus.COMPLETED


def test_a_waiting_run_is_kept_with_its_checkpoint_and_given_once() -> None:
    from store.heads import WAITING_BYTES
    from store.models import Run, SteeringRequest

    now = datetime.now(timezone.utc)
    run = Run(id="a", workflow="w", workflow_version=1, status=RunStatus.WAITING, head_seq=2, last_seq=2, branch=0,
              last_branch=0, started_by="me", started_via="console", created_at=now, updated_at=now)
    asked = SteeringRequest(id=7, run_id="a", checkpoint_seq=2, point="review", title="Review", channel="console",
                            status="pending", approvals_required=1, approvals=0, created_at=now)
    cache = HeadCache(max_entries=3, max_bytes=10_000)
    cache.pause(run, asked, 41)  # no checkpoint kept: nothing
    assert cache.take_waiting("a") is None
    cache.put(checkpoint("a", 1), position(1, 100), 100)
    cache.pause(run, asked, 41)  # the request waits at #2, not at the #1 kept: nothing
    assert cache.take_waiting("a") is None and cache._bytes == 100
    cache.put(checkpoint("a", 2), position(2, 100), 100)
    cache.pause(run, asked, 41)
    assert cache._bytes == 100 + WAITING_BYTES
    kept_run, kept_request, head, decision_id = cache.take_waiting("a")
    assert (kept_run, kept_request, head.info.seq, head.tree, decision_id) == (run, asked, 2, {"seq": 2}, 41)
    assert cache.take_waiting("a") is None and cache._bytes == 100 and cache.held("a") == 2  # given once
    cache.pause(run, asked, 42)
    cache.put(checkpoint("a", 3), position(3, 100), 100)  # a later checkpoint: the run moved on
    assert cache.take_waiting("a") is None and cache._bytes == 100
    cache.pause(run.model_copy(update={"last_seq": 3}), asked.model_copy(update={"checkpoint_seq": 3}), 43)
    for other in "bcd":  # a is dropped for the fourth run, and what was kept with it
        cache.put(checkpoint(other, 0), position(0, 100), 100)
    assert cache.take_waiting("a") is None and cache._bytes == 300 and cache._waiting == {}
