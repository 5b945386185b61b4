"""A run for the run pages' tests and screenshots: the ``doc`` workflow (tests/workflows/doc.py), a topic
holding a ``<script>``, feedback from bob, two rewinds by alice, waiting at the review again."""

from __future__ import annotations

from typing import Any

from bot.settings import Settings
from store.models import Actor

SECRET = "web-secret-for-tests-0123456789abcdef"
ALICE, BOB = "tok-alice-0123456789", "tok-bob-9876543210"
WEB = {"HAZEL_WEB_SECRET": SECRET, "HAZEL_API_TOKENS": f"alice={ALICE}, bob={BOB}"}
SCRIPT_TOPIC = "backups <script>document.title='pwned';window.pwned=1</script>"


def web_settings(base_url: str | None = None, **extra: Any) -> Settings:
    return Settings(**WEB, **({"HAZEL_BASE_URL": base_url} if base_url else {}), **extra)


def as_api(hazel: Any, name: str) -> Actor:
    return hazel.identify(channel="api", id=name, name=name)


def run_with_two_rewinds(hazel: Any) -> str:
    """Start a ``doc`` run and steer it: feedback (bob), rewind to #1 with feedback (alice), rewind to the
    second draft on the abandoned branch (alice). Returns the run id; the run waits at ``review``."""
    alice, bob = as_api(hazel, "alice"), as_api(hazel, "bob")
    run = hazel.start(workflow="doc", input={"topic": SCRIPT_TOPIC}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=run.id)
    hazel.decide(run_id=run.id, action="feedback", actor=bob, payload={"text": "add a restore drill"})
    hazel.drive(run_id=run.id)
    hazel.rewind(run_id=run.id, actor=alice, to=1, feedback="start over: cover the offsite copy too")
    hazel.drive(run_id=run.id)
    hazel.rewind(run_id=run.id, actor=alice, to=3, feedback="keep the restore drill; add the retention policy")
    hazel.drive(run_id=run.id)
    assert hazel.get(run_id=run.id).status.value == "waiting"
    return run.id
