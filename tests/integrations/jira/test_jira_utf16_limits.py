"""Jira counts a text's length in UTF-16 code units (Java's ``String.length()``), and so does Hazel when it cuts a
summary, a description or a comment to fit: an emoji (outside the BMP) counts 2. Every text sent to the fake Jira
(``tests/support/fake_jira.py``) is measured here as Jira would measure it, with a strict UTF-16 encoding (a
split surrogate pair would not encode)."""

from __future__ import annotations

import pytest

from integrations.jira import render
from store.models import ProgressView, RequestStatus
from tests.integrations.jira.test_jira_channel import decision, fake, request, rsps, run, view  # noqa: F401
from tests.support.fake_jira import FakeJira

WHALE = "🐳"  # U+1F433: one Python character, two UTF-16 code units


def units(text: str) -> int:
    """The length Jira sees (strict: a lone surrogate raises)."""
    return len(text.encode("utf-16-le")) // 2


def test_cut_utf16_counts_code_units_and_never_splits_a_pair() -> None:
    assert render.utf16_len("a" + WHALE + "é") == 4 and render.utf16_len("") == 0
    assert render.cut_utf16("a" + WHALE + "b", 2) == "a" and render.cut_utf16("a" + WHALE + "b", 3) == "a" + WHALE
    assert render.cut_utf16("abc", 3) == "abc" and render.cut_utf16("abc", 0) == ""
    held_as_two = "a\ud83d\udc33b"  # a pair as two code points (possible in a Python str): kept whole or dropped
    assert render.cut_utf16(held_as_two, 2) == "a" and render.cut_utf16(held_as_two, 3) == "a\ud83d\udc33"
    text = WHALE * 40_000
    cut = render.cut_utf16(text, render.FIELD_CHARS)
    assert units(cut) == render.FIELD_CHARS - 1 and len(cut) == render.FIELD_CHARS // 2


def test_an_emoji_artefact_is_cut_by_utf16_units_with_the_pointer(fake: FakeJira) -> None:  # noqa: F811
    ref = fake.channel().open_request(view(request(), shown=WHALE * 40_000))
    description = fake.issue(ref["issue_id"])["fields"]["description"]
    assert units(description) <= render.FIELD_CHARS, units(description)
    assert "_… cut at 30,000 characters; the whole value: {{hazel show a1b2c3d4e5f6 --full}}_" in description
    assert "h3. How to answer" in description and description.count("{noformat}") == 2
    block = description.split("{noformat}\n", 1)[1].split("\n{noformat}", 1)[0]
    assert set(block) == {WHALE} and 29_000 < units(block) <= 30_000


def test_a_mapping_of_emoji_texts_fits(fake: FakeJira) -> None:  # noqa: F811
    files = {f"{i:02}_{WHALE * 50}.sql": WHALE * 3_000 for i in range(20)}
    ref = fake.channel().open_request(view(request(), shown=files))
    description = fake.issue(ref["issue_id"])["fields"]["description"]
    assert units(description) <= render.FIELD_CHARS and description.count("{noformat}") % 2 == 0
    assert "{{hazel show a1b2c3d4e5f6 --full}}" in description


def test_an_emoji_title_gives_a_summary_of_at_most_255_units(fake: FakeJira) -> None:  # noqa: F811
    titled = request().model_copy(update={"title": WHALE * 200})
    ref = fake.channel().open_request(view(titled))
    summary = fake.issue(ref["issue_id"])["fields"]["summary"]
    assert units(summary) <= render.SUMMARY_CHARS and summary.endswith(WHALE + "…"), units(summary)
    assert units(summary) >= render.SUMMARY_CHARS - 2


@pytest.mark.parametrize("reason", [WHALE * 50_000, "first line\n" + WHALE * 50_000], ids=["line", "block"])
def test_an_emoji_reason_gives_comments_that_fit(fake: FakeJira, reason: str) -> None:  # noqa: F811
    channel = fake.channel(rejected_status="Rejected")
    ref = channel.open_request(view(request()))
    settled = request(status=RequestStatus.DECIDED, action="reject", ref=ref)
    channel.update_request(view(settled, decisions=(decision("reject", reason=reason),)))
    channel.progress(ProgressView(run=run(), workflow="migration-plan", event="rejected", request=settled,
                                  facts={"by": "priya", "reason": reason}))
    outcome, progress = fake.bodies(ref["issue_id"])
    for body in (outcome, progress):
        assert units(body) <= render.FIELD_CHARS, units(body)
        assert body.count("{noformat}") % 2 == 0 and "(cut at 30,000 characters)" in body
    assert outcome.startswith("(x) Rejected by Sam SME: ")
    assert progress.startswith("Run a1b2c3d4e5f6 ended rejected by priya: ")


def test_a_comment_is_cut_by_utf16_units_with_or_without_a_delivery(fake: FakeJira) -> None:  # noqa: F811
    """A refusal (no delivery) and an outbox comment alike: what a longer text would send is cut at Jira's limit
    counted in code units, a pair never split."""
    channel = fake.channel()
    ref = channel.open_request(view(request()))
    channel.comment(ref["issue_id"], "x" + WHALE * 20_000)
    (body,) = fake.bodies(ref["issue_id"])
    assert units(body) == render.FIELD_CHARS and body == "x" + WHALE * (render.FIELD_CHARS // 2)
    channel.comment(ref["issue_id"], WHALE * 20_000)
    assert units(fake.bodies(ref["issue_id"])[-1]) == render.FIELD_CHARS - 1
