"""``GET /healthz``: 200 when the database answers ``SELECT 1``, else 503 (no connection details)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from bot.engine import Hazel


def health_router(hazel: Hazel) -> APIRouter:
    """``GET /healthz``: ``{"status": "ok", "database": "sqlite" | "postgresql"}``, or 503
    ``{"status": "unavailable", "database": …, "error": "<error class>"}``."""
    router = APIRouter(tags=["operations"])

    @router.get("/healthz")
    def healthz() -> JSONResponse:
        """200 when the database answers, 503 otherwise."""
        error = hazel.health()
        if error is not None:  # load balancers read the status code
            return JSONResponse({"status": "unavailable", "database": hazel.database, "error": error},
                                status_code=503)
        return JSONResponse({"status": "ok", "database": hazel.database})

    return router
