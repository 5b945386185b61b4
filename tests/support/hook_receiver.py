"""A webhook receiver on 127.0.0.1 for tests: records every POST (path, headers, raw body) and answers with the
statuses queued by ``answer(...)`` (per path or for any; 200 once nothing is queued), verifying nothing itself."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)


class HookReceiver:
    """``with HookReceiver() as hooks: hooks.url("/a")`` …"""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._answers: dict[str | None, list[tuple[int, dict[str, str]]]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="hook-receiver", daemon=True)

    def url(self, path: str) -> str:
        return self.base + path

    def answer(self, status: int, *, times: int = 1, headers: dict[str, str] | None = None,
               path: str | None = None) -> None:
        """The next ``times`` deliveries (to ``path`` only, when given) get ``status`` (with ``headers``)."""
        with self._lock:
            self._answers.setdefault(path, []).extend([(status, dict(headers or {}))] * times)

    def ok(self) -> list[Received]:
        with self._lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def _take(self, path: str) -> tuple[int, dict[str, str]]:
        with self._lock:
            for key in (path, None):
                if self._answers.get(key):
                    return self._answers[key].pop(0)
            return 200, {}

    def __enter__(self) -> "HookReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler_for(receiver: HookReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, headers = receiver._take(self.path)
            with receiver._lock:
                receiver.received.append(Received(self.path, {k: v for k, v in self.headers.items()}, body, status))
            data = b'{"ok": true}' if status < 300 else b'{"ok": false}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return Handler
