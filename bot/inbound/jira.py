"""``POST /jira/webhook``: Jira comments and transitions as decisions, through ``Hazel.decide`` / ``rewind``.

Order of checks: the signature (``X-Hub-Signature``, 401 if wrong or missing; nothing else happens), the
payload (400 if malformed), the kind of event (others: 200, ignored), the issue (not Hazel's: 200, ignored),
the actor (Hazel's own comments and transitions: 200, ignored, so Hazel never answers itself). Then a comment
is a command (``/approve``, ``/reject REASON``, ``/edit VALUE``, ``/rewind STEP [feedback]``) or feedback,
and a transition to the point's approve / reject status is that decision. Whatever the engine refuses (not
allowed, invalid edit, already decided) is answered with a comment on the issue and changes nothing.

Duplicates decide once: decisions carry ``delivery_id`` (``comment:<id>``, ``changelog:<id>``), which the
database keeps unique, so Jira's retries and Server's ``issue_commented`` companion of a ``comment_created``
find the decision already made. Replies are deduplicated in memory (per process).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from typing import Any, Mapping

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from bot.engine.errors import HazelError, NotAllowedError, RunNotFoundError
from bot.engine.hazel import Hazel
from bot.settings import Settings
from bot.engine.versions import resolve_workflow
from bot.engine.workflow import SteeringPoint, Workflow
from integrations.base import DeliveryError, PermanentDeliveryError
from integrations.jira import (
    JiraChannel,
    JiraDirectory,
    JiraEvent,
    JiraOptions,
    MalformedWebhookError,
    build_client,
    message_key,
    parse_command,
    parse_event,
    verify_signature,
)
from integrations.jira.options import same_status
from integrations.jira.render import mention, who_may
from integrations.jira.webhook import SIGNATURE_HEADER, WEBHOOK_ID_HEADER, split_rewind
from store.models import Actor, RequestStatus, Run, SteeringRequest

log = logging.getLogger("hazel.jira")
HELP = ("Answer with a plain comment (feedback), or /approve, /reject REASON, /edit followed by the new value, "
        "/rewind STEP [feedback].")


def build_channel(settings: Settings) -> JiraChannel:
    """The Jira channel from ``JIRA_*`` settings (call only when ``settings.jira_configured``)."""
    secret = settings.jira_api_token.get_secret_value() if settings.jira_api_token else None
    pat = settings.jira_pat.get_secret_value() if settings.jira_pat else None
    client = build_client(url=settings.jira_url or "", cloud=settings.jira_cloud, user=settings.jira_user,
                          api_token=secret, pat=pat, timeout_sec=settings.jira_timeout_sec)
    defaults = JiraOptions(issue_type=settings.jira_issue_type or "Task",
                           approve_status=settings.jira_approve_status or None,
                           reject_status=settings.jira_reject_status or None,
                           done_status=settings.jira_done_status or None,
                           rejected_status=settings.jira_rejected_status or None)
    return JiraChannel(client=client, cloud=settings.jira_cloud, defaults=defaults)


class _Seen:
    """Delivery keys handled (or being handled) by this process, the newest ``size`` of them."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, key: str) -> bool:
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)
            return True

    def release(self, key: str) -> None:
        with self._lock:
            self._keys.pop(key, None)


