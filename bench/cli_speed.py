"""How fast the ``hazel`` command line answers: the wall time of whole processes, from start to exit, of
``hazel --help``, ``hazel runs`` and ``hazel show RUN`` on a database holding a few runs waiting at a steering
point (the real console script, as a user runs it; most of the time is Python importing what the command needs),
and beside them the floor under any command: a Python process that imports the libraries a Hazel command cannot
do without (SQLAlchemy, pydantic, Typer and Rich) and exits (``FLOOR_IMPORTS``). The floor is what the machine
costs: it moves with the machine's speed (0.2 s on a fast VM, above 0.5 s on a slow one), and the commands
with it.

Each subprocess gets a clean environment (``PATH``, ``HOME``, the repository on ``PYTHONPATH`` and the
``HAZEL_*`` settings of the bench database, nothing else: no ``.env``, no ``PYTHONDONTWRITEBYTECODE``), and
runs in an empty temporary directory. One untimed run of each command comes first (on the first backend of a
bench run only): it leaves the bytecode caches warm, as they are for a user after the first command. Every run
is checked to work on that database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.serve_memory import hazel_command
from bench.workload import ACTOR, PAUSE_WORKFLOW, bench_pause, make_hazel

REPO = Path(__file__).resolve().parent.parent
RUNS = 5
"""Runs left waiting at ``bench-pause``'s steering point for ``hazel runs`` to list."""
TIMEOUT_SEC = 60.0
FLOOR_IMPORTS = "import sqlalchemy, pydantic, typer, rich.console"
"""What the ``floor`` process runs (``python -c``): the libraries every ``hazel`` command imports."""


def prepare(url: str, n_runs: int = RUNS) -> str:
    """Leave ``n_runs`` runs of ``bench-pause`` waiting at its steering point on ``url``; returns the last one's
    id (the one ``hazel show`` shows)."""
    hazel = make_hazel(url, bench_pause)
    try:
        run_id = ""
        for _ in range(n_runs):
            run_id = hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR, claim=True).id
            hazel.drive(run_id=run_id)
    finally:
        hazel.close()
    return run_id


def cli_env(url: str) -> dict[str, str]:
    """The whole environment of a ``hazel`` subprocess on ``url`` with the bench workflows."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", tempfile.gettempdir()),
           "PYTHONPATH": str(REPO), "HAZEL_DATABASE_URL": url, "HAZEL_WORKFLOWS": "bench.workload",
           "HAZEL_OPERATOR": "bench", "COLUMNS": "120"}
    for name in ("LANG", "LC_ALL", "SYSTEMROOT", "TMPDIR"):  # locale; Windows needs SYSTEMROOT
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _run(args: list[str] | None, env: dict[str, str], cwd: str) -> tuple[float, str]:
    """Seconds from start to exit of ``hazel ARGS`` (``None``: the floor, ``python -c FLOOR_IMPORTS``), and its
    stdout.

    Raises:
        RuntimeError: the command exited non-zero.
    """
    command = [sys.executable, "-c", FLOOR_IMPORTS] if args is None else [*hazel_command(), *args]
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_SEC)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}: {last}")
    return elapsed, proc.stdout


def cli_times(backend, *, repeats: int = 5, warm_up: bool = True) -> dict[str, list[float]]:  # noqa: ANN001
    """Wall-clock seconds of ``repeats`` runs each of ``hazel --help`` (``help``), ``hazel runs`` (``runs``),
    ``hazel show RUN`` (``show``) and the floor (``floor``: ``python -c FLOOR_IMPORTS``), as subprocesses on a fresh database of ``backend``
    (``bench.databases``) holding ``RUNS`` waiting runs. The commands alternate, so that a slow moment of the
    machine spreads over all three. ``warm_up``: one untimed run of each command first (``False`` when the
    caches are already warm: the commands were timed on another backend in this process's run).

    Raises:
        RuntimeError: a command failed, or ``hazel runs`` / ``hazel show`` did not show the prepared run.
    """
    url = backend.fresh_url("cli")
    run_id = prepare(url)
    commands: dict[str, list[str] | None] = {"help": ["--help"], "runs": ["runs"], "show": ["show", run_id],
                                             "floor": None}
    times: dict[str, list[float]] = {key: [] for key in commands}
    env = cli_env(url)

    def timed(key: str, args: list[str] | None) -> float:
        elapsed, output = _run(args, env, cwd)
        if args is not None and key != "help" and run_id not in output:  # each command sees the database
            raise RuntimeError(f"hazel {' '.join(args)} did not show run {run_id} ({backend.name})")
        return elapsed

    with tempfile.TemporaryDirectory(prefix="hazel-cli-") as cwd:
        if warm_up:
            for key, args in commands.items():
                timed(key, args)
        for _ in range(repeats):
            for key, args in commands.items():
                times[key].append(timed(key, args))
    return times


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.cli_speed [--repeats N] [--backend sqlite|postgresql|both]``: print min, median and
    max seconds of each command."""
    import argparse
    import statistics
    from contextlib import ExitStack

    from bench import databases

    parser = argparse.ArgumentParser(prog="python -m bench.cli_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=RUNS)
    parser.add_argument("--backend", choices=databases.BACKEND_CHOICES, default="sqlite")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        for b in databases.chosen(stack, args.backend):
            print(f"## {b.label}: whole process, seconds (min / median / max of {args.repeats})")
            for key, values in cli_times(b, repeats=args.repeats).items():
                name = "floor" if key == "floor" else f"hazel {key}"
                print(f"{name:10s} {min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
