"""The one table: rows of measurements with their per-backend samples, goals and verdicts; machine and package
versions. Markdown, so that it can be pasted into ``bench/README.md`` as printed."""

from __future__ import annotations

import platform
import subprocess
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable

from bench.stats import Summary

BACKENDS = ("sqlite", "postgresql")
PACKAGES = ("hazel", "SQLAlchemy", "psycopg", "pydantic", "alembic", "fastapi", "uvicorn", "slack_bolt",
            "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres",
            "dbos", "psutil")


class Samples:
    """Measured values by ``key`` and backend, one per repetition (``None`` marks a failed repetition)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], list[float]] = {}
        self.notes: dict[tuple[str, str], str] = {}

    def add(self, key: str, backend: str, value: float) -> None:
        self.values.setdefault((key, backend), []).append(float(value))

    def note(self, key: str, backend: str, text: str) -> None:
        """Why ``key`` has no value on ``backend`` (shown in its cell instead)."""
        self.notes[(key, backend)] = text

    def get(self, key: str, backend: str) -> list[float]:
        return self.values.get((key, backend), [])


@dataclass(frozen=True)
class Goal:
    """``op`` is ``"<="`` or ``">="``; only ``backends`` are judged."""

    op: str
    threshold: float
    text: str
    backends: tuple[str, ...] = BACKENDS

    def met(self, value: float) -> bool:
        return value <= self.threshold if self.op == "<=" else value >= self.threshold


@dataclass(frozen=True)
class Row:
    """One line of the table. ``key``: a measured key, or a ratio ``"a/b"`` of two keys computed per
    repetition (the ratio of the two values measured in the same repetition)."""

    item: str
    label: str
    key: str
    digits: int = 0
    goal: Goal | None = None
    backends: tuple[str, ...] = BACKENDS


@dataclass
class Report:
    title: str
    meta: list[str]
    rows: list[Row]
    samples: Samples
    judged: list[tuple[Row, str, bool]] = field(default_factory=list)

    def cell_samples(self, row: Row, backend: str) -> list[float]:
        if "/" in row.key:
            a, b = row.key.split("/", 1)
            return [x / y for x, y in zip(self.samples.get(a, backend), self.samples.get(b, backend)) if y]
        return self.samples.get(row.key, backend)

    def note_for(self, row: Row, backend: str) -> str | None:
        for key in row.key.split("/"):
            note = self.samples.notes.get((key, backend))
            if note:
                return note
        return None

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", *[f"- {m}" for m in self.meta], "",
                 "| # | measurement | SQLite | PostgreSQL | goal | met |", "|---|---|---|---|---|---|"]
        self.judged.clear()
        for row in self.rows:
            cells, verdicts = [], []
            for backend in BACKENDS:
                values = self.cell_samples(row, backend) if backend in row.backends else []
                if not values:
                    cells.append(self.note_for(row, backend) or "—")
                    continue
                summary = Summary.of(values)
                cells.append(summary.format(row.digits))
                if row.goal is not None and backend in row.goal.backends:
                    ok = row.goal.met(summary.median)
                    self.judged.append((row, backend, ok))
                    verdicts.append(f"{'yes' if ok else 'NO'}" + (f" ({_short(backend)})" if len(
                        row.goal.backends) > 1 else ""))
            goal = row.goal.text if row.goal else ""
            lines.append(f"| {row.item} | {row.label} | {cells[0]} | {cells[1]} | {goal} | {', '.join(verdicts)} |")
        return "\n".join(lines)


def _short(backend: str) -> str:
    return {"sqlite": "SQLite", "postgresql": "PG"}[backend]


def machine_lines(pg_version: Callable[[], str] | None) -> list[str]:
    """Machine, Python, database and package versions, and the repository's commit."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import psutil

        memory = f"{psutil.virtual_memory().total / 2**30:.1f} GiB RAM"
        cores = f"{psutil.cpu_count(logical=True)} CPUs"
    except ImportError:
        import os

        memory, cores = "RAM unknown (psutil not installed)", f"{os.cpu_count()} CPUs"
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    pg = "unreachable"
    if pg_version is not None:
        try:
            pg = pg_version()
        except Exception as exc:  # report, never fail the run for a version string
            pg = f"unknown ({type(exc).__name__})"
    return [
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, {cpu}, {cores}, {memory}",
        f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; PostgreSQL {pg}",
        "packages: " + ", ".join(versions),
        f"commit: {_commit()}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
    ]


def _commit() -> str:
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                              timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return f"{head}{' (uncommitted changes)' if dirty else ''}" if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
