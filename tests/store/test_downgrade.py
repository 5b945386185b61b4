"""``hazel db downgrade REVISION``: the step before rolling back to an older Hazel (docs/deploy.md). Every
migration's downgrade runs on a real database, and the schema it leaves is the older release's: an upgrade
from there reaches this Hazel's head again."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect
from typer.testing import CliRunner

from bot.cli import app
from store import Store
from store.migrate import current_revision, head_revision, known_revisions


def _cli(url: str, *args: str, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    monkeypatch.setenv("HAZEL_DATABASE_URL", url)
    return CliRunner().invoke(app, list(args))


def test_downgrade_to_each_revision_then_upgrade_again(empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(empty_url)
    store.upgrade()
    head = head_revision()
    tables_at_head = set(inspect(store.engine).get_table_names())
    try:
        for revision in sorted(known_revisions(), reverse=True)[1:]:
            done = _cli(empty_url, "db", "downgrade", revision, monkeypatch=monkeypatch)
            assert done.exit_code == 0, done.output
            assert f"database at revision {revision}" in done.output
            assert current_revision(store.engine) == revision
        first = min(known_revisions())
        assert current_revision(store.engine) == first
        up = _cli(empty_url, "db", "upgrade", monkeypatch=monkeypatch)
        assert up.exit_code == 0, up.output
        assert current_revision(store.engine) == head
        assert set(inspect(store.engine).get_table_names()) == tables_at_head
    finally:
        store.dispose()


def test_an_unknown_revision_is_one_line_and_changes_nothing(empty_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(empty_url)
    store.upgrade()
    try:
        refused = _cli(empty_url, "db", "downgrade", "9999", monkeypatch=monkeypatch)
        assert refused.exit_code == 1
        assert "unknown schema revision '9999'" in refused.output
        assert "Traceback" not in refused.output
        assert current_revision(store.engine) == head_revision()
        first = min(known_revisions())
        assert _cli(empty_url, "db", "downgrade", first, monkeypatch=monkeypatch).exit_code == 0
        upwards = _cli(empty_url, "db", "downgrade", head_revision(), monkeypatch=monkeypatch)  # was "unexpected
        assert upwards.exit_code == 1 and upwards.output == (  # CommandError: Destination … is not a valid …"
            f"error: the database is at revision {first}: {head_revision()} is not below it, so there is nothing "
            "to downgrade to it (hazel db upgrade goes up)\n"), upwards.output
        assert current_revision(store.engine) == first
    finally:
        store.dispose()


def test_a_downgrade_that_drops_graph_checkpoints_is_refused_unless_told(empty_url: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from hazel.langgraph import HazelSaver

    class S(TypedDict):
        n: int

    graph = StateGraph(S)
    graph.add_node("one", lambda state: {"n": state["n"] + 1})
    graph.add_edge(START, "one")
    graph.add_edge("one", END)
    with HazelSaver.from_conn_string(empty_url) as saver:
        graph.compile(checkpointer=saver).invoke({"n": 0}, {"configurable": {"thread_id": "t1"}})
    store = Store(empty_url)
    try:
        assert _cli(empty_url, "db", "downgrade", "0004", monkeypatch=monkeypatch).exit_code == 0  # keeps them
        refused = _cli(empty_url, "db", "downgrade", "0003", monkeypatch=monkeypatch)
        assert refused.exit_code == 1, refused.output
        said = " ".join(refused.output.split())  # (s21 M1: it said "end them first", which changed nothing)
        assert "drops the LangGraph checkpoints of 1 graph thread(s) (the tables of migration 0004), 0 of them of " \
               "runs not ended: those could not resume, and no graph run could be rewound or retried; cancel the " \
               "runs not ended first" in said, said
        assert "--discard-graph-state" in refused.output and "Traceback" not in refused.output
        assert current_revision(store.engine) == "0004"
        assert "hazel_lg_checkpoints" in inspect(store.engine).get_table_names()
        done = _cli(empty_url, "db", "downgrade", "0003", "--discard-graph-state", monkeypatch=monkeypatch)
        assert done.exit_code == 0, done.output
        assert current_revision(store.engine) == "0003"
    finally:
        store.dispose()


def test_db_current_on_a_sqlite_path_that_does_not_exist_creates_nothing(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    missing = tmp_path / "typo" / "hazel.db"
    shown = _cli(f"sqlite:///{missing}", "db", "current", monkeypatch=monkeypatch)
    assert shown.exit_code == 0, shown.output
    assert "current none (no database file at" in shown.output and "nothing created" in shown.output
    assert not missing.exists() and not missing.parent.exists()
    refused = _cli(f"sqlite:///{missing}", "db", "downgrade", "0003", monkeypatch=monkeypatch)
    assert refused.exit_code == 1 and "nothing to downgrade (nothing created)" in refused.output, refused.output
    assert not missing.exists() and not missing.parent.exists()
    upgraded = _cli(f"sqlite:///{missing}", "db", "upgrade", monkeypatch=monkeypatch)  # ("unexpected
    assert upgraded.exit_code == 1 and upgraded.output == (  # FileNotFoundError: ….hazel-migrate.lock")
        f"error: the SQLite database {missing} cannot be created: its directory {missing.parent} does not exist "
        "(create it, or point HAZEL_DATABASE_URL elsewhere)\n"), upgraded.output
    assert not missing.parent.exists()


def test_discarding_graph_state_is_refused_while_a_graph_run_is_not_ended(empty_url: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Fresh-user s21 M2: with ``--discard-graph-state`` a waiting graph run was left waiting, took a decision,
    then failed from an empty thread. It is refused while one is not ended; cancelled first, the discard goes on;
    and the refusal without the flag names how many runs are not ended (M1: "end them first" had been the advice
    for runs already ended)."""
    from tests.langgraph.graphs import review_graph, workflow
    from tests.support.engine import make_hazel, person

    hz = make_hazel(empty_url, workflow(review_graph()))
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status.value == "waiting"
    store = Store(empty_url)
    try:
        unflagged = _cli(empty_url, "db", "downgrade", "0003", monkeypatch=monkeypatch)
        assert unflagged.exit_code == 1 and "1 of them of runs not ended" in " ".join(unflagged.output.split())
        refused = _cli(empty_url, "db", "downgrade", "0003", "--discard-graph-state", monkeypatch=monkeypatch)
        said = " ".join(refused.output.split())
        assert refused.exit_code == 1 and "would discard the graph state of 1 run(s) not ended" in said, said
        assert current_revision(store.engine) == head_revision()
        hz.cancel(run_id=run.id, actor=person("olga"))
        done = _cli(empty_url, "db", "downgrade", "0003", "--discard-graph-state", monkeypatch=monkeypatch)
        assert done.exit_code == 0, done.output
        assert current_revision(store.engine) == "0003"
    finally:
        store.dispose()
        hz.close()
