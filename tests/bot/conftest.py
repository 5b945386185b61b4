"""Fixtures shared by the engine and CLI tests."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.support.cli import wide_consoles

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "workflows" / "sample.py"


@pytest.fixture
def offline_example(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The example workflows offline (no ``HAZEL_LLM_*``: their steps draft without a model) and writing their
    artefacts under ``tmp_path``: a module names it with ``pytestmark = pytest.mark.usefixtures(
    "offline_example")``."""
    for name in ("HAZEL_LLM_BASE_URL", "HAZEL_LLM_API_KEY", "HAZEL_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))


@pytest.fixture
def wide_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's consoles do not wrap (``wide_consoles``), for tests that run commands without ``cli``: a module
    names it with ``pytestmark = pytest.mark.usefixtures("wide_cli")``."""
    wide_consoles(monkeypatch)


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Any]:
    """``cli(*args, code=0)`` runs ``hazel ARGS`` in-process on ``db_url`` with the sample workflows and checks
    its exit code; ``cli.json(*args)`` adds ``--json`` and parses the output. Tables are not wrapped."""
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(SAMPLE))
    monkeypatch.setenv("HAZEL_OPERATOR", "olga")
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.chdir(tmp_path)
    wide_consoles(monkeypatch)
    runner = CliRunner()

    def invoke(*args: str, code: int = 0):  # noqa: ANN202
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, (args, result.output, result.exception)
        return result

    invoke.json = lambda *args: json.loads(invoke(*args, "--json").stdout)  # type: ignore[attr-defined]
    return invoke


@pytest.fixture
def serve_logging() -> Iterator[None]:
    """The root logger restored after the test; uvicorn's loggers propagating to it, as in a fresh ``hazel serve``
    process (a server started with uvicorn's own logging config, as other tests' are, gave them handlers of their
    own and stopped them propagating)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    uvicorns = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.access", "uvicorn.error")]
    kept = [(lg, list(lg.handlers), lg.propagate, lg.level) for lg in uvicorns]
    for lg in uvicorns:
        lg.handlers[:], lg.propagate = [], True
        lg.setLevel(logging.NOTSET)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for lg, its_handlers, propagate, its_level in kept:
        lg.handlers[:], lg.propagate = its_handlers, propagate
        lg.setLevel(its_level)
