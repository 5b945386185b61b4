"""The clock of ``hazel serve`` / ``hazel worker``: APScheduler 3 wakes Hazel; the database says what is due.

Nothing is scheduled per waiting request or per run: two APScheduler jobs serve whatever waits (plus the
prune job when retention is set).

- The wake job, one date job: armed for the earliest future moment anything is due (a request's
  ``next_action_at``, a retrying run's ``wake_at``), so that deadlines fire on time, not at the next tick. It
  is re-armed after each tick (from the database), and whenever a deadline earlier than the armed one is
  committed (``wake_at``, an ``Hazel.on_deadline`` listener): by this process right after its commit (a
  request opened by one of its workers, a retry scheduled), and by another process (a CLI command, another
  ``hazel serve`` or ``hazel worker``) through PostgreSQL ``NOTIFY hazel_deadline``, heard by the worker
  pool's ``LISTEN`` connection. Never later than an armed deadline: a spare tick costs nothing, a lost one
  makes a deadline late.
- The tick, a periodic job (every ``tick_sec``): the safety net for what this process could not hear of: on
  SQLite, deadlines committed by another process; on PostgreSQL, those committed while the ``LISTEN``
  connection was down; items another process held when this one looked, left due when it died.

A tick:

1. fires the reminders, escalations and timeouts that are due (``bot.ops.timers.fire_due``: once across
   processes and restarts, settled by the database);
2. wakes the workers (``Hazel`` ready listeners) for ready runs whose retry backoff has ended;
3. when ``retention_days`` is set, a daily job prunes the checkpoints of runs that ended longer ago
   (``bot.ops.retention``).

Nothing lives only in memory: a scheduler that stops (or a process that dies) loses nothing, and the next
one, here or in another process, picks up what is due from the database. Tests call ``tick()`` directly
with an injected clock (``Hazel(clock=...)``).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler

from bot.ops import retention
from bot.ops import timers
from bot.ops.logs import log_failure
from bot.ops.timers import TickReport

if TYPE_CHECKING:
    from bot.engine import Hazel

log = logging.getLogger("hazel.scheduler")

TICK_JOB = "hazel-tick"
WAKE_JOB = "hazel-wake"
PRUNE_JOB = "hazel-prune"


class Scheduler:
    """Fires reminders, escalations and timeouts, wakes retries, and (optionally) prunes, for ``hazel``.

    Args:
        tick_sec: seconds between periodic ticks (the safety net: what the wake job was not armed for fires
            within one tick).
        batch: requests (and retrying runs) handled per database round trip.
        retention_days: prune runs that ended more than this many days ago (None: never prune).
        prune_every_sec: seconds between scheduled prunes (default: daily); the first one runs
            ``min(60, prune_every_sec)`` seconds after ``start()``.
    """

    def __init__(self, hazel: "Hazel", *, tick_sec: float = 5.0, batch: int = 100,
                 retention_days: float | None = None, prune_every_sec: float = retention.SECONDS_PER_DAY) -> None:
        if tick_sec <= 0 or prune_every_sec <= 0:
            raise ValueError("tick_sec and prune_every_sec must be positive")
        self.hazel = hazel
        self.tick_sec = tick_sec
        self.batch = batch
        self.retention_days = retention_days
        self.prune_every_sec = prune_every_sec
        self._lock = threading.Lock()
        self._arm_lock = threading.Lock()
        self._held: dict[int, datetime] = {}
        """Requests whose failure could not be postponed in the database, until when (``timers.fire_due``)."""
        self._aps: BackgroundScheduler | None = None
        hazel.on_deadline(self.wake_at)

    @classmethod
    def from_settings(cls, hazel: "Hazel") -> "Scheduler":
        """``HAZEL_SCHEDULER_TICK_SEC`` and ``HAZEL_RETENTION_DAYS`` from ``hazel.settings``."""
        return cls(hazel, tick_sec=hazel.settings.scheduler_tick_sec, retention_days=hazel.settings.retention_days)

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start APScheduler's background thread: a tick at once, then every ``tick_sec``."""
        if self._aps is not None:
            return
        self._aps = BackgroundScheduler(timezone=timezone.utc, logger=_SkipsAtDebug(_APS_LOG, {}), job_defaults={
            "coalesce": True, "max_instances": 1, "misfire_grace_time": None})
        now = datetime.now(timezone.utc)
        self._aps.add_job(self._run_tick, "interval", seconds=self.tick_sec, id=TICK_JOB, next_run_time=now)
        if self.retention_days is not None:
            self._aps.add_job(self._run_prune, "interval", seconds=self.prune_every_sec, id=PRUNE_JOB,
                              next_run_time=now + timedelta(seconds=min(60.0, self.prune_every_sec)))
        self._aps.start()
        log.info("scheduler started: tick every %.3g s%s", self.tick_sec,
                 f", pruning runs ended over {self.retention_days:g} days ago" if self.retention_days is not None
                 else "")

    def stop(self, *, wait: bool = True) -> None:
        """Stop the background thread (``wait``: let a running tick finish). Safe to call twice.

        No wake job is armed once this has begun (``_arm`` looks at ``_aps`` under ``_arm_lock``): APScheduler's
        ``shutdown(wait=True)`` holds its job stores' lock while it waits for the running jobs, and a tick
        re-arming then (``add_job`` takes that lock) waited for it for ever: the process never stopped."""
        with self._arm_lock:
            aps, self._aps = self._aps, None
        if aps is not None:
            aps.shutdown(wait=wait)

    @property
    def running(self) -> bool:
        return self._aps is not None

    # -- one pass ---------------------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        """Fire what is due now, wake retries whose backoff ended, and re-arm the wake job. One tick at a time
        per scheduler; other schedulers (processes) may tick at once: the database settles who fires what."""
        with self._lock:
            now = self.hazel.clock()
            report = timers.fire_due(self.hazel, now=now, batch=self.batch, held=self._held)
            report.retries_woken = self.wake_retries(now)
            self._rearm(now)
            return report

    def wake_at(self, at: datetime) -> None:
        """Something is due at ``at`` (UTC, the engine's clock; a past time means now): arm the wake job for it
        unless it is armed for that moment or earlier. Called by ``Hazel.on_deadline`` (after this process's
        commits, and for other processes' on PostgreSQL); no database round trip, safe from any thread, a
        no-op while the scheduler is not started."""
        self._arm(at)

    def wake_retries(self, now: datetime) -> list[str]:
        """Wake the workers for each ready run whose ``wake_at`` has come. Returns their ids."""
        return self.hazel.wake_due_retries(now=now, limit=self.batch)

    def prune(self) -> retention.PruneReport | None:
        """Apply the retention policy now (None when ``retention_days`` is not set)."""
        if self.retention_days is None:
            return None
        report = retention.prune(self.hazel.store, older_than_days=self.retention_days, now=self.hazel.clock(),
                                 graph_snapshots=self.hazel.graph_snapshots)
        if report.runs:
            log.info("pruned %d run(s): %d checkpoint(s), %d LangGraph checkpoint(s), %d pending write(s), %d bytes",
                     len(report.runs), report.checkpoints_deleted, report.graph_checkpoints_deleted,
                     report.graph_writes_deleted, report.bytes_freed)
        return report

    def next_due_at(self, *, after: datetime | None = None) -> datetime | None:
        """The earliest ``next_action_at`` of a pending request or ``wake_at`` of a ready run, later than
        ``after`` when given (None: none)."""
        return self.hazel.next_due_at(after=after)

    @property
    def armed_for(self) -> datetime | None:
        """When the wake job runs next (UTC, wall clock; None: not armed, or not started)."""
        aps = self._aps
        job = aps.get_job(WAKE_JOB) if aps is not None else None
        return job.next_run_time if job is not None else None

    # -- APScheduler glue -------------------------------------------------------------------------------------

    def _rearm(self, now: datetime) -> None:
        """Arm the wake job for the earliest moment after ``now`` anything is due. What is due already is the
        periodic tick's: this tick fired it, or another process holds it, and arming for it would spin."""
        if self._aps is None:
            return
        due_at = self.next_due_at(after=now)
        if due_at is not None:
            self._arm(due_at)

    def _arm(self, due_at: datetime) -> None:
        """Arm the wake job to run at ``due_at`` (the engine's clock; turned into the wall clock APScheduler
        runs on, 5 ms late so that the tick finds it due), unless it already runs at that moment or earlier.
        Never moved later: the armed moment may be a deadline the database did not show the tick that re-arms
        (committed meanwhile), and waking for one that went away costs one tick."""
        if self._aps is None:
            return
        run_date = (datetime.now(timezone.utc) + max(due_at - self.hazel.clock(), timedelta(0))
                    + timedelta(milliseconds=5))
        with self._arm_lock:
            aps = self._aps  # (None once stop began: see stop)
            if aps is None:
                return
            try:
                job = aps.get_job(WAKE_JOB)  # (gone once it ran: APScheduler removes a date job that fired)
                if job is not None and job.next_run_time is not None and job.next_run_time <= run_date:
                    return
                aps.add_job(self._run_tick, "date", run_date=run_date, id=WAKE_JOB, replace_existing=True)
            except Exception:  # shutting down
                log.debug("could not arm the wake job", exc_info=True)

    def _run_tick(self) -> None:
        try:
            report = self.tick()
        except Exception as exc:  # the database is unreachable, …: the next tick tries again
            log_failure(log, "scheduler tick", exc)
            return
        if report.fired or report.errors:
            log.info("scheduler: %d reminder(s), %d escalation(s), %d timeout(s), %d error(s)",
                     len(report.reminders), len(report.escalations), len(report.timeouts), len(report.errors))

    def _run_prune(self) -> None:
        try:
            self.prune()
        except Exception as exc:
            log_failure(log, "scheduled prune", exc)


_APS_LOG = logging.getLogger("apscheduler.scheduler")
"""APScheduler's own logger, the one it logs to without ``logger=``."""


class _SkipsAtDebug(logging.LoggerAdapter):
    """APScheduler's logger (``_APS_LOG``) as this scheduler's, but for its WARNING ``Execution of job "…" skipped:
    maximum number of running instances reached``, logged at DEBUG: a tick or a prune still running when the next
    one is due (a slow database, a short ``HAZEL_SCHEDULER_TICK_SEC``) is not run twice at once, and the next runs
    once it has ended (``coalesce``): nothing is lost. Logged at WARNING, it was a line per skipped tick (about
    500 a second at a 1 ms tick)."""

    def log(self, level: int, msg: object, *args: object, **kwargs: object) -> None:
        if level == logging.WARNING and "maximum number of running instances reached" in str(msg):
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)  # type: ignore[arg-type]
