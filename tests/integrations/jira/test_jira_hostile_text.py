"""Stored text in Jira never renders as wiki markup or a mention (issue 11, item 1): a title, a workflow, a
person's name, an artefact, a reason, feedback and a step's error holding ``[~accountid:…]``, ``[~user]``,
``{code}``, ``{panel}``, ``[link|http://…]``, ``h1.`` and ``|table|`` reach Jira's REST API (faked with
``responses``) escaped, or inside a ``{noformat}`` block they cannot close."""

from __future__ import annotations

import re

import pytest

from integrations.jira import render
from store.models import Decision, ProgressView, RequestStatus, RewindChoices
from tests.integrations.jira.test_jira_channel import decision, fake, request, rsps, run, view  # noqa: F401
from tests.support.fake_jira import FakeJira

LINE = "[~accountid:evil] [~admin] {code}x{code} {panel}p{panel} [click|http://evil.example] |a|b| *bold* (x)"
BLOCK = f"h1. Owned\n{LINE}\n{{noformat}}\n{{NOFORMAT}}\n||head||\n# item\n----\nbq. quote"
RAW = ("[~accountid:evil]", "[~admin]", "{code}", "{panel}", "[click|", "|a|b|")
BLOCKS = re.compile(r"\{noformat\}\n(.*?)\n\{noformat\}", re.DOTALL)


def outside_blocks(text: str) -> str:
    """``text`` without Hazel's own ``{noformat}`` blocks, after checking that none of them is closed early."""
    for body in BLOCKS.findall(text):
        assert not re.search(r"\{noformat", body, re.IGNORECASE), body
    return BLOCKS.sub("", text)


def never_markup(text: str) -> None:
    rest = outside_blocks(text)
    for token in RAW:
        assert token not in rest, (token, rest)
    assert not re.search(r"^\s*(h1\.|bq\.|#|----|\|\|)", rest, re.MULTILINE), rest


def test_inline_escapes_what_could_mean_markup_and_keeps_plain_words() -> None:
    assert render.inline(LINE) == (r"\[\~accountid:evil\] \[\~admin\] \{code\}x\{code\} \{panel\}p\{panel\} "
                                   r"\[click\|http://evil.example\] \|a\|b\| \*bold\* \(x)")
    assert render.inline("review_plan of migration-plan v1 (U0123) at 14:35: a - b; ok? C:\\temp\nnext") == (
        "review_plan of migration-plan v1 (U0123) at 14:35: a - b; ok? C:&#92;temp next")
    assert render.inline(":) ;P (/) ??cite?? -strike- +u+ ^sup^ ~sub~ _em_") == (
        r"\:) \;P \(/) \?\?cite\?\? \-strike\- \+u\+ \^sup\^ \~sub\~ \_em\_")
    assert render.quoted("one line") == "one line"
    assert render.quoted(BLOCK).startswith("\n{noformat}\nh1. Owned\n")


def test_a_hostile_request_description_and_its_comments(fake: FakeJira) -> None:  # noqa: F811
    channel = fake.channel()
    hostile_run = run().model_copy(update={"started_by": LINE, "started_via": LINE})
    shown = {LINE: BLOCK, "plain.sql": "SELECT 1;"}
    req = request().model_copy(update={"title": LINE})
    v = view(req, shown=shown).model_copy(update={"run": hostile_run, "workflow": LINE, "point": LINE,
                                                  "title": LINE, "show": LINE})
    ref = channel.open_request(v)
    description = fake.issue(ref["issue_id"])["fields"]["description"]
    never_markup(description)
    assert BLOCK.replace("{noformat}", "{\u200bnoformat}").replace("{NOFORMAT}", "{\u200bNOFORMAT}") in description
    assert ("[~accountid:acc-sme]" if fake.cloud else "[~acc-sme]") in description  # Hazel's own mentions stay

    for reason in (LINE, BLOCK):
        settled = req.model_copy(update={"status": RequestStatus.DECIDED, "decided_action": "reject",
                                         "decided_by": LINE, "message_ref": ref})
        d: Decision = decision("reject", reason=reason).model_copy(update={"actor_name": LINE})
        channel.update_request(v.model_copy(update={"request": settled, "decisions": (d,)}))
        never_markup(fake.bodies(ref["issue_id"])[-1])
    rewound = req.model_copy(update={"status": RequestStatus.DECIDED, "decided_action": "rewind",
                                     "decided_by": LINE, "message_ref": ref})
    channel.update_request(v.model_copy(update={"request": rewound, "decisions": (
        decision("rewind", to=1, feedback=BLOCK),)}))
    never_markup(fake.bodies(ref["issue_id"])[-1])
    votes = req.model_copy(update={"approvals_required": 2, "approvals": 1, "message_ref": ref})
    channel.update_request(v.model_copy(update={"request": votes, "decisions": (
        decision("approve").model_copy(update={"actor_name": LINE}),)}))
    never_markup(fake.bodies(ref["issue_id"])[-1])


