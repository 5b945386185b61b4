"""Steering decisions through the engine: approve, quorum, edit, reject, feedback, rewind, permissions."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from hazel import Approvers, StepContext, Workflow
from bot.engine.errors import (
    AlreadyDecidedError,
    CheckpointNotFoundError,
    InvalidDecisionError,
    InvalidInputError,
    NotAllowedError,
    RunNotFoundError,
)
from store.models import REWIND_NODE
from store.models import RequestStatus, RunStatus
from tests.support.engine import make_hazel, person


class Plan(BaseModel):
    request: str
    plan: str = ""
    limits: dict[str, int] = Field(default_factory=dict)
    seen_feedback: list[str] = Field(default_factory=list)
    seen_rejections: list[str] = Field(default_factory=list)
    done: bool = False


def planner(*, quorum: int = 1, self_ok: bool = True, on_reject: str | None = None,
            approvers: Approvers | None = None, actions=("approve", "edit", "reject", "feedback", "rewind")):
    wf = Workflow("planner", version=1, state=Plan)

    @wf.step
    def draft(state: Plan, ctx: StepContext) -> Plan:
        seen = [*state.seen_feedback, f"{ctx.feedback_by}:{ctx.feedback}"] if ctx.feedback else state.seen_feedback
        rej = [*state.seen_rejections, ctx.rejection] if ctx.rejection else state.seen_rejections
        return state.model_copy(update={"plan": f"plan {len(seen)}/{len(rej)} for {state.request}",
                                        "seen_feedback": seen, "seen_rejections": rej})

    wf.steer("review", show="plan", approvals_required=quorum, allow_self_approval=self_ok, on_reject=on_reject,
             approvers=approvers, actions=list(actions))

    @wf.step
    def finish(state: Plan, ctx: StepContext) -> Plan:
        return state.model_copy(update={"done": True})

    return wf


def start_waiting(hazel, who: str = "author"):  # noqa: ANN001, ANN201
    run = hazel.start(workflow="planner", input={"request": "move"}, actor=person(who))
    result = hazel.drive(run_id=run.id)
    assert result.run.status is RunStatus.WAITING and result.steps == ["draft"]
    return run.id


def test_approve_continues_to_completion(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    outcome = hazel.decide(run_id=run_id, action="approve", actor=person("sme"))
    assert outcome.settled and outcome.run_status is RunStatus.READY and outcome.next_node == "finish"
    result = hazel.drive(run_id=run_id)
    assert result.steps == ["finish"] and result.run.status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run_id).done is True
    steps = [(c.step, c.next_step) for c in hazel.checkpoints(run_id=run_id)]
    assert steps == [("__start__", "draft"), ("draft", "review"), ("review", "finish"), ("finish", None)]
    assert hazel.pending_request(run_id=run_id) is None


def test_quorum_waits_for_distinct_approvers(db_url: str) -> None:
    hazel = make_hazel(db_url, planner(quorum=2))
    run_id = start_waiting(hazel)
    first = hazel.decide(run_id=run_id, action="approve", actor=person("ann"))
    assert not first.settled and first.request.approvals == 1 and first.run_status is RunStatus.WAITING
    with pytest.raises(AlreadyDecidedError, match="ann already approved this request through console .ann. at .*one person has one vote"):
        hazel.decide(run_id=run_id, action="approve", actor=person("ann"))
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING
    second = hazel.decide(run_id=run_id, action="approve", actor=person("bob"))
    assert second.settled and second.request.approvals == 2
    assert hazel.drive(run_id=run_id).run.status is RunStatus.COMPLETED
    with pytest.raises(AlreadyDecidedError, match="^already approved by bob at "):
        hazel.decide(run_id=run_id, action="approve", actor=person("cid"))


def test_second_decision_is_refused_with_who_and_when(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    request = hazel.pending_request(run_id=run_id)
    hazel.decide(run_id=run_id, action="reject", actor=person("ann"), payload={"reason": "no"}, request_id=request.id)
    with pytest.raises(AlreadyDecidedError) as info:
        hazel.decide(run_id=run_id, action="approve", actor=person("bob"), request_id=request.id)
    assert info.value.decided_by == "ann" and info.value.action == "reject" and info.value.decided_at is not None
    assert "already rejected by ann" in str(info.value)


def test_edit_validates_and_keeps_request_pending_when_invalid(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    before = hazel.checkpoints(run_id=run_id)
    with pytest.raises(InvalidDecisionError, match="plan: Input should be a valid string"):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={"value": {"not": "text"}})
    assert hazel.pending_request(run_id=run_id).status is RequestStatus.PENDING
    assert hazel.checkpoints(run_id=run_id) == before
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING
    outcome = hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={"value": "my better plan"})
    assert outcome.settled
    hazel.drive(run_id=run_id)
    assert hazel.state_at(run_id=run_id).plan == "my better plan"
    assert hazel.get(run_id=run_id).status is RunStatus.COMPLETED


def test_edit_under_quorum_asks_again_on_the_edited_version(db_url: str) -> None:
    hazel = make_hazel(db_url, planner(quorum=2))
    run_id = start_waiting(hazel)
    hazel.decide(run_id=run_id, action="edit", actor=person("ann"), payload={"value": "edited"})
    result = hazel.drive(run_id=run_id)
    assert result.steps == [] and result.run.status is RunStatus.WAITING
    request = hazel.pending_request(run_id=run_id)
    assert request.approvals == 0 and hazel.state_at(run_id=run_id, seq=request.checkpoint_seq).plan == "edited"


def test_reject_ends_the_run_or_routes_to_on_reject(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    with pytest.raises(InvalidDecisionError, match="needs a reason"):
        hazel.decide(run_id=run_id, action="reject", actor=person("sme"), payload={"reason": "  "})
    outcome = hazel.decide(run_id=run_id, action="reject", actor=person("sme"), payload={"reason": "wrong table"})
    assert outcome.run_status is RunStatus.REJECTED and hazel.get(run_id=run_id).status is RunStatus.REJECTED

    other = make_hazel(db_url, planner(on_reject="draft"))
    run2 = start_waiting(other)
    other.decide(run_id=run2, action="reject", actor=person("sme"), payload={"reason": "wrong table"})
    result = other.drive(run_id=run2)
    assert result.steps == ["draft"] and result.run.status is RunStatus.WAITING
    assert other.state_at(run_id=run2).seen_rejections == ["wrong table"]


def test_feedback_goes_to_the_drafting_step_with_the_text(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    hazel.decide(run_id=run_id, action="feedback", actor=person("sme"), payload={"text": "use batches"})
    result = hazel.drive(run_id=run_id)
    assert result.steps == ["draft"] and result.run.status is RunStatus.WAITING
    assert hazel.state_at(run_id=run_id).seen_feedback == ["sme:use batches"]
    cps = hazel.checkpoints(run_id=run_id)
    assert cps[2].step == "review" and cps[2].handoff == {"feedback": "use batches", "by": "sme"}


def test_rewind_forks_and_keeps_the_old_branch(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    hazel.decide(run_id=run_id, action="approve", actor=person("sme"))
    hazel.drive(run_id=run_id)
    old = hazel.checkpoints(run_id=run_id)
    assert hazel.get(run_id=run_id).status is RunStatus.COMPLETED

    outcome = hazel.rewind(run_id=run_id, actor=person("sme"), to="draft", feedback="start over", edits={"request": "copy"})
    assert outcome.run_status is RunStatus.READY
    result = hazel.drive(run_id=run_id)
    assert result.steps == ["draft"] and result.run.status is RunStatus.WAITING
    cps = hazel.checkpoints(run_id=run_id)
    assert cps[: len(old)] == old  # the abandoned branch stays, unchanged
    rewind_cp = cps[len(old)]
    assert rewind_cp.step == REWIND_NODE and rewind_cp.parent_seq == 0 and rewind_cp.branch == 1
    assert cps[-1].parent_seq == rewind_cp.seq and cps[-1].branch == 1
    state = hazel.state_at(run_id=run_id)
    assert state.request == "copy" and state.seen_feedback == ["sme:start over"] and not state.done

    # rewinding to a waiting point by number re-asks; with feedback it goes to the drafting step
    target = cps[-1].seq
    hazel.rewind(run_id=run_id, actor=person("sme"), to=target)
    assert hazel.drive(run_id=run_id).run.status is RunStatus.WAITING
    with pytest.raises(CheckpointNotFoundError):
        hazel.rewind(run_id=run_id, actor=person("sme"), to=999)
    with pytest.raises(CheckpointNotFoundError, match="never reached"):
        hazel.rewind(run_id=run_id, actor=person("sme"), to="nope")
    with pytest.raises(InvalidDecisionError):
        hazel.rewind(run_id=run_id, actor=person("sme"), to="draft", edits={"limits": "not a dict"})


def test_rewind_settles_the_pending_request(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    request = hazel.pending_request(run_id=run_id)
    hazel.rewind(run_id=run_id, actor=person("sme"), to=0)
    with pytest.raises(AlreadyDecidedError, match="rewound by sme"):
        hazel.decide(run_id=run_id, action="approve", actor=person("bob"), request_id=request.id)


def test_self_approval_ban(db_url: str) -> None:
    hazel = make_hazel(db_url, planner(self_ok=False))
    run_id = start_waiting(hazel, who="author")
    with pytest.raises(NotAllowedError, match="self-approval"):
        hazel.decide(run_id=run_id, action="approve", actor=person("author"))
    with pytest.raises(NotAllowedError):
        hazel.decide(run_id=run_id, action="edit", actor=person("author"), payload={"value": "x"})
    hazel.decide(run_id=run_id, action="feedback", actor=person("author"), payload={"text": "I may still comment"})
    audit = [e.action for e in hazel.audit(run_id=run_id)]
    assert audit.count("decision.refused") == 2


def test_permissions_limit_who_decides(db_url: str) -> None:
    hazel = make_hazel(db_url, planner(approvers=Approvers(users=("ann",))))
    run_id = start_waiting(hazel)
    with pytest.raises(NotAllowedError, match="only ann may"):
        hazel.decide(run_id=run_id, action="approve", actor=person("mallory"))
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING
    refused = [e for e in hazel.audit(run_id=run_id) if e.action == "decision.refused"]
    assert refused and refused[0].actor_id == "mallory"
    hazel.decide(run_id=run_id, action="approve", actor=person("ann"))


def test_disallowed_action_and_bad_input(db_url: str) -> None:
    hazel = make_hazel(db_url, planner(actions=("approve", "reject")))
    run_id = start_waiting(hazel)
    with pytest.raises(InvalidDecisionError, match="not allowed"):
        hazel.decide(run_id=run_id, action="feedback", actor=person("sme"), payload={"text": "x"})
    with pytest.raises(RunNotFoundError):
        hazel.decide(run_id="nope", action="approve", actor=person("sme"))
    with pytest.raises(InvalidInputError, match="request"):
        hazel.start(workflow="planner", input={"request": 5}, actor=person("sme"))
    with pytest.raises(InvalidInputError, match="unknown field 'reqest'"):
        hazel.start(workflow="planner", input={"request": "x", "reqest": "typo"}, actor=person("sme"))
    with pytest.raises(ValueError):
        hazel.decide(run_id=run_id, action="dance", actor=person("sme"))
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING


def test_duplicate_delivery_decides_once(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    first = hazel.decide(run_id=run_id, action="feedback", actor=person("sme"), payload={"text": "again"}, delivery_id="d-1")
    again = hazel.decide(run_id=run_id, action="feedback", actor=person("sme"), payload={"text": "again"}, delivery_id="d-1")
    assert not first.duplicate and again.duplicate and again.decision.id == first.decision.id
    assert len(hazel.decisions(run_id=run_id)) == 1


def test_cancel_and_retry_states(db_url: str) -> None:
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    hazel.cancel(run_id=run_id, actor=person("sme"), reason="not needed")
    assert hazel.get(run_id=run_id).status is RunStatus.CANCELLED
    assert hazel.requests(run_id=run_id)[0].status is RequestStatus.CANCELLED
    with pytest.raises(AlreadyDecidedError, match="cancelled"):
        hazel.decide(run_id=run_id, action="approve", actor=person("sme"), request_id=hazel.requests(run_id=run_id)[0].id)
    from bot.engine.errors import RunStateError

    with pytest.raises(RunStateError):
        hazel.cancel(run_id=run_id, actor=person("sme"))
    with pytest.raises(RunStateError, match=r"is cancelled: nothing to retry \(rewind it to run it again from an earlier checkpoint\); retry resumes"):
        hazel.retry(run_id=run_id, actor=person("sme"))


@pytest.mark.parametrize("claim", [False, True])
def test_progress_is_reported_in_the_decided_requests_thread(db_url: str, claim: bool) -> None:
    """A run started and decided with ``claim`` keeps what it knows of its latest request in memory (no query);
    its progress messages must be the very ones a worker that reads them writes: none at the first request,
    the completion in the thread of the request that was decided."""
    hazel = make_hazel(db_url, planner())
    try:
        run = hazel.start(workflow="planner", input={"request": "move"}, actor=person("author"), claim=claim)
        hazel.drive(run_id=run.id)
        request = hazel.pending_request(run_id=run.id)
        assert request is not None
        hazel.decide(run_id=run.id, action="feedback", actor=person("sme"), payload={"text": "more"}, claim=claim)
        hazel.drive(run_id=run.id)
        second = hazel.pending_request(run_id=run.id)
        assert second is not None and second.id != request.id
        hazel.decide(run_id=run.id, action="approve", actor=person("sme"), claim=claim)
        assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
        with hazel.store.read() as tx:
            progress = [(m.payload["event"], m.request_id, m.channel)
                        for m in sorted(tx.outbox.list(run_id=run.id), key=lambda m: m.id) if m.kind == "run.progress"]
        assert progress == [("waiting", request.id, request.channel), ("completed", second.id, second.channel)]
    finally:
        hazel.close()


def test_a_rewind_naming_a_settled_request_says_so_while_the_run_executes(db_url: str) -> None:
    """The request was answered and the run is executing the step after it: a rewind pinned to that request
    is refused as already decided (who, how), not as "executing a step: rewind when it stops"."""
    hazel = make_hazel(db_url, planner())
    run_id = start_waiting(hazel)
    asked = hazel.requests(run_id=run_id)[-1].id
    hazel.decide(run_id=run_id, action="feedback", actor=person("sme"), payload={"text": "more"}, request_id=asked,
                 claim=True)  # leased to this process, its next step not executed yet: the run is running
    assert hazel.get(run_id=run_id).status is RunStatus.RUNNING
    with pytest.raises(AlreadyDecidedError, match="already answered with feedback by sme"):
        hazel.rewind(run_id=run_id, actor=person("sme"), to=0, request_id=asked)
    from bot.engine.errors import RunStateError

    with pytest.raises(RunStateError, match="executing a step"):  # unpinned: the run's state is the answer
        hazel.rewind(run_id=run_id, actor=person("sme"), to=0)


def test_the_console_operator_may_retry_or_cancel_only_as_a_person_who_may(db_url: str) -> None:
    """``HAZEL_OPERATOR=mallory hazel cancel R`` cancelled a run mallory neither started nor approves (the console
    was let through), while the same person was refused a rewind there and a cancel over REST. One rule on
    every channel: the operator acts for someone who may (``--as``) or is refused, recorded."""
    from bot.engine.errors import NotAllowedError

    hazel = make_hazel(db_url, planner(approvers=Approvers(users=["sme"])))
    run_id = start_waiting(hazel)
    with pytest.raises(NotAllowedError, match=f"mallory may not cancel run {run_id}: only sme may, or who started"):
        hazel.cancel(run_id=run_id, actor=person("mallory"), reason="x")
    with pytest.raises(NotAllowedError, match=f"mallory may not retry run {run_id}"):
        hazel.retry(run_id=run_id, actor=person("mallory"))
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING
    assert [e.detail.get("attempted") for e in hazel.audit(run_id=run_id) if e.action == "decision.refused"] == [
        "cancel", "retry"]
    as_sme = hazel.operator(acting_for="sme")
    hazel.cancel(run_id=run_id, actor=as_sme, reason="not needed")
    assert hazel.get(run_id=run_id).status is RunStatus.CANCELLED


def test_where_no_point_allows_rewinding_the_console_operator_may_not_rewind_either(db_url: str) -> None:
    """``HAZEL_OPERATOR=mallory hazel rewind R --to 2`` re-ran a completed run's side-effecting step (and put a
    cancelled run back to work) where no steering point allows rewinding, while REST and the run pages refused
    the same rewind to anyone, the run's starter included. One rule on every channel."""
    from bot.engine.errors import NotAllowedError

    hazel = make_hazel(db_url, planner(approvers=Approvers(users=["sme"]), actions=("approve", "reject")))
    run_id = start_waiting(hazel)
    hazel.decide(run_id=run_id, action="approve", actor=person("sme"), claim=True)
    assert hazel.drive(run_id=run_id).run.status is RunStatus.COMPLETED
    before = len(hazel.checkpoints(run_id=run_id))
    for who in ("mallory", "author", "sme"):
        with pytest.raises(NotAllowedError, match=f"^{who} may not rewind run {run_id}: no steering point of "
                                                  "planner v1 allows rewinding$"):
            hazel.rewind(run_id=run_id, actor=person(who), to=1)
    with pytest.raises(NotAllowedError, match="no steering point of planner v1 allows rewinding"):
        hazel.rewind(run_id=run_id, actor=hazel.operator(acting_for="sme"), to=1)
    assert hazel.get(run_id=run_id).status is RunStatus.COMPLETED and len(hazel.checkpoints(run_id=run_id)) == before

    cancelled = start_waiting(hazel)
    hazel.cancel(run_id=cancelled, actor=person("author"), reason="not needed")
    with pytest.raises(NotAllowedError, match="no steering point of planner v1 allows rewinding"):
        hazel.rewind(run_id=cancelled, actor=person("mallory"), to=1, claim=False)
    assert hazel.get(run_id=cancelled).status is RunStatus.CANCELLED


