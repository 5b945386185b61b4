"""Prometheus metrics (prometheus_client), served as ``GET /metrics`` by ``hazel serve`` (and by ``hazel worker``
on ``HAZEL_METRICS_PORT``).

Read from the database at scrape time, with a few aggregate queries (no per-run work):

- ``hazel_runs{workflow, status}`` (gauge): runs per workflow and status.
- ``hazel_waiting_requests_age_seconds`` (gauge histogram, buckets ``le`` in seconds): pending steering
  requests by how long they have waited; ``hazel_waiting_request_oldest_age_seconds`` (gauge).
- ``hazel_outbox_messages{status, kind}`` (gauge): notifications ``pending`` or ``dead`` (the backlog;
  delivered ones are not counted); ``hazel_outbox_oldest_pending_age_seconds`` (gauge).
- ``hazel_database_up`` (gauge): 1 when those queries succeeded, or when the database answered and only its
  schema is short of this Hazel's (``hazel_schema_ok`` 0: one cause, one alert); 0 otherwise (the scrape still
  answers).
- ``hazel_schema_ok`` (gauge): 1 when the database is at the schema revision this Hazel needs or a newer one
  (migrations only add: a rolling deploy migrates first), 0 when it is older (this process cannot work:
  ``/healthz`` answers 503); absent when the database did not answer (then ``hazel_database_up`` is 0). One more
  query: the schema version table (``Hazel.health``).

Observed in this process:

- ``hazel_step_duration_seconds{workflow, step, outcome}`` (histogram): how long each step function ran;
  ``outcome`` is ``ok`` or ``error`` (the step raised; it may be retried).

Plus prometheus_client's process and Python collectors. Each ``HazelMetrics`` has its own registry.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Iterator

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from store.models import OutboxStatus, RunStatus

if TYPE_CHECKING:
    from bot.engine import Hazel

log = logging.getLogger("hazel.metrics")

WAITING_AGE_BUCKETS_SEC = (60, 300, 900, 3600, 4 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600)
"""Upper bounds of the waiting-request age buckets: 1 min, 5 min, 15 min, 1 h, 4 h, 1 day, 3 days, 7 days."""
STEP_BUCKETS_SEC = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
"""Step duration buckets: steps range from pure functions (milliseconds) to LLM calls and deploys (minutes)."""


class DatabaseCollector:
    """Collects the database-backed metrics of ``hazel`` at each scrape (see the module docstring)."""

    def __init__(self, hazel: "Hazel") -> None:
        self.hazel = hazel

    def collect(self) -> Iterator[Metric]:
        health = self.hazel.health()  # first: a schema older than this Hazel's may fail the queries below too
        if health.error is None:  # (unknown when the database did not answer: hazel_database_up says so)
            yield _gauge("hazel_schema_ok", "1 when the database schema has what this Hazel needs (its revision or a "
                         "newer one), 0 when it is older (hazel db upgrade is needed).", 0 if health.schema else 1)
        up = GaugeMetricFamily("hazel_database_up", "1 when the metrics queries on the database succeeded.")
        try:
            families = list(self._families(self.hazel.clock()))
        except Exception as exc:  # a scrape must answer even when the database does not
            log.warning("metrics: database queries failed: %s", type(exc).__name__)
            # the database answered /healthz's query and only its schema is short (hazel_schema_ok 0 says so):
            # up, so that one cause fires one alert (s24 F6: both were 0 for a database emptied under serve)
            up.add_metric([], 1 if health.error is None and health.schema is not None else 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self, now: datetime) -> Iterator[Metric]:
        snap = self.hazel.metrics_snapshot(now=now, age_bounds_sec=WAITING_AGE_BUCKETS_SEC)

        by_run = GaugeMetricFamily("hazel_runs", "Runs by workflow and status.", labels=["workflow", "status"])
        counts: dict[str, dict[str, int]] = {}
        for workflow, status, n in snap.runs:
            counts.setdefault(workflow, {})[status] = n
        for workflow, per_status in sorted(counts.items()):
            for status in RunStatus:  # every status, so that a series drops to 0 instead of vanishing
                by_run.add_metric([workflow, status.value], per_status.get(status.value, 0))
        yield by_run

        total = snap.waiting_total
        age = GaugeHistogramMetricFamily(
            "hazel_waiting_requests_age_seconds", "Pending steering requests by how long they have waited.")
        buckets = [(_le(b), float(n)) for b, n in zip(WAITING_AGE_BUCKETS_SEC, snap.waiting_within, strict=True)]
        age_sum = total * now.timestamp() - snap.waiting_epoch_sum
        age.add_metric([], buckets + [("+Inf", float(total))], gsum_value=max(0.0, age_sum))
        yield age
        yield _gauge("hazel_waiting_request_oldest_age_seconds",
                     "Age of the oldest pending steering request (0 when none).", _age(now, snap.waiting_oldest))

        backlog = GaugeMetricFamily("hazel_outbox_messages", "Notifications not delivered yet (pending) or given "
                                    "up (dead), by kind.", labels=["status", "kind"])
        oldest_pending = None
        for status, kind, n, first in snap.outbox:
            backlog.add_metric([status, kind], n)
            if status == OutboxStatus.PENDING.value and first is not None:
                oldest_pending = first if oldest_pending is None else min(oldest_pending, first)
        yield backlog
        yield _gauge("hazel_outbox_oldest_pending_age_seconds",
                     "Age of the oldest pending notification (0 when none).", _age(now, oldest_pending))


def _le(bound: float) -> str:
    return f"{float(bound)}"


def _age(now: datetime, since: datetime | None) -> float:
    return max(0.0, (now - since).total_seconds()) if since is not None else 0.0


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc)
    family.add_metric([], value)
    return family


class HazelMetrics:
    """The metrics of one engine: a registry with the database collector, the step histogram (fed by the
    runner's ``on_step_end``) and the process collectors."""

    def __init__(self, hazel: "Hazel") -> None:
        self.registry = CollectorRegistry()
        self.registry.register(DatabaseCollector(hazel))
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.step_duration = Histogram("hazel_step_duration_seconds", "How long step functions ran.",
                                       ["workflow", "step", "outcome"], buckets=STEP_BUCKETS_SEC,
                                       registry=self.registry)
        hazel.on_step_end(self.observe_step)

    def observe_step(self, workflow: str, step: str, duration_sec: float, ok: bool) -> None:
        self.step_duration.labels(workflow, step, "ok" if ok else "error").observe(duration_sec)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)

    def router(self) -> APIRouter:
        """``GET /metrics``."""
        router = APIRouter(tags=["operations"])

        @router.get("/metrics", response_class=Response,
                    responses={200: {"content": {CONTENT_TYPE_LATEST: {}},
                                     "description": "Prometheus text exposition format"}})
        def metrics() -> Response:
            """Prometheus metrics: runs by status, waiting requests by age, step durations, outbox backlog."""
            return Response(self.exposition(), media_type=CONTENT_TYPE_LATEST)

        return router

    def serve(self, *, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port`` in a background thread (``hazel worker``)."""
        from prometheus_client import start_http_server

        start_http_server(port, addr=host, registry=self.registry)
