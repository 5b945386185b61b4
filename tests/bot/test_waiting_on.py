""""Waiting on me" (``Hazel.waiting_on``: Slack App Home, ``/hazel runs``, the run pages) selects a person's
requests in SQL (``store.waiting``): a request newer than hundreds of others is listed, points the person may
not decide are left out, the per-request rules still hold (self-approval ban, a vote already in, backup
approvers of escalated requests only), oldest first, at most ``limit``; and its queries read the index.

Each test first leaves 600 requests pending that the people of the test may not decide (``NOISE``; one run
through the engine, its run and request rows copied, older than every request of the test), more than the
500 oldest pending requests the former implementation read.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from pydantic import BaseModel
from sqlalchemy import insert, select, text

from bot.engine.workflow import StepContext, Workflow
from store import Store
from store.models import Approvers
from store.schema import runs, steering_requests
from tests.store.test_flat_queries import big, plans  # noqa: F401 (the fixture)
from tests.support.engine import make_hazel, person

NOISE = 600


class Doc(BaseModel):
    topic: str = ""


def workflow(name: str, point: str, actions: tuple[str, ...] = ("approve", "edit", "reject"),
             **settings) -> Workflow:  # noqa: ANN003
    wf = Workflow(name, version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer(point, title=f"{name} {point}", actions=list(actions), **settings)
    return wf


def workflows() -> list[Workflow]:
    return [
        workflow("noise", "review", approvers=Approvers(users=["bob"])),
        workflow("check", "sign_off", ("approve", "edit"), approvers=Approvers(users=["alice", "erin"]), allow_self_approval=False,
                 approvals_required=2, escalate_to=Approvers(users=["dana"]), escalate_after_sec=60),
        workflow("other", "review", approvers=Approvers(users=["frank"])),
        workflow("open", "go"),  # no approvers: anyone, but nobody's in particular on the console
        workflow("second", "look", approvers=Approvers(users=["alice"])),
    ]


def start(hazel, name: str, by: str = "carol") -> str:  # noqa: ANN001
    run = hazel.start(workflow=name, input={"topic": name}, actor=person(by))
    hazel.drive(run_id=run.id)
    return run.id


def noise(hazel) -> None:  # noqa: ANN001
    """``NOISE`` pending requests at ``noise``/``review`` (bob's), older than anything started after."""
    template = start(hazel, "noise")
    store: Store = hazel.store
    with store.transaction() as tx:
        run = dict(tx.conn.execute(select(runs).where(runs.c.id == template)).one()._mapping)
        request = dict(tx.conn.execute(select(steering_requests).where(
            steering_requests.c.run_id == template)).one()._mapping)
        assert request["workflow"] == "noise" and request["point_key"] == ""  # as the engine wrote it
        run_rows, request_rows = [], []
        for i in range(NOISE):
            at = request["created_at"] - timedelta(seconds=NOISE - i)
            run_rows.append({**run, "id": f"n{i:011d}", "created_at": at, "updated_at": at})
            request_rows.append({**{k: v for k, v in request.items() if k != "id"}, "run_id": f"n{i:011d}",
                                 "created_at": at})
        tx.conn.execute(insert(runs), run_rows)
        tx.conn.execute(insert(steering_requests), request_rows)


def listed(hazel, who: str, **kw) -> list[str]:  # noqa: ANN001, ANN003
    return [v.run.id for v in hazel.waiting_on(actor=person(who), **kw)]


@pytest.fixture
def hazel(db_url: str):  # noqa: ANN201
    h = make_hazel(db_url, *workflows())
    noise(h)
    return h


def test_a_request_newer_than_600_others_is_listed(hazel) -> None:  # noqa: ANN001
    mine = start(hazel, "check")
    assert listed(hazel, "alice") == [mine]
    assert listed(hazel, "erin") == [mine]
    assert len(listed(hazel, "bob")) == 50
    everything = listed(hazel, "bob", limit=NOISE + 5)  # (one listing of 601 requests, asserted twice)
    assert mine not in everything and len(everything) == NOISE + 1


def test_requests_at_points_they_may_not_decide_are_left_out(hazel) -> None:  # noqa: ANN001
    franks = start(hazel, "other")
    alices = start(hazel, "check")
    anyones = start(hazel, "open")
    assert listed(hazel, "alice") == [alices]
    assert listed(hazel, "frank") == [franks]
    assert listed(hazel, "zoe") == []
    # an approver-less console request is listed only where its buttons are offered (the run pages)
    assert listed(hazel, "alice", anyone=True) == [alices, anyones]
    assert listed(hazel, "zoe", anyone=True) == [anyones]


def test_the_per_request_rules_still_hold(hazel) -> None:  # noqa: ANN001
    by_alice = start(hazel, "check", by="alice")  # self-approval is off at sign_off (approve, edit only)
    voted = start(hazel, "check")
    open_ = start(hazel, "check")
    request = hazel.request_for(run_id=voted)
    hazel.decide(run_id=voted, request_id=request.id, action="approve", actor=person("alice"))
    assert hazel.request_for(run_id=voted).status.value == "pending"  # two approvals needed
    assert listed(hazel, "alice") == [open_]  # not her own run, not one she voted on
    assert listed(hazel, "erin") == [by_alice, voted, open_]
    assert listed(hazel, "dana") == []  # a backup approver: escalated requests only
    escalated = hazel.request_for(run_id=voted)
    hazel.fire_request(request_id=escalated.id, now=escalated.created_at + timedelta(seconds=61))
    assert hazel.request_for(run_id=voted).escalated_at is not None
    assert listed(hazel, "dana") == [voted]


def test_oldest_first_and_at_most_limit(hazel) -> None:  # noqa: ANN001
    order = [start(hazel, name) for name in ("check", "second", "other", "second", "check", "second")]
    alices = [run_id for run_id, name in zip(order, ("check", "second", "other", "second", "check", "second"))
              if name != "other"]
    assert listed(hazel, "alice") == alices
    assert listed(hazel, "alice", limit=3) == alices[:3]
    assert listed(hazel, "alice", limit=1) == alices[:1]
    # pages smaller than what is pending: the same answer, read a page at a time
    assert [v.run.id for v in hazel.views.waiting_on(person("alice"), limit=4, scan=1)] == alices[:4]


def test_a_request_of_an_unknown_place_is_checked_on_its_own(hazel) -> None:  # noqa: ANN001
    """Requests from before migration 0006 (no workflow, version or point key) are still listed."""
    mine = start(hazel, "second")
    with hazel.store.transaction() as tx:
        tx.conn.execute(steering_requests.update().where(steering_requests.c.run_id == mine)
                        .values(workflow="", workflow_version=0, point_key="*"))
    assert listed(hazel, "alice") == [mine]
    assert listed(hazel, "frank") == []


def test_the_queries_read_the_place_index(big: Store) -> None:  # noqa: F811
    """The skip scan over the places and the pages of chosen places: index seeks, no sort of pending rows;
    the page of every place is the oldest pending requests."""
    sqlite = big.dialect == "sqlite"
    t = steering_requests.c
    with big.transaction() as tx:  # where the engine would have put them: their run's workflow, a native point
        tx.conn.execute(steering_requests.update().values(
            workflow=select(runs.c.workflow).where(runs.c.id == t.run_id).scalar_subquery(), workflow_version=1,
            point_key=""))
        rare = tx.conn.execute(select(t.id).where(t.status == "pending", t.workflow == "w0").order_by(t.id.desc())
                               .limit(10)).scalars().all()
        tx.conn.execute(steering_requests.update().where(t.id.in_(rare)).values(point="rare"))
    if big.dialect == "postgresql":
        with big.engine.connect() as conn:
            conn.execute(text("ANALYZE hazel_steering_requests"))
            conn.commit()
    with big.read() as tx:
        places = tx.requests.pending_places()
        oldest = [r.id for r in tx.requests.pending(limit=50)]
        page = tx.requests.pending_at([p for p, _, _ in places], after=None, limit=50)
    assert [(p.workflow, p.point) for p, _, _ in places] == [("w0", "rare"), ("w0", "review"), ("w1", "review"),
                                                            ("w2", "review")]
    assert [r.id for r, _ in page] == oldest

    plan = plans(big, lambda tx: tx.requests.pending_places())
    seeks = [line for line in plan.splitlines() if "ix_hazel_steering_requests_status_place" in line]
    assert len(seeks) == len(places) + 1, plan  # one statement per place, one that finds none after the last
    assert ("TEMP B-TREE" not in seeks[0]) if sqlite else ("Sort" not in seeks[0]), plan  # the first place
    columns = ("workflow", "workflow_version", "point", "point_key", "channel")
    for line in seeks[1:]:  # the next place: five seeks, each equal on j columns and greater on the next one
        # (not the row value (workflow, …) > (…): SQLite seeks it on workflow only, then reads the whole place)
        assert line.count("ix_hazel_steering_requests_status_place") == 5, line
        assert not re.search(r"SCAN hazel_steering_requests\b" if sqlite else r"Seq Scan", line), line
        for j, column in enumerate(columns):
            equal = " AND ".join(f"{c}=?" for c in ("status", *columns[:j]))
            assert (f"({equal} AND {column}>?)" if sqlite else f"({column} > ") in line, (column, line)
    for chosen in ([places[0][0]], [p for p, _, _ in places]):
        plan = plans(big, lambda tx: tx.requests.pending_at(chosen, after=None, limit=50)).splitlines()[0]
        assert plan.count("ix_hazel_steering_requests_status_place") == len(chosen), plan
        assert not re.search(r"SCAN hazel_steering_requests\b" if sqlite else r"Seq Scan", plan), plan
        # (each range is read in index order; the sorts are of the merged ranges: at most places x limit rows)
