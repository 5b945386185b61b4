"""Commands that only read (``hazel runs``, ``show``, ``history``, ``audit``) answer while another program holds
a write transaction open on the database, and show what was last committed.

Found: on SQLite each of them began with the schema check, which read the schema's revision in a writer's
``BEGIN IMMEDIATE`` (``store.migrate.current_revision``); with another process holding the write lock, ``hazel
runs`` waited the whole busy timeout (30 s), then failed ``error: the database is busy``. Each command here
runs in a process of its own with the default busy timeout and is given 15 s: waiting for the lock fails it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.writer import write_held

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "tests" / "workflows" / "sample.py"
WAIT_SEC = 25.0
"""How long a command run while the other program holds its write transaction may take: one that waits for the
write lock waits 30 s (the busy timeout), then fails."""
SETUP_SEC = 120.0
"""How long any other command may take (the commands that set a test up, on a loaded machine)."""


def _hazel(db_url: str, tmp_path: Path, *args: str, wait_sec: float = SETUP_SEC) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HAZEL_", "SLACK_", "JIRA_"))}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               HAZEL_DATABASE_URL=db_url, HAZEL_WORKFLOWS=str(WORKFLOWS), HAZEL_OPERATOR="olga")
    try:
        return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=wait_sec)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hazel {' '.join(args)} did not answer within {wait_sec:g} s"
                    + (": it waited for the write lock" if wait_sec == WAIT_SEC else ""))


def _run(db_url: str, tmp_path: Path, topic: str) -> str:
    done = _hazel(db_url, tmp_path, "run", "doc-review", "--input", json.dumps({"topic": topic}), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["run"]["id"]


def test_reading_commands_answer_while_another_program_writes(db_url: str, tmp_path: Path) -> None:
    waiting = _run(db_url, tmp_path, "wal")
    assert _hazel(db_url, tmp_path, "feedback", waiting, "shorter").returncode == 0  # a second draft: a history
    completed = _run(db_url, tmp_path, "readers")
    assert _hazel(db_url, tmp_path, "approve", completed).returncode == 0
    with write_held(db_url, run_id=waiting):
        runs = _hazel(db_url, tmp_path, "runs", "--json", wait_sec=WAIT_SEC)
        shown = _hazel(db_url, tmp_path, "show", waiting, "--json", wait_sec=WAIT_SEC)
        history = _hazel(db_url, tmp_path, "history", waiting, wait_sec=WAIT_SEC)
        audit = _hazel(db_url, tmp_path, "audit", waiting, "--json", wait_sec=WAIT_SEC)
        plain = [_hazel(db_url, tmp_path, *args, wait_sec=WAIT_SEC) for args in (["runs"], ["show", completed])]
    for done in (runs, shown, history, audit, *plain):
        assert done.returncode == 0 and done.stderr == "", done.stderr
    assert {r["id"]: r["status"] for r in json.loads(runs.stdout)} == {waiting: "waiting", completed: "completed"}
    assert json.loads(shown.stdout)["state"]["draft"] == "About wal (v2)"
    assert "shorter" in history.stdout
    # what the other program has not committed (an event of this run, UNCOMMITTED) is not read
    assert [e["action"] for e in json.loads(audit.stdout)] == ["run.started", "request.opened", "decision.feedback",
                                                               "request.opened"]


def test_an_older_schema_is_still_refused_while_another_program_writes(empty_url: str, tmp_path: Path) -> None:
    assert _hazel(empty_url, tmp_path, "db", "upgrade").returncode == 0
    assert _hazel(empty_url, tmp_path, "db", "downgrade", "0008").returncode == 0
    with write_held(empty_url):
        done = _hazel(empty_url, tmp_path, "runs", wait_sec=WAIT_SEC)
    assert done.returncode == 1
    assert done.stderr.strip() == ("error: the database is at schema revision 0008, this Hazel needs 0009: run "
                                   "`hazel db upgrade`"), done.stderr


def test_a_command_on_an_empty_database_creates_the_schema(empty_url: str, tmp_path: Path) -> None:
    assert _run(empty_url, tmp_path, "first")
    current = _hazel(empty_url, tmp_path, "db", "current", "--json")
    assert json.loads(current.stdout)["current"] == json.loads(current.stdout)["head"] == "0009"
