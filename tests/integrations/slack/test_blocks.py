"""Block Kit rendering: messages, modals and the Home tab stay within Slack's limits (checked with the same
rules the fake Web API enforces) and carry what the SME needs."""

from __future__ import annotations

import json
import random
import re

import pytest

from integrations.slack import blocks as B
from integrations.slack import modals as M
from integrations.slack import text as T
from store.models import RequestStatus, RewindChoices
from tests.support.fake_slack import block_problems, view_problems
from tests.support.slack_views import decision, make_view


def unfence(chunks: list[str]) -> str:
    """The text of packed chunks with the fences the packer added removed (to compare with the input)."""
    return "\n".join(line for c in chunks for line in c.split("\n") if line != "```")


def test_escape_and_markdown_to_mrkdwn() -> None:
    units = T.units_of("# Title\nuse **bold** & <tags>\n```sql\nSELECT 1 < 2;\n```")
    assert units == [("*Title*", False), ("use *bold* &amp; &lt;tags&gt;", False), ("SELECT 1 &lt; 2;", True)]
    assert T.chunks("a\n```\nx\n```", 3000) == ["a\n```\nx\n```"]


@pytest.mark.parametrize("seed", range(5))
def test_pack_keeps_every_line_and_every_piece_within_the_limit(seed: int) -> None:
    rng = random.Random(seed)
    words = ["alpha", "<b>", "&", "x" * 70, "```", "# Head", "**b**", "\n", "\n\n", "y" * 4000]
    source = "".join(rng.choice(words) + " " for _ in range(3000))
    pieces = T.chunks(source, 3000)
    assert len(pieces) > 3
    assert all(0 < len(p) <= 3000 for p in pieces)
    assert all(p.split("\n").count("```") % 2 == 0 for p in pieces)  # every piece's code blocks are balanced
    expected = [line for line, _ in T.units_of(source) if line]
    got = unfence(pieces).replace("\n", "")
    assert got == "".join(expected)
    assert not any(re.search(r"&[a-z]{0,3}$", p.replace("```", "").rstrip("\n")) for p in pieces)


def test_request_message_has_header_context_artefact_and_only_allowed_buttons() -> None:
    view = make_view(actions=("approve", "reject"))
    fallback, blocks, needs_file = B.request_message(view)
    assert not needs_file and not block_problems(blocks, surface="message")
    assert blocks[0] == {"type": "header", "text": {"type": "plain_text", "text": "Approve the migration plan",
                                                    "emoji": False}}
    context = " ".join(e["text"] for e in blocks[1]["elements"])
    for fact in ("migration-plan", "review_plan", "abcdef123456", "<@U0000000009>", "due <!date^",
                 "<@U0000000001>", "<!subteam^S0000000001>"):
        assert fact in context
    assert blocks[2]["text"]["text"].startswith("*Plan*")
    buttons = blocks[-1]["elements"]
    assert [b["action_id"] for b in buttons] == ["hazel_approve", "hazel_reject"]
    assert buttons[0]["style"] == "primary" and buttons[0]["value"] == "abcdef123456:7"  # (the run, the request)
    assert buttons[1]["style"] == "danger" and buttons[1]["confirm"]["confirm"]["text"] == "Reject"
    assert "waits for a decision" in fallback


