"""A ``hazel db downgrade`` under a running process (a fresh-user finding): ``/healthz`` and the REST API said 503
``SchemaNotReadyError``, yet ``POST /api/runs`` without an ``Idempotency-Key`` answered 201 and wrote the run (its
INSERT names only columns every revision has; after ``downgrade 0008`` a keyed start too), and the run's LangGraph
step then failed on the schema at each attempt until the run ended ``failed``. Now a start checks the schema's
revision in its own transaction and writes nothing, and a step that meets the older schema keeps the run's
attempts: the run goes on once the schema is upgraded. Real databases (SQLite files, PostgreSQL), a real
downgrade, real HTTP."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from bot.inbound.api import api_router
from bot.ops.worker import WorkerPool
from bot.server.http import create_app
from bot.settings import Settings
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


def test_a_start_on_a_downgraded_schema_is_503_and_writes_nothing_whatever_its_headers(empty_url: str) -> None:
    from tests.langgraph.graphs import review_graph, workflow

    hazel = make_hazel(empty_url, doc_workflow(), workflow(review_graph()))
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    auth = {"Authorization": f"Bearer {ALICE}"}
    starts = {"doc": {"topic": "backups"}, "lg-review": {"topic": "tides"}}
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=10) as http:
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
    for record in worker_lines(caplog):  # one line a try, what every command says, no traceback
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert record.getMessage().startswith(said("0008") + "; trying again in "), record.getMessage()
    assert nodes["publish"] == 1
