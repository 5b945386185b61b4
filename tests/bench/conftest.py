"""Fixtures of the bench's tests."""

from __future__ import annotations

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
