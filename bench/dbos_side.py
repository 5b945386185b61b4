"""Items 2, 3, 4 and 6 on DBOS (dbos-transact-py), when it is installed: the second peer beside LangGraph.

The workload is written the way DBOS's documentation writes workflows: a ``@DBOS.workflow`` calling
``@DBOS.step`` functions in sequence.

- **Linear workflow** (``hazel-bench-linear``, items 2, 3 and 6): step ``i`` is one call of the step
  ``append`` with argument ``i``; it returns ``step_text(i)`` (1,024 characters), the workflow appends that to
  a list it keeps in a local variable and returns the list at the end. What DBOS writes: at the start, the
  workflow's status row and its inputs; per step (``dbos/_core.py``, ``invoke_step``), one transaction reading
  the workflow's status and ``operation_outputs`` for an already recorded output (``check_operation_execution``),
  then, after the step returned, one transaction that fences the workflow's owner (``SELECT ... FOR NO KEY
  UPDATE`` of its status row on PostgreSQL, a no-op ``UPDATE`` of it on SQLite: ``_check_owner_txn`` in
  ``dbos/_sys_db.py``) and inserts the step's row into ``operation_outputs`` (workflow id, function id,
  function name, the output as base64 of its pickle (about 1.4 KB for the 1 KB text), start and end times);
  at the end, the workflow's output (the whole list, pickled and base64-encoded, ``workflow_output``) and its
  status. Item 3 counts all of it, divided by the steps recorded (of the 3.5 KB per step measured on SQLite
  for 500 steps, the step's own row is about 2.2 KB and the workflow's output, 687 KB once, 1.4 KB).
- **Pause workflow** (``hazel-bench-pause``, item 4): the steps of ``PAUSE_STEPS`` (each a step of that name
  returning ``step_text(i)``), then ``DBOS.recv(topic, timeout_seconds=one day)`` as the steering point (DBOS
  records the durable timeout as a ``DBOS.sleep`` row in ``operation_outputs`` before it blocks), then the step
  ``RESUMED_STEP``. Resumed by ``DBOS.send(workflow_id, "approve", topic)`` from the bench thread.

Timing is as on the other sides: per step, from one step's start (``time.perf_counter()`` first thing in the
step's body) to the next's; the measured run is preceded by a ``WARM_UP_STEPS``-step run in the same DBOS
instance; the linear workflow is called directly in the bench thread (DBOS then runs it in that thread).

Configuration: DBOS's defaults (``DBOSConfig`` with ``name``, ``system_database_url``, ``log_level`` WARNING)
but for what is said here.

- SQLite: DBOS sets ``BEGIN IMMEDIATE``, ``busy_timeout`` and ``foreign_keys`` on its connections and neither
  ``journal_mode`` nor ``synchronous`` (``dbos/_sys_db_sqlite.py``, ``_create_engine``), so its own default is
  SQLite's rollback journal. The bench creates each file in WAL beforehand (the journal mode is stored in the
  file), as Hazel and LangGraph run, and checks that DBOS's connections report ``journal_mode=wal`` and
  ``synchronous=2`` (FULL, SQLite's default, which DBOS leaves alone). A fresh file per measurement.
- PostgreSQL: a fresh database ``dbos_bench_<random>`` per measurement on the bench's server (DBOS needs its
  own system database; its tables go to schema ``dbos``), dropped afterwards ``WITH (FORCE)``: a copy
  (``CREATE DATABASE … TEMPLATE``) of one database DBOS migrated once per bench run, so that each launch does
  not run DBOS's migrations again. Storage is
  ``pg_total_relation_size`` (heap, TOAST, indexes) of every table in schema ``dbos``.
- SQLite has no LISTEN/NOTIFY: a waiting ``recv`` is woken by DBOS's polling listener, which sleeps
  ``notification_listener_polling_interval_sec`` (default 1 s) between rounds and queries the database once
  per waiting workflow in each round (``dbos/_sys_db.py``, ``_notification_listener_polling``). Item 4 keeps
  that default unless ``listener_poll_sec`` is given. On PostgreSQL a trigger NOTIFYs on the message's insert
  and the listener wakes the waiter at once. Measurements without a ``recv`` (items 2, 3, 6) set the interval
  to 0.1 s, which only makes ``DBOS.destroy`` (it joins that thread) faster: the listener has nothing to poll.
- ``DBOS.fork_workflow`` does not run the fork: it writes it ``ENQUEUED`` on DBOS's internal queue
  (``dbos/_sys_db.py``, ``fork_workflow``), whose worker thread polls every second (``dbos/_queue.py``,
  ``queue_worker_thread``). Item 6's rewind latency therefore includes waiting for that poll (0 to 1 s) unless
  ``fork_queue_poll_sec`` puts the fork on a queue registered with that polling interval. The fork then
  replays the steps before ``start_step`` from their recorded outputs (one read of ``operation_outputs`` each)
  before it executes the first step anew.
- Waiting costs a thread: a workflow blocked in ``recv`` holds its executor thread (``DBOS.start_workflow``
  runs each workflow on a ``ThreadPoolExecutor`` without a worker limit, ``dbos/_dbos.py``, ``_launch``).
  ``pause_resume_threads`` returns that count, measured.

DBOS is a process-wide singleton: each measurement constructs ``DBOS(config=...)``, launches it and destroys
it (``DBOS.destroy()``; the workflow and step registrations, made once per process, survive it). Measurements
must therefore not run concurrently with each other or with another DBOS application in the process.
"""

