"""Fixtures of the bench's tests."""

from __future__ import annotations

import gc
from typing import Iterator

import pytest

from bench import databases


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> Iterator:  # noqa: ANN201
    """A bench backend (``bench.databases``) per database, for the module's tests; PostgreSQL is skipped when
    unreachable (``.ci/run`` stops the session first when it must be there)."""
    if request.param == "sqlite":
        with databases.sqlite_backend() as sqlite:
            yield sqlite
        return
    reason = databases.pg_unreachable_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL unreachable: {reason}")
    with databases.postgres_backend() as pg:
        yield pg


@pytest.fixture(autouse=True)
def _frozen_heap() -> Iterator[None]:
    """The bench calls ``gc.collect()`` before each measured loop; under pytest that full collection walks the
    whole session's heap (~0.2 s each time). ``gc.freeze()`` parks the objects that exist before the test, so
    each collection walks only what the bench itself allocated. What the bench runs and records is unchanged."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
