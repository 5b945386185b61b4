"""The HTTP app served by ``hazel serve`` (FastAPI on uvicorn): health, metrics, and the routers of the REST
API and of each configured channel."""

from __future__ import annotations

from typing import Iterable

from fastapi import APIRouter, FastAPI

from bot.engine import Hazel
from bot.inbound.health import health_router
from bot.ops.metrics import HazelMetrics


def create_app(hazel: Hazel, *, routers: Iterable[APIRouter] = ()) -> FastAPI:
    """The app: ``GET /healthz``, ``GET /metrics`` (``bot.ops.metrics``) plus ``routers`` (Slack events, the
    Jira webhook, the REST API)."""
    app = FastAPI(title="Hazel", summary="Durable agent runs steered by humans", version="0.1.0")
    app.state.hazel = hazel
    app.include_router(health_router(hazel))
    app.state.metrics = HazelMetrics(hazel)
    app.include_router(app.state.metrics.router())
    for router in routers:
        app.include_router(router)
    return app