from __future__ import annotations

import gc
import logging
import secrets
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from statistics import median
from typing import Any, Callable, Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench.databases import file_size_bytes
from bench.hazel_side import REWIND_SAMPLES, WARM_UP_STEPS, HistoryCost, StepCost, cost_of
from bench.pause_resume import PauseResume, _summary
from bench.workload import PAUSE_STEPS, RESUMED_STEP, step_text

APP_NAME = "hazel-bench-dbos"
TOPIC = "review"
"""The topic the pause workflow's ``recv`` waits on."""
RECV_TIMEOUT_SEC = 86_400.0
"""``recv``'s timeout: a day, so that no run times out during a measurement."""
FORK_QUEUE = "hazel-bench-fork"
"""The queue ``history_and_rewind`` registers when it is given ``fork_queue_poll_sec``."""
QUIET_LISTENER_SEC = 0.1
"""Listener interval of the measurements without a ``recv`` (see the module docstring)."""
SCHEMA = "dbos"
"""DBOS's system schema on PostgreSQL (``DBOSConfig.dbos_system_schema``'s default)."""
WAIT_TIMEOUT_SEC = 300.0


def available() -> str | None:
    """None when dbos imports, else why not."""
    try:
        import dbos  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or exc} not installed (pip install dbos)"
    return None


# --- the workflows, registered once per process -------------------------------------------------------------


class _Probe:
    """What the bench's steps call first thing (set by the measurement running, None otherwise)."""

    on_step: Callable[[str], None] | None = None
    """Called with the step's name (``append`` for the linear workflow's steps)."""


_PROBE = _Probe()


@dataclass(frozen=True)
class _Functions:
    linear: Callable[[int], list[str]]
    pause: Callable[[], list[str]]


