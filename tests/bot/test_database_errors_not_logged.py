"""An unexpected database error logs and shows no SQL statement, no parameters and no driver ``DETAIL`` (they
may hold a run's input, a person's text): a REST request that met one answered 500 and uvicorn's traceback
carried ``[SQL: INSERT …]`` and ``[parameters: {…, 'payload': b'{…}'}]``; a worker that met one stored them as
the run's error, which every channel shows. On SQLite and PostgreSQL, the database refusing for real (a trigger
that raises on a checkpoint's insert), over real HTTP and with a real worker pool, in text and JSON logs."""

from __future__ import annotations

import io
import json
import logging
from typing import Iterator

import httpx
import pytest
import sqlalchemy
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bot.inbound.api import api_router
from bot.ops.logs import configure_logging
from bot.ops.worker import WorkerPool
from bot.server.http import create_app
from bot.settings import Settings
from store.models import RunStatus
from tests.bot.test_api import ALICE, TOKENS
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow

PRIVATE = "Priya's private note"
"""Text of a person's: in the run's input, and in the refusal's DETAIL line (as PostgreSQL's ``Failing row
contains (…)`` quotes a row)."""
NEVER = ("[SQL", "SQL:", "INSERT INTO", "[parameters", "parameters hidden", "DETAIL", "CONTEXT:", "Failing row", "private note")



@pytest.fixture
def refusing(db_url: str) -> Iterator[str]:
    """``db_url`` whose database refuses the insert of every checkpoint after #0 (all of them with ``every``
    set by the test: ``refusing_all``), with ``refused by a trigger`` and a DETAIL line quoting ``PRIVATE``.
    Yields how to refuse all of them (SQL to run), and drops the trigger after the test."""
    engine = create_engine(db_url)
    sqlite = make_url(db_url).get_backend_name() == "sqlite"
    with engine.begin() as conn:
        if sqlite:
            conn.execute(text("CREATE TABLE h5_refuse_from (seq INTEGER)"))
            conn.execute(text("INSERT INTO h5_refuse_from VALUES (1)"))
            conn.execute(text(
                "CREATE TRIGGER h5_refuse BEFORE INSERT ON hazel_checkpoints "
                "WHEN NEW.seq >= (SELECT seq FROM h5_refuse_from) "
                "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"))
        else:
            conn.execute(text("CREATE TABLE h5_refuse_from (seq INTEGER)"))
            conn.execute(text("INSERT INTO h5_refuse_from VALUES (1)"))
            conn.execute(text(
                "CREATE FUNCTION h5_refuse() RETURNS trigger AS $$ BEGIN "
                "IF NEW.seq >= (SELECT seq FROM h5_refuse_from) THEN RAISE EXCEPTION 'refused by a trigger' "
                f"USING DETAIL = 'Failing row contains ({PRIVATE.replace(chr(39), chr(39) * 2)})'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql"))
            conn.execute(text("CREATE TRIGGER h5_refuse BEFORE INSERT ON hazel_checkpoints FOR EACH ROW "
                              "EXECUTE FUNCTION h5_refuse()"))
    try:
        yield "UPDATE h5_refuse_from SET seq = 0"
    finally:
        with engine.begin() as conn:
            if sqlite:
                conn.execute(text("DROP TRIGGER h5_refuse"))
            else:
                conn.execute(text("DROP TRIGGER h5_refuse ON hazel_checkpoints"))
                conn.execute(text("DROP FUNCTION h5_refuse()"))
            conn.execute(text("DROP TABLE h5_refuse_from"))
        engine.dispose()


def _lines(stream: io.StringIO, log_format: str) -> str:
    """The log as text (a JSON log's records' messages and tracebacks, one after another)."""
    if log_format == "text":
        return stream.getvalue()
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    return "\n".join(f"{r['message']}\n{r.get('exc_info', '')}" for r in records)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_rest_500_from_the_database_logs_no_sql_and_no_parameters(
        db_url: str, refusing: str, serve_logging: None, log_format: str) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    with hazel.store.transaction() as tx:
        tx.conn.execute(text(refusing))  # (every checkpoint: the start's #0 too)
    stream = io.StringIO()
    configure_logging(Settings(HAZEL_LOG_FORMAT=log_format), stream=stream)
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    with LiveServer(app, access_log=True) as server:
        answer = httpx.post(f"{server.url}/api/runs", json={"workflow": "doc", "input": {"topic": PRIVATE}},
                            headers={"Authorization": f"Bearer {ALICE}"}, timeout=10)
    assert answer.status_code == 500, answer.text
    assert answer.json()["error"]["type"] == "InternalError"
    logged = _lines(stream, log_format)
    assert "Exception in ASGI application" in logged, logged  # the traceback is logged (where it happened)
    assert "Traceback (most recent call last)" in logged and "refused by a trigger" in logged, logged
    assert not [word for word in NEVER if word in logged], logged


