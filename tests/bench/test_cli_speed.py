"""``bench.cli_speed`` on SQLite, once per command, so that it cannot rot. No time limit is asserted (bench code
measures; it never judges speed here)."""

from __future__ import annotations

from bench import cli_speed, databases


def test_cli_times_measures_each_command() -> None:
    with databases.sqlite_backend() as sqlite:
        times = cli_speed.cli_times(sqlite, repeats=1)
    assert set(times) == {"help", "runs", "show", "floor"}
    for key, values in times.items():
        assert len(values) == 1 and all(v > 0 for v in values), (key, values)