def test_a_run_of_a_workflow_without_steering_points_is_rewound_by_who_started_it(db_url: str) -> None:
    """No point says who may rewind: who started the run may (as they may retry or cancel it), on every channel;
    the console operator only as them."""
    from bot.engine.errors import NotAllowedError

    wf = Workflow("pipeline", version=1, state=Plan)

    @wf.step
    def one(state: Plan, ctx: StepContext) -> Plan:
        return state.model_copy(update={"plan": state.plan + "1"})

    @wf.step
    def two(state: Plan, ctx: StepContext) -> Plan:
        return state.model_copy(update={"plan": state.plan + "2"})

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="pipeline", input={"request": "x"}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    with pytest.raises(NotAllowedError, match=f"^mallory may not rewind run {run.id}: only who started the run "
                                              "may$"):
        hazel.rewind(run_id=run.id, actor=person("mallory"), to=1)
    outcome = hazel.rewind(run_id=run.id, actor=hazel.operator(acting_for="author"), to=1, claim=True)
    assert outcome.decision.person == "author"
    assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run.id).plan == "12"


def test_the_console_acting_for_someone_needs_their_right_not_the_operators(db_url: str) -> None:
    """A fresh-user finding (s30 F11): at a point whose approvers are Slack ids only, the console operator counts
    as an approver, and ``--as mallory`` was recorded as mallory's approval though mallory may not approve there.
    Acting for NAME takes NAME's right; the operator's own still stands without ``--as``."""
    class S(BaseModel):
        text: str = ""

    wf = Workflow("slack-only", version=1, state=S)
    wf.steer("p", show="text", actions=["approve", "reject"], approvers=Approvers(slack_users=["U0123ABC"]))
    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="slack-only", input={}, actor=person("dan"))
    hazel.drive(run_id=run.id)
    with pytest.raises(NotAllowedError, match="for mallory may not approve at 'P'") as refused:
        hazel.decide(run_id=run.id, action="approve", actor=hazel.operator(acting_for="mallory"))
    assert str(refused.value).endswith("the console operator may (the console operator as itself, without --as: "
                                       "acting for someone takes their right)"), str(refused.value)
    assert hazel.decisions(run_id=run.id) == []
    outcome = hazel.decide(run_id=run.id, action="approve", actor=hazel.operator())  # (the operator's own)
    assert outcome.decision.actor_id == hazel.operator().id and outcome.decision.person == hazel.operator().who
