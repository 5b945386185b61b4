"""Fixtures for the Slack channel tests: a running fake Slack Web API and a client on it."""

from __future__ import annotations

from typing import Iterator

import pytest

from integrations.slack.client import make_client
from tests.support.fake_slack import FakeSlack


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(channels={"migrations": "C0000000001", "deploys": "C0000000002"},
                   usergroups={"S0000000001": ["U0000000003", "U0000000004"]}) as f:
        yield f


@pytest.fixture
def client(fake: FakeSlack):  # noqa: ANN201
    """slack_sdk's retry handlers as in production, with short backoffs (a 429 still waits its Retry-After)."""
    return make_client(fake.bot_token, base_url=fake.api_url, backoff_sec=0.01)
