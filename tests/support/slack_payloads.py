"""Inbound Slack traffic for tests: payloads built from the real shapes in ``tests/fixtures/slack`` (our ids and
values substituted), signed with the signing secret as Slack signs them, and sent over HTTP to the app.

Signature (https://docs.slack.dev/authentication/verifying-requests-from-slack): ``X-Slack-Signature`` is
``v0=`` + hex HMAC-SHA256(signing secret, ``v0:{X-Slack-Request-Timestamp}:{raw body}``).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx

from tests.support.fake_slack import FakeSlack, Message

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slack"
TEAM = {"id": "T0000000002", "domain": "example-workspace"}


def fixture(name: str) -> Any:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else text


def sign(body: str, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The two headers Slack adds to every request."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


class SlackSender:
    """Sends signed Slack requests to ``url`` (the app's ``/slack/events``); trigger ids come from ``fake``."""

    def __init__(self, url: str, secret: str, fake: FakeSlack) -> None:
        self.url = url
        self.secret = secret
        self.fake = fake
        self.http = httpx.Client(timeout=30)

    def close(self) -> None:
        self.http.close()

    def post(self, body: str, *, content_type: str = "application/x-www-form-urlencoded",
             timestamp: int | None = None, secret: str | None = None, retry_num: int | None = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
        sent = {"Content-Type": content_type, **sign(body, secret or self.secret, timestamp), **(headers or {})}
        if retry_num is not None:
            sent.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"})
        return self.http.post(self.url, content=body.encode("utf-8"), headers=sent)

    # -- slash commands ------------------------------------------------------------------------------------

    def command_body(self, user: str, text: str, *, name: str | None = None, channel: str = "C0000000001",
                     trigger_id: str | None = None) -> str:
        form = dict(parse_qsl(fixture("slack_slash_command__bolt_python_test.form.txt").strip()))
        form.update(command="/hazel", text=text, user_id=user, user_name=name or user.lower(), channel_id=channel,
                    team_id=TEAM["id"], team_domain=TEAM["domain"], channel_name="migrations",
                    trigger_id=trigger_id or self.fake.new_trigger_id(), response_url=self.fake.response_url())
        for key in ("enterprise_id", "enterprise_name"):
            form.pop(key, None)
        return urlencode(form)

    def command(self, user: str, text: str, *, follow: bool = True, **kwargs: Any) -> httpx.Response:
        """``/hazel TEXT`` typed by ``user``; the reply is the response's JSON ``text``. ``follow``: a command
        acknowledged with ``WORKING`` (its answer was not ready within Slack's window) is answered through its
        ``response_url`` later: wait for that message and return it as the response (what the person reads
        next), instead of the acknowledgement."""
        retry_num = kwargs.pop("retry_num", None)
        body = self.command_body(user, text, **kwargs)
        response = self.post(body, retry_num=retry_num)
        return self.followed(response, body) if follow else response

    def followed(self, response: httpx.Response, body: str, timeout_sec: float = 30.0) -> httpx.Response:
        """``response`` to the command ``body``, or, when it was the ``WORKING`` acknowledgement, the answer
        later posted to the command's ``response_url`` (as a 200 response with that message as its JSON)."""
        from bot.inbound.slack.commands import WORKING

        if response.status_code != 200 or not response.content or response.json().get("text") != WORKING:
            return response
        url = dict(parse_qsl(body))["response_url"]
        answer = self.fake.wait_for(lambda: self.fake.responses_to(url), timeout_sec=timeout_sec,
                                    what=f"the answer to a slow command, posted to {url}")[0]
        return httpx.Response(200, json={k: v for k, v in answer.items() if k != "url"}, request=response.request)

    # -- buttons -------------------------------------------------------------------------------------------

    def click_payload(self, user: str, action: str, message: Message, *, name: str | None = None,
                      trigger_id: str | None = None) -> dict[str, Any]:
        """A ``block_actions`` payload for the ``hazel_<action>`` button of a message the fake holds."""
        payload = copy.deepcopy(fixture("slack_block_actions__bolt_python_test_message_button_with_state.json"))
        block, button = _button(message.blocks, action)
        payload.update(user={"id": user, "username": name or user.lower(), "name": name or user.lower(),
                             "team_id": TEAM["id"]},
                       team=TEAM, api_app_id="A0000000001", trigger_id=trigger_id or self.fake.new_trigger_id(),
                       container={"type": "message", "message_ts": message.ts, "channel_id": message.channel,
                                  "is_ephemeral": False},
                       channel={"id": message.channel, "name": "migrations"},
                       response_url="https://hooks.slack.com/actions/T0000000002/1/XXXXXXXX")
        payload["message"].update(ts=message.ts, text=message.text, blocks=message.blocks, team=TEAM["id"])
        payload["actions"] = [{**button, "block_id": block.get("block_id", "b"), "type": "button",
                               "action_ts": f"{time.time():.6f}"}]
        return payload

    def home_click_payload(self, user: str, action: str, home: dict[str, Any], request_id: int, *,
                           name: str | None = None) -> dict[str, Any]:
        """A ``block_actions`` payload for a button in ``user``'s Home tab (container type ``view``)."""
        payload = copy.deepcopy(fixture("slack_block_actions__bolt_python_test_ephemeral_button.json"))
        block, button = _button(home["blocks"], action, request_id)
        payload.update(user={"id": user, "username": name or user.lower(), "name": name or user.lower(),
                             "team_id": TEAM["id"]},
                       team=TEAM, trigger_id=self.fake.new_trigger_id(),
                       container={"type": "view", "view_id": "V0000000HOME"},
                       view={"id": "V0000000HOME", "type": "home", "blocks": home["blocks"]})
        for key in ("channel", "response_url"):
            payload.pop(key, None)
        payload["actions"] = [{**button, "block_id": block.get("block_id", "b"), "type": "button",
                               "action_ts": f"{time.time():.6f}"}]
        return payload

    def send_payload(self, payload: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.post(urlencode({"payload": json.dumps(payload)}), **kwargs)

    def click(self, user: str, action: str, message: Message, **kwargs: Any) -> httpx.Response:
        send = {k: kwargs.pop(k) for k in ("retry_num", "timestamp", "secret") if k in kwargs}
        return self.send_payload(self.click_payload(user, action, message, **kwargs), **send)

    # -- modals --------------------------------------------------------------------------------------------

    def submission_payload(self, user: str, view: dict[str, Any], values: dict[str, Any], *,
                           name: str | None = None) -> dict[str, Any]:
        """A ``view_submission`` of a modal the fake opened, with ``values`` as ``{block_id: value}``: a string
        for a text input (None: left empty), ``{"selected": value}`` for a select."""
        payload = copy.deepcopy(
            fixture("slack_view_submission__real_capture_single_input_private_metadata__heybot.json"))
        state: dict[str, Any] = {}
        for block_id, value in values.items():
            if isinstance(value, dict) and "selected" in value:
                state[block_id] = {"value": {"type": "static_select", "selected_option": {
                    "text": {"type": "plain_text", "text": str(value["selected"])}, "value": value["selected"]}}}
            else:
                state[block_id] = {"value": {"type": "plain_text_input", "value": value}}
        sent = {**payload["view"], **{k: view[k] for k in ("id", "type", "blocks", "private_metadata",
                                                            "callback_id", "title", "hash") if k in view},
                "state": {"values": state}}
        if "submit" in view:
            sent["submit"] = view["submit"]
        payload.update(user={"id": user, "username": name or user.lower(), "name": name or user.lower(),
                             "team_id": TEAM["id"]}, team=TEAM, view=sent, trigger_id=self.fake.new_trigger_id())
        return payload

    def submit(self, user: str, view: dict[str, Any], values: dict[str, Any], **kwargs: Any) -> httpx.Response:
        send = {k: kwargs.pop(k) for k in ("retry_num",) if k in kwargs}
        return self.send_payload(self.submission_payload(user, view, values, **kwargs), **send)

    # -- events --------------------------------------------------------------------------------------------

    def home_opened(self, user: str, *, retry_num: int | None = None) -> httpx.Response:
        """The ``app_home_opened`` event (Events API envelope, JSON body)."""
        body = json.dumps({
            "token": "XXXXXXXXXXXXXXXXXXXXXXXX", "team_id": TEAM["id"], "api_app_id": "A0000000001",
            "event": {"type": "app_home_opened", "user": user, "channel": "D" + user[1:], "tab": "home",
                      "event_ts": f"{time.time():.6f}"},
            "type": "event_callback", "event_id": f"Ev{int(time.time() * 1000)}", "event_time": int(time.time()),
            "authorizations": [{"enterprise_id": None, "team_id": TEAM["id"], "user_id": "U0000000BOT",
                                "is_bot": True, "is_enterprise_install": False}],
        })
        return self.post(body, content_type="application/json", retry_num=retry_num)


def _button(blocks: list[dict[str, Any]], action: str, request_id: int | None = None,
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    for block in blocks:
        for element in block.get("elements") or []:
            if element.get("action_id") == f"hazel_{action}" and (
                    request_id is None or str(element.get("value")).rpartition(":")[2] == str(request_id)):
                return block, element
    raise AssertionError(f"no hazel_{action} button in these blocks")
