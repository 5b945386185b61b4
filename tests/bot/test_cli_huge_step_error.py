"""A step that raises an error of megabytes: the run keeps it whole (``hazel show RUN --full``, with ``--json``
too, prints it whole), and everything else the CLI prints of it is cut, saying how many characters were left
out and where the whole text is (``… (N more characters: hazel show RUN --full)``): the command's lines on
stdout, the engine's warning and the error line on stderr, ``hazel show`` and the ``--json`` documents. They
used to print it whole: a 3 MB error made ``hazel run`` print 9 MB, ``--json`` 6 MB."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from store.models import ERROR_JSON_CHARS, ERROR_SHOWN_CHARS
from tests.bot.conftest import ROOT

HUGE = 600_000
"""Characters of the step's message (the cuts are the same for 3 MB; this keeps ``--full``'s panel quick)."""

BIG = f'''
from pydantic import BaseModel
from hazel import StepContext, Workflow

class S(BaseModel):
    n: int = 0

big = Workflow("big", version=1, state=S)

@big.step(max_attempts=1)
def explode(state: S, ctx: StepContext) -> S:
    raise ValueError("start " + "x" * {HUGE} + " THE-END\\nsecond line")
'''

NOTE = re.compile(r"… \(([\d,]+) more characters: hazel show ([0-9a-f]{12}) --full\)")


def _hazel(tmp_path: Path, db_url: str, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """``hazel ARGS`` through the real entry point, in a process of its own."""
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(tmp_path / "big.py"),
           "HAZEL_OPERATOR": "olga", "COLUMNS": "200"}
    env.pop("HAZEL_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == code, (args, done.returncode, done.stderr[-2000:])
    return done


def _cut(text: str, run_id: str, shown: int, whole: int) -> None:
    """``text`` ends with the note of a cut after ``shown`` characters of a text of ``whole`` characters."""
    found = NOTE.search(text)
    assert found is not None, text[-300:]
    assert found.group(2) == run_id and int(found.group(1).replace(",", "")) == whole - shown, found.group(0)


def test_a_step_error_of_megabytes_is_cut_wherever_the_cli_prints_it(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text(BIG)
    ran = _hazel(tmp_path, db_url, "run", "big", code=1)
    assert len(ran.stdout) + len(ran.stderr) < 4 * ERROR_SHOWN_CHARS + 2000, (len(ran.stdout), len(ran.stderr))
    run_id = re.search(r"started run ([0-9a-f]{12})", ran.stdout).group(1)
    whole: dict[str, Any] = json.loads(_hazel(tmp_path, db_url, "show", run_id, "--full", "--json").stdout)["run"]
    error, trace = whole["error"], whole["error_traceback"]  # stored whole, and --full --json says so
    assert error == f"ValueError: start {'x' * HUGE} THE-END\nsecond line", error[-100:]
    assert trace.rstrip().endswith("second line") and "THE-END" in trace
    assert "THE-END" not in ran.stdout + ran.stderr
    summary = next(line for line in ran.stdout.splitlines() if line.startswith(f"run {run_id}: now failed"))
    _cut(ran.stdout[ran.stdout.index(summary):], run_id, ERROR_SHOWN_CHARS, len(error))
    warning = next(line for line in ran.stderr.splitlines() if "attempt 1/1 failed" in line)
    _cut(ran.stderr[ran.stderr.index(warning):], run_id, ERROR_SHOWN_CHARS, len(error))  # the engine's log
    last = ran.stderr.splitlines()[-1]  # the command's one error line
    assert last.startswith(f"error: run {run_id} failed at step explode: ValueError: start xxx"), last[:100]
    _cut(last, run_id, 300, len(error))

    as_json = _hazel(tmp_path, db_url, "retry", run_id, "--json", code=1)
    body = json.loads(as_json.stdout)
    assert len(as_json.stdout) < 3 * ERROR_JSON_CHARS, len(as_json.stdout)
    assert body["run"]["error"].startswith(error[:ERROR_JSON_CHARS])
    _cut(body["run"]["error"], run_id, ERROR_JSON_CHARS, len(error))
    assert body["run"]["error_traceback"].startswith(whole["error_traceback"][:ERROR_JSON_CHARS])
    _cut(body["run"]["error_traceback"], run_id, ERROR_JSON_CHARS, len(whole["error_traceback"]))
    _cut(body["error"]["message"], run_id, 300, len(error))
    listed = json.loads(_hazel(tmp_path, db_url, "runs", "--json").stdout)[0]
    _cut(listed["error"], run_id, ERROR_JSON_CHARS, len(error))
    shown = json.loads(_hazel(tmp_path, db_url, "show", run_id, "--json").stdout)["run"]
    _cut(shown["error"], run_id, ERROR_JSON_CHARS, len(error))

    plain = _hazel(tmp_path, db_url, "show", run_id).stdout
    assert "THE-END" not in plain and len(plain) < 2 * ERROR_SHOWN_CHARS + 2000, len(plain)
    _cut(re.sub(r"[│\s]+", " ", plain), run_id, ERROR_SHOWN_CHARS, len(error))
    full = _hazel(tmp_path, db_url, "show", run_id, "--full").stdout  # the whole text, where the notes send
    panel, trace_shown = full.split("Traceback (most recent call last)", 1)
    assert "THE-END" in panel and panel.count("x") >= HUGE and "more characters" not in full  # the whole error
    assert "THE-END\nsecond line" in trace_shown and trace_shown.count("x") >= HUGE  # and its traceback
