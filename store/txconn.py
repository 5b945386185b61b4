"""The connection of one ``store.db.transaction``, without SQLAlchemy's per-transaction machinery.

A transaction takes a pooled DBAPI connection (SQLAlchemy's pool, its checkout and checkin events: the
PostgreSQL ping of ``store.db``), begins on the driver itself and commits or rolls back on the driver.
SQLite: ``BEGIN IMMEDIATE`` at once. PostgreSQL: the connection is put in autocommit mode for the
transaction and ``BEGIN`` is sent with its first statement (``unbegun``: ``store.fast`` queues it in the
same pipeline), where psycopg, outside autocommit, sends its own ``BEGIN`` and waits for its answer first, in
a pipeline too: one round trip more per transaction (about 90 µs of a decision on the VM of ``bench/``). The statements of
the hot paths (``store.fast``) execute on that DBAPI connection directly. Anything else a repository asks of
a SQLAlchemy ``Connection`` (``execute`` of a Core statement, ``exec_driver_sql``, …) goes to one made on
first use over the same DBAPI connection and transaction (``sqlalchemy``), which then ends the transaction
as SQLAlchemy does.

Why: a SQLAlchemy ``Connection`` made, begun, committed and closed costs about 60 µs of Python on the VM of
``bench/`` (an empty ``Store.transaction()`` 73 µs against 6.5 µs for ``BEGIN IMMEDIATE`` + ``COMMIT`` on
the driver), and a resume commits two transactions, a step that opens a request or ends its run one.

Driver errors are raised as SQLAlchemy's (``sqlalchemy.exc.DBAPIError`` and its subclasses, the driver's
error as ``.orig``), and a connection that broke is invalidated (the pool opens a new one), as SQLAlchemy's
``Connection`` does.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from store.db import BEGUN, POOL_INVALIDATED, sqlite_begin


class TxConnection:
    """One transaction's connection: ``connection`` is the pooled DBAPI connection (SQLAlchemy's pool proxy:
    ``.driver_connection`` is the sqlite3 or psycopg connection), ``dialect`` the engine's, ``info`` the pooled
    connection's own dict (it outlives the transaction). Every other attribute is SQLAlchemy's ``Connection``'s
    (``sqlalchemy``). Made by ``begin``, ended by ``end``; one thread at a time.

    Execute through ``store.fast`` or SQLAlchemy, not on ``connection.driver_connection`` directly: on
    PostgreSQL that connection is in autocommit mode, and a statement sent on it before ``BEGIN`` (``unbegun``)
    would run, and commit, outside the transaction."""

    __slots__ = ("engine", "dialect", "connection", "info", "unbegun", "committed", "guarding", "fenced",
                 "_sqlalchemy", "_write", "_durable", "_postgresql")

    def __init__(self, engine: Engine, fairy: Any, *, write: bool, durable: bool) -> None:
        self.engine = engine
        self.dialect = engine.dialect
        self.connection: Any = fairy
        self.info: dict[Any, Any] = fairy.info
        self.unbegun: tuple[str, ...] = ()
        """PostgreSQL: what to send before the transaction's first statement (``BEGIN``, and ``SET LOCAL
        synchronous_commit TO OFF`` when not durable); empty once sent, and on SQLite."""
        self.committed = False
        """PostgreSQL: the transaction was committed with the statements of a ``store.fast.pipeline(commit=True)``
        block (nothing more may be executed in it; ``end`` gives the connection back)."""
        self.guarding = False
        """Inside such a block: writes that decide whether the transaction may commit use their guarded form."""
        self.fenced: str | None = None
        """The run whose lease a guarded checkpoint write in this transaction checks (``store.Tx.pipeline``)."""
        self._sqlalchemy: Connection | None = None
        self._write = write
        self._durable = durable
        self._postgresql = engine.dialect.name == "postgresql"

    @classmethod
    def begin(cls, engine: Engine, sqlite_levels: tuple[str, str] | None, *, write: bool,
              durable: bool, snapshot: bool = True) -> TxConnection:
        """Check a connection out of ``engine``'s pool and begin a transaction on it. ``sqlite_levels``: the
        SQLite engine's ``synchronous`` and relaxed levels (``store.db``); None on PostgreSQL. ``snapshot``
        (readers on PostgreSQL): REPEATABLE READ, one snapshot for all statements; False: READ COMMITTED, for a
        reader that locks rows (``FOR UPDATE SKIP LOCKED`` at REPEATABLE READ fails with a serialization error
        on a row another transaction changed and committed after the snapshot).

        Raises:
            sqlalchemy.exc.DBAPIError: no connection (``OperationalError``: the database is unreachable; with
                ``connection_invalidated`` when the pooled connection and the one opened in its place were
                both found dead: ``store.db``'s checkout ping), or the
                transaction could not begin (SQLite's lock held past the busy timeout: "database is locked").
        """
        dbapi_error = engine.dialect.loaded_dbapi.Error
        try:
            fairy = engine.raw_connection()
        except dbapi_error as exc:
            invalidated = getattr(exc, POOL_INVALIDATED, False) or engine.dialect.is_disconnect(exc, None, None)
            raise DBAPIError.instance(None, None, exc, dbapi_error, dialect=engine.dialect,
                                      connection_invalidated=invalidated) from exc
        conn = cls(engine, fairy, write=write, durable=durable)
        try:
            if sqlite_levels is not None:
                sqlite_begin(fairy, sqlite_levels, write=write, durable=durable)
            elif conn._postgresql:
                fairy.driver_connection.autocommit = True  # (no I/O) set back by ``end``
                # a reader sees one snapshot for all its statements (READ COMMITTED takes one per statement: a run
                # read as waiting, then its request as already settled by a decision committed in between)
                begin = "BEGIN" if write or not snapshot else "BEGIN ISOLATION LEVEL REPEATABLE READ"
                conn.unbegun = (begin,) if durable else (begin, "SET LOCAL synchronous_commit TO OFF")
        except dbapi_error as exc:
            error = conn._translated(exc, "BEGIN")
            conn._give_back(reset=True)
            raise error from exc
        except BaseException:
            conn._give_back(reset=True)
            raise
        return conn

    def send_begin(self, driver: Any) -> None:
        """Send ``unbegun`` on ``driver`` (PostgreSQL): queued in the pipeline open on it (``store.fast``), or,
        outside one, each answered before the next."""
        for sql in self.unbegun:
            driver.execute(sql)
        self.unbegun = ()

    @property
    def sqlalchemy(self) -> Connection:
        """A SQLAlchemy ``Connection`` over this transaction (made on first use; it commits or rolls back at
        ``end``)."""
        sa = self._sqlalchemy
        if sa is None:
            if self.committed:
                raise RuntimeError("a statement after its transaction committed (store.fast.pipeline(commit=True))")
            if self.connection is None:
                raise DBAPIError.instance(None, None, ConnectionError("the transaction's connection was invalidated"),
                                          ConnectionError, connection_invalidated=True)
            if self.unbegun:  # (a round trip: rare, the hot paths execute through ``store.fast``)
                try:
                    self.send_begin(self.connection.driver_connection)
                except self.dialect.loaded_dbapi.Error as exc:
                    raise self._translated(exc, "BEGIN") from exc
            sa = Connection(self.engine, connection=self.connection)
            sa.execution_options(**{BEGUN: True, "hazel_write": self._write, "hazel_durable": self._durable})
            sa.begin()  # SQLAlchemy's own bookkeeping; nothing is sent (``store.db``'s begin hook skips it)
            self._sqlalchemy = sa
        return sa

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sqlalchemy, name)

    def invalidate(self, exception: BaseException | None = None) -> None:
        """Discard the DBAPI connection (it broke): the pool opens a new one; the transaction is lost."""
        sa, fairy = self._sqlalchemy, self.connection
        self.connection = None
        if sa is not None:
            sa.invalidate(exception)
        elif fairy is not None:
            fairy.invalidate(exception)

    def end(self, *, commit: bool) -> None:
        """Commit (``commit``) or roll back, and give the connection back to the pool. A failed rollback
        invalidates the connection and is not raised (the caller is raising what made it roll back).

        Raises:
            sqlalchemy.exc.DBAPIError: the commit failed (the transaction was rolled back, or the connection
                broke and was invalidated).
        """
        sa = self._sqlalchemy
        if sa is not None:
            self._sqlalchemy = None
            try:
                if commit and not self.committed:
                    sa.commit()
                else:  # (committed with its statements: SQLAlchemy's bookkeeping ends; nothing is sent)
                    try:
                        sa.rollback()
                    except Exception:  # noqa: BLE001 (SQLAlchemy invalidated it if it broke)
                        pass
            finally:
                if self._postgresql and not sa.invalidated and self.connection is not None:
                    try:
                        self.connection.driver_connection.autocommit = False  # as the pool lent it
                    except Exception as exc:  # noqa: BLE001 (still in a transaction: not to be lent again)
                        sa.invalidate(exc)
                self.connection = None
                sa.close()
            return
        fairy = self.connection
        if fairy is None:  # invalidated: already back in the pool
            return
        if self.unbegun or self.committed:  # nothing was sent, or the commit went with the statements
            self._give_back(reset=False)
            return
        driver = fairy.driver_connection
        if not commit:
            try:
                driver.rollback()
            except Exception as exc:  # noqa: BLE001 (a broken connection: the pool must not lend it again)
                self.invalidate(exc)
                return
            self._give_back(reset=False)
            return
        try:
            driver.commit()
        except self.dialect.loaded_dbapi.Error as exc:
            error = self._translated(exc, "COMMIT")
            self._give_back(reset=True)  # (rolls back what is left of the transaction)
            raise error from exc
        except BaseException:
            self._give_back(reset=True)
            raise
        self._give_back(reset=False)

    def _translated(self, exc: Exception, statement: str) -> DBAPIError:
        """A driver error as SQLAlchemy's (the connection invalidated if it broke)."""
        invalid = self.dialect.is_disconnect(exc, self.connection.driver_connection if self.connection else None,
                                             None)
        if invalid:
            self.invalidate(exc)
        return DBAPIError.instance(statement, None, exc, self.dialect.loaded_dbapi.Error,
                                   connection_invalidated=invalid, dialect=self.dialect)

    def _give_back(self, *, reset: bool) -> None:
        """Check the connection back in; ``reset``: roll it back first (after a failure), else it is known to
        be out of any transaction (committed or rolled back just now). On PostgreSQL out of autocommit mode,
        as the pool lent it; a connection that cannot be is invalidated instead."""
        fairy = self.connection
        if fairy is None:
            return
        if self._postgresql:
            driver = fairy.driver_connection
            try:
                if reset:
                    driver.rollback()
                driver.autocommit = False
            except Exception as exc:  # noqa: BLE001 (broken, or still in a transaction)
                self.invalidate(exc)
                return
            reset = False
        self.connection = None
        if reset:
            fairy.close()  # the pool's reset rolls back
        else:
            fairy._close_special(transaction_reset=True)  # as SQLAlchemy's Connection.close after its commit