@lru_cache(maxsize=1)
def _functions() -> _Functions:
    """Decorate the workflows and steps (once: DBOS keeps them in its process-wide registry, which
    ``DBOS.destroy()`` leaves in place, and a new ``DBOS(config=...)`` picks them up)."""
    from dbos import DBOS

    @DBOS.step(name="append")
    def append(i: int) -> str:
        probe = _PROBE.on_step
        if probe is not None:
            probe("append")
        return step_text(i)

    @DBOS.workflow(name="hazel-bench-linear")
    def linear(n_steps: int) -> list[str]:
        items: list[str] = []
        for i in range(n_steps):
            items.append(append(i))
        return items

    def named_step(name: str, i: int) -> Callable[[], str]:
        text_i = step_text(i)

        def body() -> str:
            probe = _PROBE.on_step
            if probe is not None:
                probe(name)
            return text_i

        body.__name__ = body.__qualname__ = name
        return DBOS.step(name=name)(body)

    before = [named_step(name, i) for i, name in enumerate(PAUSE_STEPS)]
    after = named_step(RESUMED_STEP, len(PAUSE_STEPS))

    @DBOS.workflow(name="hazel-bench-pause")
    def pause() -> list[str]:
        items = [step() for step in before]
        decision = DBOS.recv(TOPIC, timeout_seconds=RECV_TIMEOUT_SEC)
        if decision != "approve":
            raise RuntimeError(f"bench pause workflow received {decision!r}")
        items.append(after())
        return items

    return _Functions(linear=linear, pause=pause)


# --- system databases and the DBOS lifecycle ------------------------------------------------------------------


@dataclass
class _SystemDatabase:
    """A fresh DBOS system database of ``backend``: ``url`` for DBOS, ``size_bytes()`` for item 3."""

    backend_name: str
    url: str

    @property
    def is_sqlite(self) -> bool:
        return self.backend_name == "sqlite"

    def size_bytes(self) -> int:
        """SQLite: the file once its WAL is folded in (``file_size_bytes``); DBOS may still be running, its
        idle pooled connections do not stop ``wal_checkpoint(TRUNCATE)``, which waits out a transaction in
        progress, and a checkpoint that could not complete raises rather than count the WAL. PostgreSQL:
        ``pg_total_relation_size`` of every table in schema ``dbos``."""
        if self.is_sqlite:
            path = make_url(self.url).database or ""
            conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                conn.close()
            if busy:
                raise RuntimeError(f"could not checkpoint the WAL of {path}")
            return file_size_bytes(path)
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(text(
                    "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :schema AND c.relkind = 'r'"),
                    {"schema": SCHEMA}).scalar_one())
        finally:
            engine.dispose()

    def operation_outputs(self) -> str:
        return "operation_outputs" if self.is_sqlite else f"{SCHEMA}.operation_outputs"


