"""A SQLite database whose write lock another process holds past the busy timeout (a fresh-user finding, F8: every
command waited 30 s, then ended ``error: unexpected OperationalError: database is locked (HAZEL_DEBUG=1 shows
where)``). Each command now says in one line that the database is busy, for how long the lock was held, what
stands and what to do; exit status 1, nothing written. Commands that only read do not wait for the lock: they
answer with what was last committed (``tests/bot/test_cli_reads_beside_a_writer.py``).

The lock is SQLite's own, taken by another connection on the same file (``BEGIN EXCLUSIVE``, as another program
would hold it: Hazel's in-process turns do not see it). The busy timeout is shortened to 0.3 s in this process
(``store.db.BUSY_TIMEOUT_MS``, read when an engine is made) so that each command waits 0.3 s instead of 30 s.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from store import db
from tests.support.cli import in_process_cli
from tests.support.waiting import wait_until

LOCKER = r'''
import os
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from hazel import Approvers, StepContext, Workflow

HERE = Path(__file__).parent
HOLDER = (
    "import os, sqlite3, sys, time\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "c.execute('BEGIN EXCLUSIVE')\n"
    "print('locked', flush=True)\n"
    "while os.path.exists(sys.argv[2]):\n"
    "    time.sleep(0.02)\n")


class Note(BaseModel):
    text: str = ""


wf = Workflow("locker", version=1, state=Note)


@wf.step
def draft(state: Note, ctx: StepContext) -> Note:
    return state.model_copy(update={"text": "drafted"})


wf.steer("review", show="text", approvers=Approvers(users=["olga"]))


@wf.step
def lock_it(state: Note, ctx: StepContext) -> Note:
    """Another program takes the database's write lock while this step runs, and keeps it while the file
    ``hold`` exists."""
    (HERE / "hold").touch()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(HERE / "hazel.db"), str(HERE / "hold")],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    (HERE / "holder.pid").write_text(str(holder.pid))
    return state.model_copy(update={"text": "locked"})
'''


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Any]:
    (tmp_path / "locker.py").write_text(LOCKER)
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 300)
    return in_process_cli(monkeypatch, tmp_path, db_url=f"sqlite:///{tmp_path / 'hazel.db'}",
                          workflows=str(tmp_path / "locker.py"))


@pytest.fixture
def waiting_run(cli: Callable[..., Any]) -> str:
    return json.loads(cli("run", "locker", "--json").stdout)["run"]["id"]


class Locked:
    """``BEGIN EXCLUSIVE`` on the database file from a connection of its own, until ``release()``."""

    def __init__(self, path: Path) -> None:
        self.conn: sqlite3.Connection | None = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self.conn is not None:
            self.conn.execute("ROLLBACK")
            self.conn.close()
            self.conn = None


@pytest.fixture
def locked(tmp_path: Path, waiting_run: str) -> Iterator[Locked]:
    lock = Locked(tmp_path / "hazel.db")
    try:
        yield lock
    finally:
        lock.release()


def _busy_line(tmp_path: Path) -> str:
    return (f"error: the database is busy (sqlite:///{tmp_path / 'hazel.db'}): another process has held SQLite's "
            "write lock for 0.3 s; nothing was recorded: try again")


@pytest.mark.parametrize("argv", [["approve", "RUN"], ["reject", "RUN", "--reason", "no"], ["cancel", "RUN"],
                                  ["run", "locker"]])
def test_every_command_that_writes_on_a_locked_database_says_it_is_busy_in_one_line(
        argv: list[str], cli: Callable[..., Any], waiting_run: str, locked: Locked, tmp_path: Path) -> None:
    argv = [waiting_run if a == "RUN" else a for a in argv]
    result = cli(*argv, code=1)
    assert result.stderr.strip() == _busy_line(tmp_path), result.stderr
    assert "unexpected" not in result.output
    locked.release()
    shown = json.loads(cli("show", waiting_run, "--json").stdout)
    assert shown["run"]["status"] == "waiting" and shown["pending_request"]["status"] == "pending"  # as it was
    assert [r["id"] for r in json.loads(cli("runs", "--json").stdout)] == [waiting_run]


@pytest.mark.parametrize("argv", [["runs"], ["show", "RUN"], ["history", "RUN"], ["audit", "RUN"]])
def test_a_command_that_reads_answers_beside_the_lock(argv: list[str], cli: Callable[..., Any], waiting_run: str,
                                                      locked: Locked) -> None:
    """(Found: the schema check each command starts with took the write lock, ``hazel runs`` and ``hazel show``
    said the database was busy.)"""
    result = cli(*[waiting_run if a == "RUN" else a for a in argv])
    assert result.stderr == "" and "review" in result.stdout, result.output  # the run waits at 'review'


def test_json_mode_prints_the_same_line_as_the_error_object(cli: Callable[..., Any], waiting_run: str,
                                                            locked: Locked, tmp_path: Path) -> None:
    result = cli("approve", waiting_run, "--json", code=1)
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "OperationalError"
    assert f"error: {error['message']}" == _busy_line(tmp_path)


def test_a_command_whose_run_meets_the_lock_says_what_stands_and_how_it_continues(
        cli: Callable[..., Any], waiting_run: str, tmp_path: Path) -> None:
    """The approve is recorded; the checkpoint of the step after it meets the lock another process took while that
    step ran (and holds until the file ``hold`` is removed)."""
    try:
        result = cli("approve", waiting_run, code=1)
    finally:
        (tmp_path / "hold").unlink(missing_ok=True)
    line = result.stderr.strip()
    assert line == (f"error: the database is busy (sqlite:///{tmp_path / 'hazel.db'}): another process has held "
                    f"SQLite's write lock for 0.3 s; what this command recorded before stands, and run {waiting_run} "
                    "was executing: a step cut short runs again from its last checkpoint: `hazel retry "
                    f"{waiting_run}` continues it here once the database is free, or `hazel serve` / `hazel "
                    "worker`"), result.stderr
    assert "approve recorded" in result.stdout
    wait_until(lambda: _gone(int((tmp_path / "holder.pid").read_text())), 10, "the lock holder to end")
    shown = json.loads(cli("show", waiting_run, "--json").stdout)
    assert shown["run"]["head_seq"] == 2 and shown["pending_request"] is None, shown["run"]  # the approve stands


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # (our child: reap it)
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return False
