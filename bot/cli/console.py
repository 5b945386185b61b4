"""The console channel as one CLI command uses it (imported when the command builds its engine)."""

from __future__ import annotations

from typing import Any

from integrations.console import ConsoleChannel
from store.models import ProgressView


class CommandConsole(ConsoleChannel):
    """``ConsoleChannel`` that remembers the run events it printed (``reported``: ``(run id, event)`` pairs),
    so that a command does not print the same news again in its own words (``hazel cancel``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reported: set[tuple[str, str]] = set()

    def progress(self, view: ProgressView) -> None:
        super().progress(view)
        if view.event != "waiting":
            self.reported.add((view.run.id, view.event))