def test_a_worker_that_meets_a_database_error_logs_and_stores_no_sql_and_no_parameters(
        db_url: str, refusing: str, serve_logging: None) -> None:
    """The run's first step writes checkpoint #1, which the database refuses: the run fails "outside a step".
    Its error (shown by ``hazel show``, the REST API, the run pages, Slack and Jira) and its traceback (``hazel
    show --full``) held the statement and its parameters; the log line was one line already."""
    hazel = make_hazel(db_url, doc_workflow())
    run = hazel.start(workflow="doc", input={"topic": PRIVATE}, actor=person("olga"))
    stream = io.StringIO()
    configure_logging(Settings(HAZEL_LOG_FORMAT="text"), stream=stream)
    pool = WorkerPool(hazel, threads=1)
    assert pool.drain() == 1
    logged = stream.getvalue()
    assert f"run {run.id}: its execution failed outside a step (" in logged, logged
    assert "refused by a trigger" in logged and not [word for word in NEVER if word in logged], logged
    failed = hazel.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED
    assert failed.error.endswith("refused by a trigger") and "\n" not in failed.error, failed.error
    assert not [word for word in NEVER if word in failed.error_traceback], failed.error_traceback
    assert failed.error_traceback.rstrip().endswith(failed.error.split(": ", 1)[1]), failed.error_traceback


def _integrity_error() -> sqlalchemy.exc.IntegrityError:
    """A real ``IntegrityError`` of an engine that shows its parameters (SQLAlchemy's default: not Hazel's)."""
    engine = sqlalchemy.create_engine("sqlite://")
    adding, values = text("INSERT INTO t VALUES (1, :note)"), {"note": PRIVATE}  # (not on the lines a traceback
    try:  # shows: they are the test's source, not the error's text)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT)"))
            conn.execute(adding, values)
            conn.execute(adding, values)
    except sqlalchemy.exc.IntegrityError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("a duplicate key was accepted")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_any_record_quoting_a_database_error_is_logged_without_its_statement(serve_logging: None,
                                                                            log_format: str) -> None:
    """Whoever logs it: a traceback (``log.exception``; the error wrapped in another), a library's
    ``f"… (error: {e})"`` (Bolt's listener errors), a ``%s`` of the error. An error that is not the
    database's keeps its whole message."""
    error = _integrity_error()
    assert PRIVATE in str(error) and "[SQL: " in str(error)  # (what SQLAlchemy writes by default)
    stream = io.StringIO()
    configure_logging(Settings(HAZEL_LOG_FORMAT=log_format), stream=stream)
    log = logging.getLogger("hazel.test")
    try:
        raise error
    except sqlalchemy.exc.IntegrityError:
        log.exception("a click failed")
    try:
        raise RuntimeError("could not record the decision") from error
    except RuntimeError:
        log.exception("wrapped")
    log.error(f"Failed to run listener function (error: {error})")
    log.warning("a %s of it: %s", "message", error)
    log.error("not the database's:\nsecond line kept")
    logged = _lines(stream, log_format)
    assert not [word for word in NEVER if word in logged], logged
    said = "(sqlite3.IntegrityError) UNIQUE constraint failed: t.id"
    assert logged.count(f"sqlalchemy.exc.IntegrityError: {said}") == 2, logged  # each traceback's, by its first line
    assert f"Failed to run listener function (error: {said}" in logged and f"a message of it: {said}" in logged
    assert "could not record the decision" in logged and "second line kept" in logged, logged


def test_hazels_own_engines_never_put_parameters_in_an_error(db_url: str, serve_logging: None) -> None:
    """``hide_parameters``: an error raised through Hazel's store (any path: SQLAlchemy's or the driver's own)
    carries no parameter in its text, wherever that text goes (a traceback printed by Python itself, a library's
    log). PostgreSQL's own ``DETAIL:`` line quotes the row: Hazel shows and logs the error by its first line,
    the driver's error (SQLAlchemy's ``orig``) logged with ``%s`` included."""
    from bot.engine import error_line, traceback_text

    hazel = make_hazel(db_url, doc_workflow())
    with pytest.raises(sqlalchemy.exc.DBAPIError) as raised:
        with hazel.store.transaction() as tx:  # (a run without its other columns: NOT NULL refuses it)
            tx.conn.execute(text("INSERT INTO hazel_runs (id, workflow) VALUES (:id, :wf)"), {"id": "r", "wf": PRIVATE})
    said = str(raised.value)
    assert "[parameters: " not in said and "[SQL parameters hidden due to hide_parameters=True]" in said, said
    assert PRIVATE not in said[said.index("[SQL: "):], said
    assert PRIVATE not in error_line(raised.value) and PRIVATE not in traceback_text(raised.value)
    stream = io.StringIO()
    configure_logging(Settings(HAZEL_LOG_FORMAT="text"), stream=stream)
    logging.getLogger("hazel.test").warning("the driver said: %s", raised.value.orig)
    assert "the driver said: " in stream.getvalue() and PRIVATE not in stream.getvalue(), stream.getvalue()
