"""A decision delivered again (the same delivery id: a REST ``Idempotency-Key``, Slack's or Jira's retry) is
answered as it was first: a quorum vote that did not settle its request says ``settled: false`` again, also
once another person's vote settled the request (it said ``true``: the request as it is now)."""

from __future__ import annotations

from pydantic import BaseModel

from bot.engine.workflow import Workflow
from hazel import StepContext
from store.models import Approvers
from tests.support.engine import make_hazel, person


class Change(BaseModel):
    shipped: bool = False


def quorum() -> Workflow:
    wf = Workflow("pair", version=1, state=Change)

    @wf.step
    def prepare(state: Change, ctx: StepContext) -> Change:
        return state

    wf.steer("sign_off", actions=["approve", "reject"], approvers=Approvers(users=("priya", "alice")),
             approvals_required=2)

    @wf.step
    def ship(state: Change, ctx: StepContext) -> Change:
        return Change(shipped=True)

    return wf


def test_a_replayed_vote_says_whether_it_settled_the_request(db_url: str) -> None:
    hazel = make_hazel(db_url, quorum())
    run = hazel.start(workflow="pair", input={}, actor=person("sam"), claim=True)
    hazel.drive(run_id=run.id)
    first = hazel.decide(run_id=run.id, action="approve", actor=person("priya"), delivery_id="vote-1")
    assert first.settled is False and not first.duplicate
    second = hazel.decide(run_id=run.id, action="approve", actor=person("alice"), delivery_id="vote-2")
    assert second.settled is True
    again = hazel.decide(run_id=run.id, action="approve", actor=person("priya"), delivery_id="vote-1")
    assert again.duplicate and again.settled is False, again
    assert again.next_node is None  # (it wrote no checkpoint: the settling vote did)
    settling = hazel.decide(run_id=run.id, action="approve", actor=person("alice"), delivery_id="vote-2")
    assert settling.duplicate and settling.settled is True and settling.next_node == "ship", settling
