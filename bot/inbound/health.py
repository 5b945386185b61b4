"""The HTTP app served by ``hazel serve`` (FastAPI on uvicorn): health, and the routers of each channel."""

from __future__ import annotations

from typing import Iterable

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import text

from bot.ops.metrics import HazelMetrics
from bot.engine.hazel import Hazel


def create_app(hazel: Hazel, *, routers: Iterable[APIRouter] = ()) -> FastAPI:
    """The app: ``GET /healthz``, ``GET /metrics`` (``bot.ops.metrics``) plus ``routers`` (Slack events, the Jira
    webhook, the REST API)."""
    app = FastAPI(title="Hazel", summary="Durable agent runs steered by humans", version="0.1.0")
    app.state.hazel = hazel

    @app.get("/healthz", tags=["operations"])
    def healthz() -> JSONResponse:
        """200 when the database answers, 503 otherwise."""
        try:
            with hazel.store.read() as tx:
                tx.conn.execute(text("SELECT 1"))
        except Exception as exc:  # report, never raise: load balancers read the status code
            return JSONResponse({"status": "unavailable", "database": hazel.store.dialect,
                                 "error": type(exc).__name__}, status_code=503)
        return JSONResponse({"status": "ok", "database": hazel.store.dialect})

    app.state.metrics = HazelMetrics(hazel)
    app.include_router(app.state.metrics.router())
    for router in routers:
        app.include_router(router)
    return app
