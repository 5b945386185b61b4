"""``hazel`` in-process through Typer's runner, for the tests that call several commands in a row."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner


def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's consoles (``bot.cli.common.out`` / ``err``) 200 columns wide, so that tables do not wrap."""
    from bot.cli import common

    monkeypatch.setattr(common.out, "width", 200)
    monkeypatch.setattr(common.err, "width", 200)


def in_process_cli(monkeypatch: pytest.MonkeyPatch, cwd: Path, *, db_url: str, workflows: str,
                   operator: str = "olga") -> Callable[..., Any]:
    """``invoke(*args, code=0)`` runs ``hazel ARGS`` in this process on ``db_url`` with ``workflows``
    (``HAZEL_WORKFLOWS``: module names or paths) as ``operator``, in ``cwd``, tables 200 columns wide, and checks
    the exit code; returns Click's result (``.stdout``, ``.stderr``)."""
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", workflows)
    monkeypatch.setenv("HAZEL_OPERATOR", operator)
    monkeypatch.chdir(cwd)
    from bot.cli import app

    wide_consoles(monkeypatch)
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, (args, result.output, result.exception)
        return result

    return invoke
