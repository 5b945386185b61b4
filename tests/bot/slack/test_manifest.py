"""``manifest.yml`` against the code: every slash command, event and Web API method Hazel uses is covered by the
manifest, and the manifest asks for no bot scope the code does not need.

What the code uses is read from the code itself: the ``WebClient`` methods called anywhere in ``bot/inbound/slack`` and
``integrations/slack`` (resolved to Web API methods through slack_sdk's own source, so ``files_upload_v2``
counts as the methods it calls), and the arguments of Bolt's ``app.command`` / ``app.event`` decorators. The
methods the fake Slack Web API answered in this session must be among them too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import pickle
import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml
from slack_sdk import WebClient

from bot.inbound.slack.http import EVENTS_PATH
from tests.support.fake_slack import FakeSlack

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = [ROOT / "bot" / "inbound" / "slack", ROOT / "integrations" / "slack"]

SCOPES = {
    # Slack's documented bot scope per Web API method (https://docs.slack.dev/reference/methods/<method>).
    "chat.postMessage": {"chat:write"},
    "chat.update": {"chat:write"},
    "chat.postEphemeral": {"chat:write"},
    # a retried post looks for the message an earlier attempt may have left: public and private channels
    # (https://docs.slack.dev/reference/methods/conversations.history, .../conversations.replies,
    # .../conversations.list)
    "conversations.history": {"channels:history", "groups:history"},
    "conversations.replies": {"channels:history", "groups:history"},
    "conversations.list": {"channels:read", "groups:read"},
    "files.getUploadURLExternal": {"files:write"},
    "files.completeUploadExternal": {"files:write"},
    "usergroups.users.list": {"usergroups:read"},
    # users.info needs users:read; its profile.email needs users:read.email as well
    # (https://docs.slack.dev/reference/methods/users.info, "email" in the user object's profile).
    "users.info": {"users:read", "users:read.email"},
    "views.open": set(),
    "views.publish": set(),
    "views.update": set(),
    "views.push": set(),
    "auth.test": set(),
}
EVENT_SCOPES = {"app_home_opened": set()}  # https://docs.slack.dev/reference/events/app_home_opened
APP_LEVEL = {"apps.connections.open"}
"""Called with the app-level token (Socket Mode), whose scope ``connections:write`` is not a bot scope."""


def manifest() -> dict:
    return yaml.safe_load((ROOT / "manifest.yml").read_text(encoding="utf-8"))


@cache
def api_methods_of(client_method: str) -> frozenset[str]:
    """The Web API methods a ``WebClient`` method calls (``api_call("x.y")``, or other client methods)."""
    source = inspect.getsource(getattr(WebClient, client_method))
    found = set(re.findall(r'api_call\(\s*"([A-Za-z.]+)"', source))
    for name in re.findall(r"self\.([a-z]+_[A-Za-z_]+)\(", source):
        if name != client_method and callable(getattr(WebClient, name, None)) and name != "api_call":
            found |= api_methods_of(name)
    return frozenset(found)


def _parse(path: Path) -> ast.Module:
    """``ast.parse`` of ``path`` in a Python process of its own, the tree sent back pickled. CPython 3.11.7 keeps
    the AST constructor's recursion count per interpreter and misses restoring it on error paths (gh-106905), so
    another parse in this process (another thread's, or 3.11's ``traceback`` module parsing a failing line) can
    leave it off and ``ast.parse`` raises ``SystemError: AST constructor recursion depth mismatch``. Parsing in a
    thread of our own did not avoid it: CI failed on it."""
    done = subprocess.run([sys.executable, "-c", "import ast, pickle, sys; sys.stdout.buffer.write("
                           "pickle.dumps(ast.parse(open(sys.argv[1], encoding='utf-8').read())))", str(path)],
                          capture_output=True, check=True, timeout=60)
    return pickle.loads(done.stdout)


def used_in_code() -> tuple[set[str], set[str], set[str]]:
    """``(Web API methods, slash commands, events)`` the Slack code uses."""
    methods: set[str] = set()
    commands: set[str] = set()
    events: set[str] = set()
    for package in PACKAGES:
        for path in sorted(package.glob("*.py")):
            tree = _parse(path)
            module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and "_" in node.attr and node.attr != "api_call" \
                        and callable(getattr(WebClient, node.attr, None)):
                    methods |= api_methods_of(node.attr)  # called, or passed on to be called
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                        and node.func.attr in ("command", "event"):
                    arg = node.args[0]
                    if isinstance(arg, ast.Call):  # a pattern: the catch-all of events Hazel does not subscribe
                        continue  # to (bot.inbound.slack.home), no subscription
                    value = arg.value if isinstance(arg, ast.Constant) else getattr(module, arg.id)
                    (commands if node.func.attr == "command" else events).add(value)
    methods.add("auth.test")  # Bolt's own authorization middleware calls it once (token_verification off)
    return methods, commands, events


def test_the_code_uses_what_we_think_it_does() -> None:
    methods, commands, events = used_in_code()
    assert {"chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "views.publish",
            "usergroups.users.list", "files.getUploadURLExternal", "files.completeUploadExternal"} <= methods
    assert commands == {"/hazel"} and events == {"app_home_opened"}


def test_manifest_covers_every_method_command_and_event_with_exactly_the_scopes_needed() -> None:
    m = manifest()
    methods, commands, events = used_in_code()
    unknown = methods - set(SCOPES) - APP_LEVEL
    assert not unknown, f"add the documented scopes of {unknown} to SCOPES"
    needed = set().union(*(SCOPES[x] for x in methods if x in SCOPES), *(EVENT_SCOPES[e] for e in events))
    if commands:
        needed.add("commands")
    assert set(m["oauth_config"]["scopes"]["bot"]) == needed

    declared = {c["command"]: c for c in m["features"]["slash_commands"]}
    assert set(declared) == commands
    assert set(m["settings"]["event_subscriptions"]["bot_events"]) == events
    urls = [c["url"] for c in declared.values()] + [m["settings"]["event_subscriptions"]["request_url"],
                                                    m["settings"]["interactivity"]["request_url"]]
    assert all(u.startswith("https://") and u.endswith(EVENTS_PATH) for u in urls)
    assert m["settings"]["interactivity"]["is_enabled"] is True
    assert m["features"]["bot_user"]["display_name"]
    if "views.publish" in methods:
        assert m["features"]["app_home"]["home_tab_enabled"] is True
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # DMs to approvers


def test_every_method_the_fake_answered_is_one_the_code_uses() -> None:
    methods, _, _ = used_in_code()
    seen = FakeSlack.methods_seen - {"upload"}  # the upload URL of files_upload_v2 is not a Web API method
    assert seen <= methods | APP_LEVEL, seen - methods
