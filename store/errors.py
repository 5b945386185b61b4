"""Errors the store raises.

    StoreError (Exception)
    ├── SchemaNotReadyError (RuntimeError): the database is not at Hazel's schema revision
    ├── UnsupportedDatabaseError (ValueError): a URL for a database Hazel does not run on
    ├── DatabaseOpenError (OSError): a SQLite file that cannot be opened, and why
    ├── LeaseLostError (RuntimeError): a fenced write found the run leased to someone else (or cancelled)
    ├── ChangedMeanwhileError (RuntimeError): a guarded write found its row no longer as read
    └── DuplicateDecisionError (ValueError): the same person already decided this request, or the
        channel delivery id was already recorded
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error raised by ``store``."""


class SchemaNotReadyError(StoreError, RuntimeError):
    """The database has no Hazel tables, or an older revision: run ``hazel db upgrade``."""


class UnsupportedDatabaseError(StoreError, ValueError):
    """Hazel runs on SQLite and PostgreSQL (``postgresql+psycopg``) only."""


class DatabaseOpenError(StoreError, OSError):
    """SQLite could not open the database file (``unable to open database file``), with why when it can be told
    (``store.db.unopened_why``: a directory that does not exist, a path that is a directory, no permission)."""


class LeaseLostError(StoreError, RuntimeError):
    """A write fenced by a lease token changed no row: another worker owns the run now, or it was cancelled."""


class ChangedMeanwhileError(StoreError, RuntimeError):
    """A write guarded in the database (``store.fast.guarded``: a transaction that commits with its statements)
    changed no row: the run or its request is no longer as the transaction read it. Nothing was written."""


class DuplicateDecisionError(StoreError, ValueError):
    """A unique key refused a decision: same person on the same request, or a delivery id seen before."""

    def __init__(self, message: str, *, by_delivery: bool) -> None:
        super().__init__(message)
        self.by_delivery = by_delivery
