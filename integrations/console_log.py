"""The console channel as log records: for ``hazel serve`` / ``hazel worker`` under ``HAZEL_LOG_FORMAT=json``,
where every line a process writes must be one JSON object (journald, a log shipper), not a rich panel."""

from __future__ import annotations

import logging
from typing import Any

from integrations.console import ConsoleChannel, progress_extra
from store.models import ProgressView, RequestView

log = logging.getLogger("hazel.console")

FAILED_EVENTS = frozenset({"failed"})
"""Run events logged at WARNING; the others (completed, rejected, cancelled) and every request at INFO."""


class LoggingConsole(ConsoleChannel):
    """``ConsoleChannel`` that logs each notification to ``logger`` (default ``hazel.console``) instead of
    printing it: the message is the notification's plain text (no markup, no wrapping; its lines separated
    by ``\\n``), and the record carries ``run_id`` and, where there is one, ``request_id``, plus ``kind``:

    - a request (``open_request``, ``remind``): ``steering_request``, ``reminder`` or ``escalation``, with
      ``workflow`` and ``point``;
    - a vote or a decision (``update_request``): ``approval`` or ``decision`` (then ``status``, the request's:
      ``decided``, ``cancelled``, …);
    - a run's news (``progress``): ``run``, with ``status`` (``completed``, ``failed``, ``rejected``,
      ``cancelled``) and ``workflow``.

    The records go through the process's log handler (``bot.ops.logs.configure_logging``), so its secret
    redaction applies to them as to every other record. ``command``, ``max_chars``: as ``ConsoleChannel``."""

    def __init__(self, *, logger: logging.Logger | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = logger or log

    def open_request(self, view: RequestView) -> dict[str, Any] | None:
        note = self.request_note(view)
        self.log.info("%s", note.plain(), extra={"run_id": view.run.id, "request_id": view.request.id,
                                                 "kind": note.kind, "workflow": view.workflow,
                                                 "point": view.point})
        return {"console": True}

    def update_request(self, view: RequestView) -> None:
        r = view.request
        vote = view.vote is not None or r.status.value == "pending"  # (a vote: pending when it was counted)
        self.log.info("%s", self.update_text(view), extra={
            "run_id": view.run.id, "request_id": r.id, "kind": "approval" if vote else "decision",
            "status": "pending" if vote else r.status.value})

    def progress(self, view: ProgressView) -> None:
        if view.event == "waiting":
            return  # the new request logs itself
        extra = progress_extra(view)
        fields = {"run_id": view.run.id, "kind": "run", "status": view.event, "workflow": view.workflow}
        level = logging.WARNING if view.event in FAILED_EVENTS else logging.INFO
        self.log.log(level, "run %s %s%s", view.run.id, view.event, f": {extra}" if extra else "", extra=fields)
