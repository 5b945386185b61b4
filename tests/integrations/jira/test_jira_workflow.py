"""Walking an issue through its Jira workflow (``integrations.jira.workflow``) against the fake Jira's
transitions, and reading Atlassian Document Format comment bodies (``integrations.jira.adf``)."""

from __future__ import annotations

from typing import Iterator

import pytest
import responses

from integrations.base import DeliveryError
from integrations.jira.adf import ADFError, adf_text, opens_with_own_words
from integrations.jira.workflow import walk
from store.models import ProgressView, RequestStatus
from tests.integrations.jira.test_jira_channel import request, run, view
from tests.support import jira_payloads as p
from tests.support.fake_jira import FakeJira


@pytest.fixture
def fake() -> Iterator[FakeJira]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield FakeJira(rsps)


def new_issue(fake: FakeJira, status: str = "To Do") -> str:
    ref = fake.channel().open_request(view(request()))
    fake.set_status(ref["issue_id"], status)
    return ref["issue_id"]


def test_a_direct_transition_is_one_hop(fake: FakeJira) -> None:
    issue = new_issue(fake)
    result = walk(fake.channel().client, issue, "Done")
    assert (result.reached, result.status, result.taken) == (True, "Done", ("Go Done",))


def test_already_there_moves_nothing(fake: FakeJira) -> None:
    issue = new_issue(fake, "Done")
    result = walk(fake.channel().client, issue, "done")  # names compare case-insensitively
    assert result.reached and result.taken == () and fake.count("GET", "/transitions$") == 0


def test_the_shortest_known_path_after_exploring(fake: FakeJira) -> None:
    fake.workflow = {"To Do": [("Triage", "Triaged"), ("Start", "In Progress")],
                     "Triaged": [("Untriage", "To Do")],
                     "In Progress": [("Review", "In Review"), ("Stop", "To Do")],
                     "In Review": [("Accept", "Done")]}
    issue = new_issue(fake)
    result = walk(fake.channel().client, issue, "Done")
    # Triaged is a dead end: back to To Do (known), then on through the statuses not read yet
    assert result.reached and fake.status(issue) == "Done"
    assert result.taken == ("Triage", "Untriage", "Start", "Review", "Accept")
    assert fake.transitions_made(issue) == list(result.taken)


def test_the_walk_stops_after_max_hops_and_goes_back(fake: FakeJira) -> None:
    chain = ["To Do", "In Progress", "In Review", "Approved", "Done"]
    fake.workflow = {a: [(f"to {b}", b)] + ([(f"back from {a}", prev)] if prev else [])
                     for prev, a, b in zip([None] + chain, chain, chain[1:])}
    issue = new_issue(fake)
    result = walk(fake.channel().client, issue, "Done", max_hops=2)
    assert not result.reached and "not reached within 2 transitions from *To Do*" in result.reason
    assert fake.status(issue) == "To Do" and result.status == "To Do", "taken back to where it started"
    assert result.taken == ("to In Progress", "to In Review", "back from In Review", "back from In Progress")


def test_no_path_without_passing_a_done_status_or_an_avoided_one(fake: FakeJira) -> None:
    fake.workflow = {"Approved": [("Close", "Done"), ("Decline", "Rejected"), ("Hold", "On Hold")],
                     "Done": [("Reopen", "In Review")]}
    issue = new_issue(fake, "Approved")
    result = walk(fake.channel().client, issue, "In Review", avoid=["On Hold"])
    assert not result.reached and result.reason == "no path of transitions leads there from *Approved*"
    assert result.taken == () and fake.status(issue) == "Approved"


def test_a_dead_end_without_a_way_back_says_where_the_issue_is(fake: FakeJira) -> None:
    fake.workflow = {"Approved": [("Park", "In Progress")], "In Progress": []}
    issue = new_issue(fake, "Approved")
    result = walk(fake.channel().client, issue, "In Review")
    assert not result.reached and result.status == "In Progress" and result.taken == ("Park",)
    note = fake.channel().move(issue, "Done")  # and so does the channel's note
    assert note == ("(Hazel could not move this issue to *Done*: no path of transitions leads there from "
                    "*In Progress*.)")


def test_a_transition_jira_refuses_ends_the_walk_with_its_answer(fake: FakeJira) -> None:
    fake.workflow = {"To Do": [("Start", "In Progress")], "In Progress": [("Finish", "Done")]}
    issue = new_issue(fake)
    fake.fail("POST", "/transitions$", status=400)  # e.g. a transition screen with a required field
    result = walk(fake.channel().client, issue, "Done")
    assert not result.reached and "Jira refused the transition *Start* from *To Do*" in result.reason
    assert "HTTP 400" in result.reason and fake.status(issue) == "To Do"


