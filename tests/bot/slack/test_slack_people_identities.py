"""A people file maps each person to their console, REST API, Slack and Jira identities (README "Who is who"):
Slack messages name the person who started a run through the REST API (not the token's name), approvers
listed as ``people`` are shown by their Slack mention (once) and DMed (``notify_approvers``, escalation), the
starter of a run under a self-approval ban is neither DMed nor shown the request as "waiting on you", and a
signed ``block_actions`` with an action_id Hazel never posts is a 400 naming why. Real HTTP into
``/slack/events`` with signed payloads; only Slack's Web API is faked (on loopback)."""

from __future__ import annotations

import copy

from pydantic import BaseModel

from bot.engine.workflow import StepContext, Workflow
from bot.ops.scheduler import Scheduler
from integrations.jira import render as jira_render
from integrations.jira.options import JiraOptions
from store.models import Approvers
from tests.bot.slack.conftest import SlackEnv
from tests.support.clock import FakeClock

PRIYA_ID, OLGA_ID, DAN_ID = "U0000000001", "U0000000011", "U0000000012"
PEOPLE = f"""
[people.priya]
slack = ["{PRIYA_ID}"]
api = ["priya-ci"]
console = ["pk"]

[people.olga]
slack = ["{OLGA_ID}"]
api = ["olga-ci"]

[people.dan]
slack = ["{DAN_ID}"]

[people.sam]
console = ["sam"]
"""


class Doc(BaseModel):
    text: str = ""


def workflow(**options: object) -> Workflow:
    """draft -> review in #migrations (approvers listed as people), DMs its approvers."""
    wf = Workflow("people-wf", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": "drop the legacy column"}

    settings: dict = dict(channel="slack:#migrations", approvers=Approvers(people=("sam", "dan", "priya")),
                          notify_approvers=True)
    settings.update(options)
    wf.steer("review", show="text", **settings)
    return wf


def make(make_env, tmp_path, monkeypatch, wf: Workflow, **kwargs) -> SlackEnv:  # noqa: ANN001
    people = tmp_path / "people.toml"
    people.write_text(PEOPLE, encoding="utf-8")
    monkeypatch.setenv("HAZEL_PEOPLE_FILE", str(people))
    return make_env(wf, **kwargs)


def start_by_api(env: SlackEnv, token_name: str) -> str:
    """Start a run as the REST API does for a token named ``token_name``."""
    actor = env.hazel.identify(channel="api", id=token_name)
    return env.hazel.start(workflow="people-wf", input={}, actor=actor).id


def dms(env: SlackEnv, user: str) -> list:
    return env.fake.channel_messages("D" + user[1:])


def test_cards_name_the_person_and_people_approvers_are_mentioned_and_dmed(make_env, tmp_path,
                                                                             monkeypatch) -> None:  # noqa: ANN001
    env = make(make_env, tmp_path, monkeypatch, workflow())
    run_id = start_by_api(env, "olga-ci")
    env.settle()
    message = env.request_message(run_id)
    text = str(message.blocks)
    assert "started by olga" in text and "olga-ci" not in text, text
    assert f"Approvers: sam, <@{DAN_ID}>, <@{PRIYA_ID}>" in text, text
    assert "dan," not in text and "priya" not in text, text
    for user in (DAN_ID, PRIYA_ID):  # people listed by name, DMed by their Slack id
        [dm] = env.wait(lambda u=user: dms(env, u), f"the DM to {user}")
        assert "started by olga" in str(dm.blocks) and any(b["type"] == "actions" for b in dm.blocks)
    request = env.pending(run_id)
    assert {d["user"] for d in request.message_ref["dms"]} == {DAN_ID, PRIYA_ID}
    # App Home says the same
    assert env.sender.home_opened(DAN_ID).status_code == 200
    home = env.wait(lambda: "Waiting on you (1)" in str(env.fake.homes.get(DAN_ID)) and env.fake.homes[DAN_ID],
                    "dan's Home tab")
    assert "started by olga" in str(home) and "olga-ci" not in str(home)
    # Jira's issue description renders the same view field
    view = env.hazel.request_view(request_id=request.id)
    description = jira_render.description(view, JiraOptions(), cloud=True)
    assert "*Started by:* olga (api)" in description, description


def test_an_escalation_dms_backup_approvers_listed_as_people(make_env, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    clock = FakeClock()
    wf = workflow(approvers=Approvers(people=("dan",)), notify_approvers=False, escalate_after_sec=10,
                  escalate_to=Approvers(people=("olga",)))
    env = make(make_env, tmp_path, monkeypatch, wf, clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = start_by_api(env, "pk")
    env.settle()
    message = env.request_message(run_id)
    assert "started by priya" in str(message.blocks) and "pk" not in str(message.blocks).replace("pkg", "")
    assert not dms(env, OLGA_ID)
    clock.advance(11)
    scheduler.tick()
    env.settle()
    assert env.pending(run_id).escalated_at is not None
    [dm] = env.wait(lambda: dms(env, OLGA_ID), "the escalation's DM to olga")
    assert any(b["type"] == "actions" for b in dm.blocks)
    notice = [m for m in env.fake.channel_messages(message.channel, thread_ts=message.ts)
              if "escalated" in (m.text or "")]
    assert notice and f"escalated to <@{OLGA_ID}>" in notice[0].text, [m.text for m in notice]
    assert "olga" not in notice[0].text.replace(f"<@{OLGA_ID}>", "")


def test_the_starter_under_a_self_approval_ban_gets_no_dm_nor_waits(make_env, tmp_path,
                                                                     monkeypatch) -> None:  # noqa: ANN001
    env = make(make_env, tmp_path, monkeypatch, workflow(allow_self_approval=False))
    run_id = start_by_api(env, "priya-ci")
    env.settle()
    env.request_message(run_id)
    env.wait(lambda: dms(env, DAN_ID), "the DM to dan")
    assert not dms(env, PRIYA_ID), "the starter was DMed a request she may not approve"
    assert {d["user"] for d in env.pending(run_id).message_ref["dms"]} == {DAN_ID}
    assert env.sender.home_opened(PRIYA_ID).status_code == 200
    home = env.wait(lambda: env.fake.homes.get(PRIYA_ID), "priya's Home tab")
    assert "Waiting on you (0)" in str(home), home
    assert env.sender.home_opened(DAN_ID).status_code == 200
    env.wait(lambda: "Waiting on you (1)" in str(env.fake.homes.get(DAN_ID)), "dan's Home tab")


def test_an_unknown_action_id_is_a_400_naming_why(make_env, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    env = make(make_env, tmp_path, monkeypatch, workflow())
    run_id = start_by_api(env, "olga-ci")
    env.settle()
    message = env.request_message(run_id)
    payload = copy.deepcopy(env.sender.click_payload(DAN_ID, "approve", message))
    payload["actions"][0]["action_id"] = "hazel_bogus"
    response = env.sender.send_payload(payload)
    assert response.status_code == 400, response.text
    assert response.text.startswith("malformed Slack request: action_id 'hazel_bogus' is not one of Hazel's"), \
        response.text
    payload["actions"][0]["action_id"] = "other"
    assert env.sender.send_payload(payload).status_code == 400
    assert env.pending(run_id) is not None and not env.hazel.decisions(run_id=run_id)
