"""``ReadyListener.stop()`` wakes its connection instead of waiting out the current ``LISTEN`` poll, so a worker
process (``hazel serve``/``hazel worker``) stops at once on PostgreSQL."""

from __future__ import annotations

import threading

from store.notify import ReadyListener

POLL_SEC = 120.0  # one LISTEN wait: far longer than stop() may take


def test_stop_does_not_wait_out_the_poll(pg_url: str) -> None:
    heard: list[str] = []
    listener = ReadyListener(pg_url, heard.append, poll_sec=POLL_SEC)
    listener.start()
    assert listener.connected.wait(timeout=30), "the LISTEN connection never came up"
    stopping = threading.Thread(target=listener.stop, daemon=True)
    stopping.start()
    stopping.join(timeout=POLL_SEC / 4)  # the old stop() returned only when the 120 s wait ended
    assert not stopping.is_alive(), "stop() waited for the LISTEN poll to time out"
    assert not listener._thread.is_alive()
    assert heard == []  # the wake-up on the listener's own channel is not a ready run
