"""The README's edit recipe gives back what it was given: ``hazel show RUN --raw > f`` then ``hazel edit RUN
--file f`` stores the value byte for byte, whether it ends with a newline or not (``--raw`` ends the value with
one added newline; a file's final newline is not part of its value). An empty file is refused unless
``--allow-empty``; a file over ``HAZEL_MAX_STATE_BYTES`` is refused before it is read whole."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.bot.conftest import ROOT

HAZEL = ROOT / ".venv" / "bin" / "hazel"
NOTE = '''
from pydantic import BaseModel

from hazel import StepContext, Workflow


class Note(BaseModel):
    text: str


note = Workflow("note", version=1, state=Note)


@note.step
def begin(state: Note, ctx: StepContext) -> Note:
    return state


note.steer("review", title="Review the note", show="text")
note.steer("check", title="Check the note", show="text")
'''
VALUES = ["plan", "plan\n", "plan\n\n", "line one\r\nline two\r\n", "line one\r\n", "  indented\n\ttabs  ",
          "ünïcødé ✓ \u2028 end", "\tx\n\n\n"]


@pytest.fixture
def note_cli(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN001, ANN201
    path = tmp_path / "roundtrip_note.py"
    path.write_text(NOTE)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(path))
    return cli


def start(cli: Any, text: str) -> str:
    return cli.json("run", "note", "--input", json.dumps({"text": text}))["run"]["id"]


def test_show_raw_then_edit_file_gives_back_the_value_byte_for_byte(note_cli, tmp_path: Path) -> None:  # noqa: ANN001
    for i, value in enumerate(VALUES):
        run_id = start(note_cli, value)
        raw = note_cli("show", run_id, "--raw").stdout_bytes
        assert raw == value.encode() + b"\n", (value, raw)
        plan = tmp_path / f"plan{i}.txt"
        plan.write_bytes(raw)
        edited = note_cli.json("edit", run_id, "--at", "review", "--file", str(plan))
        assert edited["pending_request"]["point"] == "check"
        assert edited["run"]["status"] == "waiting"
        assert note_cli.json("show", run_id)["state"]["text"] == value, repr(value)
        again = note_cli.json("edit", run_id, "--at", "check", "--set", f"text=@{plan}")
        assert again["run"]["status"] == "completed"
        assert note_cli.json("show", run_id)["state"]["text"] == value, repr(value)


def test_a_windows_editors_byte_order_mark_is_not_part_of_the_value(note_cli, tmp_path: Path) -> None:  # noqa: ANN001
    """Fresh-user s20 L2: Notepad's "UTF-8 with BOM" put an invisible U+FEFF at the start of a text field, and
    JSON text with one was refused in Python's words ("decode using utf-8-sig")."""
    run_id = start(note_cli, "the plan")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello bom\r\nline2\r\n")
    note_cli.json("edit", run_id, "--at", "review", "--file", "bom.txt")
    assert note_cli.json("show", run_id)["state"]["text"] == "hello bom\r\nline2"
    (tmp_path / "input.json").write_bytes(b'\xef\xbb\xbf{"text": "from a file"}')
    started = note_cli.json("run", "note", "--input", f"@{tmp_path / 'input.json'}")
    assert note_cli.json("show", started["run"]["id"])["state"]["text"] == "from a file"


def test_the_readme_recipe_in_a_shell(note_cli, db_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    env = {**os.environ, "HAZEL": str(HAZEL)}
    for value in ("plan", "plan\n"):
        run_id = start(note_cli, value)
        done = subprocess.run(["sh", "-c", f'"$HAZEL" show {run_id} --raw > plan.txt && '
                                           f'"$HAZEL" edit {run_id} --at review --file plan.txt --json'],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["pending_request"]["point"] == "check"
        assert note_cli.json("show", run_id)["state"]["text"] == value


def test_an_empty_file_is_refused_unless_allow_empty(note_cli, tmp_path: Path) -> None:  # noqa: ANN001
    run_id = start(note_cli, "the plan")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "newline.txt").write_text("\n")
    for args in (["--file", "empty.txt"], ["--file", "newline.txt"], ["--set", "text=@empty.txt"],
                 ["--set", "text="]):
        refused = note_cli("edit", run_id, "--at", "review", *args, code=1)
        line = refused.stderr.strip()
        assert len(line.splitlines()) == 1 and "the edit leaves field 'text' empty" in line and "--allow-empty" in line, line
        shown = note_cli.json("show", run_id)
        assert shown["state"]["text"] == "the plan" and shown["pending_request"]["point"] == "review"
    (tmp_path / "blank.txt").write_text("  \n\n")
    blank = note_cli("edit", run_id, "--at", "review", "--file", "blank.txt", code=1).stderr
    assert "the edit leaves field 'text' blank (only whitespace)" in blank and "--allow-empty" in blank
    allowed = note_cli.json("edit", run_id, "--at", "review", "--file", "blank.txt", "--allow-empty")
    assert allowed["pending_request"]["point"] == "check"
    assert note_cli.json("show", run_id)["state"]["text"] == "  \n"
    note_cli("edit", run_id, "--at", "check", "--file", "empty.txt", "--allow-empty")
    assert note_cli.json("show", run_id)["state"]["text"] == ""


def test_a_file_over_the_state_limit_is_refused_before_it_is_read_whole(note_cli, tmp_path: Path,  # noqa: ANN001
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_MAX_STATE_BYTES", "2048")
    run_id = start(note_cli, "the plan")
    big = tmp_path / "big.txt"
    big.write_text("x" * 2049)
    for argv in (["edit", run_id, "--at", "review", "--file", str(big)],
                 ["edit", run_id, "--at", "review", "--set", f"text=@{big}"],
                 ["run", "note", "--input", f"@{big}"], ["feedback", run_id, f"@{big}"]):
        line = note_cli(*argv, code=1).stderr.strip()
        assert line == f"error: {big} is 2,049 bytes, over the limit of 2,048 bytes (HAZEL_MAX_STATE_BYTES)", line
    (tmp_path / "fits.txt").write_text("y" * 2000)
    note_cli("edit", run_id, "--at", "review", "--file", "fits.txt")
    assert note_cli.json("show", run_id)["state"]["text"] == "y" * 2000

    # a pipe has no size: at most one byte past the limit is read, then the writer is cut off
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    written = [0]

    def endless() -> None:
        try:
            with open(fifo, "wb", buffering=0) as out:
                while written[0] < 64 * 1024 * 1024:
                    written[0] += out.write(b"z" * 4096)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=endless, daemon=True)
    writer.start()
    line = note_cli("edit", run_id, "--at", "check", "--file", str(fifo), code=1).stderr.strip()
    writer.join(timeout=30)
    assert line == f"error: {fifo} is over the limit of 2,048 bytes (HAZEL_MAX_STATE_BYTES)", line
    assert written[0] < 1024 * 1024, written[0]
    assert note_cli.json("show", run_id)["pending_request"]["point"] == "check"
