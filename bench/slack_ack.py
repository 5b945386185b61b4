"""Item 7, Slack click to acknowledgement: signed ``block_actions`` requests (an Approve button on a waiting
run's request) sent over HTTP to Hazel's real app on loopback; the time to each 200 response.

The app is what ``hazel serve`` runs (``bot.server.build`` + ``bot.inbound.health.create_app`` with
``bot.server.wiring.http_routers``, workers and outbox delivery started) served by uvicorn in a thread, with Slack
configured against a minimal fake Slack Web API on loopback (every method answers ``ok``), so the work Bolt
does after acknowledging (recording the decision, updating the message) really happens. Bodies are signed with
slack_sdk's ``SignatureVerifier.generate_signature``. When ``http_routers`` mounts no ``/slack/events`` route
the measurement reports that Slack is not configured.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import urlencode

import httpx

from bench.stats import percentile
from bench.workload import ACTOR, PAUSE_WORKFLOW, settings_for, silent_console

EVENTS_PATH = "/slack/events"
NOT_CONFIGURED = "n/a (Slack app not configured)"
WARM_UP_CLICKS = 3
"""Clicks sent first and not counted (the process's first requests import and compile its handlers)."""


@dataclass(frozen=True)
class AckLatency:
    p50_ms: float
    p99_ms: float


class _FakeSlack(BaseHTTPRequestHandler):
    """Answers every Web API method with ``{"ok": true, ...}`` (plus the fields callers read)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        method = self.path.rstrip("/").rsplit("/", 1)[-1]
        body: dict = {"ok": True, "ts": f"{time.time():.6f}", "channel": "C0BENCH00"}
        if method == "users.info":
            body["user"] = {"id": "U0BENCH00", "name": "bench", "real_name": "Bench", "profile": {}}
        elif method in ("usergroups.list", "usergroups.users.list"):
            body.update(usergroups=[], users=[])
        elif method == "conversations.info":
            body["channel"] = {"id": "C0BENCH00", "name": "bench"}
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


@contextmanager
def fake_slack_api() -> Iterator[str]:
    """A fake Slack Web API on a free loopback port; yields its base URL (``http://127.0.0.1:P/api/``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeSlack)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-slack",
                              daemon=True)  # shutdown() waits up to one poll_interval (0.5 s by default)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/"
    finally:
        server.shutdown()
        server.server_close()


def click_body(request_id: int, run_id: str) -> str:
    """The form body Slack posts for a click on ``hazel_approve`` (shape of Slack's block_actions payload)."""
    payload = {
        "type": "block_actions", "api_app_id": "A0BENCH00", "token": "unused",
        "user": {"id": "U0BENCH00", "username": "bench", "name": "bench", "team_id": "T0BENCH00"},
        "team": {"id": "T0BENCH00", "domain": "bench"},
        "trigger_id": f"{secrets.randbelow(10**10)}.{secrets.randbelow(10**10)}.{secrets.token_hex(16)}",
        "container": {"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0BENCH00"},
        "channel": {"id": "C0BENCH00", "name": "bench"},
        "message": {"type": "message", "ts": "1700000000.000100", "text": f"run {run_id}", "blocks": []},
        "response_url": "https://hooks.slack.com/actions/T0BENCH00/1/unused",
        "actions": [{"type": "button", "action_id": "hazel_approve", "block_id": "hazel_actions",
                     "value": f"{run_id}:{request_id}", "action_ts": f"{time.time():.6f}",
                     "text": {"type": "plain_text", "text": "Approve"}}],
    }
    return urlencode({"payload": json.dumps(payload)})


def slack_ack(backend, n_clicks: int) -> AckLatency | str:  # noqa: ANN001
    """``n_clicks`` signed clicks (after ``WARM_UP_CLICKS`` uncounted ones), each on another waiting run;
    p50/p99 of the time to the 200 response. Every clicked run must then have been decided. Returns
    ``NOT_CONFIGURED`` when the app mounts no ``/slack/events``.

    Raises:
        RuntimeError: a click was answered with another status, or a clicked run was never decided.
    """
    from slack_sdk.signature import SignatureVerifier

    from bot.server.processes import build
    from bot.server.http import create_app
    from bot.server.wiring import http_routers

    signing_secret = secrets.token_hex(16)
    with fake_slack_api() as api_url:
        settings = settings_for(backend.fresh_url("slack")).model_copy(update={
            "slack_bot_token": _secret("xoxb-bench-" + secrets.token_hex(8)),
            "slack_signing_secret": _secret(signing_secret), "slack_api_url": api_url})
        hazel, pool = build(settings, console=silent_console())
        try:
            routers = http_routers(hazel, settings)
            if not any(getattr(route, "path", None) == EVENTS_PATH for router in routers for route in router.routes):
                return NOT_CONFIGURED
            app = create_app(hazel, routers=routers)
            waiting = []
            for _ in range(n_clicks + WARM_UP_CLICKS):
                run = hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR)
                hazel.drive(run_id=run.id)
                waiting.append((hazel.pending_request(run_id=run.id).id, run.id))
            pool.start()
            hazel.deliverer.start()
            verifier = SignatureVerifier(signing_secret)
            latencies = []
            with _serve(app) as base, httpx.Client(base_url=base, timeout=10.0) as client:
                for request_id, run_id in waiting:
                    body = click_body(request_id, run_id)
                    ts = str(int(time.time()))
                    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
                               "X-Slack-Signature": verifier.generate_signature(timestamp=ts, body=body)}
                    started = time.perf_counter()
                    response = client.post(EVENTS_PATH, content=body, headers=headers)
                    latencies.append((time.perf_counter() - started) * 1e3)
                    if response.status_code != 200:
                        raise RuntimeError(f"click answered {response.status_code}: {response.text[:200]}")
                _wait_decided(hazel, [run_id for _, run_id in waiting])
            measured = latencies[WARM_UP_CLICKS:]
            return AckLatency(percentile(measured, 50), percentile(measured, 99))
        finally:
            pool.stop()
            hazel.close()


def _wait_decided(hazel, run_ids: list[str], timeout_sec: float = 60.0) -> None:  # noqa: ANN001
    """Every clicked run has left ``waiting`` (the click was not only acknowledged but decided).

    Raises:
        RuntimeError: some run is still waiting after ``timeout_sec``.
    """
    deadline = time.monotonic() + timeout_sec
    while True:
        still = [r for r in run_ids if hazel.get(run_id=r).status.value == "waiting"]
        if not still:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(still)} clicked runs were acknowledged but never decided")
        time.sleep(0.05)


def _secret(value: str):  # noqa: ANN202
    from pydantic import SecretStr

    return SecretStr(value)


@contextmanager
def _serve(app) -> Iterator[str]:  # noqa: ANN001
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="bench-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("bench HTTP server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
