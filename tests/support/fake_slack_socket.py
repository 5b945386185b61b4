"""A fake Slack Socket Mode endpoint on 127.0.0.1: the WebSocket server that ``apps.connections.open`` points
the app to (set ``FakeSlack.socket_url = server.url``).

It speaks just enough WebSocket (RFC 6455: the handshake, unmasked server frames, masked client frames, ping,
pong, close) to send Slack's ``hello`` and envelopes, and to collect the app's acknowledgements
(``{"envelope_id": …, "payload": …}``, https://docs.slack.dev/apis/events-api/using-socket-mode).
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import time
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class FakeSocketMode:
    """One client at a time; ``send(envelope)`` and ``ack(envelope_id)``."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"ws://127.0.0.1:{self._listener.getsockname()[1]}/link/?ticket=test"
        self.received: list[dict[str, Any]] = []
        self._conn: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fake-socket-mode", daemon=True)

    def __enter__(self) -> "FakeSocketMode":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._listener.close()
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass

    def wait_connected(self, timeout_sec: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_sec
        while self._conn is None:
            if time.monotonic() > deadline:
                raise AssertionError("the app did not connect over Socket Mode")
            time.sleep(0.02)

    def send(self, envelope: dict[str, Any]) -> None:
        assert self._conn is not None
        self._frame(0x1, json.dumps(envelope).encode("utf-8"))

    def ack(self, envelope_id: str, timeout_sec: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_sec
        while True:
            for message in list(self.received):
                if message.get("envelope_id") == envelope_id:
                    return message
            if time.monotonic() > deadline:
                raise AssertionError(f"no acknowledgement of envelope {envelope_id}: {self.received}")
            time.sleep(0.02)

    # -- the wire -------------------------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = conn.recv(4096)
            if not chunk:
                return
            request += chunk
        headers = dict(line.split(": ", 1) for line in request.decode().split("\r\n")[1:] if ": " in line)
        key = headers.get("Sec-WebSocket-Key", "").strip()
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        self._conn = conn
        self.send({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0000000001"},
                   "debug_info": {"host": "fake", "approximate_connection_time": 3600}})
        while not self._stop.is_set():
            frame = self._read(conn)
            if frame is None:
                return
            opcode, data = frame
            if opcode == 0x1:
                self.received.append(json.loads(data.decode("utf-8")))
            elif opcode == 0x9:
                self._frame(0xA, data)
            elif opcode == 0x8:
                return

    def _read(self, conn: socket.socket) -> tuple[int, bytes] | None:
        def exactly(n: int) -> bytes | None:
            buf = b""
            while len(buf) < n:
                try:
                    chunk = conn.recv(n - len(buf))
                except OSError:
                    return None
                if not chunk:
                    return None
                buf += chunk
            return buf

        head = exactly(2)
        if head is None:
            return None
        opcode, length = head[0] & 0x0F, head[1] & 0x7F
        if length == 126:
            raw = exactly(2)
            length = struct.unpack(">H", raw)[0] if raw else 0
        elif length == 127:
            raw = exactly(8)
            length = struct.unpack(">Q", raw)[0] if raw else 0
        mask = exactly(4) if head[1] & 0x80 else b"\0\0\0\0"
        data = exactly(length) if length else b""
        if mask is None or data is None:
            return None
        return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))

    def _frame(self, opcode: int, data: bytes) -> None:
        n = len(data)
        head = bytes([0x80 | opcode]) + (bytes([n]) if n < 126 else bytes([126]) + struct.pack(">H", n)
                                         if n < 65536 else bytes([127]) + struct.pack(">Q", n))
        with self._send_lock:
            assert self._conn is not None
            self._conn.sendall(head + data)
