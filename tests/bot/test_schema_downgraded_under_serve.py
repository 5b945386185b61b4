"""A ``hazel db downgrade`` under a running process (a fresh-user finding): ``/healthz`` and the REST API said 503
``SchemaNotReadyError``, yet ``POST /api/runs`` without an ``Idempotency-Key`` answered 201 and wrote the run (its
INSERT names only columns every revision has; after ``downgrade 0008`` a keyed start too). Now a start checks the
schema's revision in its own transaction and writes nothing. Real databases (SQLite files, PostgreSQL), a real
downgrade, real HTTP."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from store.migrate import HEAD, downgrade, upgrade
from tests.bot.test_api import ALICE, TOKENS
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow


def said(revision: str) -> str:
    return f"the database is at schema revision {revision}, this Hazel needs {HEAD}: run `hazel db upgrade`"


def runs_stored(hazel: Any) -> int:
    """The rows of ``hazel_runs``, read with plain SQL (whatever the schema's revision)."""
    with hazel.store.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM hazel_runs")).scalar()


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
