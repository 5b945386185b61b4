"""A SQLite URL a person got wrong. A ``?`` in it starts SQLAlchemy's query string: ``sqlite:///runs?old.db``
opened (and created) the file ``runs`` without a word (fresh-user s17). ``HAZEL_DATABASE_URL`` is refused at
start when its query is not one the driver takes (each argument with a value, one of pysqlite's, or any with
``uri=true``), naming the file it would have opened and how to write a ``?`` in a name; nothing is created. A
file SQLite cannot open is named with why (a missing directory, a directory)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner


@pytest.mark.parametrize(("url", "opened"), [
    ("sqlite:///runs?old.db", "runs"),
    ("sqlite:///runs?db=1", "runs"),
    ("sqlite:///runs?timeout=5&old", "runs"),
])
def test_a_question_mark_meant_as_part_of_the_name_is_refused(url: str, opened: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HAZEL_DATABASE_URL", url)
    result = CliRunner().invoke(app, ["runs"])
    assert result.exit_code == 1, result.output
    assert (f"HAZEL_DATABASE_URL: the '?' in a SQLite URL starts its query, so the database would be the file "
            f"{opened!r}; write a '?' that is part of the file's name as %3F") in result.output, result.output
    assert list(tmp_path.iterdir()) == []  # nothing opened, nothing created


@pytest.mark.parametrize(("url", "created"), [
    ("sqlite:///a%3Fb.db", "a?b.db"),  # the '?' written as %3F: part of the name
    ("sqlite:///t.db?timeout=5", "t.db"),  # a driver argument
    ("sqlite:///file:u.db?mode=rwc&uri=true", "u.db"),  # SQLite's own URI parameters
])
def test_a_query_the_driver_takes_is_accepted(url: str, created: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HAZEL_DATABASE_URL", url)
    result = CliRunner().invoke(app, ["runs"])
    assert result.exit_code == 0 and "no runs" in result.output, result.output
    assert (tmp_path / created).is_file()


@pytest.mark.parametrize(("name", "why"), [
    ("missing/hazel.db", "(the directory {tmp}/missing does not exist: create it first)"),
    ("a-directory", "({tmp}/a-directory is a directory)"),
])
def test_a_file_sqlite_cannot_open_is_named_with_why(name: str, why: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite says only "unable to open database file" (fresh-user s17 F5); the line says what stands in the way."""
    from bot.cli import app

    (tmp_path / "a-directory").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HAZEL_DATABASE_URL", f"sqlite:///{name}")
    result = CliRunner().invoke(app, ["runs"])
    assert result.exit_code == 1, result.output
    assert f"unable to open database file {why.format(tmp=tmp_path)}" in " ".join(result.output.split()), \
        result.output
