"""A database error that stops ``hazel approve`` after its decision committed says what stands and how the run
continues, as the busy database's line does (fresh-user s18 M1: a full disk gave only "database or disk is
full", so a person retried the plain ``approve`` and approved the next point unseen). The error is made real by
a file size limit on the command's process: SQLite's write past it fails (``EFBIG``: "disk I/O error")."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "tests" / "workflows" / "bulky.py"
LIMIT_BYTES = 512 * 1024
"""Largest file the limited command may write: the decision's commit fits (about 100 KB of log), the bulk step's
1.2 MB checkpoint does not."""


def _hazel(args: list[str], env: dict[str, str], *, limited: bool = False) -> subprocess.CompletedProcess:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (a write past the limit fails with EFBIG instead)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))

    return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=limit if limited else None)


def test_a_full_disk_after_the_decision_says_what_stands(tmp_path: Path) -> None:
    env = {**os.environ, "HAZEL_DATABASE_URL": f"sqlite:///{tmp_path / 'hazel.db'}",
           "HAZEL_WORKFLOWS": str(WORKFLOW), "HAZEL_OPERATOR": "olga"}
    started = _hazel(["run", "bulky", "--json"], env)
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["run"]["id"]

    approved = _hazel(["approve", run_id], env, limited=True)
    assert approved.returncode == 1, (approved.stdout, approved.stderr)
    assert "approve recorded" in approved.stdout
    assert approved.stderr.startswith(f"error: database sqlite:///{tmp_path / 'hazel.db'}: disk I/O error; ")
    assert (f"; what this command recorded before stands, and run {run_id} was executing: a step cut short runs "
            "again from its last checkpoint: `") in approved.stderr
    assert f" retry {run_id}` continues it here once the database takes writes again" in approved.stderr

    retried = _hazel(["retry", run_id, "--json"], env)  # (room again: the run is handed back, then continued)
    assert retried.returncode == 0, retried.stderr
    shown = json.loads(_hazel(["show", run_id, "--json"], env).stdout)
    assert shown["run"]["status"] == "completed"
    assert len(shown["state"]["text"]) == 1_200_000  # (past the point: the approval stood)
