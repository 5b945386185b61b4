"""Slack over Socket Mode (``hazel serve --socket-mode``): Bolt's handler, connected in the background.

slack_sdk's built-in ``SocketModeClient`` (3.48, under Bolt's ``SocketModeHandler``) keeps a connection once it
has one: its session monitor, every ``ping_interval`` (10 s under Bolt), opens a new one (``apps.connections.open``,
then the WebSocket) when the current one is gone, logging each failure; so does a WebSocket that did not open.
What it does not retry is the first ``connect()``: that raises when ``apps.connections.open`` fails (Slack
unreachable: ``URLError`` / ``OSError``; an error answer: ``SlackApiError``), and the monitor starts only after a
first URL was issued. ``hazel serve`` called it while starting, so Slack unreachable at that moment ended the
whole process (exit 1; the REST API, the run pages, the workers, Jira and the scheduler with it).

``SocketModeConnection`` makes that first ``connect()`` in a thread of its own, trying again with backoff
(``first_backoff_sec`` doubling up to ``max_backoff_sec``: 1, 2, 4, 8, 16, 30, 30 … s), one log line per try and
no token in it, while the rest of ``hazel serve`` runs; once Slack has issued a URL, slack_sdk keeps the
connection. Slack refusing the app-level token (``REFUSED_TOKEN``, e.g. ``invalid_auth``) is a configuration
error no retry fixes: one ERROR line, no more tries, and ``hazel serve`` keeps serving everything else (a token
is read at start: fix it and restart). Other error answers (``socket_mode_not_enabled`` until Socket Mode is
turned on in the app's settings, ``internal_error``) are tried again like an outage.

The Socket Mode client gets a Web API client of its own, without retry handlers (these tries are the retries),
whose ``Failed to send a request to Slack API server`` lines are left out (``_SaidByTheCaller``): each such failure
is raised to this module's loop or to slack_sdk's session monitor, which log it in one line.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger("hazel.slack")

REFUSED_TOKEN = frozenset({"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                           "not_allowed_token_type", "user_removed_from_team", "team_disabled"})
"""``apps.connections.open`` errors that mean Slack refuses the app-level token itself: the unrecoverable start
errors of Slack's own Node SDK (``UnrecoverableSocketModeStartError``: ``not_authed``, ``invalid_auth``,
``account_inactive``, ``user_removed_from_team``, ``team_disabled``), plus a revoked or expired token and a token
of another kind (``not_allowed_token_type``: a bot token ``xoxb-…`` given as ``SLACK_APP_TOKEN``)."""

State = Literal["connecting", "connected", "refused", "closed"]

_WEB_API_LOG = logging.getLogger("slack_sdk.web.base_client.socket_mode")
"""The logger of the Socket Mode client's Web API client (a child of slack_sdk's: as quiet as it is)."""


class _SaidByTheCaller(logging.Filter):
    """Leaves out slack_sdk's ``Failed to send a request to Slack API server: …`` (``_WEB_API_LOG``) and the Socket
    Mode client's ``Failed to retrieve WSS URL: …``: the error is then raised to whoever called
    (``SocketModeConnection``'s loop, slack_sdk's session monitor), which logs it; with them a try was three
    lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not (message.startswith("Failed to send a request to Slack API server")
                    or message.startswith("Failed to retrieve WSS URL"))


_SAID_BY_THE_CALLER = _SaidByTheCaller()
_WEB_API_LOG.addFilter(_SAID_BY_THE_CALLER)


def socket_mode_web_client(base_url: str, *, timeout_sec: int = 10) -> WebClient:
    """The Web API client the Socket Mode client calls ``apps.connections.open`` with (``SocketModeHandler``'s
    ``web_client``; the app-level token goes with each call): on ``base_url`` (``HAZEL_SLACK_API_URL``), without
    retry handlers, logging to ``_WEB_API_LOG``."""
    return WebClient(base_url=base_url if base_url.endswith("/") else base_url + "/", timeout=timeout_sec,
                     logger=_WEB_API_LOG, retry_handlers=[])  # (None: slack_sdk's default, a connection retry)


