"""Crash safety: a run executing in a subprocess is SIGKILLed in the middle of a step; after a restart it
continues from its last checkpoint, completed steps do not run again, and it ends with the same state as an
uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.models import RunStatus
from tests.support.cli import in_process_cli

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "tests" / "workflows" / "crashy.py"


def hazel(args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:  # noqa: ANN003
    return subprocess.Popen([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.slow
def test_sigkill_mid_step_then_restart(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(WORKFLOW),
           "CRASHY_DIR": str(tmp_path), "HAZEL_OPERATOR": "tester"}
    # the reads (runs, show) in this process, as a command started here (its start recovers dead owners' runs);
    # the run and the worker that execute steps are processes of their own
    monkeypatch.setenv("CRASHY_DIR", str(tmp_path))
    read = in_process_cli(monkeypatch, ROOT, db_url=db_url, workflows=str(WORKFLOW), operator="tester")
    (tmp_path / "block").touch()
    proc = hazel(["run", "crashy", "--input", '{"total": 1}'], env)
    deadline = time.monotonic() + 60
    while not (tmp_path / "slow.started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the slow step never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    (tmp_path / "block").unlink()

    runs = json.loads(read("runs", "--json").stdout)
    assert len(runs) == 1
    run_id = runs[0]["id"]  # listing started Hazel: the dead process's run is recovered already
    assert runs[0]["status"] == RunStatus.READY.value

    restart = hazel(["worker", "--until-idle", "--json"], env)
    out, err = restart.communicate(timeout=60)
    assert restart.returncode == 0, err
    shown = json.loads(read("show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "completed"
    # uninterrupted: ((1 + 1) * 10 + 7) * 2 = 54
    assert shown["state"] == {"total": 54, "trail": ["first", "second", "slow", "last"]}
    effects = [line.split()[0] for line in (tmp_path / "effects.log").read_text().splitlines()]
    assert effects.count("first") == 1 and effects.count("second") == 1 and effects.count("last") == 1
    assert effects.count("slow-start") == 2 and effects.count("slow-end") == 1  # only the killed step ran again
    keys = {line.split()[1] for line in (tmp_path / "effects.log").read_text().splitlines()
            if line.startswith("slow")}
    assert keys == {f"{run_id}:2:slow"}  # the same idempotency key before and after the crash
