"""A command that drives its run into ``failed`` (``hazel approve``, ``retry``, ``run``, …) exits 1, and says so as
every error that exits 1 does: one line on stderr, ``error: run R failed at step S: <its error>``, and with
``--json`` its usual document carries the error as its ``"error"`` member (one document, never two). It used to
print no error line, and with ``--json`` no ``"error"`` object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bot.engine.registry import module_name
from tests.bot.conftest import ROOT, SAMPLE

SPEND_FAILED = "RuntimeError: payment provider down"


def _failing_budget(cli, fails: int) -> str:  # noqa: ANN001
    """A ``budget`` run waiting at its approval, whose ``spend`` step (one attempt) fails ``fails`` times."""
    cli("workflows")  # loads the module
    sys.modules[module_name(SAMPLE)].FAIL["spend"] = fails
    return cli.json("run", "budget", "--input", '{"purpose": "chairs"}')["run"]["id"]


def test_a_command_that_drives_its_run_into_failed_prints_one_error_line(cli) -> None:  # noqa: ANN001
    run_id = _failing_budget(cli, 1)
    done = cli("approve", run_id, code=1)
    assert f"run {run_id}: now failed; {SPEND_FAILED}" in done.stdout  # its usual output, as before
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: run {run_id} failed at step spend: {SPEND_FAILED}"], done.stderr
    assert done.stderr.splitlines()[-1] == errors[0], done.stderr  # the last line, after the attempt's warning


def test_with_json_the_failure_is_the_error_member_of_the_one_document(cli) -> None:  # noqa: ANN001
    run_id = _failing_budget(cli, 2)
    done = cli("approve", run_id, "--at", "approve_budget", "--json", code=1)
    body = json.loads(done.stdout)  # one document: its usual members and the error
    assert body["run"]["status"] == "failed" and body["decision"]["action"] == "approve"
    message = f"run {run_id} failed at step spend: {SPEND_FAILED}"
    assert body["error"] == {"type": "RunFailedError", "message": message}, body.get("error")
    assert f"error: {message}" in done.stderr.splitlines(), done.stderr
    again = cli("retry", run_id, "--json", code=1)  # a retry that fails again says so the same way
    body = json.loads(again.stdout)
    assert body["run"]["status"] == "failed" and body["error"] == {"type": "RunFailedError", "message": message}
    done = cli.json("retry", run_id)  # and one that goes through has no error member
    assert done["run"]["status"] == "completed" and "error" not in done


BOOM = '''
from pydantic import BaseModel
from hazel import StepContext, Workflow

class S(BaseModel):
    n: int = 0

boom = Workflow("boom", version=1, state=S)

@boom.step(max_attempts=1)
def explode(state: S, ctx: StepContext) -> S:
    raise ValueError("no fuse")
'''


def test_a_failed_runs_document_to_a_closed_stdout_ends_quietly(db_url: str, tmp_path: Path) -> None:
    """The document with its error is written while the error is reported: a reader gone before it (``| head
    -0``) ends the command as any other closed stdout does, status 141 and no error line or traceback."""
    (tmp_path / "boom.py").write_text(BOOM)
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(tmp_path / "boom.py"),
           "HAZEL_OPERATOR": "olga"}
    env.pop("HAZEL_DEBUG", None)
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "run", "boom", "--json"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "error:" not in err, err
    assert "step explode attempt 1/1 failed: ValueError: no fuse" in err  # (the engine's warning, as before)
