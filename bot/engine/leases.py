"""Leases: which process executes a run, for how long, and finding the runs of processes that died.

A run being executed is ``running`` with ``lease_owner`` (``host:pid:nonce``), a fencing ``lease_token`` that
every write of the executing worker must present, and ``lease_expires_at``. One heartbeat thread per process
renews the leases it holds every ``lease_sec / 3``. A run whose owner is a dead process on this host, or whose
lease expired, is handed back as ``ready`` by ``recover``.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from datetime import datetime, timedelta
from typing import Callable

from bot.engine.errors import error_line, log_error
from store import Store
from store.models import SYSTEM

log = logging.getLogger("hazel.runner")
CRASH_LIMIT = 5
"""Deaths in a row of the processes executing a run at one checkpoint after which ``recover`` fails the run
instead of handing it back: a step that kills its process (``os._exit``, the kernel's out-of-memory killer, a
crash in native code) was claimed by worker after worker for ever, each dying, ``hazel serve``'s HTTP with it
(a fresh-user finding, s30 F9). Such a death is no attempt of the step's (``max_attempts``)."""


def make_owner() -> str:
    """Lease owner id: ``host:pid:nonce`` (the pid lets a restart on the same host spot dead owners); ``host``
    is the host name and, where Linux tells it, the process's PID namespace (``name@4026532201``): containers
    on one host with host networking share its name, not its process ids."""
    return f"{local_host()}:{os.getpid()}:{secrets.token_hex(3)}"


def local_host() -> str:
    """This process's host as ``make_owner`` names it: the host name, plus ``@`` and the inode of its PID
    namespace (``/proc/self/ns/pid``) where there is one."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()}@{namespace}"


def owner_is_dead(owner: str | None) -> bool:
    """True when ``owner`` names a process of this host and PID namespace that no longer exists (an owner of
    another namespace, such as a container sharing this host's name, is judged by its lease alone: its process
    ids are not this one's; a fresh-operator finding, s24, where a worker took the runs of a live ``serve`` in
    another container and their steps ran two and three times at once)."""
    if not owner:
        return True
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != local_host() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _zombie(int(pid_text))


def _zombie(pid: int) -> bool:
    """Whether process ``pid`` has exited and waits to be reaped (state ``Z`` in ``/proc/PID/stat``, Linux): it
    runs nothing, though ``kill(pid, 0)`` finds it. A container whose first process does not reap its children
    keeps a killed ``hazel`` command so, and its run stayed leased to it. False where ``/proc`` does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] == b"Z"  # (the name, in parentheses, may hold spaces)


class Leases:
    """The leases this process holds, renewed by one heartbeat thread (started on first use).

    Args:
        owner: this process's owner id (``make_owner()``).
        lease_sec: how long a claim lasts without renewal.
        transient: whether an error of a renewal says the database is unreachable (``runner.is_transient``):
            such a failure is logged in one line, not with its traceback.
    """

    def __init__(self, store: Store, *, owner: str, lease_sec: float, clock: Callable[[], datetime],
                 transient: Callable[[BaseException], bool] = lambda _exc: False) -> None:
        self.store = store
        self.transient = transient
        self.owner = owner
        self.lease_sec = lease_sec
        self.clock = clock
        self._tokens: set[str] = set()
        self._lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    def until(self, now: datetime) -> datetime:
        """When a lease taken or renewed at ``now`` expires."""
        return now + timedelta(seconds=self.lease_sec)

    def hold(self, token: str) -> None:
        """Renew the lease ``token`` until ``drop`` (starts the heartbeat if needed)."""
        with self._lock:
            self._tokens.add(token)
            if self._heartbeat is None or not self._heartbeat.is_alive():
                self._heartbeat = threading.Thread(target=self._renew_loop, name="hazel-lease-heartbeat",
                                                   daemon=True)
                self._heartbeat.start()

    def drop(self, token: str | None) -> None:
        with self._lock:
            self._tokens.discard(token or "")

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_sec / 3):
            with self._lock:
                tokens = list(self._tokens)
            if not tokens:
                continue
            try:
                with self.store.transaction() as tx:
                    tx.runs.renew_leases(tokens=tokens, lease_until=self.until(self.clock()))
            except Exception as exc:  # the next beat tries again; a lost lease is caught by the fenced write
                if not self.transient(exc):
                    log_error(log, exc, "lease renewal failed")  # (one line: a statement's parameters are users')
                    continue
                log.warning("lease renewal of %d run(s) failed: the database is unreachable (%s); trying again "
                            "in %g s", len(tokens), error_line(exc), self.lease_sec / 3)  # (one line, as the workers')

    def recover(self) -> list[str]:
        """Hand back to the queue every ``running`` run whose worker is dead (same host, pid gone) or whose
        lease has expired. Returns their ids."""
        now = self.clock()
        recovered: list[str] = []
        died: list[str] = []
        lapsed: list[str] = []
        failed: list[str] = []
        with self.store.read() as tx:
            candidates = tx.runs.running()
        for run in candidates:
            dead = owner_is_dead(run.lease_owner) and run.lease_owner != self.owner
            expired = run.lease_expires_at is not None and run.lease_expires_at < now
            if not (dead or expired):
                continue
            with self.store.transaction() as tx:  # only the lease read above: another process may have
                # recovered the run meanwhile and leased it to a live worker, whose lease this must not take
                crashes = tx.events.crashes_at(run.id, run.head_seq) + 1 if dead else 0
                error = (f"the process executing run {run.id} after checkpoint #{run.head_seq} died {crashes} times "
                         "in a row (killed, out of memory, or a crash in native code): not tried again; fix the "
                         f"cause, then `hazel retry {run.id}`") if crashes >= CRASH_LIMIT else None
                if tx.runs.release_to_ready(run.id, now=now, only_token=run.lease_token,
                                            expired_before=None if dead else now, error=error):
                    tx.events.add(action="run.recovered", actor=SYSTEM, now=now, run_id=run.id,
                                  previous_owner=run.lease_owner, reason="owner died" if dead else "lease expired",
                                  head_seq=run.head_seq, **({"crashes": crashes} if dead else {}))
                    if error is not None:
                        tx.events.add(action="run.failed", actor=SYSTEM, now=now, run_id=run.id, error=error)
                        from bot.engine import transitions

                        transitions.progress(tx, run_id=run.id, now=now, event="failed", error=error)
                        failed.append(run.id)
                        continue
                    tx.notify_ready(run.id)
                    recovered.append(run.id)
                    (died if dead else lapsed).append(run.id)
        if died:
            log.warning("recovered %d run(s) left running by a dead process: %s", len(died), ", ".join(died))
        if lapsed:  # (its process may live on, paused or cut off: its writes are fenced by the lease)
            log.warning("recovered %d run(s) whose lease ran out: %s", len(lapsed), ", ".join(lapsed))
        if failed:
            log.error("failed %d run(s) whose executing process died %d times in a row at one checkpoint: %s",
                      len(failed), CRASH_LIMIT, ", ".join(failed))
        return recovered

    def close(self) -> None:
        self._stop.set()
