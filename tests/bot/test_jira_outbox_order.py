"""The issue of a steering request whose creation Jira carried out but never answered, decided from the CLI
before the retry, is found by its labels and adopted by that retry, then gets the outcome (a comment and the
transition) and the run's progress: the outbox delivers a run's messages to one channel in order."""

from __future__ import annotations

from integrations.jira.channel import request_label
from store.models import RequestStatus
from tests.support.jira_env import OPERATOR, jira_env


def test_an_issue_whose_answer_was_lost_is_adopted_and_closed_after_a_cli_decision(db_url: str) -> None:
    with jira_env(db_url) as env:
        env.fake.fail("POST", r"^/issue$", status=504, after=True)  # created, but the answer is lost
        run_id = env.start()  # waits at the scripts review in jira:MIG; its issue's retry is not due yet
        review = env.pending(run_id)
        assert review is not None and review.message_ref is None and len(env.fake.issues) == 1
        [issue] = env.fake.issues.values()

        env.hazel.decide(run_id=run_id, action="approve", actor=OPERATOR)  # from the CLI, before the retry
        env.drive(run_id)  # on to the sign-off (jira:MIG too): nothing may overtake the review's issue
        assert len(env.fake.issues) == 1 and env.fake.bodies(issue["id"]) == []
        for _ in range(3):
            env.clock.advance(3600)
            env.hazel.deliverer.deliver_due()

        with env.hazel.store.read() as tx:
            settled = tx.requests.get(review.id)
            assert settled is not None and settled.status is RequestStatus.DECIDED
            assert (settled.message_ref or {}).get("issue_id") == issue["id"], "adopted"
            assert [m for m in tx.outbox.list(run_id=run_id) if m.status.value != "sent"] == []
        mine = [i for i in env.fake.issues.values() if request_label(review.id) in i["fields"]["labels"]]
        assert mine == [issue], "one issue for the review"
        assert env.fake.status(issue["id"]) == "Done", "moved to the done status"
        bodies = env.fake.bodies(issue["id"])
        assert any("approved" in b.lower() for b in bodies), bodies  # the outcome
        assert len(bodies) >= 2, bodies  # and the run's progress
        sign_off = env.pending(run_id)
        assert sign_off is not None and sign_off.point == "sign_off" and sign_off.message_ref["issue_id"] != issue["id"]