def socket_mode_handler(app: App, app_token: str, *, web_client: WebClient | None = None) -> SocketModeHandler:
    """Bolt's Socket Mode handler (``apps.connections.open`` with the app-level ``xapp-`` token, scope
    ``connections:write``) on ``web_client`` (default: the app's client). ``SocketModeConnection`` connects it."""
    app.logger.addFilter(_SAID_BY_THE_CALLER)  # (the Socket Mode client logs to the app's logger)
    return SocketModeHandler(app, app_token, web_client=web_client)


class SocketModeConnection:
    """Connects ``handler`` in a background thread (see the module docstring); ``close()`` stops it.

    Args:
        handler: Bolt's handler, not connected yet.
        first_backoff_sec: the pause after the first failed try, in seconds; doubled after each further one.
        max_backoff_sec: the longest pause between tries, in seconds.

    ``state``: ``connecting`` (trying), ``connected`` (Slack issued a URL: slack_sdk keeps the connection from
    then on, reconnecting by itself), ``refused`` (Slack refused the app-level token: no more tries) or
    ``closed``.
    """

    def __init__(self, handler: SocketModeHandler, *, first_backoff_sec: float = 1.0,
                 max_backoff_sec: float = 30.0) -> None:
        self.handler = handler
        self.first_backoff_sec = first_backoff_sec
        self.max_backoff_sec = max_backoff_sec
        self.state: State = "connecting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._connect, name="hazel-socket-mode", daemon=True)

    def start(self) -> "SocketModeConnection":
        """Start connecting; returns at once."""
        self._thread.start()
        return self

    @property
    def connected(self) -> bool:
        """Whether the WebSocket is open now."""
        return self.handler.client.is_connected()

    def close(self, *, timeout_sec: float = 5.0) -> None:
        """Stop trying, disconnect, and release the handler's threads. A try in flight (a Web API call, at most its
        timeout) is not waited for beyond ``timeout_sec``: the thread closes the handler itself when it returns."""
        self._stop.set()
        self.state = "closed"
        self.handler.close()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_sec)

    def _connect(self) -> None:
        backoff = self.first_backoff_sec
        while not self._stop.is_set():
            try:
                self.handler.connect()
            except SlackApiError as exc:
                code = _error_code(exc)
                if code in REFUSED_TOKEN:
                    self.state = "refused"
                    log.error("Socket Mode is off: Slack refused SLACK_APP_TOKEN (%s): set an app-level token "
                              "(xapp-…) with the connections:write scope and restart hazel serve; everything else "
                              "keeps running, but Slack's buttons, modals and /hazel do not reach this server "
                              "until then", code)
                    return
                if self._stop.is_set():
                    break
                hint = " (turn Socket Mode on in the app's settings)" if code == "socket_mode_not_enabled" else ""
                log.warning("Socket Mode: Slack answered apps.connections.open with %s%s; trying again in %g s",
                            code, hint, backoff)
            except Exception as exc:  # noqa: BLE001 (URLError, OSError, a timeout: Slack cannot be reached)
                if self._stop.is_set():
                    break
                log.warning("Socket Mode: Slack cannot be reached (%s); trying again in %g s", _short(exc), backoff)
            else:
                if self._stop.is_set():  # closed while connecting: the handler's monitor started after close()
                    self.handler.close()
                    return
                self.state = "connected"
                if self.connected:
                    log.info("connected to Slack over Socket Mode")
                else:
                    log.warning("Socket Mode: Slack issued a connection URL but the WebSocket did not open; "
                                "slack_sdk tries again every %g s", self.handler.client.ping_interval)
                return
            self._stop.wait(backoff)
            backoff = min(backoff * 2, self.max_backoff_sec)


def _error_code(exc: SlackApiError) -> str:
    """Slack's ``error`` code of an error answer, or ``HTTP <status>`` when the answer is not Slack's JSON."""
    data = getattr(exc.response, "data", None)
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return data["error"][:100]
    return f"HTTP {getattr(exc.response, 'status_code', '?')}"


def _short(exc: BaseException) -> str:
    """``Class: first line of the message`` (at most 200 characters)."""
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
