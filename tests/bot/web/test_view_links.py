"""The "View run" links of Slack cards and Jira issues: signed, view only, opening the run's page; absent
without HAZEL_BASE_URL or HAZEL_WEB_SECRET."""

from __future__ import annotations

import re

from slack_sdk import WebClient

from bot.inbound.web import link_maker
from bot.server.wiring import jira_channel, slack_channel
from integrations.jira import render
from integrations.jira.options import JiraOptions
from integrations.slack import SlackChannel
from integrations.slack import blocks as B
from tests.bot.web.conftest import Browserless, Served
from tests.bot.web.scenario import web_settings
from tests.support.fake_slack import FakeSlack


def pending_view(served: Served, channel: str = "slack:C0000000001"):  # noqa: ANN201
    request = served.hazel.pending_request(run_id=served.run_id)
    view = served.hazel.request_view(request_id=request.id)
    return view.model_copy(update={"request": view.request.model_copy(update={"channel": channel})})


def test_a_slack_card_links_to_the_run_page(served: Served) -> None:
    make_link = link_maker(web_settings(served.url))
    with FakeSlack(channels={"migrations": "C0000000001"}) as slack:
        channel = SlackChannel(WebClient(token=slack.bot_token, base_url=slack.api_url), link_for=make_link)
        ref = channel.open_request(pending_view(served))
        posted = slack.message(ref["channel"], ref["ts"])
    texts = [e["text"] for b in posted.blocks if b["type"] == "context" for e in b["elements"]]
    found = [m for t in texts for m in re.findall(r"<(http[^|>]+)\|View run>", t)]
    assert len(found) == 1 and found[0].startswith(f"{served.url}/runs/{served.run_id}?t=")
    client = Browserless(served.url)
    opened = client.get(found[0].removeprefix(served.url))
    assert opened.status_code == 303
    page = client.get(f"/runs/{served.run_id}")
    assert page.status_code == 200 and "Review the plan" in page.text and 'value="approve"' not in page.text


def test_a_jira_issue_links_to_the_run_page(served: Served) -> None:
    url = link_maker(web_settings(served.url))(served.run_id)
    body = render.description(pending_view(served, "jira:MIG"), JiraOptions(), cloud=True, link=url)
    assert f"*View run:* [the checkpoint tree, diffs and audit log|{url}]" in body
    assert "View run" not in render.description(pending_view(served, "jira:MIG"), JiraOptions(), cloud=True)


def test_no_link_without_a_base_url_or_a_secret(served: Served) -> None:
    view = pending_view(served)
    assert link_maker(web_settings()) is None  # no HAZEL_BASE_URL
    from bot.settings import Settings

    assert link_maker(Settings(HAZEL_BASE_URL="https://hazel.example.com")) is None  # no secret
    _, blocks, _ = B.request_message(view)
    assert "View run" not in str(blocks)
    wired = slack_channel(web_settings("https://hazel.example.com", SLACK_BOT_TOKEN="xoxb-test"))
    assert wired.link_for(served.run_id).startswith(f"https://hazel.example.com/runs/{served.run_id}?t=")
    assert slack_channel(web_settings(SLACK_BOT_TOKEN="xoxb-test")).link_for is None
    jira = jira_channel(web_settings("https://hazel.example.com", JIRA_URL="https://x.atlassian.net",
                                     JIRA_USER="u@example.com", JIRA_API_TOKEN="t"))
    assert jira.link_for(served.run_id).startswith("https://hazel.example.com/runs/")
