"""A ``hazel db downgrade`` under a running process (a fresh-user finding): ``/healthz`` and the REST API said 503
``SchemaNotReadyError``, yet ``POST /api/runs`` without an ``Idempotency-Key`` answered 201 and wrote the run (its
INSERT names only columns every revision has; after ``downgrade 0008`` a keyed start too), and the run's LangGraph
step then failed on the schema at each attempt until the run ended ``failed``; and SQLite's "no such column" was
logged as "the database is unreachable". Now a start checks the schema's revision in its own transaction and
writes nothing, a step (or Hazel's own write) that meets the older schema keeps the run's attempts and the run goes
on once the schema is upgraded, and the worker says what every command says. Real databases (SQLite files,
PostgreSQL), a real downgrade, real HTTP."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from sqlalchemy import text

from bot.inbound.api import api_router
from bot.ops.worker import WorkerPool
from bot.server.http import create_app
from bot.settings import Settings
from hazel import StepContext, Workflow
from store.migrate import HEAD, downgrade, upgrade
from store.models import RunStatus
from tests.bot.test_api import ALICE, TOKENS
from tests.support.deployment import wait_for
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow

PAUSES_SEC = (0.05, 0.1, 0.2)


def said(revision: str) -> str:
    return f"the database is at schema revision {revision}, this Hazel needs {HEAD}: run `hazel db upgrade`"


def runs_stored(hazel: Any) -> int:
    """The rows of ``hazel_runs``, read with plain SQL (whatever the schema's revision)."""
    with hazel.store.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM hazel_runs")).scalar()


def worker_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "hazel.worker" and r.levelno >= logging.WARNING]


def said_at(revision: str, caplog: pytest.LogCaptureFixture) -> bool:
    """Whether a worker logged that the schema is at ``revision`` (``worker_lines``)."""
    return any(r.getMessage().startswith(said(revision) + "; ") for r in worker_lines(caplog))


def assert_schema_lines(records: list[logging.LogRecord], revision: str) -> None:
    """Each a WARNING without a traceback saying what ``/healthz`` says, and when the thread tries again: at
    ``revision``, or at one the downgrade or the upgrade passes (they migrate one revision at a time)."""
    pattern = re.escape(said("NNNN")).replace("NNNN", r"\d{4}") + r"; trying again in [\d.]+ s"
    assert any(r.getMessage().startswith(said(revision) + "; ") for r in records), [r.getMessage() for r in records]
    for record in records:
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert re.fullmatch(pattern, record.getMessage()), record.getMessage()


def test_a_start_on_a_downgraded_schema_is_503_and_writes_nothing_whatever_its_headers(empty_url: str) -> None:
    from tests.langgraph.graphs import review_graph, workflow

    hazel = make_hazel(empty_url, doc_workflow(), workflow(review_graph()))
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    auth = {"Authorization": f"Bearer {ALICE}"}
    starts = {"doc": {"topic": "backups"}, "lg-review": {"topic": "tides"}}
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        for revision in ("0008", "0005"):  # (0008: only a LangGraph table is short; 0005: hazel_runs too)
            downgrade(hazel.store.engine, revision)
            assert http.get("/healthz").status_code == 503
            for workflow_name, given in starts.items():
                for headers in ({}, {"Idempotency-Key": f"key-{revision}-{workflow_name}"}):
                    response = http.post("/api/runs", json={"workflow": workflow_name, "input": given},
                                         headers={**auth, **headers})
                    assert response.status_code == 503, (revision, workflow_name, headers, response.text)
                    assert response.json() == {"error": {"type": "SchemaNotReadyError", "message": said(revision)}}
                    assert response.headers["Retry-After"]
            assert runs_stored(hazel) == 0  # nothing written, with or without a key
        upgrade(hazel.store.engine)
        response = http.post("/api/runs", json={"workflow": "doc", "input": {"topic": "backups"}}, headers=auth)
        assert response.status_code == 201, response.text
    assert runs_stored(hazel) == 1