def test_a_button_value_names_the_run_and_the_request_within_slacks_limit() -> None:
    assert B.read_button_value(B.button_value("abcdef123456", 7)) == B.ButtonValue("abcdef123456", 7)
    longest = B.button_value("f" * 32, 2**31 - 1)  # (the runs.id column's width, the largest request id)
    assert len(longest) == 43 <= B.MAX_BUTTON_VALUE_CHARS
    assert B.read_button_value("7") == B.ButtonValue(None, 7)  # a card an older Hazel posted: the request alone
    for forged in (" 7", "+7", "\uff17", "7\n", "a:b", ":7", "abc:", "a:7:8", "x" * 33 + ":7", "\u00e9:7", None, 7):
        assert B.read_button_value(forged) is None, forged
    with pytest.raises(ValueError):
        B.button_value("not a run id", 7)
    home = B.home_view([make_view()], [])
    values = [e["value"] for b in home["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert values and set(values) == {"abcdef123456:7"}


def test_long_artefact_is_split_over_sections_then_previewed_with_a_file() -> None:
    medium = "\n".join(f"{i:05d} " + "m" * 90 for i in range(80))  # ~7,700 characters
    _, blocks, needs_file = B.request_message(make_view(shown=medium))
    sections = [b for b in blocks if b["type"] == "section"]
    assert not needs_file and len(sections) == 3
    assert "".join(s["text"]["text"].replace("\n", "") for s in sections) == medium.replace("\n", "")
    assert not block_problems(blocks, surface="message")

    huge = "\n".join(f"line {i} " + "z" * 120 for i in range(470))  # ~60,000 characters
    _, blocks, needs_file = B.request_message(make_view(shown=huge))
    assert needs_file and not block_problems(blocks, surface="message")
    assert sum(len(t) for t in re.findall(r'"text": "((?:[^"\\]|\\.)*)"', json.dumps(blocks))) < 13000
    assert "60," in json.dumps(blocks) or "59," in json.dumps(blocks)  # the note says how long it is


def test_structured_artefact_renders_each_file_in_a_code_block() -> None:
    scripts = {"001_up.sql": "BEGIN;\nALTER TABLE t ADD c int;\nCOMMIT;", "001_down.sql": "DROP c;"}
    _, blocks, _ = B.request_message(make_view(shown=scripts, show="scripts"))
    text = blocks[2]["text"]["text"]
    assert text.startswith("*001_up.sql*\n```\nBEGIN;") and "*001_down.sql*\n```\nDROP c;\n```" in text


def test_decided_message_shows_outcome_who_when_and_no_buttons() -> None:
    d = decision("reject", payload={"reason": "too risky <now>"})
    view = make_view(status=RequestStatus.DECIDED, decided_action="reject", decisions=(d,))
    fallback, blocks, _ = B.request_message(view)
    assert not any(b["type"] == "actions" for b in blocks)
    outcome = blocks[-1]["text"]["text"]
    assert outcome.startswith("⛔ Rejected by <@U0000000001> · <!date^") and "too risky &lt;now&gt;" in outcome
    assert "Rejected" in fallback


def test_quorum_votes_are_shown_and_buttons_stay() -> None:
    view = make_view(approvals_required=2, approvals=1, decisions=(decision("approve"),))
    _, blocks, _ = B.request_message(view)
    assert "1 of 2 approvals so far: <@U0000000001>" in blocks[-2]["text"]["text"]
    assert blocks[-1]["type"] == "actions"


def test_edit_modal_one_input_per_field_and_long_text_in_parts() -> None:
    meta = {"request_id": 7, "run_id": "abcdef123456", "channel": "C0000000001"}
    scripts = {"a.sql": "SELECT 1;", "b.sql": "SELECT 2;"}
    modal = M.edit_modal(make_view(shown=scripts, show="scripts"), meta)
    assert not view_problems(modal)
    inputs = [b for b in modal["blocks"] if b["type"] == "input"]
    assert [(b["label"]["text"], b["element"]["initial_value"]) for b in inputs] == [
        ("a.sql", "SELECT 1;"), ("b.sql", "SELECT 2;")]

    plan = "p" * 7000
    modal = M.edit_modal(make_view(shown=plan), meta)
    assert not view_problems(modal)
    inputs = [b for b in modal["blocks"] if b["type"] == "input"]
    assert len(inputs) == 3 and "".join(b["element"]["initial_value"] for b in inputs) == plan
    values = {b["block_id"]: {"value": {"type": "plain_text_input", "value": b["element"]["initial_value"]}}
              for b in inputs}
    assert M.edit_payload(plan, "plan", values) == {"text": plan}

    with pytest.raises(M.TooLargeToEditError):
        M.edit_modal(make_view(shown="q" * 400_000), meta)


def test_edit_payload_hands_typed_entries_to_the_engine_which_parses_them() -> None:
    """The modal only collects what was typed; the engine parses it (text for text, JSON otherwise) and names
    the entry whose JSON does not parse, which the modal flags."""
    from bot.engine.errors import InvalidDecisionError
    from bot.engine.steering.edits import edited_value

    original = {"count": 3, "note": "x"}
    values = {"edit_0_0": {"value": {"value": "[1, 2"}}, "edit_1_0": {"value": {"value": None}}}
    payload = M.edit_payload(original, "cfg", values)
    assert payload == {"entries": {"count": "[1, 2", "note": None}}
    with pytest.raises(InvalidDecisionError, match="invalid edit: entry 'count' of field 'cfg' must be given as "
                       "JSON here") as err:
        edited_value(original, "cfg", payload)
    assert M.block_for_error(original, "cfg", str(err.value)) == "edit_0_0"
    values["edit_0_0"]["value"]["value"] = "5"
    assert edited_value(original, "cfg", M.edit_payload(original, "cfg", values)) == {"count": 5, "note": None}
    assert M.block_for_error(original, "cfg", "invalid edit: cfg.note: Input should be a valid string") == "edit_1_0"
    flipped = {"note": "x", "count": 3}  # the entry the engine names is flagged, not the first one
    with pytest.raises(InvalidDecisionError) as err:
        edited_value(flipped, "cfg", {"entries": {"count": "[1, 2"}})
    assert M.block_for_error(flipped, "cfg", str(err.value)) == "edit_1_0"


def test_rewind_and_reason_modals_are_valid() -> None:
    meta = {"request_id": 7, "run_id": "abcdef123456", "channel": None}
    view = make_view()
    rewind = M.rewind_modal(view, meta)
    assert not view_problems(rewind)
    options = rewind["blocks"][2]["element"]["options"]
    assert [o["value"] for o in options] == ["1", "0"] and options[0]["text"]["text"].startswith("#1 → review_plan")
    for kind in ("reject", "feedback"):
        assert not view_problems(M.reason_modal(kind, view, meta))


def plain_texts(value: object) -> list[dict]:
    """Every ``plain_text`` object in a Block Kit payload."""
    if isinstance(value, list):
        return [p for v in value for p in plain_texts(v)]
    if not isinstance(value, dict):
        return []
    own = [value] if value.get("type") == "plain_text" else []
    return own + [p for v in value.values() for p in plain_texts(v)]


def test_shortcodes_in_a_workflows_or_persons_words_stay_as_written() -> None:
    """A title, a field name, a key or a step name holding ``:tada:`` is shown with its colons: every
    ``plain_text`` object has ``"emoji": false``."""
    meta = {"request_id": 7, "run_id": "abcdef123456", "channel": None}
    view = make_view(shown={":key:": "v"}, show=":memo:")
    boom = tuple(c.model_copy(update={"next_step": ":boom:"}) for c in view.checkpoints)
    view = view.model_copy(update={"title": ":tada: Ship it", "checkpoints": boom,
                                   "rewind": RewindChoices(checkpoints=boom, total=len(boom))})
    surfaces = [B.request_message(view)[1], B.request_message(view.model_copy(update={"escalation": True}))[1],
                M.edit_modal(view, meta), M.rewind_modal(view, meta),
                M.reason_modal("reject", view, meta), B.home_view([view], [])]
    objects = plain_texts(surfaces)
    texts = " ".join(o["text"] for o in objects)
    for shortcode in (":tada: Ship it", "Edit :memo:", ":key:", "→ :boom:"):
        assert shortcode in texts, shortcode
    assert objects and all(o["emoji"] is False for o in objects)


def test_home_view_fits_100_blocks_however_many_requests_wait() -> None:
    views = [make_view(request_id=i) for i in range(60)]
    home = B.home_view(views, [(v.run, v.request) for v in views[:15]], notice="Already approved")
    assert not view_problems(home) and len(home["blocks"]) <= 100
    assert "…and" in json.dumps(home, ensure_ascii=False)
    empty = B.home_view([], [])
    assert not view_problems(empty) and "Nothing is waiting on you" in json.dumps(empty)


def test_progress_texts() -> None:
    from store.models import ProgressView

    view = make_view()
    nxt = view.request.model_copy(update={"title": "Review the scripts", "channel": "slack:C0000000002"})
    waiting = ProgressView(run=view.run, workflow="migration-plan", event="waiting", request=view.request,
                           next_request=nxt, steps=("write_scripts",))
    assert B.progress_text(waiting) == ("Ran `write_scripts`. Run `abcdef123456` now waits at *Review the scripts* "
                                        "in <#C0000000002>.")
    failed = ProgressView(run=view.run, workflow="migration-plan", event="failed", request=view.request,
                          facts={"step": "deploy", "error": "boom <x>"})
    assert "failed at `deploy`: boom &lt;x&gt;" in B.progress_text(failed)
