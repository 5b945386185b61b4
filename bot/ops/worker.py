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
from typing import TYPE_CHECKING, Any

from bot.engine import is_transient, log_context

if TYPE_CHECKING:
    from bot.engine import Claim, Hazel

log = logging.getLogger("hazel.worker")

OUTAGE_PAUSE_MAX_SEC = 10.0
"""Longest pause of a worker thread between tries while the database is unreachable (1, 2, 4, 8, 10, 10 … s)."""


class WorkerPool:
    """``threads`` workers for ``hazel`` (see the module docstring). One pool per process.

    Args:
        sweep_sec: how often an idle worker looks for ready runs without being woken, and how often the pool
            looks for runs left by dead processes (``Hazel.recover``: one query of the running runs).
        take_claims: once started, execute the runs this process's decisions claim (default True).
    """

    def __init__(self, hazel: "Hazel", *, threads: int = 4, sweep_sec: float = 1.0, take_claims: bool = True) -> None:
        self.hazel = hazel
        self.threads = threads
        self.sweep_sec = sweep_sec
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

    def stop(self, timeout_sec: float = 30.0) -> None:
        """Stop claiming; runs being executed finish their current step, checkpoint it and are handed back
        (another process, or this one when it starts again, continues them), and so are claims not started yet.
        Waits up to ``timeout_sec``."""
        self._stop.set()
        self.hazel.take_claims(None)
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
            if is_transient(exc):  # the run stays leased here: handed back as soon as the database answers
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
            except Exception:
                with self._wake:
                    self._stranded[:0] = stranded
                raise
            stranded.pop(0)

    def drain(self) -> int:
        """Execute ready runs in this thread until none is ready now. Returns how many drives happened."""
        n = 0
        while self.work_once():
            n += 1
        return n

    def _recover_if_due(self) -> None:
        """``Hazel.recover`` when the pool has not looked for ``sweep_sec``: one of its threads looks, the
        others go on working."""
        with self._recovery_lock:
            if time.monotonic() - self._last_recovery < self.sweep_sec:
                return
            self._last_recovery = time.monotonic()
        self.hazel.recover()

    def _loop(self) -> None:
        pause_sec = 0.0  # after errors of a database that is down: doubling from 1 s up to OUTAGE_PAUSE_MAX_SEC
        while not self._stop.is_set():
            try:
                if self._stranded:
                    self._hand_back_stranded()
                self._recover_if_due()
                worked = self.work_once()
                pause_sec = 0.0
                if worked:
                    continue
            except Exception as exc:
                if is_transient(exc):  # one line per try, not a traceback of the driver's every layer
                    pause_sec = min(OUTAGE_PAUSE_MAX_SEC, max(1.0, pause_sec * 2))
                    first = (str(exc).strip().splitlines() or [""])[0][:300]
                    with log_context(run_id=getattr(exc, "hazel_run_id", None)):  # the drive it cut short, if any
                        log.warning("the database is unreachable (%s: %s); trying again in %.0f s",
                                    type(exc).__name__, first, pause_sec)
                else:
                    pause_sec = 1.0
                    log.exception("worker loop error; continuing")
                with self._wake:  # a new claim or wake-up (a decision committed: the database is back) ends it early
                    self._pending_wakes = 0  # (those before the failure are the sweep's to catch up)
                    if not self._claims and not self._stop.is_set():
                        self._wake.wait(pause_sec)
                continue
            with self._wake:
                if self._pending_wakes == 0 and not self._claims:
                    self._wake.wait(self.sweep_sec)
                self._pending_wakes = max(0, self._pending_wakes - 1)
