"""``run.decided`` for a rewind reports the run's status before the rewind moved it on, as for every other
decision (README, Notification hooks): ``waiting`` for a run that waited, ``cancelled`` / ``completed`` for an
ended one, never the ``running`` / ``ready`` the rewind left it in. Finding 7 of session 14. Received over real
HTTP by a receiver that checks each signature, from rewinds through the engine and through the REST API; on
SQLite and PostgreSQL."""

from __future__ import annotations

import time

import httpx

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from store.models import RunStatus
from tests.bot.test_hooks import ALICE, make, signed
from tests.support.hook_receiver import HookReceiver
from tests.support.live import LiveServer


def _rewinds(receiver: HookReceiver, run_id: str) -> list[dict]:
    """The ``run.decided`` events of rewinds of ``run_id`` received so far, in order, signatures checked."""
    events = [signed(r) for r in receiver.ok()]
    return [e for e in events if e["run"]["id"] == run_id and e["type"] == "run.decided"
            and e["data"]["action"] == "rewind"]


def test_a_rewinds_hook_reports_the_status_before_it(db_url: str) -> None:
    with HookReceiver() as receiver:
        hazel = make(db_url, [receiver.url("/hook")])
        waiting = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
        hazel.drive(run_id=waiting.id)
        hazel.rewind(run_id=waiting.id, actor=ALICE, to="draft")
        hazel.drive(run_id=waiting.id)  # (waits again: delivers what is due)
        cancelled = hazel.start(workflow="doc", input={"topic": "indexes"}, actor=ALICE)
        hazel.drive(run_id=cancelled.id)
        hazel.cancel(run_id=cancelled.id, actor=ALICE, reason="duplicate")
        hazel.rewind(run_id=cancelled.id, actor=ALICE, to=1)
        hazel.drive(run_id=cancelled.id)
        hazel.decide(run_id=cancelled.id, action="approve", actor=ALICE)
        hazel.drive(run_id=cancelled.id)
        assert hazel.get(run_id=cancelled.id).status is RunStatus.COMPLETED
        hazel.rewind(run_id=cancelled.id, actor=ALICE, to=1)
        hazel.drive(run_id=cancelled.id)
        hazel.deliverer.deliver_due()

        [rewound] = _rewinds(receiver, waiting.id)
        assert rewound["run"]["status"] == "waiting" and rewound["request"]["status"] == "decided"
        assert [e["run"]["status"] for e in _rewinds(receiver, cancelled.id)] == ["cancelled", "completed"]
        hazel.close()


def test_a_rest_rewinds_hook_reports_waiting(db_url: str) -> None:
    with HookReceiver() as receiver:
        hazel = make(db_url, [receiver.url("/hook")])
        tokens = Settings(HAZEL_API_TOKENS="alice=tok-alice-0123456789")
        run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
        hazel.drive(run_id=run.id)
        with LiveServer(create_app(hazel, routers=[api_router(hazel, tokens)])) as server:
            answer = httpx.post(f"{server.url}/api/runs/{run.id}/decisions", timeout=15,
                                json={"action": "rewind", "payload": {"to": 1}},
                                headers={"Authorization": "Bearer tok-alice-0123456789"})
            assert answer.status_code == 201, answer.text
            deadline = time.monotonic() + 20
            while not _rewinds(receiver, run.id) and time.monotonic() < deadline:
                hazel.deliverer.deliver_due()
                time.sleep(0.05)
        [rewound] = _rewinds(receiver, run.id)
        assert rewound["run"]["status"] == "waiting" and rewound["data"]["actor"]["channel"] == "api"
        hazel.close()
