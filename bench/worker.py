"""A worker process for the pause-and-resume bench: ``python -m bench.worker URL OUT_JSON THREADS``.

It is ``hazel worker`` without the scheduler (``bot.server.processes.build`` + ``WorkerPool``, woken by
LISTEN/NOTIFY on PostgreSQL, + outbox delivery to a discarded console) with ``Hazel.on_step`` recording
``[run_id, step, time.monotonic()]``; on SIGTERM it stops and writes the records to ``OUT_JSON``. CLOCK_MONOTONIC is one clock for every process on the machine, so the bench process can compare
these times with its own.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from bot.server.processes import build

from bench.workload import settings_for, silent_console


def main(argv: list[str]) -> int:
    url, out, threads = argv[0], argv[1], int(argv[2])
    hazel, pool = build(settings_for(url), workers=threads, console=silent_console())
    records: list[tuple[str, str, float]] = []
    hazel.on_step(lambda run_id, step: records.append((run_id, step, time.monotonic())))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pool.start()
    hazel.deliverer.start()
    print("ready", flush=True)
    stop.wait()
    pool.stop()
    hazel.close()
    with open(out, "w") as fh:
        json.dump(records, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