class JiraWebhook:
    """Turns webhook deliveries into decisions.

    Args:
        channel: the Jira channel (its client answers people with comments).
        directory: Hazel's own account and people's groups.
        secret: ``JIRA_WEBHOOK_SECRET``; None refuses everything unless ``allow_unsigned``.
    """

    def __init__(self, hazel: Hazel, *, channel: JiraChannel, directory: JiraDirectory, secret: str | None,
                 allow_unsigned: bool = False) -> None:
        self.hazel = hazel
        self.channel = channel
        self.directory = directory
        self.secret = secret
        self.allow_unsigned = allow_unsigned
        self.seen = _Seen()

    def handle(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """One delivery: ``(HTTP status, JSON answer)``. 401 unsigned / wrongly signed, 400 malformed, 503
        when Jira cannot be asked now (Jira Cloud sends the webhook again), else 200. Other errors (the
        database unreachable) propagate: a 500, which Jira Cloud also retries."""
        if not (verify_signature(self.secret, body, headers.get(SIGNATURE_HEADER)) if self.secret
                else self.allow_unsigned):
            return 401, {"error": "missing or invalid X-Hub-Signature" if self.secret
                         else "JIRA_WEBHOOK_SECRET is not set: webhooks are refused"}
        try:
            event = parse_event(json.loads(body), webhook_id=headers.get(WEBHOOK_ID_HEADER))
        except (ValueError, MalformedWebhookError) as exc:  # JSONDecodeError is a ValueError
            return 400, {"error": f"malformed Jira webhook: {exc}"}
        if event is None:
            return 200, {"ignored": "not a comment or a status change"}
        key = f"{event.delivery_id}:{hashlib.sha256(event.text.encode()).hexdigest()[:16]}"
        if not self.seen.claim(key):
            return 200, {"duplicate": True}
        try:
            status, answer = self._dispatch(event)
        except DeliveryError as exc:
            self.seen.release(key)
            log.warning("jira webhook %s on issue %s: Jira unavailable: %s", event.webhook_event, event.issue_id, exc)
            return 503, {"error": "Jira is unavailable; send again later"}
        except Exception:
            self.seen.release(key)
            raise
        return status, answer

    # -- dispatch ---------------------------------------------------------------------------------------

    def _dispatch(self, event: JiraEvent) -> tuple[int, dict[str, Any]]:
        with self.hazel.store.read() as tx:
            request = tx.requests.by_message_key(message_key(event.issue_id))
        if request is None:
            return 200, {"ignored": "not an issue Hazel created"}
        if event.actor.id == self.directory.own_id():
            return 200, {"ignored": "Hazel's own change"}
        try:
            run = self.hazel.get(request.run_id)
            wf = resolve_workflow(self.hazel.registry, run)
        except RunNotFoundError:
            return 200, {"ignored": "the run is gone"}
        except HazelError as exc:  # the run's workflow version is not deployed
            return self._reply(event, str(exc), refused=True)
        point = wf.point(request.point)
        opts = self.channel.options_for(point.options)
        if event.kind == "transition":
            return self._transition(event, request, run, wf, point, opts)
        return self._comment(event, request, run, wf, point)

    def _transition(self, event: JiraEvent, request: SteeringRequest, run: Run, wf: Workflow,
                    point: SteeringPoint, opts: JiraOptions) -> tuple[int, dict[str, Any]]:
        if same_status(event.to_status, opts.approve_status):
            action, payload = "approve", {}
        elif same_status(event.to_status, opts.reject_status):
            action, payload = "reject", {"reason": event.text.strip() or f"moved to {event.to_status} in Jira"}
        else:
            return 200, {"ignored": f"status {event.to_status!r} decides nothing here"}
        if request.status is not RequestStatus.PENDING:
            return 200, {"ignored": "the request is already settled"}
        back = f" The issue goes back to {event.from_status}." if event.from_status else ""
        status, answer = self._decide(event, request, run, wf, action, payload, refused_note=back)
        if "refused" in answer and event.from_status:
            try:
                self.channel.move(event.issue_id, event.from_status)
            except DeliveryError as exc:  # the answer is posted; sending it again on a retry would repeat it
                log.warning("jira: could not move issue %s back to %r: %s", event.issue_id, event.from_status, exc)
        return status, answer

    def _comment(self, event: JiraEvent, request: SteeringRequest, run: Run, wf: Workflow,
                 point: SteeringPoint) -> tuple[int, dict[str, Any]]:
        command = parse_command(event.text)
        if command.action == "unknown":
            return self._reply(event, f"/{command.argument} is not a Hazel command. {HELP}", refused=True)
        pending = request.status is RequestStatus.PENDING
        if command.plain and (not pending or "feedback" not in point.actions or not command.argument):
            return 200, {"ignored": "a comment, not a decision"}
        if command.action == "rewind":
            to, feedback = split_rewind(command.argument)
            return self._decide(event, request, run, wf, "rewind", {"to": to, "feedback": feedback})
        if command.action == "reject":
            return self._decide(event, request, run, wf, "reject", {"reason": command.argument})
        if command.action == "feedback":
            return self._decide(event, request, run, wf, "feedback", {"text": command.argument})
        if command.action == "edit" and pending:
            tree = self.hazel.state_tree_at(run.id, request.checkpoint_seq)
            current = tree.get(point.show) if point.show and isinstance(tree, dict) else tree
            if not command.argument.strip():
                return self._reply(event, "/edit needs the new value after it. Nothing changed.", refused=True)
            if isinstance(current, str):
                value: Any = command.argument
            else:
                try:
                    value = json.loads(command.argument)
                except ValueError as exc:
                    return self._reply(event, f"/edit needs the new {point.show or 'state'} as JSON here "
                                              f"({exc}). Nothing changed; the request is still open.", refused=True)
            return self._decide(event, request, run, wf, "edit", {"value": value})
        return self._decide(event, request, run, wf, command.action, {})

    def _decide(self, event: JiraEvent, request: SteeringRequest, run: Run, wf: Workflow, action: str,
                payload: dict[str, Any], *, refused_note: str = "") -> tuple[int, dict[str, Any]]:
        actor = Actor(id=event.actor.id, channel="jira", name=event.actor.display_name,
                      groups=self._groups(wf, event.actor.id))
        pending = request.status is RequestStatus.PENDING
        try:
            if action == "rewind":
                outcome = self.hazel.rewind(run.id, actor, to=payload["to"], feedback=payload["feedback"],
                                            request_id=request.id if pending else None,
                                            delivery_id=event.delivery_id)
            else:
                outcome = self.hazel.decide(run.id, action, actor, payload=payload, request_id=request.id,
                                            delivery_id=event.delivery_id)
        except NotAllowedError as exc:
            approvers = wf.point(request.point).approvers
            return self._reply(event, f"{exc}. Nothing changed. Who may steer this request: "
                                      f"{who_may(approvers, cloud=self.channel.cloud)}.{refused_note}", refused=True)
        except HazelError as exc:  # invalid edit, already decided, unknown rewind target, …
            still = " The request is still open." if pending and action != "rewind" else ""
            return self._reply(event, f"{exc}. Nothing changed.{still}{refused_note}", refused=True)
        log.info("jira %s on issue %s by %s: %s run %s%s", event.webhook_event, event.issue_id, actor.id, action,
                 run.id, " (duplicate)" if outcome.duplicate else "")
        return 200, {"decided": outcome.decision.action.value, "run_id": run.id, "duplicate": outcome.duplicate,
                     "run_status": outcome.run_status.value}

    def _groups(self, wf: Workflow, person: str) -> frozenset[str]:
        """The person's Jira groups, looked up only when they could matter: some approver list of the workflow
        names Jira groups and does not already name this person."""
        lists = [a for p in wf.steering_points() for a in (p.approvers, p.escalate_to) if a is not None]
        if not any(a.jira_groups and person not in a.jira_users for a in lists):
            return frozenset()
        try:
            return self.directory.groups_of(person)
        except PermanentDeliveryError as exc:  # unknown user or no permission to read users: no groups
            log.warning("jira: cannot read the groups of %s: %s", person, exc)
            return frozenset()

    def _reply(self, event: JiraEvent, text: str, *, refused: bool) -> tuple[int, dict[str, Any]]:
        """Answer the person on the issue (raises DeliveryError when Jira is down: the caller answers 503)."""
        self.channel.comment(event.issue_id, f"{mention(event.actor.id, cloud=self.channel.cloud)} {text}")
        return 200, {"refused" if refused else "answered": text}


def jira_router(hazel: Hazel, settings: Settings, *, channel: JiraChannel | None = None,
                directory: JiraDirectory | None = None) -> APIRouter:
    """The ``POST /jira/webhook`` router. Uses the Jira channel Hazel delivers through, when it has one."""
    found = hazel.router.channels.get("jira")
    channel = channel or (found if isinstance(found, JiraChannel) else build_channel(settings))
    directory = directory or JiraDirectory(channel.client, group_ttl_sec=settings.jira_group_cache_sec)
    secret = settings.jira_webhook_secret.get_secret_value() if settings.jira_webhook_secret else None
    if secret is None:
        log.warning("JIRA_WEBHOOK_SECRET is not set: %s", "unsigned Jira webhooks are accepted"
                    if settings.jira_webhook_allow_unsigned else "every Jira webhook is refused with 401")
    webhook = JiraWebhook(hazel, channel=channel, directory=directory, secret=secret,
                          allow_unsigned=settings.jira_webhook_allow_unsigned)
    router = APIRouter(tags=["jira"])

    @router.post("/jira/webhook")
    async def jira_webhook(request: Request) -> JSONResponse:
        """Jira's webhook (comment_created, comment_updated, jira:issue_updated)."""
        body = await request.body()
        status, answer = await run_in_threadpool(webhook.handle, body, request.headers)
        return JSONResponse(answer, status_code=status)

    return router
