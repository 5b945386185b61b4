"""Migration ``jira_delivery_keys``: Jira decisions' delivery ids written before it (``comment:<id>``) become
``<site>/issue/<issue id>/comment/<id>``, so that Jira's retries and edits of old comments still find their
decision; rows it cannot place keep their key; the downgrade restores the old keys."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import insert, select

from integrations.jira import parse_event
from store import Store
from store.migrate import _config, upgrade
from store.schema import decisions, runs, steering_requests
from tests.support import jira_payloads as p

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def _revisions() -> tuple[str, str]:
    """(this migration's revision, the one before it), found by the script's file name."""
    scripts = ScriptDirectory.from_config(_config())
    (script,) = [s for s in scripts.walk_revisions() if s.path.endswith("_jira_delivery_keys.py")]
    return script.revision, str(script.down_revision)


def _request(run_id: str, ref: dict | None) -> dict:
    return dict(run_id=run_id, checkpoint_seq=0, point="review", title="t", channel="jira:MIG", status="decided",
                approvals_required=1, approvals=1, created_at=T0, reminders_sent=0, message_ref=ref,
                message_key=ref and f"jira:{ref['issue_id']}")


def _decision(run_id: str, request_id: int | None, delivery_id: str | None, *, channel: str = "jira",
              action: str = "approve", person: str = "sam") -> dict:
    return dict(run_id=run_id, request_id=request_id, action=action, actor_id=person, channel=channel,
                payload={}, created_at=T0, delivery_id=delivery_id, person=person)


def test_old_jira_delivery_ids_are_rewritten_with_site_and_issue(empty_url: str) -> None:
    mine, before = _revisions()
    store = Store(empty_url)
    upgrade(store.engine, before)
    cloud = {"issue_id": "10001", "issue_key": "MIG-1", "url": "https://Example.atlassian.net/browse/MIG-1"}
    server = {"issue_id": "10002", "issue_key": "MIG-2", "url": "http://jira.example.invalid:8080/jira/browse/MIG-2"}
    with store.engine.begin() as conn:
        conn.execute(insert(runs), [dict(id=r, workflow="wf", workflow_version=1, status="waiting", head_seq=0,
                                         last_seq=0, branch=0, last_branch=0, started_by="t", started_via="console",
                                         created_at=T0, updated_at=T0, attempt=0, started_by_person="t")
                                    for r in ("r1", "r2")])
        ids = [conn.execute(insert(steering_requests).values(**_request(run, ref))
                            .returning(steering_requests.c.id)).scalar_one()
               for run, ref in (("r1", cloud), ("r2", server), ("r2", None))]
        conn.execute(insert(decisions), [
            _decision("r1", ids[0], "comment:30001"),
            _decision("r2", ids[1], "changelog:40001"),
            _decision("r2", ids[1], "webhook:w-9", person="lee"),
            _decision("r2", ids[2], "comment:30002"),  # its request has no issue: left as it is
            _decision("r2", None, "comment:30003", action="rewind"),  # a rewind of a settled request: no request
            _decision("r1", ids[0], "comment:30004", channel="slack", person="ann"),  # not Jira's
            _decision("r1", ids[0], None, channel="console", person="priya"),
        ])
    upgrade(store.engine, "head")

    def keys() -> list[str | None]:
        with store.engine.connect() as conn:
            return list(conn.execute(select(decisions.c.delivery_id).order_by(decisions.c.id)).scalars())

    assert keys() == ["example.atlassian.net/issue/10001/comment/30001",
                      "jira.example.invalid:8080/jira/issue/10002/changelog/40001",
                      "jira.example.invalid:8080/jira/issue/10002/webhook/w-9",
                      "comment:30002", "comment:30003", "comment:30004", None]
    command.downgrade(_config(store.engine), before)
    assert keys() == ["comment:30001", "changelog:40001", "webhook:w-9", "comment:30002", "comment:30003",
                      "comment:30004", None]
    upgrade(store.engine, "head")
    assert keys()[0] == "example.atlassian.net/issue/10001/comment/30001"
    assert mine != before
    store.dispose()


def test_the_keys_match_what_the_webhook_computes() -> None:
    """The migration's frozen copy of the key gives the key the webhook computes for the same comment."""
    script = next(s for s in ScriptDirectory.from_config(_config()).walk_revisions()
                  if s.path.endswith("_jira_delivery_keys.py"))
    spec = importlib.util.spec_from_file_location("jira_delivery_keys", script.path)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    issue = {"id": "10001", "key": "MIG-1", "fields": {"status": {"name": "To Do"}, "labels": []}}
    for cloud, base in ((True, "https://example.atlassian.net"), (False, "http://jira.example.invalid:8080/jira"),
                        (True, "https://" + "long" * 40 + ".example")):
        event = parse_event(p.comment_event(issue, "/approve", "sam", cloud=cloud, base=base, comment_id="30001"))
        assert event is not None
        assert migration._key(migration._site(f"{base}/browse/MIG-1"), "10001", "comment", "30001") == event.delivery_id
        assert len(event.delivery_id) <= 200
