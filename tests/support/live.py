"""A real HTTP server for tests: uvicorn serving an ASGI app on 127.0.0.1 in a background thread."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
import time

import uvicorn


_PORTS_FROM, _PORTS_PER_WORKER, _SLICES = 20_000, 500, 25
"""Ports handed to tests: below Linux's ephemeral range (32768-60999, ``/proc/sys/net/ipv4/ip_local_port_range``),
each xdist worker its own thousand. A port the kernel picked (``bind(0)``) was free when asked but sits in the
range every outgoing connection takes its local port from, and another worker's server could take it before
the test's process bound it (seen in a full run: ``hazel serve`` found its port in use). 25 slices of 500
(20000-32499): more than the 16 workers ``tests/conftest.py`` starts at most."""
_next_port: list[int] = []


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now, from this xdist worker's own slice (gw0: 20000-20499,
    gw1: 20500-20999, …; outside xdist the first), starting at a random place in it and going round: no other
    worker of the run is handed it, whatever the timing. Raises OSError when the whole slice is taken."""
    if not _next_port:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        index = int(worker[2:]) if worker[2:].isdigit() else 0
        start = _PORTS_FROM + (index % _SLICES) * _PORTS_PER_WORKER
        _next_port.extend([start, random.randrange(_PORTS_PER_WORKER)])
    start, offset = _next_port
    for _ in range(_PORTS_PER_WORKER):
        port = start + offset % _PORTS_PER_WORKER
        offset += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _next_port[1] = offset
        return port
    raise OSError(f"no free port in {start}-{start + _PORTS_PER_WORKER - 1}")


class _Server(uvicorn.Server):
    """uvicorn's server, its main loop woken by ``stop()`` (uvicorn's own looks at ``should_exit`` every 0.1 s:
    that was 0.05 s on average at the end of each test with a live server)."""

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            try:
                await asyncio.wait_for(self._wake.wait(), 0.1)
            except asyncio.TimeoutError:
                pass
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown (stop accepting, ask each connection to close, wait for the connections and tasks
        to finish, then the lifespan's), waiting in steps of 5 ms where uvicorn's sleeps 0.1 s first and then
        polls every 0.1 s: 0.1 s at the end of every test with a live server."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        await asyncio.sleep(0.005)
        timeout = self.config.timeout_graceful_shutdown
        deadline = None if timeout is None else time.monotonic() + timeout
        while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:
            if deadline is not None and time.monotonic() > deadline:
                for t in self.server_state.tasks:
                    t.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
                break
            await asyncio.sleep(0.005)
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()

    def stop(self) -> None:
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop is already closed: it has exited
                pass


class LiveServer:
    """``with LiveServer(app) as server: httpx.post(server.url + "/path", …)``."""

    def __init__(self, app, *, port: int | None = None, access_log: bool = False) -> None:  # noqa: ANN001
        """``access_log``: uvicorn logs every request at INFO through the root logger's handlers (as
        ``hazel serve`` configures it: ``log_config=None``)."""
        # Bound here and handed to uvicorn, so that no other process can take the port between choosing it and
        # listening on it (a port chosen free and bound later was taken by another test process once). Its
        # protocol named (IPPROTO_TCP), as uvicorn's own socket has it: asyncio sets TCP_NODELAY only on the
        # connections of such a socket; without it, every response on a kept-alive connection waited 40 ms
        # (its body held back by Nagle's algorithm until the client's delayed ACK of its headers).
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.socket.bind(("127.0.0.1", port or 0))
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        logs = {"log_level": "info", "log_config": None} if access_log else {"log_level": "warning"}
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, lifespan="off", **logs)
        self.server = _Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]},
                                       name="live-server", daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                self.socket.close()
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.server.stop()
        self.thread.join(timeout=10)
        self.socket.close()