@contextmanager
def _system_database(backend, tag: str) -> Iterator[_SystemDatabase]:  # noqa: ANN001
    """A new SQLite file in WAL (``backend.fresh_url``), or a new PostgreSQL database on the bench's server,
    dropped on exit."""
    if backend.name == "sqlite":
        url = backend.fresh_url(f"dbos-{tag}", migrate=False)
        conn = sqlite3.connect(backend.file_of(url))
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        finally:
            conn.close()
        if mode != "wal":
            raise RuntimeError(f"SQLite refused WAL for the DBOS system database (journal_mode={mode})")
        yield _SystemDatabase(backend.name, url)
        return
    name = f"dbos_bench_{secrets.token_hex(4)}"
    template = _migrated_template(backend)
    admin = create_engine(backend.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            _disconnect(conn, template)
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
        try:
            yield _SystemDatabase(backend.name, make_url(backend.url).set(database=name).render_as_string(
                hide_password=False))
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


_TEMPLATES: dict[str, str] = {}
"""PostgreSQL: the bench database's URL → its DBOS template database (``_migrated_template``)."""


def _migrated_template(backend) -> str:  # noqa: ANN001
    """A database on ``backend``'s server that DBOS has migrated (launched on it once, then destroyed), made
    once per bench database and dropped with it; every measurement's system database is a copy of it
    (``CREATE DATABASE … TEMPLATE``): a fresh database as DBOS leaves it after its migrations, without running
    them again (0.6 to 1.7 s of each launch on a new database on a slow 2-core VM)."""
    if backend.url in _TEMPLATES:
        return _TEMPLATES[backend.url]
    name = f"dbos_bench_template_{secrets.token_hex(4)}"
    admin = create_engine(backend.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(backend.url).set(database=name).render_as_string(hide_password=False)
        with _launched(_SystemDatabase(backend.name, url), listener_poll_sec=QUIET_LISTENER_SEC):
            pass
    finally:
        admin.dispose()

    def drop() -> None:
        _TEMPLATES.pop(backend.url, None)
        engine = create_engine(backend.url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            engine.dispose()

    backend.cleanups.append(drop)
    _TEMPLATES[backend.url] = name
    return name


def _disconnect(conn, database: str) -> None:  # noqa: ANN001
    """End every session on ``database`` (a template must have none while it is copied)."""
    conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name "
                      "AND pid <> pg_backend_pid()"), {"name": database})


@contextmanager
def _launched(sysdb: _SystemDatabase, *, listener_poll_sec: float | None) -> Iterator[Any]:
    """``DBOS(config=...)`` + ``DBOS.launch()`` on ``sysdb``; ``DBOS.destroy()`` on exit. Yields the instance."""
    import dbos._dbos as dbos_module
    from dbos import DBOS, DBOSConfig

    _functions()  # registered before DBOS(), so that its application version covers them
    if dbos_module._dbos_global_instance is not None:  # DBOS(config=...) would return it, ignoring the config
        raise RuntimeError("a DBOS instance already exists in this process; the bench needs its own")
    logging.getLogger("dbos").setLevel(logging.WARNING)
    config: DBOSConfig = {"name": APP_NAME, "system_database_url": sysdb.url, "log_level": "WARNING"}
    if listener_poll_sec is not None:
        config["notification_listener_polling_interval_sec"] = listener_poll_sec
    instance = DBOS(config=config)
    try:
        DBOS.launch()
        if sysdb.is_sqlite:
            with instance._sys_db.engine.connect() as conn:
                mode = conn.execute(text("PRAGMA journal_mode")).scalar_one()
                sync = conn.execute(text("PRAGMA synchronous")).scalar_one()
            if (mode, sync) != ("wal", 2):
                raise RuntimeError(f"DBOS's SQLite connections run journal_mode={mode}, synchronous={sync}")
        yield instance
    finally:
        _PROBE.on_step = None
        DBOS.destroy()


def _wait_until(condition: Callable[[], bool], what: str, timeout_sec: float = WAIT_TIMEOUT_SEC) -> None:
    """Poll ``condition`` every 2 ms. Raises TimeoutError after ``timeout_sec``."""
    deadline = time.monotonic() + timeout_sec
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"DBOS bench: {what} not reached in {timeout_sec:.0f} s")
        time.sleep(0.002)


# --- items 2 and 3 ------------------------------------------------------------------------------------------------


def checkpoint_cost(backend, n_steps: int, *, measure_storage: bool = False) -> StepCost:  # noqa: ANN001
    """Item 2 (and 3 with ``measure_storage``): the linear workflow of ``n_steps`` steps, called in the bench
    thread after a ``WARM_UP_STEPS``-step one; per step = between consecutive step starts. Storage: bytes the
    measured run added to the system database (SQLite: the file after ``wal_checkpoint(TRUNCATE)``;
    PostgreSQL: every table of schema ``dbos``), divided by the steps it recorded."""
    from dbos import DBOS, SetWorkflowID

    fns = _functions()
    starts: list[float] = []
    with _system_database(backend, "linear") as sysdb:
        with _launched(sysdb, listener_poll_sec=QUIET_LISTENER_SEC):
            gc.collect()  # as every side, before the warm-up (bench.hazel_side.checkpoint_cost)
            fns.linear(WARM_UP_STEPS)
            before = sysdb.size_bytes() if measure_storage else 0
            workflow_id = uuid.uuid4().hex
            _PROBE.on_step = lambda _name: starts.append(time.perf_counter())
            with SetWorkflowID(workflow_id):
                items = fns.linear(n_steps)
            _PROBE.on_step = None
            assert len(items) == n_steps, len(items)
            recorded = len(DBOS.list_workflow_steps(workflow_id, load_output=False))
            assert recorded == n_steps, recorded
        per_step = (sysdb.size_bytes() - before) / recorded if measure_storage else None
    return cost_of(starts, per_step)


