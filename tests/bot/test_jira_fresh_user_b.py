"""What a fresh user met with the Jira channel (``hazel serve`` wiring, signed webhooks over real HTTP into the
app, Jira faked at its HTTP boundary with ``responses``), on SQLite and PostgreSQL:

1. a comment refused while Jira answered 503 keeps its refusal on Jira's retry (one outcome per comment);
2. an ADF comment nested 150 lists deep is answered 400, as the README says;
3. reminders mention approvers listed as ``people`` by their Jira identities from the people file;
4. a transition to Rejected on an approved request is refused, said on the issue and moved back;
5. ``on_timeout="fail"`` says the run failed at its timeout, not that it was cancelled.
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
import responses
from pydantic import BaseModel
from rich.console import Console

from bot.engine.registry import Registry
from bot.ops.scheduler import Scheduler
from bot.server.app import HazelApp
from bot.server.http import create_app
from bot.server.wiring import channels_from_settings, http_routers
from bot.settings import Settings
from hazel import StepContext, Workflow
from integrations.console import ConsoleChannel
from store.models import Actor, Approvers, RequestStatus, RunStatus
from tests.support import jira_payloads as p
from tests.support.fake_jira import FakeJira
from tests.support.jira_env import SECRET, Clock, JiraEnv, jira_env
from tests.support.live import LiveServer

HOUR = 3600.0


pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)


@pytest.fixture
def env(db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url, cloud=False) as e:  # Jira Server, as the fresh user ran it
        e.fake.groups.update({e.who["lead"]: ["dba", "jira-users"], e.who["stranger"]: ["jira-users"]})
        yield e


def refusals(env: JiraEnv, run_id: str) -> list:
    return [e for e in env.hazel.audit(run_id=run_id) if e.action == "decision.refused"]


# -- 1. one outcome per comment, a 503 included ----------------------------------------------------------------

def test_a_comment_refused_while_jira_was_down_keeps_its_refusal_on_the_retry(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    first = env.pending(run_id)
    # Jira starts answering 503: Hazel's comments and the re-asked request's issue update cannot get through
    env.fake.fail("POST", "/comment$", times=1000)
    env.fake.fail("GET", "^/search", times=1000)
    assert env.send(env.comment(issue, "Please add an index.")).json()["decided"] == "feedback"
    env.drive(run_id)  # the run revises and asks again on the same issue; request.opened keeps failing
    second = env.pending(run_id)
    assert second is not None and second.id != first.id and not second.message_ref
    # the lead (a dba) approves what the issue still shows: the request answered with feedback
    approve = env.comment(issue, "/approve", person="lead", comment_id="9001")
    assert env.send(approve).status_code == 503  # refused, but Jira did not take the answer
    assert len(refusals(env, run_id)) == 1
    # Jira is back: the new request reaches the issue, then Jira sends the comment again
    env.fake.failures.clear()
    env.clock.advance(HOUR)
    env.hazel.deliverer.deliver_due()
    assert env.pending(run_id).message_ref["issue_id"] == issue["id"]
    answer = env.send(approve)
    assert answer.status_code == 200, answer.text
    assert "already answered with feedback by" in answer.json()["refused"]
    assert env.send(approve).json() == {"duplicate": True}
    # one outcome: the refusal, recorded and said once; the new request is untouched
    assert len(refusals(env, run_id)) == 1
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve", "feedback"]
    assert env.pending(run_id).id == second.id and env.pending(run_id).status is RequestStatus.PENDING
    bodies = env.fake.bodies(issue["id"])
    assert len([b for b in bodies if "Nothing changed" in b]) == 1
    assert not [b for b in bodies if "Approved by" in b], bodies
    # the lead approves the new version with a new comment
    assert env.send(env.comment(issue, "/approve", person="lead")).json()["decided"] == "approve"


def test_a_refused_transition_while_jira_was_down_is_moved_back_on_the_retry_and_audited_once(
        env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    move = env.transition(issue, "Approved", person="stranger")
    env.fake.fail("GET", r"^/issue/[^/]+/transitions$")  # moving it back fails first
    assert env.send(move).status_code == 503
    answer = env.send(move)
    assert "may not approve" in answer.json()["refused"] and "Hazel moved the issue back to To Do." in \
        answer.json()["refused"]
    assert env.fake.status(issue["id"]) == "To Do"
    assert len(refusals(env, run_id)) == 1 and len(env.fake.bodies(issue["id"])) == 1


# -- 2. ADF nested too deeply ---------------------------------------------------------------------------------

def test_an_adf_document_whose_content_is_not_a_list_is_answered_400(env: JiraEnv) -> None:
    """Fresh-user s20 L5: ``{"type": "doc", "content": "notalist"}`` was read as no text and ignored as a
    comment, not answered 400 as a body that is no document is."""
    run_id = env.start()
    issue = env.issue(run_id)
    for content in ("notalist", {"type": "paragraph"}, 5):
        payload = env.comment(issue, "placeholder")
        payload["comment"]["body"] = {"type": "doc", "version": 1, "content": content}
        answer = env.send(payload)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == ("malformed Jira webhook: comment.body: its content is not a list of "
                                          "nodes"), answer.text
    assert env.pending(run_id) is not None and env.pending(run_id).point == "review_artefacts"


def test_an_adf_comment_nested_150_lists_deep_is_answered_400(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    node: dict[str, Any] = {"type": "text", "text": "deep"}
    for _ in range(150):
        node = {"type": "bulletList", "content": [node]}
    payload = env.comment(issue, "placeholder")
    payload["comment"]["body"] = {"type": "doc", "version": 1, "content": [node]}
    answer = env.send(payload)
    assert answer.status_code == 400, answer.text
    assert "nests deeper than 100 levels" in answer.json()["error"]
    # as deep with list items between the lists, and tables in tables: 400 as well
    for wrap in (lambda n: {"type": "bulletList", "content": [{"type": "listItem", "content": [n]}]},
                 lambda n: {"type": "table", "content": [{"type": "tableRow", "content": [
                     {"type": "tableCell", "content": [n]}]}]}):
        node = {"type": "paragraph", "content": [{"type": "text", "text": "deep"}]}
        for _ in range(60):
            node = wrap(node)
        payload["comment"]["body"] = {"type": "doc", "version": 1, "content": [node]}
        assert env.send(payload).status_code == 400
    # a list a few levels deep is still read
    node = {"type": "paragraph", "content": [{"type": "text", "text": "add an index"}]}
    for _ in range(3):
        node = {"type": "bulletList", "content": [{"type": "listItem", "content": [node]}]}
    payload["comment"]["body"] = {"type": "doc", "version": 1, "content": [node]}
    assert env.send(payload).json()["decided"] == "feedback"
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve", "feedback"]
    (feedback,) = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert feedback.payload["text"] == "- - - add an index"


# -- 4. a transition on a settled request -----------------------------------------------------------------------

def test_a_transition_to_rejected_on_an_approved_request_is_refused_and_moved_back(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    assert env.send(env.comment(issue, "/approve")).json()["decided"] == "approve"
    env.drive(run_id)
    assert env.fake.status(issue["id"]) == "Done"
    answer = env.send(env.transition(issue, "Rejected", person="lead", comment="too risky"))
    assert answer.status_code == 200
    refused = answer.json()["refused"]
    assert refused.startswith(f"already approved by {env.who['sme']} at "), refused
    sign_off = env.hazel.pending_request(run_id=run_id)  # where the run waits now: said after who settled it
    assert refused.endswith(f" UTC; run {run_id} now waits at {sign_off.point!r} (request {sign_off.id}). Nothing "
                            "changed. Hazel moved the issue back to Done."), refused
    assert env.fake.status(issue["id"]) == "Done"
    assert env.fake.bodies(issue["id"])[-1].endswith(refused)
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve", "approve"]
    assert refusals(env, run_id)[-1].actor_id == env.who["lead"]
    assert env.hazel.get(run_id=run_id).status is RunStatus.WAITING  # at the sign-off, as before


# -- 3 and 5: reminders and timeouts of a point of our own, wired as hazel serve wires it ------------------------

class Doc(BaseModel):
    text: str = ""


def timed(**steer: Any) -> Workflow:
    wf = Workflow("timed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": "draft 1"}

    wf.steer("review", show="text", channel="jira:MIG", **steer)

    @wf.step
    def publish(state: Doc, ctx: StepContext) -> dict:
        return {"text": state.text + " (published)"}

    return wf


@contextmanager
def served(db_url: str, tmp_path: Path, wf: Workflow) -> Iterator[tuple[HazelApp, FakeJira, Clock, str]]:
    """``wf`` served as ``hazel serve`` serves it (settings -> channels -> routers -> app), on Jira Server,
    with a people file giving priya the Jira user name ``priya.k``."""
    people = tmp_path / "people.toml"
    people.write_text('[people.priya]\njira = ["priya.k"]\n\n[people.sam]\njira = ["sam.sme"]\n', encoding="utf-8")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake = FakeJira(rsps, cloud=False)
        auth = fake.client_kwargs()
        config = Settings(HAZEL_DATABASE_URL=db_url, JIRA_URL=fake.base, JIRA_WEBHOOK_SECRET=SECRET,
                          JIRA_PAT=auth["pat"], HAZEL_PEOPLE_FILE=str(people))
        registry = Registry()
        registry.add(wf)
        clock = Clock()
        hazel = HazelApp(config, registry=registry, load_workflows=False, clock=clock,
                         console=ConsoleChannel(console=Console(file=io.StringIO(), width=120)),
                         channels=channels_from_settings(config))
        hazel.prepare()
        try:
            with LiveServer(create_app(hazel, routers=http_routers(hazel, config))) as server:
                yield hazel, fake, clock, server.url + "/jira/webhook"
        finally:
            hazel.close()


def waiting_issue(hazel: HazelApp, fake: FakeJira) -> tuple[str, dict[str, Any]]:
    run = hazel.start(workflow="timed", input={}, actor=Actor(id="ops", channel="console", name="ops"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    request = hazel.pending_request(run_id=run.id)
    return run.id, fake.issue(request.message_ref["issue_id"])


def test_a_reminder_mentions_approvers_listed_as_people_by_their_jira_user(db_url: str, tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya",), jira_users=("lee.lead",)), remind_after_sec=HOUR)
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, url):
        run_id, issue = waiting_issue(hazel, fake)
        assert "*Who may decide:* priya ([~priya.k]), [~lee.lead]" in issue["fields"]["description"]
        assert sorted(fake.watchers.get(issue["id"], [])) == ["lee.lead", "priya.k"]
        clock.advance(HOUR)
        assert len(Scheduler(hazel).tick().reminders) == 1
        hazel.deliverer.deliver_due()
        (reminder,) = [b for b in fake.bodies(issue["id"]) if b.startswith("Reminder:")]
        assert reminder.startswith("Reminder: this request is still waiting for priya ([~priya.k]), [~lee.lead] ")
        # a refusal names them, without mentioning them (s25 F16: a mention notifies each approver, at every
        # comment a stranger writes)
        stranger = p.comment_event(issue, "/approve", "stu.stranger", cloud=False, base=fake.base)
        answer = p.send(url, stranger, secret=SECRET)
        assert "Who may steer this request: priya, lee.lead." in answer.json()["refused"], answer.text
        assert "[~priya.k]" not in fake.bodies(issue["id"])[-1] and "[~lee.lead]" not in fake.bodies(issue["id"])[-1]
        # priya, by her Jira user name, may decide
        mine = p.comment_event(issue, "/approve", "priya.k", cloud=False, base=fake.base)
        assert p.send(url, mine, secret=SECRET).json()["decided"] == "approve"
        assert hazel.get(run_id=run_id).status is not RunStatus.WAITING


def test_a_timeout_that_fails_the_run_says_so_on_the_issue(db_url: str, tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya",)), timeout_sec=HOUR, on_timeout="fail")
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, _url):
        run_id, issue = waiting_issue(hazel, fake)
        clock.advance(HOUR)
        assert Scheduler(hazel).tick().timeouts
        hazel.deliverer.deliver_due()
        assert hazel.get(run_id=run_id).status is RunStatus.FAILED
        bodies = fake.bodies(issue["id"])
        assert not [b for b in bodies if "Cancelled" in b], bodies
        assert (f"(!) Nobody decided in time: the run failed at its timeout. Nothing more to decide here; "
                f"{{{{hazel retry {run_id}}}}} asks again.") in bodies, bodies
