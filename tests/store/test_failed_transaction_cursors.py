"""A transaction that fails with a statement's rows unread gives its connection back clean.

On SQLite an unread SELECT keeps its statement, and with it a read transaction, alive on the pooled
connection after the rollback, for as long as its cursor lives (a failed transaction's cursors live as long
as its traceback). Once another connection committed, every ``BEGIN IMMEDIATE`` on that pooled connection
failed at once with "database is locked": a rewind to checkpoint 99999999999999999999 wedged every writer of
``hazel serve`` that way (the driver raised OverflowError binding it, after the run and its request had been
read without being looked at)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from store import Store
from store.checkpoints import SEQ_MAX
from store.models import Actor
from tests.support.engine import make_hazel
from tests.workflows.sample import docs

NOW = datetime(2026, 12, 2, tzinfo=timezone.utc)


def _write(store: Store, run_id: str) -> None:
    with store.transaction() as tx:
        tx.events.add(action="test.write", actor=Actor(id="t", name="t", channel="console"), now=NOW,
                      run_id=run_id)


def test_a_failed_transactions_unread_rows_do_not_lock_the_next_writer(db_url: str) -> None:
    hazel = make_hazel(db_url, docs)
    run_id = hazel.start(workflow="doc-review", input={"topic": "t"}, actor=hazel.operator()).id
    store = Store(db_url, pool_size=1)  # one pooled connection: the next transaction gets the same one
    other = Store(db_url)
    try:
        kept = []
        with pytest.raises(RuntimeError):
            with store.transaction() as tx:
                kept.append(tx.runs.get_later(run_id))  # sent, never read (as a refused rewind's reads were)
                raise RuntimeError("a failure after the read")
        _write(other, run_id)  # another connection commits: the unread statement's snapshot is now old
        _write(store, run_id)  # "database is locked" at once, before the fix
        with store.read() as tx:
            assert tx.runs.get(run_id).id == run_id
        assert kept  # (the unread answer is still referenced, as a traceback would keep it)
    finally:
        store.dispose()
        other.dispose()


@pytest.mark.parametrize("to", [99999999999999999999, "99999999999999999999", SEQ_MAX + 1, -1])
def test_a_rewind_past_any_checkpoint_number_is_refused_and_changes_nothing(db_url: str, to: object) -> None:
    from bot.engine.errors import CheckpointNotFoundError

    hazel = make_hazel(db_url, docs)
    op = hazel.operator()
    run_id = hazel.start(workflow="doc-review", input={"topic": "t"}, actor=op, claim=True).id
    hazel.drive(run_id=run_id)
    before = hazel.checkpoints(run_id=run_id)
    for _ in range(2):  # refused twice: nothing left behind by the first
        with pytest.raises(CheckpointNotFoundError, match="no checkpoint #"):
            hazel.rewind(run_id=run_id, actor=op, to=to)
    assert hazel.checkpoints(run_id=run_id) == before
    assert hazel.get(run_id=run_id).status.value == "waiting"
    with pytest.raises(CheckpointNotFoundError):  # reading the state there: the same answer
        hazel.state_at(run_id=run_id, seq=int(str(to)))
    out = hazel.decide(run_id=run_id, action="approve", actor=op)  # writers still write
    assert out.settled


def test_a_jira_rewind_to_a_huge_number_is_refused_and_the_next_comment_decides(
        db_url: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """What wedged ``hazel serve``: a feedback comment (the run resumes), then ``/rewind 99999999999999999999``."""
    from tests.support.jira_env import jira_env

    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))
    with jira_env(db_url, cloud=True) as env:
        run_id = env.start()
        issue = env.issue(run_id)
        answer = env.send(env.comment(issue, "/rewind 99999999999999999999"))
        assert answer.status_code == 200, answer.text
        refused = answer.json()["refused"]
        assert "has no checkpoint \\#99999999999999999999" in refused and "Nothing changed" in refused
        assert env.send(env.comment(issue, "/approve")).json()["decided"] == "approve"