def test_a_langgraph_step_that_meets_an_older_schema_keeps_its_attempts_and_goes_on_after_the_upgrade(
        empty_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """The finding's run: its graph's checkpointer raises ``SchemaNotReadyError`` at every attempt until the
    upgrade. Before, each attempt counted and the run ended ``failed`` after the last (here 2, 50 ms apart)."""
    from tests.langgraph.graphs import review_graph, workflow

    nodes: Counter = Counter()
    hazel = make_hazel(empty_url, workflow(review_graph(on_node=lambda name: nodes.update([name])),
                                           max_attempts=2, backoff_sec=0.05))
    run = hazel.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    assert hazel.drive(run_id=run.id).status is RunStatus.WAITING
    downgrade(hazel.store.engine, "0008")
    caplog.set_level(logging.INFO, logger="hazel")
    pool = WorkerPool(hazel, threads=2, sweep_sec=0.05, outage_pauses_sec=PAUSES_SEC)
    pool.start()
    try:
        hazel.decide(run_id=run.id, action="approve", actor=person("ana"))  # ready: a worker claims it
        wait_for(lambda: len(worker_lines(caplog)) >= 4, what="the workers to meet the schema")
        time.sleep(0.5)  # ten times the backoff of the run's attempts: it had failed by now
        waiting = hazel.get(run_id=run.id)
        assert waiting.status in (RunStatus.READY, RunStatus.RUNNING), waiting.status
        assert (waiting.attempt, waiting.error) == (0, None)
        upgrade(hazel.store.engine)
        wait_for(lambda: hazel.get(run_id=run.id).status is RunStatus.COMPLETED, what="the run to complete")
    finally:
        pool.stop()
    actions = [e.action for e in hazel.audit(run_id=run.id)]
    assert not {"step.retry_scheduled", "step.failed", "run.failed"} & set(actions), actions
    assert not [r for r in caplog.records if r.name == "hazel.runner" and r.levelno >= logging.WARNING]
    assert_schema_lines(worker_lines(caplog), "0008")  # one line a try, what every command says, no traceback
    assert nodes["publish"] == 1


class Note(BaseModel):
    text: str = ""


def test_hazels_own_write_that_meets_an_older_schema_hands_the_run_back_and_it_goes_on(
        empty_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """A native run whose step returns into a schema downgraded meanwhile (here the step downgrades it, as an
    operator would while it executes): its pause cannot be written (``hazel_steering_requests`` lacks 0006's
    columns). Before, PostgreSQL took the ``ProgrammingError`` for the run's own and tried to fail it "outside a
    step" (that write failed too: the run stayed leased until its lease ran out), and SQLite logged an outage. Now the run is handed back, unfailed, and waits for its review once the schema is upgraded;
    the step cut short runs again (once)."""
    calls: Counter = Counter()
    downgraded = threading.Event()
    wf = Workflow("note", version=1, state=Note)

    @wf.step
    def draft(state: Note, ctx: StepContext) -> Note:
        calls[ctx.run_id] += 1
        if not downgraded.is_set():
            downgrade(hazel.store.engine, "0005")
            downgraded.set()
        return Note(text="drafted")

    wf.steer("review", show="text")
    hazel = make_hazel(empty_url, wf)
    caplog.set_level(logging.INFO, logger="hazel")
    pool = WorkerPool(hazel, threads=2, sweep_sec=0.05, outage_pauses_sec=PAUSES_SEC)
    pool.start()
    try:
        run = hazel.start(workflow="note", input={}, actor=person("olga"))
        assert downgraded.wait(10)
        wait_for(lambda: said_at("0005", caplog) and len(worker_lines(caplog)) >= 3,
                 what="the workers to meet the schema")
        with hazel.store.engine.connect() as conn:  # (plain SQL: the run as stored, whatever the revision)
            status, attempt, error = conn.execute(text(
                "SELECT status, attempt, error FROM hazel_runs WHERE id = :id"), {"id": run.id}).one()
        assert status in ("ready", "running") and (attempt, error) == (0, None), (status, attempt, error)
        upgrade(hazel.store.engine)
        wait_for(lambda: hazel.get(run_id=run.id).status is RunStatus.WAITING, what="the run to wait")
    finally:
        pool.stop()
    assert calls[run.id] == 2
    assert "run.failed" not in [e.action for e in hazel.audit(run_id=run.id)]
    assert_schema_lines(worker_lines(caplog), "0005")


def test_the_worker_says_the_schema_is_older_not_that_the_database_is_unreachable(
        empty_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """At 0005 a worker's claim names a column the schema lacks (``hazel_runs.start_key``): SQLite's
    ``OperationalError`` "no such column" was logged as an outage, PostgreSQL's ``ProgrammingError`` as a worker
    loop error. Both now say what ``/healthz`` and every command say, and the workers go on after the upgrade."""
    hazel = make_hazel(empty_url, doc_workflow())
    caplog.set_level(logging.INFO, logger="hazel")
    pool = WorkerPool(hazel, threads=2, sweep_sec=0.05, outage_pauses_sec=PAUSES_SEC)
    pool.start()
    try:
        downgrade(hazel.store.engine, "0005")
        wait_for(lambda: said_at("0005", caplog) and len(worker_lines(caplog)) >= 4,
                 what="the workers to meet the schema")
        upgrade(hazel.store.engine)
        run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=person("olga"))
        wait_for(lambda: hazel.get(run_id=run.id).status is RunStatus.WAITING, what="the run to wait")
    finally:
        pool.stop()
    lines = worker_lines(caplog)
    assert not [r.getMessage() for r in lines if "unreachable" in r.getMessage()]
    assert_schema_lines(lines, "0005")
