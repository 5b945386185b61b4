"""A Hazel wired for Jira as ``hazel serve`` wires it (settings -> ``channels_from_settings`` /
``http_routers`` -> ``create_app``), served over real HTTP, talking to a fake Jira (``responses``)."""

from __future__ import annotations

import io
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Iterator

import httpx
import responses
from rich.console import Console

from bot.engine.registry import Registry
from bot.engine.workflow import Workflow
from bot.server.app import HazelApp as Hazel
from bot.settings import Settings
from bot.server.http import create_app
from bot.server.wiring import channels_from_settings, http_routers
from examples.migration_plan import build
from integrations.console import ConsoleChannel
from store.models import Actor, Approvers, Run, SteeringRequest
from tests.support import jira_payloads
from tests.support.fake_jira import FakeJira
from tests.support.live import LiveServer

SECRET = "jira-webhook-secret-for-tests"
OPERATOR = Actor(id="priya", channel="console", name="priya")


def people(cloud: bool) -> dict[str, str]:
    """The test's Jira people: account ids on Cloud, user names on Server."""
    if cloud:
        return {"sme": "557058:sme-sam", "lead": "557058:lead-lee", "stranger": "557058:stranger-stu"}
    return {"sme": "sam.sme", "lead": "lee.lead", "stranger": "stu.stranger"}


class Clock:
    """A settable UTC clock for the engine (outbox retry times)."""

    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class JiraEnv:
    hazel: Hazel
    fake: FakeJira
    url: str
    cloud: bool
    who: dict[str, str]
    clock: Clock

    def send(self, payload: Any, *, secret: str | None = SECRET, **kw: Any) -> httpx.Response:
        return jira_payloads.send(self.url + "/jira/webhook", payload, secret=secret, **kw)

    def start(self, request: str = "rename users.email to users.email_address") -> str:
        """Start the example and approve its plan on the console: it then waits at the scripts review (Jira)."""
        run = self.hazel.start(workflow="migration-plan", input={"request": request}, actor=OPERATOR)
        self.hazel.drive(run_id=run.id)
        self.hazel.decide(run_id=run.id, action="approve", actor=OPERATOR)
        self.drive(run.id)
        return run.id

    def drive(self, run_id: str) -> Run:
        result = self.hazel.drive(run_id=run_id)
        self.hazel.deliverer.deliver_due()
        assert result.run is not None
        return result.run

    def pending(self, run_id: str) -> SteeringRequest | None:
        return self.hazel.pending_request(run_id=run_id)

    def issue(self, run_id: str) -> dict[str, Any]:
        """The fake issue of the run's pending request."""
        request = self.pending(run_id)
        assert request is not None and request.message_ref, "the request has no issue"
        return self.fake.issue(request.message_ref["issue_id"])

    def comment(self, issue: dict[str, Any], body: str, person: str = "sme", **kw: Any) -> dict[str, Any]:
        return jira_payloads.comment_event(issue, body, self.who.get(person, person), cloud=self.cloud,
                                           base=self.fake.base, **kw)

    def transition(self, issue: dict[str, Any], to: str, person: str = "sme", **kw: Any) -> dict[str, Any]:
        before = self.fake.set_status(issue["id"], to)
        return jira_payloads.transition_event(issue, to, before, self.who.get(person, person), cloud=self.cloud,
                                              base=self.fake.base, **kw)


@contextmanager
def jira_env(db_url: str, *, cloud: bool = True, approvers: Approvers | None = None,
             secret: str | None = SECRET, base: str | None = None, first_issue_id: int = 10001,
             rsps: responses.RequestsMock | None = None, workflows: Iterable[Workflow] = (),
             **settings: Any) -> Iterator[JiraEnv]:
    """The example workflow with its scripts review and sign-off on ``jira:MIG`` (plan review on the console),
    approvers: the SME by id and the ``dba`` group (unless ``approvers`` says otherwise), and ``workflows``
    besides; the fake Jira site at ``base`` (default: the fake's), numbering its issues from ``first_issue_id``;
    two sites in one test share one ``rsps`` (``responses`` mocks do not nest)."""
    who = people(cloud)
    approvers = approvers or Approvers(jira_users=(who["sme"],), jira_groups=("dba",))
    with (nullcontext(rsps) if rsps is not None else responses.RequestsMock(assert_all_requests_are_fired=False)) as rsps:
        fake = FakeJira(rsps, cloud=cloud, base=base, first_id=first_issue_id)
        auth = fake.client_kwargs()
        config = Settings(HAZEL_DATABASE_URL=db_url, JIRA_URL=fake.base, JIRA_WEBHOOK_SECRET=secret,
                          JIRA_USER=auth.get("user"), JIRA_API_TOKEN=auth.get("api_token"), JIRA_PAT=auth.get("pat"),
                          **settings)
        assert config.jira_configured and config.jira_cloud is cloud
        registry = Registry()
        registry.add(build(plan_channel="console", review_channel="jira:MIG", signoff_channel="jira:MIG",
                           approvers=approvers))
        for wf in workflows:
            registry.add(wf)
        clock = Clock()
        console = ConsoleChannel(console=Console(file=io.StringIO(), width=120))
        hazel = Hazel(config, registry=registry, load_workflows=False, console=console, clock=clock,
                      channels=channels_from_settings(config))
        hazel.prepare()
        app = create_app(hazel, routers=http_routers(hazel, config))
        try:
            with LiveServer(app) as server:
                yield JiraEnv(hazel=hazel, fake=fake, url=server.url, cloud=cloud, who=who, clock=clock)
        finally:
            hazel.close()
