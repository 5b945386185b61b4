"""A whole Hazel with Slack for tests: the database (``db_url``: SQLite and PostgreSQL), the fake Slack Web API,
the FastAPI app with ``POST /slack/events`` served over real HTTP, and a sender of signed Slack requests."""

from __future__ import annotations

import io
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest
from rich.console import Console

from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.settings import Settings
from bot.inbound.slack import slack_routers
from bot.server.http import create_app
from bot.ops.worker import WorkerPool
from bot.engine.workflow import Workflow
from examples import migration_plan
from integrations.console import ConsoleChannel
from integrations.slack import SlackChannel
from integrations.slack.client import make_client
from store.models import Approvers, SteeringRequest
from tests.support.fake_slack import FakeSlack, Message
from tests.support.live import LiveServer
from tests.support.slack_payloads import SlackSender

if TYPE_CHECKING:
    from tests.support.jira_env import Clock

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PRIYA = "U0000000001"      # approver by user id
SAM = "U0000000003"        # approver through the user group S0000000001
OUTSIDER = "U0000000005"   # in the channel, not an approver
STARTER = "U0000000009"    # starts runs
DBA = "S0000000001"
MIGRATIONS, DEPLOYS = "C0000000001", "C0000000002"
APPROVERS = Approvers(slack_users=(PRIYA,), slack_usergroups=(DBA,))


def example(**kwargs: Any) -> Workflow:
    """The example workflow with every steering point in Slack."""
    kwargs.setdefault("approvers", APPROVERS)
    return migration_plan.build(plan_channel="slack:#migrations", review_channel="slack:#migrations",
                                signoff_channel="slack:#deploys", **kwargs)


class SlackEnv:
    """Hazel + fake Slack + the app on a live HTTP server."""

    def __init__(self, db_url: str, workflows: list[Workflow], fake: FakeSlack, *,
                 clock: Callable[[], datetime] | None = None, max_retries: int = 2) -> None:
        self.fake = fake
        registry = Registry()
        for wf in workflows:
            registry.add(wf)
        self.settings = Settings(HAZEL_DATABASE_URL=db_url, SLACK_BOT_TOKEN=fake.bot_token,
                                 SLACK_SIGNING_SECRET=SECRET, HAZEL_SLACK_API_URL=fake.api_url)
        self.channel = SlackChannel(make_client(fake.bot_token, base_url=fake.api_url, backoff_sec=0.01,
                                                max_retries=max_retries))
        self.console_out = io.StringIO()
        self.hazel = Hazel(self.settings, registry=registry, load_workflows=False, channels={"slack": self.channel},
                           console=ConsoleChannel(console=Console(file=self.console_out, width=120)),
                           **({"clock": clock} if clock else {}))
        self.hazel.prepare()
        self.server = LiveServer(create_app(self.hazel, routers=slack_routers(self.hazel, self.settings,
                                                                               channel=self.channel)))  # (as
        # hazel serve wires it: the channel refreshes Home tabs after it posts or updates a request)
        self.server.__enter__()
        self.sender = SlackSender(self.server.url + "/slack/events", SECRET, fake)
        self.pool: WorkerPool | None = None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.stop()
        self.sender.close()
        self.server.__exit__(None, None, None)
        self.hazel.close()

    def run_in_background(self) -> None:
        """Workers and outbox delivery in threads, as ``hazel serve`` runs them."""
        self.pool = WorkerPool(self.hazel, threads=2, sweep_sec=0.2)
        self.pool.start()
        self.hazel.deliverer.start(sweep_sec=0.1)

    def settle(self) -> None:
        """Without background threads: execute ready runs and deliver what is due, here."""
        pool = WorkerPool(self.hazel, threads=1)
        while pool.drain():
            pass
        self.hazel.deliverer.deliver_due()

    def start(self, workflow: str = "migration-plan", data: dict | None = None, *, by: str = STARTER) -> str:
        """Start a run through ``/hazel start`` and return its id."""
        import json

        response = self.sender.command(by, f"start {workflow} {json.dumps(data or {'request': 'split full_name'})}")
        assert response.status_code == 200, response.text
        text = response.json()["text"]
        assert "Started run" in text, text
        return text.split("`")[1]

    def pending(self, run_id: str) -> SteeringRequest | None:
        return self.hazel.pending_request(run_id=run_id)

    def at_artefacts_review(self) -> str:
        """Start a run of the example, have priya approve its plan by a click, and return the run's id once
        it waits at ``review_artefacts``."""
        run_id = self.start()
        self.settle()
        self.sender.click(PRIYA, "approve", self.request_message(run_id, "review_plan"), name="priya")
        self.wait(lambda: self.hazel.decisions(run_id=run_id), "priya's approval")
        self.settle()
        return run_id

    def wait(self, predicate: Callable[[], Any], what: str, timeout_sec: float = 15.0) -> Any:
        return self.fake.wait_for(predicate, what=what, timeout_sec=timeout_sec)

    def request_message(self, run_id: str, point: str | None = None) -> Message:
        """The Slack message of the run's pending request (waits until it is posted)."""
        def posted() -> SteeringRequest | None:
            r = self.pending(run_id)
            ok = r is not None and r.message_ref and (point is None or r.point == point)
            return r if ok else None

        request = self.wait(posted, f"the request {point or ''} of run {run_id} to be posted")
        return self.fake.message(request.message_ref["channel"], request.message_ref["ts"])

    def open_form(self, user: str, action: str, message: Message, *, name: str | None = None,
                  payload: Callable[[], dict] | None = None) -> dict:
        """``user`` clicks the ``action`` button of ``message`` (or sends what ``payload()`` makes, a click of
        its own); the modal it opened. Slack lets a click open a form within 3 seconds of it (the fake too:
        ``expired_trigger_id``), and a loaded machine can take longer: Hazel then tells the person to click
        again, and the click is made again, as they would."""
        told = "Slack did not let me open the form in time"
        for _ in range(3):
            views, ephemerals = len(self.fake.views), len(self.fake.ephemerals_for(user))
            if payload is None:
                self.sender.click(user, action, message, name=name)
            else:
                self.sender.send_payload(payload())
            opened = self.wait(lambda: next((v for v in self.fake.views[views:]
                                             if v["callback_id"] == f"hazel_{action}"), None)
                               or any(told in e["text"] for e in self.fake.ephemerals_for(user)[ephemerals:]),
                               f"the hazel_{action} modal to open")
            if opened is not True:
                return opened
        raise AssertionError(f"the hazel_{action} modal expired three times")

    def ephemeral(self, user: str, contains: str) -> dict:
        return self.wait(lambda: next((e for e in self.fake.ephemerals_for(user) if contains in e["text"]), None),
                         f"an ephemeral for {user} containing {contains!r}")


