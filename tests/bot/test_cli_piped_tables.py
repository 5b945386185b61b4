"""Tables written to a file or a pipe (``hazel runs > f``, ``hazel audit R | grep …``) are laid out at their own
full width: one line per row, nothing stored wrapped or cut. They were laid out for rich's 80 columns, and the
commands cut stored text themselves: ``hazel runs``' error at 50 characters, ``hazel outbox``'s last error at 60,
each ``hazel audit`` detail value at 80, whatever the width (s25 F14). ``COLUMNS`` still sets the width, and on a
terminal long values wrap in their column."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from store.models import OutboxKind
from tests.bot.conftest import ROOT
from tests.support.engine import make_hazel

STORY = "the provider answered with a long story " + "x" * 120 + " END-OF-ERROR"
LATE = ("Jira read the issue's status failed: HTTP 404: Issue does not exist or you lack permission " + "y" * 60
        + " (MIG-7)")

BOOM = f'''
from pydantic import BaseModel
from hazel import StepContext, Workflow

class S(BaseModel):
    n: int = 0

boom = Workflow("boom", version=1, state=S)

@boom.step(max_attempts=1)
def explode(state: S, ctx: StepContext) -> S:
    raise ValueError({STORY!r})
'''


def _hazel(env: dict[str, str], *args: str, code: int = 0) -> str:
    """``hazel ARGS``' stdout, written to a pipe (stdin not a terminal either: rich would take its width)."""
    done = subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done.stdout


def _env(db_url: str, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "boom.py").write_text(BOOM)
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(tmp_path / "boom.py"),
           "HAZEL_OPERATOR": "olga"}
    for name in ("COLUMNS", "LINES", "HAZEL_DEBUG", "FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)
    return env


def _row(out: str, *needles: str) -> str:
    """The one line of ``out`` holding every one of ``needles``."""
    [line] = [line for line in out.splitlines() if all(n in line for n in needles)] or [""]
    assert line, (needles, out)
    return line


def test_piped_tables_hold_every_stored_value_whole_one_row_a_line(db_url: str, tmp_path: Path) -> None:
    env = _env(db_url, tmp_path)
    _hazel(env, "run", "boom", code=1)
    runs = _hazel(env, "runs")
    run_id = runs.splitlines()[2].split()[0]
    assert _row(runs, run_id, "failed", f"ValueError: {STORY}", "olga")
    assert _row(_hazel(env, "audit", run_id), "step.failed", f"error=ValueError: {STORY}")
    hazel = make_hazel(db_url)
    with hazel.store.transaction() as tx:
        tx.outbox.add(channel="jira:MIG", kind=OutboxKind.REQUEST_CLOSED, now=hazel.clock(), run_id=run_id)
    with hazel.store.transaction() as tx:
        [message] = [m for m in tx.outbox.list(run_id=run_id) if m.channel == "jira:MIG"]
        tx.outbox.mark_failed(message.id, error=LATE, retry_at=None)
    assert _row(_hazel(env, "outbox", "--run", run_id), str(message.id), run_id, "dead", LATE)
    narrow = _hazel({**env, "COLUMNS": "90"}, "runs")  # a width given is the width
    assert max(len(line) for line in narrow.splitlines()) <= 90 and "END-OF-ERROR" in narrow, narrow
    folded = "".join(line.split("│")[3] for line in narrow.splitlines()[2:])  # wrapped in its column, whole
    assert f"ValueError: {STORY}".replace(" ", "") in folded.replace(" ", ""), narrow


def test_an_audit_value_over_two_thousand_characters_says_how_many_more_and_where() -> None:
    from datetime import datetime, timezone

    from bot.cli.render import event_detail
    from store.models import AuditEvent

    event = AuditEvent(id=1, run_id="0123456789ab", request_id=None, actor_id="hazel", actor_name=None,
                       channel="system", action="timeout.failed", created_at=datetime.now(timezone.utc),
                       detail={"on_timeout": "approve", "error": "line one\nline two " + "z" * 2_500})
    shown = event_detail(event)
    assert shown.startswith("on_timeout=approve, error=line one line two zzz") and "\n" not in shown
    assert shown.endswith("z… (518 more characters: hazel audit 0123456789ab --json)"), shown[-80:]
