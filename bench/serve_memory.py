"""Item 5, waiting is free: resident memory and threads of a real ``hazel serve`` process with 0 and with
10,000 waiting runs in its database.

The waiting runs: one run of ``bench-pause`` is executed through Hazel to its steering point and its
notification delivered; then its rows (run, checkpoints, pending steering request, audit events, delivered
outbox rows) are copied under new run and request ids by ``INSERT … SELECT`` over a generated sequence, so the
database holds 10,000 runs in exactly the state a real waiting run leaves behind, in a second or two instead of
minutes. ``hazel serve`` is started as a
subprocess on a free loopback port; once ``/healthz`` answers and ``settle_sec`` has passed (its workers swept
the queue and its deliverer ran), psutil reads its RSS and thread count.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import select, text

from store.schema import checkpoints, events, outbox, runs, steering_requests

from bench.workload import ACTOR, PAUSE_WORKFLOW, bench_pause, make_hazel

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ServeFootprint:
    """``rss_mb``: resident set size in MiB; ``threads``: OS threads of the process."""

    rss_mb: float
    threads: int


COPIES_PER_TRANSACTION = 250
"""Copies of the waiting run inserted per transaction (PostgreSQL keeps every version of a counter row that a
transaction updates until it ends: one transaction for all of them would cost their square)."""


def add_waiting_runs(url: str, n_runs: int) -> None:
    """Leave ``n_runs`` runs waiting at ``bench-pause``'s steering point in the database at ``url``: one
    executed through Hazel, ``n_runs - 1`` copies of its rows made in the database (``INSERT … SELECT`` over a
    generated sequence; each copy has its own run id and steering request id, and its audit events and outbox
    rows point at them).

    Raises:
        RuntimeError: the database then holds another number of waiting runs.
    """
    hazel = make_hazel(url, bench_pause)
    try:
        run = hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR)
        hazel.drive(run_id=run.id)  # executes to the steering point and delivers its notification
        pg = hazel.store.dialect == "postgresql"
        with hazel.store.read() as tx:
            request_id = tx.conn.execute(select(steering_requests.c.id).where(
                steering_requests.c.run_id == run.id)).scalar_one()
            base = int(tx.conn.execute(text("SELECT COALESCE(MAX(id), 0) + 1 FROM hazel_steering_requests"))
                       .scalar_one())
        copies = n_runs - 1
        for first in range(0, copies, COPIES_PER_TRANSACTION):
            with hazel.store.transaction() as tx:
                _copy(tx.conn, pg, run.id, request_id, base, first, min(COPIES_PER_TRANSACTION, copies - first))
        if pg and copies > 0:
            with hazel.store.transaction() as tx:
                tx.conn.execute(text("SELECT setval(pg_get_serial_sequence('hazel_steering_requests', 'id'), "
                                     "(SELECT MAX(id) FROM hazel_steering_requests))"))
        with hazel.store.read() as tx:
            waiting = tx.runs.count_by_status().get("waiting", 0)
    finally:
        hazel.close()
    if waiting != n_runs:
        raise RuntimeError(f"expected {n_runs} waiting runs, found {waiting}")


_ID_MULTIPLIER = 0x9E3779B1
"""Copy ``i``'s run id is ``(i + 1)`` times this (mod 2**48) in 12 hex digits: a different id for every copy,
spread over the id space as random ids are."""
_MASK48 = (1 << 48) - 1


def _copy(conn, pg: bool, template: str, request_id: int, base: int, first: int, n: int) -> None:  # noqa: ANN001
    """Copies ``first`` .. ``first + n - 1`` of the run ``template``'s rows (copy ``i``'s run id: 12 hex digits
    from ``i``; its steering request's id: ``base + i``)."""
    seq = ("copies AS (SELECT i FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g(i))"
           if pg else "copies(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM copies WHERE i < :last)")
    key = "(((copies.i + 1) * :mult) & :mask)"
    new_id = f"lpad(to_hex({key}), 12, '0')" if pg else f"printf('%012x', {key})"
    new_request = "(CASE WHEN t.request_id = :req THEN :base + copies.i ELSE t.request_id END)"
    params = {"first": first, "last": first + n - 1, "mult": _ID_MULTIPLIER, "mask": _MASK48, "tpl": template,
              "req": request_id, "base": base}
    for table in (runs, checkpoints, steering_requests, events, outbox):
        overrides = {"id": new_id} if table is runs else {"run_id": new_id, "request_id": new_request}
        if table is steering_requests:
            overrides["id"] = ":base + copies.i"
        cols = [c.name for c in table.c if c.name != "id" or table in (runs, steering_requests)]
        exprs = ", ".join(overrides.get(c, f"t.{c}") for c in cols)
        where = "t.id = :tpl" if table is runs else "t.run_id = :tpl"
        order = "copies.i" if table is runs else "copies.i, " + ("t.seq" if table is checkpoints else "t.id")
        head = f"INSERT INTO {table.name} ({', '.join(cols)})"
        body = f"SELECT {exprs} FROM copies CROSS JOIN {table.name} t WHERE {where} ORDER BY {order}"
        with_ = f"WITH {'' if pg else 'RECURSIVE '}{seq}"
        conn.execute(text(f"{head} {with_} {body}" if pg else f"{with_} {head} {body}"), params)


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
