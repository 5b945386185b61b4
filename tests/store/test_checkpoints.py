"""Checkpoint storage: patches sized by the change, periodic snapshots, bounded loads, branches."""

from __future__ import annotations

import random
import string
from datetime import datetime, timezone

from store import NewCheckpoint, SnapshotPolicy, Store
from store.models import RunStatus


def words(rng: random.Random, n_chars: int) -> str:
    out = []
    while sum(len(w) + 1 for w in out) < n_chars:
        out.append("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))))
    return " ".join(out)[:n_chars]


def new_run(store: Store, run_id: str = "r1") -> None:
    with store.transaction() as tx:
        tx.runs.insert(run_id=run_id, workflow="w", workflow_version=1, started_by="me", started_via="console",
                       now=datetime.now(timezone.utc), status=RunStatus.READY)


def cp(seq: int, parent: int | None, branch: int = 0) -> NewCheckpoint:
    return NewCheckpoint(run_id="r1", seq=seq, parent_seq=parent, branch=branch, step=f"s{seq}",
                         next_step="x", workflow_version=1, created_at=datetime.now(timezone.utc))


def test_bytes_per_step_follow_the_change_and_loads_are_bounded(db_url: str) -> None:
    policy = SnapshotPolicy(max_chain=40, delta_ratio=4.0)
    store = Store(db_url, snapshot_policy=policy)
    new_run(store)
    rng = random.Random(7)
    trees = [{"items": [], "title": "t"}]
    position = None
    with store.transaction() as tx:
        position = tx.checkpoints.write(cp(0, None), trees[0], None)
    for seq in range(1, 201):
        tree = {"items": trees[-1]["items"] + [words(rng, 1000)], "title": "t"}
        trees.append(tree)
        with store.transaction() as tx:
            position = tx.checkpoints.write(cp(seq, seq - 1), tree, position)
    with store.read() as tx:
        infos = tx.checkpoints.list("r1")
        loads = {seq: tx.checkpoints.load("r1", seq) for seq in (0, 1, 39, 40, 41, 99, 150, 200)}
    patches = [i for i in infos if not i.is_snapshot]
    snapshots = [i for i in infos if i.is_snapshot]
    # a patch holds one ~1 KB item whatever the state's size (200 KB by the end)
    assert max(p.stored_bytes for p in patches) < 1200
    assert abs(patches[5].stored_bytes - patches[-5].stored_bytes) < 300
    # a snapshot at most every max_chain checkpoints along the chain
    assert 200 // 41 <= len(snapshots) - 1 <= 200 // 20
    for seq, loaded in loads.items():
        assert loaded.tree == trees[seq], seq
        assert loaded.rows_read <= policy.max_chain + 1
    store.dispose()


def test_large_changes_snapshot_early(db_url: str) -> None:
    """When each change rewrites most of the state, patches outweigh a snapshot fast: take one."""
    store = Store(db_url, snapshot_policy=SnapshotPolicy(max_chain=100, delta_ratio=2.0))
    new_run(store)
    rng = random.Random(1)
    position = None
    for seq in range(0, 30):
        tree = {"body": words(rng, 3000)}
        with store.transaction() as tx:
            position = tx.checkpoints.write(cp(seq, seq - 1 if seq else None), tree, position)
    with store.read() as tx:
        infos = tx.checkpoints.list("r1")
    assert sum(1 for i in infos if i.is_snapshot) >= 8
    store.dispose()


def test_a_fork_loads_its_own_branch(store: Store) -> None:
    new_run(store)
    with store.transaction() as tx:
        p0 = tx.checkpoints.write(cp(0, None), {"v": [0]}, None)
        p1 = tx.checkpoints.write(cp(1, 0), {"v": [0, 1]}, p0)
        tx.checkpoints.write(cp(2, 1), {"v": [0, 1, 2]}, p1)
    with store.transaction() as tx:
        base = tx.checkpoints.load("r1", 1)
        fork = tx.checkpoints.write(cp(3, 1, branch=1), {"v": [0, 1, "fork"]}, tx.checkpoints.position(base))
        tx.checkpoints.write(cp(4, 3, branch=1), {"v": [0, 1, "fork", 4]}, fork)
    with store.read() as tx:
        assert tx.checkpoints.load("r1", 2).tree == {"v": [0, 1, 2]}
        assert tx.checkpoints.load("r1", 4).tree == {"v": [0, 1, "fork", 4]}
        info = tx.checkpoints.info("r1", 3)
        assert info.parent_seq == 1 and info.branch == 1
        assert tx.checkpoints.load("r1", 99) is None


def test_a_fenced_write_needs_the_lease(store: Store) -> None:
    """The checkpoint and the run's head are written together, and only by the lease holder: with a stale
    token nothing is written (one statement on PostgreSQL, two in one transaction on SQLite)."""
    from datetime import timedelta

    import pytest

    from store import Fence, LeaseLostError

    new_run(store)
    now = datetime.now(timezone.utc)
    with store.transaction() as tx:
        p0 = tx.checkpoints.write(cp(0, None), {"v": 0}, None)
        claimed = tx.runs.claim(owner="me", token="tok-1", now=now, lease_until=now + timedelta(seconds=60))
    assert claimed is not None and claimed.status is RunStatus.RUNNING
    with pytest.raises(LeaseLostError):
        with store.transaction() as tx:
            tx.checkpoints.write(cp(1, 0), {"v": 1}, p0,
                                 fence=Fence("r1", "stale-token", now, {"head_seq": 1, "last_seq": 1}))
    with store.read() as tx:
        assert tx.checkpoints.info("r1", 1) is None and tx.runs.get("r1").head_seq == 0
    with store.transaction() as tx:
        tx.checkpoints.write(cp(1, 0), {"v": 1}, p0, fence=Fence(
            "r1", "tok-1", now, {"head_seq": 1, "last_seq": 1, "status": RunStatus.WAITING}))
    with store.read() as tx:
        run = tx.runs.get("r1")
        assert tx.checkpoints.load("r1", 1).tree == {"v": 1}
        assert (run.head_seq, run.last_seq, run.status, run.lease_token) == (1, 1, RunStatus.WAITING, None)


def test_a_listing_says_what_each_checkpoint_says_alone(store: Store) -> None:
    """``list`` builds its rows from the driver's tuples (``_info_rows``); ``info`` reads one checkpoint its own
    way. Both agree on every field: timestamps UTC and aware, the handoff's JSON, the decision, the snapshot
    flag, the newest first with ``newest``."""
    new_run(store)
    at = datetime(2026, 12, 5, 22, 30, 1, 250, tzinfo=timezone.utc)
    with store.transaction() as tx:
        pos = tx.checkpoints.write(NewCheckpoint(run_id="r1", seq=0, parent_seq=None, branch=0, step="__start__",
                                                 next_step="a", workflow_version=1, created_at=at), {"v": 0}, None)
        for seq in (1, 2, 3):
            handoff = {"feedback": "shorter, «please»", "by": "ann"} if seq == 2 else None
            pos = tx.checkpoints.write(
                NewCheckpoint(run_id="r1", seq=seq, parent_seq=seq - 1, branch=0, step=f"s{seq}",
                              next_step=None if seq == 3 else "x", workflow_version=1,
                              created_at=at.replace(second=seq), handoff=handoff),
                {"v": seq}, pos)
    with store.read() as tx:
        listed = tx.checkpoints.list("r1")
        alone = [tx.checkpoints.info("r1", seq) for seq in range(4)]
        newest = tx.checkpoints.list("r1", newest=2)
    assert listed == alone
    assert [i.seq for i in newest] == [3, 2] and newest == alone[:1:-1]
    assert listed[0].created_at == at and listed[0].created_at.tzinfo == timezone.utc
    assert listed[2].handoff == {"feedback": "shorter, «please»", "by": "ann"} and listed[1].handoff is None
    assert [i.is_snapshot for i in listed][0] is True and listed[3].next_step is None


def test_a_stored_time_with_an_offset_of_its_own_is_read_as_utc() -> None:
    """SQLite keeps Hazel's times as naive UTC text; a text that carries an offset (not written by Hazel) is
    read as the instant it names, in UTC."""
    from store.fast import _sqlite_time_out

    assert _sqlite_time_out("2026-12-05 22:30:01.000250") == datetime(2026, 12, 5, 22, 30, 1, 250, tzinfo=timezone.utc)
    assert _sqlite_time_out("2026-12-05 22:30:01").tzinfo is timezone.utc
    shifted = _sqlite_time_out("2026-12-06 00:30:01+02:00")
    assert shifted == datetime(2026, 12, 5, 22, 30, 1, tzinfo=timezone.utc) and shifted.tzinfo is timezone.utc
