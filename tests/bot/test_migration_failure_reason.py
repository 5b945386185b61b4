"""A version migration that fails names why, on one line, wherever a decision is refused for it (the engine's
``VersionUnavailableError``, REST's 409, Slack's answer): each field the new model refuses and the reason
(``owner: Field required``), several joined and capped, or the migration function's own error. Before, the
message ended at pydantic's first line, ``ValidationError: 1 validation error for S2``: which field, and why,
was cut off (a fresh-user finding, F7). On SQLite and PostgreSQL, with a real v1 run waiting when only v2 is
deployed."""

from __future__ import annotations

import re
from typing import Any, Callable

import pytest

from bot.engine.errors import VersionUnavailableError
from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from store.models import RunStatus
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer
from tests.workflows.migrating import v1, v2


def waiting_v1_run(db_url: str, **kwargs: Any) -> str:
    old = make_hazel(db_url, v1(**kwargs))
    run = old.start(workflow="mig", input={}, actor=person("me"))
    assert old.drive(run_id=run.id).run.status is RunStatus.WAITING
    old.close()
    return run.id


def refusal(hazel: Any, run_id: str) -> str:
    with pytest.raises(VersionUnavailableError) as err:
        hazel.decide(run_id=run_id, action="approve", actor=person("sme"))
    return str(err.value)


@pytest.mark.parametrize(("migrate", "reason"), [
    (lambda tree: dict(tree), "owner: Field required"),
    (lambda tree: {**tree, "owner": 123}, "owner: Input should be a valid string"),
    (lambda tree: None, "(state): Input should be a valid dictionary or instance of S2"),
])
def test_a_refused_migration_names_each_field_and_why(db_url: str, migrate: Callable, reason: str) -> None:
    run_id = waiting_v1_run(db_url)
    new = make_hazel(db_url, v2(migrate))
    before = (new.get(run_id=run_id), new.checkpoints(run_id=run_id), new.requests(run_id=run_id))
    message = refusal(new, run_id)
    assert message == (f"run {run_id}: migrating its state from v1 to mig v2 failed: the migrated state does not "
                       f"fit mig v2's state model (S2): {reason}")
    assert (new.get(run_id=run_id), new.checkpoints(run_id=run_id), new.requests(run_id=run_id)) == before
    with pytest.raises(VersionUnavailableError, match="failed: the migrated state does not fit .*" + re.escape(reason)):
        new.rewind(run_id=run_id, actor=person("me"), to=0)
    request = new.pending_request(run_id=run_id)
    shown = new.shown(request_id=request.id)
    assert shown.migration_error == message and shown.value == "the plan"  # the stored value, said to be so


def test_several_refused_fields_are_joined_on_one_line_and_capped(db_url: str) -> None:
    many = {f"f{i:03}": (str, ...) for i in range(60)}
    from pydantic import create_model

    Many = create_model("Many", plan=(str, ""), **many)  # noqa: N806
    run_id = waiting_v1_run(db_url)
    two = make_hazel(db_url, v2(lambda tree: {**tree, "owner": ["not", "text"], "plan": 5}))
    message = refusal(two, run_id)
    assert message.endswith("(S2): plan: Input should be a valid string; owner: Input should be a valid string")
    sixty = make_hazel(db_url, v2(lambda tree: dict(tree), state=Many))
    message = refusal(sixty, run_id)
    details = message.split("(Many): ", 1)[1]
    assert "\n" not in message and details.startswith("f000: Field required; f001: Field required; ")
    assert details.endswith("; … (60 errors in all)")
    assert len(details) <= 400 + len("; … (60 errors in all)")  # (versions.MIGRATION_DETAILS_MAX_CHARS)


def test_a_migration_function_that_raises_is_named_with_its_error(db_url: str) -> None:
    run_id = waiting_v1_run(db_url)
    new = make_hazel(db_url, v2(lambda tree: {"plan": tree["draft"]}))
    assert refusal(new, run_id) == (f"run {run_id}: migrating its state from v1 to mig v2 failed: the migration "
                                    "function raised KeyError: 'draft'")


def test_rest_answers_409_naming_the_field(db_url: str) -> None:
    import httpx

    run_id = waiting_v1_run(db_url)
    new = make_hazel(db_url, v2(lambda tree: dict(tree)))
    app = create_app(new, routers=[api_router(new, Settings(HAZEL_API_TOKENS="alice=tok-alice-0123456789"))])
    with LiveServer(app) as server:
        response = httpx.post(f"{server.url}/api/runs/{run_id}/decisions", json={"action": "approve"},
                              headers={"Authorization": "Bearer tok-alice-0123456789"}, timeout=10)
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["type"] == "VersionUnavailableError"
    assert error["message"].endswith("does not fit mig v2's state model (S2): owner: Field required")
    assert new.get(run_id=run_id).status is RunStatus.WAITING and new.get(run_id=run_id).workflow_version == 1

