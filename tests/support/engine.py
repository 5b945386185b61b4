"""Building a ``Hazel`` for tests: a given database, given workflows, a console that prints into a buffer."""

from __future__ import annotations

import io

from rich.console import Console

from bot.engine.registry import Registry
from bot.engine.workflow import Workflow
from bot.server.app import HazelApp as Hazel
from bot.settings import Settings
from integrations.console import ConsoleChannel
from store.models import Actor


_created: list[Hazel] = []


def close_all() -> None:
    """Close every Hazel ``make_hazel`` built (their connection pools), after each test (conftest)."""
    while _created:
        _created.pop().close()


def make_hazel(db_url: str, *workflows: Workflow, lease_sec: float = 60.0, **kwargs) -> Hazel:  # noqa: ANN003
    """A prepared Hazel on ``db_url`` with ``workflows`` registered; closed automatically after the test."""
    registry = Registry()
    for wf in workflows:
        registry.add(wf)
    buffer = io.StringIO()
    console = ConsoleChannel(console=Console(file=buffer, width=120), command="hazel")
    settings = Settings(HAZEL_DATABASE_URL=db_url, HAZEL_LEASE_SEC=lease_sec)
    hazel = Hazel(settings, registry=registry, load_workflows=False, console=console, **kwargs)
    _created.append(hazel)
    hazel.prepare()
    hazel.console_buffer = buffer  # type: ignore[attr-defined]
    return hazel


def person(name: str) -> Actor:
    """A console actor named ``name`` (as the operator ``name`` at the terminal): their own person."""
    return Actor(id=name, channel="console", name=name, person=name)