@pytest.fixture
def make_env(db_url: str, tmp_path, monkeypatch) -> Iterator[Callable[..., SlackEnv]]:  # noqa: ANN001
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))
    made: list[tuple[SlackEnv, FakeSlack]] = []

    def make(*workflows: Workflow, clock: Callable[[], datetime] | None = None, max_retries: int = 2,
             fake: FakeSlack | None = None, **fake_kwargs: Any) -> SlackEnv:
        """``fake``: the Slack of an earlier env of the test (its messages kept), e.g. a Hazel started again."""
        own = fake is None
        if fake is None:
            fake = FakeSlack(channels={"migrations": MIGRATIONS, "deploys": DEPLOYS},
                             usergroups={DBA: [SAM, "U0000000004"]}, **fake_kwargs).start()
        env = SlackEnv(db_url, list(workflows) or [example()], fake, clock=clock, max_retries=max_retries)
        made.append((env, fake if own else None))
        return env

    yield make
    for env, fake in made:
        env.close()
        if fake is not None:
            fake.stop()


def post_answer_lost(make_env: Callable[..., SlackEnv]) -> "tuple[SlackEnv, Clock, str]":
    """The example started under a settable clock, its first request's post made by Slack but its answer lost
    (the client times out after 1 s, Slack answers after 3): ``(env, clock, run_id)``, the post's retry not due
    yet."""
    from tests.support.jira_env import Clock

    clock = Clock()
    env = make_env(clock=clock)
    env.channel.client.timeout = 1  # production: 10 s
    env.fake.lose_answers("chat.postMessage", stall_sec=3)
    run_id = env.start()
    env.settle()
    return env, clock, run_id


def driven_to_its_request(make_env: Callable[..., SlackEnv]) -> "tuple[SlackEnv, Clock, str, WorkerPool]":
    """The example started under a settable clock and driven to its first request by a one-thread pool, whose
    post is not delivered yet: ``(env, clock, run_id, pool)``."""
    from tests.support.jira_env import Clock

    clock = Clock()
    env = make_env(clock=clock)
    run_id = env.start()
    pool = WorkerPool(env.hazel, threads=1)
    while pool.drain():
        pass
    return env, clock, run_id, pool


def claim_request_post(env: SlackEnv, clock: Callable[[], datetime]) -> Any:
    """Claim the run's ``request.opened`` message as a deliverer does (lease 60 s), and return it: a process
    that is sending it, or died doing so."""
    with env.hazel.store.transaction() as tx:
        [claimed] = [m for m in tx.outbox.claim_due(now=clock(), lease_sec=60) if m.kind == "request.opened"]
    return claimed
