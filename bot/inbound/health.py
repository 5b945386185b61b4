"""``GET /healthz``: 200 when the database answers at the schema revision this Hazel needs (or a newer one), else
503 (no connection details). One query: the schema version table."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from bot.engine import Hazel


def health_router(hazel: Hazel) -> APIRouter:
    """``GET /healthz``: ``{"status": "ok", "database": "sqlite" | "postgresql"}``; or 503
    ``{"status": "unavailable", "database": …, "error": "<error class>"}`` when the database does not answer;
    or 503 ``{"status": "unavailable", "database": …, "error": "SchemaNotReadyError", "message": "the database
    is at schema revision 0005, this Hazel needs 0007: run `hazel db upgrade`"}`` when its schema is older
    than this process needs (``Hazel.health``; a newer one is fine for a running process: migrations only add,
    and a rolling deploy migrates before it rolls the processes)."""
    router = APIRouter(tags=["operations"])

    @router.get("/healthz")
    @router.head("/healthz", include_in_schema=False)  # (load balancers probe with HEAD; s24 F8: it was 405)
    def healthz() -> JSONResponse:
        """200 when the database answers at this Hazel's schema revision or a newer one, 503 otherwise (HEAD:
        the same status, no body)."""
        health = hazel.health()
        if health.error is not None:  # load balancers read the status code
            return JSONResponse({"status": "unavailable", "database": hazel.database, "error": health.error},
                                status_code=503)
        if health.schema is not None:
            return JSONResponse({"status": "unavailable", "database": hazel.database, "error": "SchemaNotReadyError",
                                 "message": health.schema}, status_code=503)
        return JSONResponse({"status": "ok", "database": hazel.database})

    return router
