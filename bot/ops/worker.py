"""Executing runs in a long-running process: a pool of worker threads that execute ready runs.

Work reaches the pool three ways: claims handed over by this process's own decisions (``Hazel.take_claims``:
the decision's transaction leased the run here, so the next step starts from the state in hand, with no
claim and no read); wake-ups when a run becomes ready (``Hazel.on_ready`` in-process, PostgreSQL ``LISTEN``
across processes), after which a worker claims the oldest ready run; and a periodic sweep, the safety net.
A recovery sweep hands back the runs of dead processes: once per ``sweep_sec`` for the whole pool, so a run
left ``running`` by a process that died on this host is ready again within about a second, and one whose lease
expired elsewhere as soon as it has. Nothing runs per waiting run.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Sequence

from bot.engine import error_line, is_transient, log_context, log_error
from store.errors import SchemaNotReadyError

if TYPE_CHECKING:
    from bot.engine import Claim, Hazel

log = logging.getLogger("hazel.worker")

OUTAGE_PAUSES_SEC: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 10.0)
"""A worker thread's pauses between tries while the database is unreachable: the n-th failed try in a row is
followed by the n-th pause, the last one repeating (1, 2, 4, 8, 10, 10 … s)."""


class WorkerPool:
    """``threads`` workers for ``hazel`` (see the module docstring). One pool per process.

    Args:
        sweep_sec: how often an idle worker looks for ready runs without being woken, and how often the pool
            looks for runs left by dead processes (``Hazel.recover``: one query of the running runs).
        take_claims: once started, execute the runs this process's decisions claim (default True).
        outage_pauses_sec: a thread's pauses, in seconds, between tries while the database is unreachable
            (``OUTAGE_PAUSES_SEC``; the last one repeats). A new claim or wake-up ends a pause early.
    """

    def __init__(self, hazel: "Hazel", *, threads: int = 4, sweep_sec: float = 1.0, take_claims: bool = True,
                 outage_pauses_sec: Sequence[float] = OUTAGE_PAUSES_SEC) -> None:
        if not outage_pauses_sec or any(p < 0 for p in outage_pauses_sec):
            raise ValueError(f"outage_pauses_sec must be one or more seconds of 0 or more: {outage_pauses_sec!r}")
        self.hazel = hazel
        self.threads = threads
        self.sweep_sec = sweep_sec
        self.outage_pauses_sec = tuple(float(p) for p in outage_pauses_sec)
        self._submitted = 0  # claims submitted so far: a pause ends when one arrives
        self._wake = threading.Condition()
        self._pending_wakes = 0
        self._claims: collections.deque["Claim"] = collections.deque()
        self._stranded: list["Claim"] = []  # leased here, their drive cut short by the database: handed back
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listener: Any = None
        self._recovery_lock = threading.Lock()
        self._last_recovery = 0.0
        self.take_claims = take_claims
        hazel.on_ready(lambda _run_id: self.wake())

    def wake(self) -> None:
        with self._wake:
            self._pending_wakes += 1
            self._wake.notify()

    def submit(self, claim: "Claim") -> None:
        """Execute a run this process leased (a decision's claim) as soon as a worker is free."""
        with self._wake:
            self._claims.append(claim)
            self._submitted += 1
            self._wake.notify()

    def start(self) -> None:
        """Start the worker threads (and, on PostgreSQL, the LISTEN connection); from now on decisions taken
        in this process hand their runs to this pool."""
        if self._listener is None:
            self._listener = self.hazel.ready_listener(on_ready=lambda _run_id: self.wake())
            if self._listener is not None:
                self._listener.start()
        for i in range(self.threads):
            t = threading.Thread(target=self._loop, name=f"hazel-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        if self.take_claims:
            self.hazel.take_claims(self.submit)

    def begin_stop(self) -> None:
        """Stop claiming, and tell the runs being executed to be handed back once their current step is
        checkpointed; returns at once (``stop`` waits for them). A process that stops calls it first, before it
        stops its other parts, so that no step begins after the stop was asked for."""
        self._stop.set()
        self.hazel.take_claims(None)

    def stop(self, timeout_sec: float = 30.0) -> None:
        """Stop claiming; runs being executed finish their current step, checkpoint it and are handed back
        (another process, or this one when it starts again, continues them), and so are claims not started yet.
        Waits up to ``timeout_sec``."""
        self.begin_stop()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        with self._wake:
            self._wake.notify_all()
        for t in self._threads:
            t.join(timeout=timeout_sec)
        self._threads.clear()
        with self._wake:
            left, self._claims, self._stranded = [*self._claims, *self._stranded], collections.deque(), []
        for claim in left:  # leased here but not started (or cut short): ready for the next process
            try:
                self.hazel.release(claim=claim)
            except Exception:  # the database is down: recovery hands them back when their lease runs out
                log.exception("could not hand back run %s", claim.run.id)

    def work_once(self) -> bool:
        """Execute one handed-over claim, or claim and execute one ready run. False when there was none."""
        with self._wake:
            claim = self._claims.popleft() if self._claims else None
        if claim is None:
            claim = self.hazel.claim_next()
        if claim is None:
            return False
        try:
            self.hazel.execute(claim=claim, hand_back=self._stop)
        except Exception as exc:
            # the run stays leased here: handed back as soon as the database answers (an older schema: at once,
            # the run's attempts untouched, while this thread waits for the upgrade: ``_loop``)
            if is_transient(exc) or isinstance(exc, SchemaNotReadyError):
                with self._wake:
                    self._stranded.append(claim)
                exc.hazel_run_id = claim.run.id  # type: ignore[attr-defined]  (the loop's one line names it)
            raise
        return True

    def _hand_back_stranded(self) -> None:
        """Hand back (``ready``, fenced by their lease) the runs whose drive the database cut short, so that
        any worker continues them from their last checkpoint now, not when their lease runs out.

        Raises:
            Exception: the database still fails (the claims not handed back stay for the next try).
        """
        with self._wake:
            stranded, self._stranded = self._stranded, []
        while stranded:
            claim = stranded[0]
            try:
                if self.hazel.release(claim=claim):
                    log.info("run %s handed back after the database failed during its drive", claim.run.id)
            except Exception as exc:
                with self._wake:
                    self._stranded[:0] = stranded
                exc.hazel_run_id = claim.run.id  # type: ignore[attr-defined]  (the loop's one line names it)
                raise
            stranded.pop(0)

    def drain(self) -> int:
        """Execute ready runs in this thread until none is ready now. Returns how many drives happened."""
        n = 0
        while self.work_once():
            n += 1
        return n

    def _recover_if_due(self, *, now: bool = False) -> None:
        """``Hazel.recover`` when the pool has not looked for ``sweep_sec`` (or ``now``: a thread whose last try
        met an outage asks the database so before it takes a claim): one of its threads looks, the others go on
        working."""
        with self._recovery_lock:
            if not now and time.monotonic() - self._last_recovery < self.sweep_sec:
                return
            self._last_recovery = time.monotonic()
        self.hazel.recover()

    def _loop(self) -> None:
        failures = 0  # tries in a row that met an unreachable database (or another error of the loop's own)
        behind = False  # the last try met a schema older than this Hazel needs (``hazel db downgrade``)
        while not self._stop.is_set():
            try:
                if self._stranded:
                    self._hand_back_stranded()
                if behind:  # no claim until the schema is upgraded (one query a try): a run claimed would only
                    self._check_schema()  # meet it again, its step executed for nothing
                    behind = False
                # after a failure, the database must answer before a claim is taken: a queued claim taken while
                # it is down would only be stranded (its step run for nothing), and the thread back here at once
                self._recover_if_due(now=failures > 0)
                worked = self.work_once()
                failures = 0
                if worked:
                    continue
            except BaseException as exc:  # (not only Exception: an asyncio.CancelledError or a GeneratorExit from a
                # listener or a library ended the thread, and with it this process's share of the work)
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                pause_sec = self.outage_pauses_sec[min(failures, len(self.outage_pauses_sec) - 1)]
                failures += 1
                with log_context(run_id=getattr(exc, "hazel_run_id", None)):  # the run it concerns, if one
                    said = self.hazel.schema_behind(exc)  # (asks the database only after an error that is its
                    if said is not None:  # and not an outage's)
                        behind = True  # one line per try, what /healthz and every command say
                        log.warning("%s; trying again in %g s", said, pause_sec)
                    elif is_transient(exc):  # one line per try, not a traceback of the driver's every layer
                        log.warning("the database is unreachable (%s); trying again in %g s", error_line(exc),
                                    pause_sec)
                    else:
                        log_error(log, exc, "worker loop error; trying again in %g s", pause_sec)
                self._pause(pause_sec)
                continue
            with self._wake:
                if self._pending_wakes == 0 and not self._claims:
                    self._wake.wait(self.sweep_sec)
                self._pending_wakes = max(0, self._pending_wakes - 1)

    def _check_schema(self) -> None:
        """Raises:
            SchemaNotReadyError: the database's schema is still older than this Hazel needs (``Hazel.health``).
        """
        said = self.hazel.health().schema
        if said is not None:
            raise SchemaNotReadyError(said)

    def _pause(self, pause_sec: float) -> None:
        """Wait ``pause_sec`` after a failed try, whatever the queue holds (its claims wait for the database), or
        until a claim is submitted or a wake-up arrives meanwhile (a decision committed: the database is back),
        or the pool stops."""
        with self._wake:
            self._pending_wakes = 0  # (those before the failure are the sweep's to catch up)
            submitted = self._submitted
            self._wake.wait_for(lambda: self._stop.is_set() or self._pending_wakes > 0
                                or self._submitted != submitted, timeout=pause_sec)
