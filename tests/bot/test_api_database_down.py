"""The REST API during a database outage, over real HTTP on SQLite and PostgreSQL: a database that cannot be
reached answers 503 ``DatabaseUnavailableError`` with ``Retry-After`` (was 500 ``InternalError``), naming no
host, port, path or credentials; the same calls answer 200 before the outage and after it. Errors that are not
an outage (an IntegrityError) stay 500."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import psycopg
import pytest
import sqlalchemy
from fastapi import APIRouter
from sqlalchemy.engine import make_url

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.test_api import TOKENS, Api
from tests.support.engine import make_hazel
from tests.support.live import LiveServer, free_port
from tests.workflows.doc import doc_workflow

DOWN = {"error": {"type": "DatabaseUnavailableError", "message": "the database is unavailable; try again shortly"}}


class Proxy:
    """A TCP proxy on 127.0.0.1 to ``target`` (PostgreSQL): ``stop()`` closes its port and every connection
    through it (the database is unreachable: connections refused), ``start()`` opens the same port again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.port = target, free_port()
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        assert self.listener is not None
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # (wakes the blocked accept: close alone would not on Linux)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.sockets.clear()


@pytest.fixture
def outage(db_url: str, tmp_path: Path) -> Iterator[tuple[Api, Callable[[], None], Callable[[], None], list[str]]]:
    """A served Hazel whose database can be cut off for real: ``(api, cut, restore, secrets)``; ``secrets``:
    what the answers must never show (host, port, path, user, password).

    SQLite: the database's directory is moved away (and the pool's open files let go, as a restart would):
    connecting fails with "unable to open database file". PostgreSQL: Hazel connects through a TCP proxy that
    is shut (its connections dropped, its port refusing)."""
    parsed = make_url(db_url)
    if parsed.get_backend_name() == "sqlite":
        home = tmp_path / "dbhome"
        home.mkdir()
        shutil.copyfile(parsed.database, home / "hazel.db")
        hazel = make_hazel(f"sqlite:///{home / 'hazel.db'}", doc_workflow())
        gone = tmp_path / "dbhome-gone"

        def cut() -> None:
            home.rename(gone)
            hazel.store.dispose()

        def restore() -> None:
            gone.rename(home)

        secrets = [str(home), "hazel.db"]
    else:
        proxy = Proxy((parsed.host or "127.0.0.1", parsed.port or 5432))
        proxy.start()
        hazel = make_hazel(parsed.set(port=proxy.port).render_as_string(hide_password=False), doc_workflow())
        cut, restore = proxy.stop, proxy.start
        secrets = [str(proxy.port), parsed.host or "127.0.0.1", parsed.username or "postgres",
                   *([parsed.password] if parsed.password else [])]
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    with LiveServer(app) as server:
        yield Api(server.url), cut, restore, secrets
    hazel.close()


def assert_down(response: httpx.Response, secrets: list[str]) -> None:
    assert response.status_code == 503, response.text
    assert response.json() == DOWN
    assert response.headers["Retry-After"] == "5"
    assert not [s for s in secrets if s in response.text], response.text


def test_database_outage_answers_503_then_200_again(outage: tuple[Any, ...]) -> None:
    api, cut, restore, secrets = outage
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]  # (no step executing when the database goes)
    assert api.call("GET", "/api/runs").status_code == 200
    assert api.call("GET", f"/api/runs/{run_id}").status_code == 200

    cut()
    assert_down(api.call("GET", "/api/runs"), secrets)
    assert_down(api.call("GET", f"/api/runs/{run_id}"), secrets)
    assert_down(api.call("GET", f"/api/runs/{run_id}"), secrets)  # (and again: a pool with nothing to give)
    assert api.http.get("/healthz").status_code == 503  # the same outage /healthz reports

    restore()
    assert api.call("GET", "/api/runs").status_code == 200
    assert api.run(run_id)["status"] == "waiting"


def _psycopg_refused() -> psycopg.OperationalError:
    """A real ``psycopg.OperationalError``: connecting to a port where nothing listens."""
    try:
        psycopg.connect(host="127.0.0.1", port=free_port(), user="hazel", password="s3cret-pw", connect_timeout=2)
    except psycopg.OperationalError as exc:
        return exc
    raise AssertionError("connected to a port where nothing listens")


def _integrity_error() -> sqlalchemy.exc.IntegrityError:
    """A real ``IntegrityError``: a duplicate primary key."""
    engine = sqlalchemy.create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
            conn.execute(sqlalchemy.text("INSERT INTO t VALUES (1)"))
            conn.execute(sqlalchemy.text("INSERT INTO t VALUES (1)"))
    except sqlalchemy.exc.IntegrityError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("a duplicate key was accepted")


def test_driver_errors_answer_503_and_programming_errors_500(db_url: str) -> None:
    """The errors a route may meet where Hazel talks to the driver's connection directly (psycopg's and
    sqlite3's own OperationalError, or an error raised from one) answer 503; an IntegrityError stays 500."""
    hazel = make_hazel(db_url, doc_workflow())
    raised: dict[str, Callable[[], BaseException]] = {
        "psycopg": _psycopg_refused,
        "sqlite3": lambda: sqlite3.OperationalError("unable to open database file"),
        "wrapped": lambda: _wrapped(_psycopg_refused()),
        "integrity": _integrity_error,
        "bug": lambda: KeyError("oops"),
    }
    router = APIRouter()

    @router.get("/boom/{kind}")
    def boom(kind: str) -> None:
        raise raised[kind]()

    app = create_app(hazel, routers=[router])
    with LiveServer(app) as server:  # (a connection each: uvicorn closes one whose request raised)
        for kind in ("psycopg", "sqlite3", "wrapped"):
            assert_down(httpx.get(f"{server.url}/boom/{kind}", timeout=10), ["s3cret-pw", "hazel", "database file"])
        for kind in ("integrity", "bug"):
            response = httpx.get(f"{server.url}/boom/{kind}", timeout=10)
            assert response.status_code == 500, (kind, response.text)
            assert response.json()["error"]["type"] == "InternalError"
            assert "Retry-After" not in response.headers


def _wrapped(cause: BaseException) -> RuntimeError:
    try:
        raise RuntimeError("could not read the run") from cause
    except RuntimeError as exc:
        return exc