DISPLAY = "report\u202egpj.exe \x1b[31mred\x07 \u2066iso\u2069 \x9b2J"
"""Characters a display acts on: a bidi override (``report.exe.jpg`` as read), a terminal colour, a bell, an
isolate, a C1 CSI."""
ACTED_ON = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_control_characters_and_bidi_overrides_reach_jira_as_visible_escapes(fake: FakeJira) -> None:  # noqa: F811
    channel = fake.channel()
    req = request().model_copy(update={"title": DISPLAY})
    v = view(req, shown={DISPLAY: f"line one\n{DISPLAY}\tend"}).model_copy(update={"title": DISPLAY})
    ref = channel.open_request(v)
    issue = fake.issue(ref["issue_id"])
    for text in (issue["fields"]["summary"], issue["fields"]["description"]):
        assert not ACTED_ON.search(text), repr(text)
    assert "report\\u202egpj.exe \\x1b[31mred\\x07" in issue["fields"]["description"]  # in its block
    assert "\tend" in issue["fields"]["description"], "tabs and newlines stay in a block"
    assert issue["fields"]["summary"].startswith(r"report\u202egpj.exe \x1b[31mred\x07 \u2066iso\u2069")
    for reason in (DISPLAY, f"two\nlines {DISPLAY}"):
        settled = req.model_copy(update={"status": RequestStatus.DECIDED, "decided_action": "reject",
                                         "decided_by": DISPLAY, "message_ref": ref})
        d: Decision = decision("reject", reason=reason).model_copy(update={"actor_name": DISPLAY})
        channel.update_request(v.model_copy(update={"request": settled, "decisions": (d,)}))
        body = fake.bodies(ref["issue_id"])[-1]
        assert not ACTED_ON.search(body) and "u202e" in body, repr(body)
    assert render.inline(DISPLAY) == r"report&#92;u202egpj.exe &#92;x1b\[31mred&#92;x07 &#92;u2066iso&#92;u2069 &#92;x9b2J"


@pytest.mark.parametrize("event, facts", [
    ("failed", {"error": BLOCK, "step": LINE}),
    ("rejected", {"by": LINE, "reason": BLOCK}),
    ("cancelled", {"by": LINE, "reason": LINE}),
    ("waiting", {}),
])
def test_hostile_progress_comments(event: str, facts: dict) -> None:
    nxt = request().model_copy(update={"title": LINE, "channel": LINE})
    text = render.progress_comment(ProgressView(run=run(), workflow=LINE, event=event, steps=(LINE,),
                                                facts=facts, request=request(), next_request=nxt))
    never_markup(text)


def test_hostile_step_names_in_the_rewind_help_and_the_how_to_answer(fake: FakeJira) -> None:  # noqa: F811
    """A step's name (a LangGraph node may be named anything) in the list of checkpoints a ``/rewind`` can
    name, and in the issue's "How to answer", is literal text, cut at ``STEP_CHARS``."""
    name = "[~accountid:evil] {code}x{code} [click|http://evil.example] |a|b| *bold* (x)"
    base = view(request())
    offered = tuple(cp.model_copy(update={"next_step": step}) for cp, step in zip(
        base.rewind.checkpoints, (name, "x" * 500)))
    choices = RewindChoices(checkpoints=offered, total=152)
    help_ = render.rewind_help("a1b2c3d4e5f6", choices)
    never_markup(help_)
    assert f"* #1 → {render.inline(name)} · 2024-05-01 12:00 UTC · branch 0" in help_
    assert f"* #0 → {'x' * (render.STEP_CHARS - 1)}… · " in help_ and "x" * render.STEP_CHARS not in help_
    assert help_.endswith("Showing 2 of 152 checkpoints the run can continue from: #0 (the run's input), where "
                          "each step starts, and the newest. To continue from another, {{/rewind N}} with its "
                          "number ({{hazel history a1b2c3d4e5f6}} lists them all), or the run's page.")
    assert "Showing" not in render.rewind_help("a1b2c3d4e5f6", RewindChoices(checkpoints=offered, total=2))
    ref = fake.channel().open_request(base.model_copy(update={"rewind": choices}))
    description = fake.issue(ref["issue_id"])["fields"]["description"]
    never_markup(description)
    assert f"(steps: {render.inline(name)}, {'x' * 500}; or a checkpoint's number" in description
