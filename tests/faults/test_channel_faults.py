"""Channel faults, reported as counts: the Slack fake answering 500 and 429 for a while, Jira unreachable for a
while. Notifications wait in the outbox and are delivered once the channel is back: every steering request is
posted exactly once, every run completes, no decision is lost."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import requests

from store.models import Actor, RunStatus
from tests.bot.slack.conftest import DEPLOYS, MIGRATIONS, PRIYA, SlackEnv, example
from tests.support.fake_slack import FakeSlack
from tests.support.jira_env import jira_env
from tests.support.waiting import wait_until

N_RUNS = 12


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    for name in ("HAZEL_LLM_BASE_URL", "HAZEL_LLM_API_KEY", "HAZEL_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))


@pytest.mark.slow
def test_slack_answering_500_and_429_for_a_while(db_url: str) -> None:
    fake = FakeSlack(channels={"migrations": MIGRATIONS, "deploys": DEPLOYS}).start()
    env = SlackEnv(db_url, [example()], fake, max_retries=1)
    hazel = env.hazel
    hazel.deliverer.backoff_sec, hazel.deliverer.max_backoff_sec = 0.2, 1.0
    sme = Actor(id=PRIYA, channel="slack", name="priya")
    try:
        env.run_in_background()
        # Slack is down: every post fails with 500, every update is rate limited
        fake.fail("chat.postMessage", status=500, times=None)
        fake.fail("chat.update", status=429, retry_after_sec=1, times=None)
        run_ids = [hazel.start(workflow="migration-plan", input={"request": f"change {i}"}, actor=sme).id for i in range(N_RUNS)]
        wait_until(lambda: all(hazel.pending_request(run_id=r) for r in run_ids), 30, "every run to wait at the plan")
        wait_until(lambda: len(fake.calls_to("chat.postMessage", ok=False)) >= 2 * N_RUNS, 30,
                   "a while: several delivery attempts to fail (as many as two per request)")
        assert not any(hazel.pending_request(run_id=r).message_ref for r in run_ids), "nothing could be posted"
        failed_posts = len(fake.calls_to("chat.postMessage", ok=False))
        fake.clear_failures()

        # steer every run to the end; midway Slack rate-limits everything again for a while
        for round_no in range(3):
            wait_until(lambda: all(hazel.pending_request(run_id=r) is not None and hazel.pending_request(run_id=r).message_ref
                                   for r in run_ids), 60, f"every request of round {round_no} to be posted")
            if round_no == 1:
                fake.fail("chat.postMessage", status=429, retry_after_sec=1, times=None)
                fake.fail("chat.update", status=500, times=None)
            for rid in run_ids:
                hazel.decide(run_id=rid, action="approve", actor=sme)
            if round_no == 1:
                time.sleep(1.0)
                fake.clear_failures()
        wait_until(lambda: all(hazel.get(run_id=r).status is RunStatus.COMPLETED for r in run_ids), 60,
                   "every run to complete")
        def outbox_pending() -> list:
            with hazel.store.read() as tx:
                return tx.outbox.list(status="pending")

        wait_until(lambda: not outbox_pending(), 30, "the outbox to drain")
        requests_all = [req for rid in run_ids for req in hazel.requests(run_id=rid)]
        top_level = Counter()
        for call in fake.calls_to("chat.postMessage", ok=True):
            if not call.params.get("thread_ts"):
                top_level[call.params.get("channel")] += 1
        with hazel.store.read() as tx:
            dead = tx.outbox.list(status="dead")
        report = {
            "runs": N_RUNS,
            "runs completed": sum(1 for r in run_ids if hazel.get(run_id=r).status is RunStatus.COMPLETED),
            "steering requests": len(requests_all),
            "requests never posted": sum(1 for r in requests_all if not r.message_ref),
            "request messages posted": sum(top_level.values()),
            "decisions recorded": sum(len(hazel.decisions(run_id=r)) for r in run_ids),
            "posts refused while Slack was failing": failed_posts,
            "notifications dead": len(dead),
        }
        print("\nslack fault report:", report)
        assert report["runs completed"] == N_RUNS
        assert report["steering requests"] == 3 * N_RUNS and report["requests never posted"] == 0
        assert report["request messages posted"] == report["steering requests"], "each request posted once"
        assert report["decisions recorded"] == 3 * N_RUNS and report["notifications dead"] == 0
        assert failed_posts >= N_RUNS
    finally:
        env.close()
        fake.stop()


@pytest.mark.slow
def test_jira_unreachable_for_a_while(db_url: str) -> None:
    with jira_env(db_url) as env:
        hazel = env.hazel
        env.fake.fail("GET", r".*", times=40, exception=requests.ConnectionError("connection refused"))
        env.fake.fail("POST", r".*", times=40, exception=requests.ConnectionError("connection refused"))
        run_ids = [env.start(f"change number {i}") for i in range(N_RUNS)]  # each now waits at the Jira review
        assert not env.fake.issues, "Jira is unreachable: no issue yet"
        attempts = 0
        while any(not hazel.pending_request(run_id=r).message_ref for r in run_ids):
            attempts += 1
            assert attempts < 200, "the outbox never got the issues created"
            env.clock.advance(700)  # past the longest backoff
            hazel.deliverer.deliver_due()
        for rid in run_ids:  # approve by transition, then sign off by comment
            issue = env.issue(rid)
            assert env.send(env.transition(issue, "Approved")).json()["decided"] == "approve"
            env.drive(rid)
            assert env.send(env.comment(env.issue(rid), "/approve")).json()["decided"] == "approve"
            env.drive(rid)
        with hazel.store.read() as tx:
            failed = [e for rid in run_ids for e in tx.events.for_run(rid) if e.action == "outbox.failed"]
            dead = tx.outbox.list(status="dead")
        report = {
            "runs": N_RUNS,
            "runs completed": sum(1 for r in run_ids if hazel.get(run_id=r).status is RunStatus.COMPLETED),
            "issues created": len(env.fake.issues),
            "issues expected": 2 * N_RUNS,
            "deliveries that failed at first": len(failed),
            "notifications dead": len(dead),
        }
        print("\njira fault report:", report)
        assert report["runs completed"] == N_RUNS
        assert report["issues created"] == report["issues expected"], "one issue per request, none doubled"
        assert report["deliveries that failed at first"] >= 1 and report["notifications dead"] == 0
