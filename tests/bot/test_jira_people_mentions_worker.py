"""Approvers listed as people are mentioned by their Jira identities in every process that delivers (``hazel
worker``, a CLI command delivering its own run's notifications), not only where the webhook router is built."""

from __future__ import annotations

import io
from pathlib import Path

import responses
from rich.console import Console

from store.models import Approvers
from bot.engine.registry import Registry
from bot.ops.scheduler import Scheduler
from bot.server.app import HazelApp
from bot.server.wiring import channels_from_settings
from bot.settings import Settings
from integrations.console import ConsoleChannel
from tests.bot.test_jira_fresh_user_b import HOUR, Clock, timed, waiting_issue
from tests.support.fake_jira import FakeJira


def test_a_worker_without_the_webhook_router_mentions_people_by_their_jira_user(db_url: str,
                                                                                tmp_path: Path) -> None:
    people = tmp_path / "people.toml"
    people.write_text('[people.priya]\njira = ["priya.k"]\n', encoding="utf-8")
    wf = timed(approvers=Approvers(people=("priya",)), remind_after_sec=HOUR)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake = FakeJira(rsps, cloud=False)
        config = Settings(HAZEL_DATABASE_URL=db_url, JIRA_URL=fake.base, JIRA_PAT=fake.client_kwargs()["pat"],
                          HAZEL_PEOPLE_FILE=str(people))
        registry = Registry()
        registry.add(wf)
        clock = Clock()
        hazel = HazelApp(config, registry=registry, load_workflows=False, clock=clock,  # as `hazel worker` builds it
                         console=ConsoleChannel(console=Console(file=io.StringIO(), width=120)),
                         channels=channels_from_settings(config))
        hazel.prepare()
        try:
            _run_id, issue = waiting_issue(hazel, fake)
            assert "*Who may decide:* priya ([~priya.k])" in issue["fields"]["description"]
            assert fake.watchers.get(issue["id"]) == ["priya.k"]
            clock.advance(HOUR)
            assert len(Scheduler(hazel).tick().reminders) == 1
            hazel.deliverer.deliver_due()
            (reminder,) = [b for b in fake.bodies(issue["id"]) if b.startswith("Reminder:")]
            assert reminder.startswith("Reminder: this request is still waiting for priya ([~priya.k]) ")
        finally:
            hazel.close()
