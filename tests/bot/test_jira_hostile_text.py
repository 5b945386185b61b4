"""A Jira commenter's display name (or a command) holding wiki markup is never echoed back as markup or a
mention in Hazel's answer on the issue (issue 11, item 1)."""

from __future__ import annotations

from typing import Iterator

import pytest

from integrations.jira.render import inline
from tests.integrations.jira.test_jira_hostile_text import LINE, never_markup
from tests.support.jira_env import JiraEnv, jira_env


pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)


@pytest.fixture(params=["cloud", "server"])
def env(request: pytest.FixtureRequest, db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url, cloud=request.param == "cloud") as e:
        e.fake.groups.update({e.who["stranger"]: ["jira-users"]})
        yield e


def test_a_refusal_quotes_a_hostile_name_and_command_as_text(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    answer = env.send(env.comment(issue, "/approve", person="stranger", display=LINE), webhook_id="x-1")
    assert "may not approve" in answer.json()["refused"]
    reply = env.fake.bodies(issue["id"])[-1]
    never_markup(reply)
    assert r"\[\~accountid:evil\]" in reply
    assert reply.startswith(f"[~accountid:{env.who['stranger']}]" if env.cloud else f"[~{env.who['stranger']}]")
    assert f"Who may steer this request: {inline(env.who['sme'])}" in reply, reply  # (named, not mentioned: F16)
    env.send(env.comment(issue, "/{panel}[~admin]", person="stranger", comment_id="901"), webhook_id="x-2")
    never_markup(env.fake.bodies(issue["id"])[-1])


def test_a_user_name_that_cannot_stand_in_a_mention_is_written_as_text(env: JiraEnv) -> None:
    """Fresh-user s20 L1: the answer's mention of the commenter was built from the raw user name, so a Server user
    name ``x] [~lee.lead`` closed it early and mentioned (notified) someone else; a line break broke it."""
    run_id = env.start()
    issue = env.issue(run_id)
    lead = env.who["lead"]
    for n, name in enumerate((f"x] [~{lead}", f"x] [~accountid:{lead}", "x\ny")):
        env.fake.groups.update({name: ["jira-users"]})
        answer = env.send(env.comment(issue, "/approve", person=name, comment_id=f"95{n}"), webhook_id=f"m-{n}")
        assert "may not approve" in answer.json()["refused"], answer.text
        reply = env.fake.bodies(issue["id"])[-1]
        opening = reply.split(" may not approve", 1)[0]
        assert f"[~{lead}]" not in reply and f"[~accountid:{lead}]" not in reply, reply  # nobody else notified
        assert "[~x" not in opening, opening  # (written as text, escaped)
        # (s30 D4: the name was written twice, once for the mention that could not be, once naming them)
        assert opening in (inline(name), inline(name.replace("\n", "\ufffd"))), opening
