"""Commands that only read (``runs``, ``show``, ``history``, ``audit``, ``outbox``) read on when the database
takes no write: the runs of dead processes, which every command first hands back, stay as stored and a warning
says so (fresh-user s17 F3: on a full disk every one of them failed, when the operator most needed to look).
A command that writes still fails in one line. Here the database is opened read-only (SQLite's ``mode=ro``), as a
full disk or a write lock held past the busy timeout refuse the write."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from bot.engine.leases import local_host
from tests.support.cli import in_process_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dead_owners_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A database whose one run is ``running`` under the lease of a process that has exited."""
    path = tmp_path / "hazel.db"
    cli = in_process_cli(monkeypatch, ROOT, db_url=f"sqlite:///{path}", workflows="examples.migration_plan")
    run_id = json.loads(cli("run", "migration-plan", "--input", '{"request": "move the db"}', "--json").stdout)[
        "run"]["id"]
    gone = subprocess.Popen(["true"])
    gone.wait()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE hazel_runs SET status = 'running', lease_owner = ?, lease_token = 't'",
                    (f"{local_host()}:{gone.pid}:t",))
    return path, run_id


def test_reads_go_on_when_the_hand_back_cannot_be_written(dead_owners_run,  # noqa: ANN001
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path, run_id = dead_owners_run
    read_only = in_process_cli(monkeypatch, ROOT, db_url=f"sqlite:///file:{path}?mode=ro&uri=true",
                               workflows="examples.migration_plan")
    for args in (("runs", "--json"), ("show", run_id, "--json"), ("history", run_id), ("audit", run_id),
                 ("outbox",)):
        result = read_only(*args)
        assert "runs left running by a dead process were not handed back (attempt to write a readonly " \
               "database): they are shown as stored" in result.stderr, (args, result.stderr)
        if args[0] == "show":  # the JSON says it too: the run it shows as running was not handed back
            warnings = json.loads(result.stdout)["warnings"]
            assert len(warnings) == 1 and warnings[0].startswith(
                "runs left running by a dead process were not handed back (attempt to write"), result.stdout
    assert [r["status"] for r in json.loads(read_only("runs", "--json").stdout)] == ["running"]
    refused = read_only("cancel", run_id, code=1)  # a command that writes fails in one line, as before
    assert "attempt to write a readonly database" in refused.stderr
    writable = in_process_cli(monkeypatch, ROOT, db_url=f"sqlite:///{path}", workflows="examples.migration_plan")
    listed = writable("runs", "--json")
    assert "not handed back" not in listed.stderr
    assert json.loads(writable("show", run_id, "--json").stdout)["warnings"] == []  # (none kept from before)
    assert [r["status"] for r in json.loads(listed.stdout)] == ["ready"]  # handed back by the first writer


def test_behind_a_held_lock_the_warning_names_it(dead_owners_run,  # noqa: ANN001
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from store import db

    path, run_id = dead_owners_run
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 300)  # (read when an engine is made: 0.3 s instead of 30)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program's writer (Hazel's own turns do not see it)
    try:
        cli = in_process_cli(monkeypatch, ROOT, db_url=f"sqlite:///{path}", workflows="examples.migration_plan")
        result = cli("show", run_id, "--json")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert json.loads(result.stdout)["run"]["status"] == "running"
    assert "another process has held SQLite's write lock" in json.loads(result.stdout)["warnings"][0]
    assert ("runs left running by a dead process were not handed back (another process has held SQLite's write "
            "lock for 0.3 s): they are shown as stored") in result.stderr