def test_jira_unavailable_mid_walk_is_a_delivery_error(fake: FakeJira) -> None:
    fake.workflow = {"To Do": [("Start", "In Progress")], "In Progress": [("Finish", "Done")]}
    issue = new_issue(fake)
    fake.fail("GET", "/transitions$", status=503)
    with pytest.raises(DeliveryError):
        walk(fake.channel().client, issue, "Done")


def test_progress_of_a_completed_run_walks_its_issue_to_done(fake: FakeJira) -> None:
    fake.workflow = {"To Do": [("Start", "In Progress")], "In Progress": [("Finish", "Done")]}
    channel = fake.channel()
    ref = channel.open_request(view(request()))
    channel.progress(ProgressView(run=run(), workflow="migration-plan", event="completed", facts={},
                                  request=request(status=RequestStatus.DECIDED, action="approve", ref=ref),
                                  next_request=None, steps=("deploy",)))
    assert fake.status(ref["issue_id"]) == "Done" and fake.transitions_made(ref["issue_id"]) == ["Start", "Finish"]
    assert fake.bodies(ref["issue_id"])[-1] == "(/) Run a1b2c3d4e5f6 completed after deploy."


# -- ADF -------------------------------------------------------------------------------------------------------

def test_adf_text_of_the_common_nodes() -> None:
    doc = p.adf(
        {"type": "heading", "attrs": {"level": 2}, "content": [p.text("Review")]},
        p.paragraph(p.text("thanks "), {"type": "mention", "attrs": {"id": "acc-1"}}, p.text(" "),
                    {"type": "emoji", "attrs": {"shortName": ":tada:"}}, p.text(" see "),
                    {"type": "inlineCard", "attrs": {"url": "https://example.invalid/x"}}),
        {"type": "orderedList", "attrs": {"order": 3}, "content": [
            {"type": "listItem", "content": [p.paragraph(p.text("one")), {"type": "bulletList", "content": [
                {"type": "listItem", "content": [p.paragraph(p.text("nested"))]}]}]},
            {"type": "listItem", "content": [p.paragraph(p.text("two"))]}]},
        {"type": "rule"},
        {"type": "panel", "attrs": {"panelType": "info"}, "content": [p.paragraph(p.text("in a panel"))]},
        {"type": "table", "content": [{"type": "tableRow", "content": [
            {"type": "tableHeader", "content": [p.paragraph(p.text("a"))]},
            {"type": "tableCell", "content": [p.paragraph(p.text("b"))]}]}]},
        {"type": "mediaSingle", "content": [{"type": "media", "attrs": {"id": "m"}}]},
        {"type": "someFutureNode", "content": [p.paragraph(p.text("still read"))]})
    assert adf_text(doc) == ("Review\n\nthanks @acc-1 :tada: see https://example.invalid/x\n\n"
                             "3. one\n   - nested\n4. two\n\nin a panel\n\na | b\n\nstill read")


def test_a_code_block_is_verbatim_and_commands_survive() -> None:
    doc = p.adf(p.paragraph(p.text("/edit")), {"type": "codeBlock", "content": [p.text("line 1\n  line 2\n")]})
    assert adf_text(doc) == "/edit\n\nline 1\n  line 2"


def test_only_a_paragraph_or_heading_opens_with_the_authors_own_words() -> None:
    quote = {"type": "blockquote", "content": [p.paragraph(p.text("/approve"))]}
    code = {"type": "codeBlock", "content": [p.text("/approve")]}
    assert opens_with_own_words(p.adf(p.paragraph(p.text("/approve")), quote))
    assert opens_with_own_words(p.adf({"type": "heading", "content": [p.text("/approve")]}))
    assert opens_with_own_words(p.adf(p.paragraph(), {"type": "rule"}, p.paragraph(p.text("ok"))))  # (empty first)
    assert not opens_with_own_words(p.adf(quote, p.paragraph(p.text("no"))))
    assert not opens_with_own_words(p.adf(p.paragraph(), code))
    assert opens_with_own_words(p.adf())
    with pytest.raises(ADFError):
        opens_with_own_words("text")


@pytest.mark.parametrize("doc, message", [
    ({"type": "paragraph"}, "not an ADF document"),
    ("text", "not an ADF document"),
])
def test_not_adf(doc: object, message: str) -> None:
    with pytest.raises(ADFError, match=message):
        adf_text(doc)


def test_too_deep_is_refused_not_a_recursion_error() -> None:
    node: dict = p.text("x")
    for _ in range(500):
        node = {"type": "blockquote", "content": [node]}
    with pytest.raises(ADFError, match="deeper than 100"):
        adf_text(p.adf(node))
    assert adf_text(p.adf({"type": "empty"})) == "" and adf_text({"type": "doc"}) == ""
