"""``hazel db current`` on a database whose schema is newer than this Hazel printed the right text but exited 0,
where every other command exits 1 there: it exits 1 (text and ``--json`` alike); 0 on a current database."""

from __future__ import annotations

import json

from tests.bot.test_cli_malformed import NEWER, hostile, newer_schema  # noqa: F401  (the fixtures)


def test_db_current_exits_1_on_a_newer_database(hostile, newer_schema: str) -> None:  # noqa: ANN001, F811
    from store.migrate import head_revision

    text = hostile("db", "current")
    assert text.exit_code == 1, text.output
    assert " ".join(text.stdout.split()) == (f"current {NEWER}; this Hazel needs {head_revision()}; the database is newer "
                                   "than this Hazel: use a newer Hazel")
    as_json = hostile("db", "current", "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["newer_than_this_hazel"] is True


def test_db_current_exits_0_on_a_current_database(hostile) -> None:  # noqa: ANN001, F811
    result = hostile("db", "current")
    assert result.exit_code == 0 and "newer" not in result.stdout, result.output
