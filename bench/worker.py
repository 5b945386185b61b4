"""A worker process for the pause-and-resume bench: ``python -m bench.worker URL OUT_JSON THREADS``.

It is ``hazel worker`` without the scheduler (``bot.server.processes.build`` + ``WorkerPool``, woken by
LISTEN/NOTIFY on PostgreSQL, + outbox delivery to a discarded console) with ``Hazel.on_step`` recording
``[run_id, step, time.monotonic()]``; it prints ``ready PID`` once it works, and on SIGTERM it writes the records
to ``OUT_JSON`` (whole: written aside and renamed) and exits at once (the measurement is over by then: every
run has completed; a graceful stop of the pool, its listener and its deliverer took 1.5 s of every measurement
and measures nothing). CLOCK_MONOTONIC is one clock for every process on the machine, so the bench process can
compare these times with its own.

``python -m bench.worker --fork-server``: imports what a worker imports, once, then reads lines ``URL OUT_JSON
THREADS`` on stdin and forks a worker for each (the child continues as above, from ``build`` on: the same
process as a fresh one but for the 2 s of imports it did not repeat). It exits when stdin closes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback

from bot.server.processes import build

from bench.workload import settings_for, silent_console


def main(argv: list[str]) -> int:
    url, out, threads = argv[0], argv[1], int(argv[2])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    hazel, pool = build(settings_for(url), workers=threads, console=silent_console())
    records: list[tuple[str, str, float]] = []
    hazel.on_step(lambda run_id, step: records.append((run_id, step, time.monotonic())))
    pool.start()
    hazel.deliverer.start()
    print(f"ready {os.getpid()}", flush=True)
    stop.wait()
    with open(out + ".part", "w") as fh:
        json.dump(list(records), fh)
    os.replace(out + ".part", out)
    sys.stdout.flush()
    os._exit(0)  # no graceful stop: the connections close with the process, nothing is left leased


def fork_server() -> int:
    """Fork a worker (``main``) for every line ``URL OUT_JSON THREADS`` read on stdin; a child that fails before
    it is ready prints ``failed PID: error``."""
    if threading.active_count() != 1:  # fork copies one thread only
        print(f"failed {os.getpid()}: {threading.active_count()} threads in the fork server", flush=True)
        return 1
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in sys.stdin:
        args = line.split()
        if not args:
            continue
        sys.stdout.flush()
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                main(args)
            except BaseException as exc:  # noqa: BLE001 (the bench waits for a line either way)
                traceback.print_exc()
                print(f"failed {os.getpid()}: {type(exc).__name__}: {exc}", flush=True)
            os._exit(1)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--fork-server"]:
        raise SystemExit(fork_server())
    raise SystemExit(main(sys.argv[1:]))