# --- item 4 ---------------------------------------------------------------------------------------------------------


def pause_resume(backend, n_runs: int, *, listener_poll_sec: float | None = None) -> PauseResume:  # noqa: ANN001
    """Item 4 (see ``pause_resume_threads``, which also returns the threads the waiting runs hold)."""
    return pause_resume_threads(backend, n_runs, listener_poll_sec=listener_poll_sec)[0]


def pause_resume_threads(backend, n_runs: int, *,  # noqa: ANN001
                         listener_poll_sec: float | None = None) -> tuple[PauseResume, int]:
    """Item 4 on DBOS, plus item 5's question: ``(PauseResume, threads)``.

    Pause (after one run paused and resumed untimed, as on Hazel's and LangGraph's sides): ``n_runs`` ×
    ``DBOS.start_workflow`` of the pause workflow, timed until every run is blocked in
    ``recv``: its three steps recorded and the ``DBOS.sleep`` row of ``recv``'s durable timeout committed (the
    bench polls ``operation_outputs`` every 2 ms, as Hazel's side polls its runs). ``threads``: then
    ``threading.active_count()`` minus its value just before the runs were started (DBOS reuses an executor
    thread it already had idle, so it can be one less than the runs). Resume: ``DBOS.send(id, "approve",
    topic)`` for each run in turn from the bench thread; latency from the call's start to the start of
    ``RESUMED_STEP`` in that run; resumes/s = runs ÷ time from the first send until every run has finished.
    ``listener_poll_sec``: DBOS's ``notification_listener_polling_interval_sec`` (None: DBOS's default, 1 s;
    it matters on SQLite only, see the module docstring)."""
    from dbos import DBOS

    fns = _functions()
    resumed_at: dict[str, float] = {}

    def on_step(name: str) -> None:
        if name == RESUMED_STEP:
            resumed_at[DBOS.workflow_id or ""] = time.perf_counter()

    with _system_database(backend, "pause") as sysdb:
        poller = create_engine(sysdb.url)
        count_waiting = text(f"SELECT COUNT(*) FROM {sysdb.operation_outputs()} WHERE function_name = 'DBOS.sleep'")

        def waiting(n: int) -> bool:
            with poller.connect() as conn:
                return int(conn.execute(count_waiting).scalar_one()) >= n

        try:
            with _launched(sysdb, listener_poll_sec=listener_poll_sec):
                _PROBE.on_step = on_step
                # one run paused and resumed untimed, as Hazel's and LangGraph's sides do (its DBOS.sleep row
                # stays: counted below)
                warm_up = DBOS.start_workflow(fns.pause)
                _wait_until(lambda: waiting(1), "the warm-up run waiting in recv")
                DBOS.send(warm_up.workflow_id, "approve", TOPIC)
                warm_up.get_result()
                resumed_at.clear()
                threads_before = threading.active_count()
                started = time.perf_counter()
                handles = [DBOS.start_workflow(fns.pause) for _ in range(n_runs)]
                _wait_until(lambda: waiting(n_runs + 1), f"{n_runs} runs waiting in recv")
                pause_sec = time.perf_counter() - started
                threads = threading.active_count() - threads_before
                sent_at: dict[str, float] = {}
                started = time.perf_counter()
                for handle in handles:
                    sent_at[handle.workflow_id] = time.perf_counter()
                    DBOS.send(handle.workflow_id, "approve", TOPIC)
                for handle in handles:
                    assert len(handle.get_result()) == len(PAUSE_STEPS) + 1
                resume_sec = time.perf_counter() - started
        finally:
            poller.dispose()
    missing = [w for w in sent_at if w not in resumed_at]
    if missing:
        raise RuntimeError(f"{len(missing)} resumed DBOS runs never started {RESUMED_STEP!r}")
    latencies = [(resumed_at[w] - sent_at[w]) * 1e3 for w in sent_at]
    return _summary(n_runs, pause_sec, resume_sec, latencies), threads


