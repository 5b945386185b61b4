"""The same delivery of a decision on one of two requests a LangGraph run waits on at once, sent again (a
channel's retry: the same delivery id, REST Idempotency-Key, run page form), gets the first answer back
(``duplicate``) with what the run still waits on, as the first answer said it: the engine's outcome, the REST
answer, the run page's confirmation. Once the other request is answered, a copy says the run waits on nothing.
On SQLite and PostgreSQL."""

from __future__ import annotations

import re

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.langgraph.graphs import pair_graph, workflow
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer


def _waiting(hz):  # noqa: ANN001, ANN202
    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    legal, security = hz.pending_requests_of(run_id=run.id)
    return run, legal, security


def test_a_repeated_delivery_says_what_the_run_still_waits_on(db_url: str) -> None:
    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"))
    run, legal, security = _waiting(hz)
    ana = person("ana")
    first = hz.decide(run_id=run.id, action="approve", actor=ana, request_id=legal.id, delivery_id="d-1")
    again = hz.decide(run_id=run.id, action="approve", actor=ana, request_id=legal.id, delivery_id="d-1")
    assert not first.duplicate and again.duplicate
    assert [r.id for r in again.still_pending] == [r.id for r in first.still_pending] == [security.id]
    hz.decide(run_id=run.id, action="approve", actor=ana, request_id=security.id)
    later = hz.decide(run_id=run.id, action="approve", actor=ana, request_id=legal.id, delivery_id="d-1")
    assert later.duplicate and later.still_pending == ()  # (computed as it is now)


def test_rest_answers_a_repeated_idempotency_key_with_still_pending(db_url: str) -> None:
    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"))
    run, legal, security = _waiting(hz)
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        body = {"action": "approve", "request_id": legal.id}
        first = api.decide(run.id, body, token=ALICE, headers={"Idempotency-Key": "k-1"})
        again = api.decide(run.id, body, token=ALICE, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == 201 and again.status_code == 200, (first.text, again.text)
    assert again.json()["duplicate"] is True
    assert again.json()["still_pending"] == first.json()["still_pending"]
    assert [(r["id"], r["point"]) for r in again.json()["still_pending"]] == [(security.id, "security")]


def test_the_run_page_confirms_a_resubmitted_form_with_what_the_run_still_waits_on(db_url: str) -> None:
    from bot.inbound.web import Signer, web_router
    from tests.bot.web.conftest import Browserless
    from tests.bot.web.scenario import web_settings

    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"))
    run, legal, security = _waiting(hz)
    settings = web_settings()
    with LiveServer(create_app(hz, routers=[web_router(hz, settings)])) as server:
        client = Browserless(server.url)
        assert client.get(f"/runs/{run.id}?t={Signer(settings).token(run.id, 'alice', minted_by='olga')}").status_code in (200, 303)
        page = client.get(f"/runs/{run.id}").text
        form = {"action": "approve", "csrf": re.search(r'name="csrf" value="([^"]+)"', page).group(1),
                "request_id": legal.id, "nonce": re.search(r'name="nonce" value="([^"]+)"', page).group(1)}
        flashes = []
        for _ in range(2):  # the same form sent twice (a double click, a browser's resubmission)
            assert client.post(f"/runs/{run.id}/decide", data=form).status_code == 303
            flashes.append(re.search(r'<p class="flash"[^>]*>([^<]*)</p>',
                                     client.get(f"/runs/{run.id}").text).group(1))
    still = f"still waiting on: security (steering request {security.id})"
    assert all(still in f for f in flashes), flashes
