"""``hazel serve`` and ``hazel worker``: the long-running processes."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading

from typing import Iterator

import uvicorn
from rich.console import Console
from sqlalchemy.exc import OperationalError

from bot.ops.metrics import HazelMetrics
from bot.ops.scheduler import Scheduler
from bot.ops.worker import WorkerPool
from bot.server.app import HazelApp
from bot.server.clock import check_clock  # (serve's and worker's; every CLI command's too: bot.cli.common)
from bot.server.http import create_app
from bot.server.stopping import StopSignals
from bot.server.wiring import channels_from_settings, http_routers, start_socket_mode
from bot.settings import Settings
from integrations.console import ConsoleChannel
from integrations.console_log import LoggingConsole

log = logging.getLogger("hazel.server")


def build(settings: Settings, *, workers: int | None = None, console: ConsoleChannel | None = None,
          stop: threading.Event | None = None) -> tuple[HazelApp, WorkerPool] | None:
    """The engine and its worker pool, with the configured channels (``console``: default ``console_for``);
    runs left by dead processes are recovered. None when ``stop`` was set while the database was unreachable
    (``prepare_when_reachable``): the engine is closed, nothing was started."""
    hazel = HazelApp(settings, channels=channels_from_settings(settings),
                     console=console if console is not None else console_for(settings))
    recovered = prepare_when_reachable(hazel, stop=stop)
    if recovered is None:
        hazel.close()
        return None
    if recovered:
        log.warning("recovered %d run(s) on start", len(recovered))
    pool = WorkerPool(hazel, threads=workers if workers is not None else settings.workers,
                      sweep_sec=settings.sweep_sec)
    return hazel, pool


def console_for(settings: Settings, *, printer: Console | None = None, command: str = "hazel") -> ConsoleChannel:
    """The console channel of ``serve`` / ``worker``: with ``HAZEL_LOG_FORMAT=json``, a ``LoggingConsole``
    (each notification one log record of ``hazel.console``, so that everything the process writes is one JSON
    object a line); else panels printed to ``printer`` (default: stdout). ``command``: how the reader invokes
    the CLI, for the answer commands shown."""
    if settings.log_format == "json":
        return LoggingConsole(command=command)
    return ConsoleChannel(console=printer, command=command)


def prepare_when_reachable(hazel: HazelApp, *, max_backoff_sec: float = 10.0,
                           stop: threading.Event | None = None) -> list[str] | None:
    """``hazel.prepare()``, waiting for the database while it is unreachable (a long-running process started
    during a database restart waits instead of exiting). A schema that needs ``hazel db upgrade`` still fails
    at once. Returns the recovered run ids; None when ``stop`` is set (SIGTERM/SIGINT) before the database
    answered: the pause between tries ends at once, and no further try is made.

    ``max_backoff_sec``: the longest pause between tries, in seconds (they start at 0.5 s and double)."""
    backoff = 0.5
    stop = stop if stop is not None else threading.Event()
    while not stop.is_set():
        try:
            check_clock(hazel)  # (before prepare: its recovery of runs whose lease ran out reads this clock)
            return hazel.prepare()
        except OperationalError as exc:
            if stop.is_set():  # the signal came during the try
                break
            log.warning("database unreachable (%s); retrying in %.1fs", str(exc.orig).splitlines()[0][:200]
                        if exc.orig else type(exc).__name__, backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, max_backoff_sec)
    log.info("stopping: asked to stop before the database answered (nothing was started)")
    return None


def bind_problem(host: str, port: int) -> str | None:
    """Why ``serve`` could not listen on ``host:port`` (the port taken, the address not this machine's, …), or
    None when it can: a trial bind with ``SO_REUSEADDR``, as uvicorn binds, closed at once. Checked before
    anything starts, so that a taken port is one line instead of a started-and-stopped server's log."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        return f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as trial:
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            trial.bind(address)
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def serve(settings: Settings, *, host: str, port: int, workers: int | None = None,
          socket_mode: bool = False, signals: StopSignals | None = None,
          console: ConsoleChannel | None = None) -> None:
    """Serve HTTP with uvicorn; run workers and outbox delivery in this process (and Slack Socket Mode
    when ``socket_mode``). SIGINT or SIGTERM stops it: steps in flight finish and checkpoint first; one that
    arrives while it starts (also while it waits for an unreachable database) stops it as soon as it can.
    ``signals``: the stop signals as the command installed them early (default: installed here); ``console``:
    the console channel (default ``console_for``: answer commands printed as ``hazel …``)."""
    # a SIGINT/SIGTERM before uvicorn takes the signals over (while the database is waited for, or while the
    # workers, which may already be running a step, and the scheduler start): kept, and handed to the server
    # once it runs, which then stops at once; while the database is unreachable, it ends the wait at once
    signals = signals if signals is not None else StopSignals().install()
    try:
        built = build(settings, workers=workers, console=console, stop=signals.event)
    except BaseException:
        signals.restore()
        raise
    if built is None:
        signals.restore()
        log.info("stopped")
        return
    hazel, pool = built
    app = create_app(hazel, routers=http_routers(hazel, settings))
    socket = scheduler = None
    try:
        pool.start()
        pool.wake()
        hazel.deliverer.start()
        socket = start_socket_mode(hazel, settings) if socket_mode else None
        scheduler = Scheduler.from_settings(hazel)
        scheduler.start()
        # log_config=None: uvicorn's records go through the handler of bot.ops.logs.configure_logging.
        server = _Server(uvicorn.Config(app, host=host, port=port, log_level=settings.log_level.lower(),
                                        log_config=None), early=signals.received)
        server.run()
    finally:
        pool.begin_stop()  # first: a step that ends while the rest stops is handed back, not followed by the next
        log.info("stopping: letting steps in flight finish and checkpoint")
        if socket is not None:
            socket.close()
        if scheduler is not None:
            scheduler.stop()
        pool.stop()
        hazel.close()
        signals.restore()
        log.info("stopped")


class _Server(uvicorn.Server):
    """uvicorn's server, except that SIGINT/SIGTERM only stop it: the signal is not raised again after its
    shutdown (as uvicorn does), so that ``serve`` stops its workers cleanly and exits 0. ``early``: the
    signals received before it ran (``serve`` kept them): handled as soon as it takes the signals over."""

    def __init__(self, config: uvicorn.Config, *, early: list[int] | None = None) -> None:
        super().__init__(config)
        self.early = early if early is not None else []

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in self.early:
            self.handle_exit(sig, None)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def work(settings: Settings, *, workers: int | None = None, until_idle: bool = False,
         console: ConsoleChannel | None = None, signals: StopSignals | None = None
         ) -> tuple[int, list[tuple[str, int, int]]]:
    """Execute ready runs: until none is ready (``until_idle``), or until SIGINT/SIGTERM (also one that arrives
    while it waits for an unreachable database: it stops at once). ``signals``: the stop signals as the command
    installed them early (default: installed here unless ``until_idle``). Returns ``(drives, left)`` with
    ``until_idle``: the number of drives, and ``(workflow, version, count)`` of the ready runs left because
    this process does not have their version (``Hazel.ready_not_runnable``); else ``(0, [])``."""
    if signals is None and not until_idle:  # from the start: a signal while the database is waited for ends it
        signals = StopSignals().install()
    stop = signals.event if signals is not None else threading.Event()  # (until_idle: never set)
    built = build(settings, workers=workers, console=console, stop=stop)
    if built is None:
        log.info("stopped")
        return 0, []
    hazel, pool = built
    scheduler = Scheduler.from_settings(hazel)
    try:
        if until_idle:
            scheduler.tick()  # fire what is due now (timeouts may make runs ready)
            n = pool.drain()
            hazel.deliverer.deliver_due()
            return n, hazel.ready_not_runnable()
        if settings.metrics_port is not None:  # this process's Prometheus /metrics (bot.ops.metrics)
            HazelMetrics(hazel).serve(host=settings.host, port=settings.metrics_port)
        pool.start()
        pool.wake()
        hazel.deliverer.start()
        scheduler.start()
        log.info("worker started: %d thread(s), %s, workflows: %s", pool.threads,
                 hazel.store.engine.dialect.name,
                 ", ".join(sorted(f"{wf.name} v{wf.version}" for wf in hazel.registry.all())) or "none")
        stop.wait()
        pool.begin_stop()  # (as serve does: before the scheduler's stop, which may take a while)
        log.info("stopping: letting steps in flight finish and checkpoint")
        return 0, []
    finally:
        scheduler.stop()
        pool.stop()
        hazel.close()
        if not until_idle:
            log.info("stopped")
