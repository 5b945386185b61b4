"""Item 5, waiting is free: resident memory and threads of a real ``hazel serve`` process with 0 and with
10,000 waiting runs in its database.

The waiting runs: one run of ``bench-pause`` is executed through Hazel to its steering point and its
notification delivered; then its rows (run, checkpoints, pending steering request, audit events, delivered
outbox rows) are copied under new run ids in one transaction, so the database holds 10,000 runs in exactly
the state a real waiting run leaves behind, in seconds instead of minutes. ``hazel serve`` is started as a
subprocess on a free loopback port; once ``/healthz`` answers and ``settle_sec`` has passed (its workers swept
the queue and its deliverer ran), psutil reads its RSS and thread count.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import insert, select

from store.schema import checkpoints, events, outbox, runs, steering_requests

from bench.workload import ACTOR, PAUSE_WORKFLOW, bench_pause, make_hazel

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ServeFootprint:
    """``rss_mb``: resident set size in MiB; ``threads``: OS threads of the process."""

    rss_mb: float
    threads: int


def add_waiting_runs(url: str, n_runs: int) -> None:
    """Leave ``n_runs`` runs waiting at ``bench-pause``'s steering point in the database at ``url``."""
    hazel = make_hazel(url, bench_pause)
    run = hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR)
    hazel.drive(run_id=run.id)  # executes to the steering point and delivers its notification
    with hazel.store.transaction() as tx:
        conn = tx.conn
        run_row = dict(conn.execute(select(runs).where(runs.c.id == run.id)).one()._mapping)
        cps = [dict(r._mapping) for r in conn.execute(select(checkpoints).where(checkpoints.c.run_id == run.id))]
        request = dict(conn.execute(select(steering_requests).where(steering_requests.c.run_id == run.id)).one()
                       ._mapping)
        evs = [dict(r._mapping) for r in conn.execute(select(events).where(events.c.run_id == run.id))]
        outs = [dict(r._mapping) for r in conn.execute(select(outbox).where(outbox.c.run_id == run.id))]
        for table_rows in (evs, outs):
            for row in table_rows:
                row.pop("id")
        request.pop("id")
        batch = 1000
        for first in range(0, n_runs - 1, batch):
            ids = [secrets.token_hex(6) for _ in range(min(batch, n_runs - 1 - first))]
            conn.execute(insert(runs), [{**run_row, "id": i} for i in ids])
            conn.execute(insert(checkpoints), [{**cp, "run_id": i} for i in ids for cp in cps])
            conn.execute(insert(steering_requests), [{**request, "run_id": i} for i in ids])
            conn.execute(insert(events), [{**ev, "run_id": i} for i in ids for ev in evs])
            conn.execute(insert(outbox), [{**o, "run_id": i} for i in ids for o in outs])
    with hazel.store.read() as tx:
        waiting = tx.runs.count_by_status().get("waiting", 0)
    hazel.close()
    if waiting != n_runs:
        raise RuntimeError(f"expected {n_runs} waiting runs, found {waiting}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hazel_command() -> list[str]:
    """The ``hazel`` console script next to this Python, else ``python -c`` calling ``bot.cli.main``."""
    script = Path(sys.executable).with_name("hazel")
    if script.exists():
        return [str(script)]
    found = shutil.which("hazel")
    return [found] if found else [sys.executable, "-c", "from bot.cli import main; main()"]


def measure_serve(url: str, *, settle_sec: float = 1.0, timeout_sec: float = 90.0) -> ServeFootprint:
    """Start ``hazel serve`` on ``url``, wait for ``/healthz`` and ``settle_sec``, read RSS and threads, stop it
    (SIGINT, as Ctrl-C).

    Raises:
        RuntimeError: the server did not answer within ``timeout_sec``.
    """
    import psutil

    port = _free_port()
    env = {**os.environ, "HAZEL_DATABASE_URL": url, "HAZEL_WORKFLOWS": "bench.workload", "HAZEL_PORT": str(port),
           "HAZEL_HOST": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    proc = subprocess.Popen([*hazel_command(), "serve"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_sec
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"hazel serve exited with {proc.returncode} before answering")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("hazel serve did not answer /healthz in time")
            time.sleep(0.05)
        time.sleep(settle_sec)
        p = psutil.Process(proc.pid)
        return ServeFootprint(p.memory_info().rss / 2**20, p.num_threads())
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