# --- item 6 ---------------------------------------------------------------------------------------------------------


def history_and_rewind(backend, n_steps: int = 200, rewind_to: int = 100, *,  # noqa: ANN001
                       fork_queue_poll_sec: float | None = None, samples: int = REWIND_SAMPLES) -> HistoryCost:
    """Item 6: a completed ``n_steps`` linear workflow; ``history_ms`` = ``DBOS.list_workflow_steps(id)``
    (every step with its output deserialized; checked to return ``n_steps`` entries); ``rewind_step_ms`` = from
    the call of ``DBOS.fork_workflow(id, start_step)`` to the start of the first step the fork executes anew.
    ``start_step`` is a function id (1-based: a workflow's first step is 1); it is read from the history as
    the id of step ``rewind_to`` (0-based), so the fork keeps the first ``rewind_to`` steps' recorded outputs,
    as Hazel's ``rewind(to=rewind_to)`` keeps checkpoint ``rewind_to``, and runs the others again (checked).
    ``fork_queue_poll_sec``: None forks onto DBOS's internal queue (its default: a poll every second); a number
    registers a queue polled that often and forks onto it. The same calls run once first on a
    ``WARM_UP_STEPS``-step workflow, as on Hazel's side; as there, ``samples`` workflows are run, the history is
    of the first and ``rewind_step_ms`` the median of one fork of each."""
    from dbos import DBOS, SetWorkflowID

    fns = _functions()
    with _system_database(backend, "history") as sysdb, _launched(sysdb, listener_poll_sec=QUIET_LISTENER_SEC):
        queue_name = None
        if fork_queue_poll_sec is not None:
            DBOS.register_queue(FORK_QUEUE, polling_interval_sec=fork_queue_poll_sec)
            queue_name = FORK_QUEUE
        _rewind_once(fns, WARM_UP_STEPS, WARM_UP_STEPS // 2, queue_name)
        workflow_ids = [uuid.uuid4().hex for _ in range(samples)]
        for workflow_id in workflow_ids:
            with SetWorkflowID(workflow_id):
                fns.linear(n_steps)
        started = time.perf_counter()
        steps = DBOS.list_workflow_steps(workflow_ids[0])
        history_ms = (time.perf_counter() - started) * 1e3
        assert len(steps) == n_steps, len(steps)
        rewinds_ms = [_rewind_once(fns, n_steps, rewind_to, queue_name, workflow_id=workflow_id,
                                   steps=steps if workflow_id == workflow_ids[0] else None)
                      for workflow_id in workflow_ids]
    return HistoryCost(history_ms, median(rewinds_ms))


def _rewind_once(fns: _Functions, n_steps: int, rewind_to: int, queue_name: str | None, *,
                 workflow_id: str | None = None, steps: list | None = None) -> float:
    """Fork a completed linear workflow (run here when ``workflow_id`` is None) at step ``rewind_to``, wait for
    the fork to finish, check it; returns ms from the fork call to the first step it executed."""
    from dbos import DBOS, SetWorkflowID

    if workflow_id is None:
        workflow_id = uuid.uuid4().hex
        with SetWorkflowID(workflow_id):
            fns.linear(n_steps)
    if steps is None:
        steps = DBOS.list_workflow_steps(workflow_id)
    executed: list[tuple[str, float]] = []
    _PROBE.on_step = lambda _name: executed.append((DBOS.workflow_id or "", time.perf_counter()))
    started = time.perf_counter()
    handle = DBOS.fork_workflow(workflow_id, steps[rewind_to]["function_id"], queue_name=queue_name)
    items = handle.get_result(polling_interval_sec=0.01)
    _PROBE.on_step = None
    anew = [at for wid, at in executed if wid == handle.workflow_id]
    assert items == [step_text(i) for i in range(n_steps)], "the fork's result differs from the original's"
    assert len(anew) == n_steps - rewind_to, (len(anew), n_steps - rewind_to)
    return (anew[0] - started) * 1e3
