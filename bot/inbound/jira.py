"""``POST /jira/webhook``: Jira comments and transitions as decisions, through ``Hazel.decide`` / ``rewind``.

Order of checks: the signature (``X-Hub-Signature``, 401 if wrong or missing; nothing else happens), the
payload (400 if malformed), the kind of event (others: 200, ignored), the issue (not Hazel's: 200, ignored),
the actor (Hazel's own comments and transitions: 200, ignored, so Hazel never answers itself). Then a comment
is a command (``/approve``, ``/reject REASON``, ``/edit VALUE``, ``/rewind STEP [feedback]``) or feedback,
and a transition to the point's approve / reject status is that decision. A ``/rewind`` without a target, or
naming none the run has, is answered with the checkpoints it can name (the engine's choice, as Slack's Rewind
modal lists them: ``RequestView.rewind``), saying when that list is cut and how to reach the rest. Whatever the
engine refuses (not allowed, invalid edit, already decided) is answered with a comment on the issue and changes
nothing; a refused transition's issue is first moved back where it came from, through as many transitions as
the workflow needs (``JiraChannel.walk``), and the answer says whether Hazel could. On the issue of a run that
has ended, a plain comment where the point takes feedback goes to the engine as feedback too (refused and
answered, not ignored), and a refusal there says that the run has ended and what runs it again. A ``/rewind``
that settles no request of its issue (the run had ended, or waits on another channel) is answered with what it
did, since no outcome comment comes to that issue from the outbox. A deleted issue (``jira:issue_deleted``)
whose request still waits has it asked again on a new issue (``Hazel.ask_again``, audited as
``request.asked_again`` by who deleted it); a deletion decides nothing.

Duplicates decide once: decisions carry ``delivery_id`` (``<site>/issue/<id>/comment/<id>``, ``…/changelog/<id>``:
``integrations.jira.webhook.delivery_key``), which the database keeps unique, so Jira's retries and Server's
``issue_commented`` companion of a ``comment_created`` find the decision already made, while the same comment
id on another issue or Jira site is another delivery. Replies are deduplicated in memory (per process); an
ignored delivery is not remembered (sent again, it is ignored again: not a "duplicate").
A refusal is the outcome of its delivery too: when the engine refused a comment or a transition (and audited
it) but Jira did not take Hazel's answer (503, so Jira sends the webhook again), the retry posts that same
refusal and decides nothing, so a comment refused on the request the issue showed never lands on the next
request the issue carries once Jira is back (as a Slack button stays bound to its own request). That memory
is per process too: a retry that reaches another process (or one restarted) is decided afresh; there the
event's time binds it: a delivery answers the request the issue showed when the person acted (``JiraEvent.at``,
Jira's clock; ``Hazel.request_by_message_key(asked_by=…)``), so one written before a newer version was asked
is refused, saying the issue asks again, rather than deciding the version the person never saw.

A transition to the approve or reject status of a request already settled is refused like any other (who
decided it and when) and the issue is moved back. A transition made with a comment comes as two webhooks in no
set order (``jira:issue_updated`` with the comment, and its ``comment_created``), keyed alike by the comment:
a plain comment on a pending request's issue that the payload shows already in the approve or reject status
is read as that transition (reject: the comment is the reason), so whichever comes first decides what the
person did, never feedback.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from collections import OrderedDict
from typing import Any, Callable, Mapping

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from bot.engine import (
    CheckpointNotFoundError,
    EmptyEditError,
    Hazel,
    HazelError,
    MissingEditValueError,
    MissingRewindTargetError,
    NotAllowedError,
)
from bot.engine.limits import channel_text
from bot.inbound.api_errors import load_json_body
from bot.settings import Settings
from integrations.base import DeliveryError, PermanentDeliveryError
from integrations.jira import (
    JiraChannel,
    JiraDirectory,
    JiraEvent,
    JiraOptions,
    MalformedWebhookError,
    message_key,
    parse_command,
    parse_event,
    verify_signature,
)
from integrations.jira.options import same_status
from integrations.jira.render import inline, mention, rewind_help, rewound_comment
from integrations.jira.webhook import SIGNATURE_HEADER, WEBHOOK_ID_HEADER, split_rewind
from store.models import (
    Actor,
    Decision,
    RequestStatus,
    RequestView,
    RunStatus,
    SteeringRequest,
    past_tense,
    plain_mentions,
)

log = logging.getLogger("hazel.jira")
HELP = ("Answer with a plain comment (feedback), or /approve, /reject REASON, /edit followed by the new value, "
        "/rewind STEP [feedback] (/rewind alone lists the checkpoints to continue from).")


class _Answer:
    """An answer decided for one delivery, not yet posted on the issue: a refusal's ``text`` and, for a refused
    transition, ``on_refused`` (moves the issue back; returns the sentence that says where it is), run again
    by each attempt to post it; or, with ``decided`` (the webhook's JSON answer for the decision), what a
    decision did that no outcome comment will say on this issue (a rewind of an ended run)."""

    def __init__(self, event: JiraEvent, text: str, on_refused: Callable[[], str] | None = None, *,
                 decided: dict[str, Any] | None = None) -> None:
        self.event, self.text, self.on_refused, self.decided = event, text, on_refused, decided


class _Unanswered(Exception):
    """The outcome of a delivery (a refusal, audited, or a rewind) is decided but Jira did not take the answer:
    ``answer``."""

    def __init__(self, answer: _Answer, cause: DeliveryError) -> None:
        super().__init__(str(cause))
        self.answer, self.cause = answer, cause


class _Seen:
    """Delivery keys handled (or being handled) by this process, the newest ``size`` of them; a key whose
    refusal Jira did not take holds that refusal (``_Answer``), which the retry posts instead of deciding
    again (one outcome per delivery, as Slack's delivery ids give)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._keys: OrderedDict[str, _Answer | None] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, key: str) -> tuple[bool, _Answer | None]:
        """``(claimed, the refusal still to post)``; not claimed: handled already or being handled."""
        with self._lock:
            if key in self._keys:
                answer = self._keys[key]
                if answer is None:
                    return False, None
                self._keys[key] = None  # this attempt posts it
                return True, answer
            self._keys[key] = None
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)
            return True, None

    def release(self, key: str, answer: _Answer | None = None) -> None:
        """Forget ``key`` (nothing was decided: the retry decides), or keep ``answer`` for the retry."""
        with self._lock:
            if answer is None:
                self._keys.pop(key, None)
            else:
                self._keys[key] = answer


class _Unmoved:
    """Refused moves to the approve or reject status whose issue stays there, per process (as ``_Seen``).

    A move made with a comment comes as two webhooks; when the comment's comes first, it does not say the
    status the issue left, so its refusal cannot move the issue back. The two meet here by their delivery key:
    the status change, arriving while the comment is handled or after, hands its ``from_status`` over
    (``companion``) and the issue is moved back then (s30 F4: the status change was dropped as a duplicate and
    the issue stayed in Approved). While an issue stays where a refused move left it (not moved back yet, or
    Hazel could not), a plain comment on it is a comment, not that move again (``holds``): an approver's question
    had approved the request. A real move of the issue (any other status change delivered) forgets it."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._left: OrderedDict[str, tuple[str, str]] = OrderedDict()  # key -> (issue id, status it stays in)
        self._from: OrderedDict[str, str] = OrderedDict()  # key -> status left, handed over by the status change
        self._lock = threading.Lock()

    def companion(self, key: str, from_status: str) -> tuple[str, str] | None:
        """The status change of delivery ``key`` arrived after its comment: ``(issue id, status)`` when that
        comment's refused move left the issue there (the caller moves it back now), else None (its status
        left is kept for the comment still being handled: ``left``)."""
        with self._lock:
            if key in self._left:
                return self._left.pop(key)
            self._from[key] = from_status
            self._trim(self._from)
            return None

    def left(self, key: str, issue_id: str, status: str) -> str | None:
        """A refused move of delivery ``key`` stays in ``status``: the status it left when its status change
        has come (move it back there), else None (noted, for ``companion`` and ``holds``)."""
        with self._lock:
            came = self._from.pop(key, None)
        if came is None:
            self.stays(key, issue_id, status)
        return came

    def stays(self, key: str, issue_id: str, status: str) -> None:
        """A refused move (delivery ``key``) left issue ``issue_id`` in ``status`` (Hazel could not move it
        back): noted for ``holds``."""
        with self._lock:
            self._left[key] = (issue_id, status)
            self._trim(self._left)

    def holds(self, issue_id: str, status: str | None) -> bool:
        """Whether a refused move left issue ``issue_id`` in ``status`` and nothing has moved it since."""
        with self._lock:
            return any(i == issue_id and same_status(s, status) for i, s in self._left.values())

    def moved(self, issue_id: str) -> None:
        """Issue ``issue_id`` changed status: what a refused move left there no longer stands."""
        with self._lock:
            for key in [k for k, (i, _) in self._left.items() if i == issue_id]:
                del self._left[key]

    def _trim(self, kept: OrderedDict) -> None:
        while len(kept) > self.size:
            kept.popitem(last=False)


def _key(event: JiraEvent) -> str:
    """The delivery key of ``event`` in this process: its ``delivery_id`` and a digest of its text (a lone
    surrogate included: s30 F1, the digest of such a comment was a 500)."""
    digest = hashlib.sha256(event.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{event.delivery_id}:{digest}"


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
        self.unmoved = _Unmoved()

    def handle(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """One delivery: ``(HTTP status, JSON answer)``. 401 unsigned / wrongly signed, 400 malformed, 503
        when Jira cannot be asked now (Jira Cloud sends the webhook again), else 200. Other errors (the
        database unreachable) propagate: a 500, which Jira Cloud also retries."""
        if not (verify_signature(self.secret, body, headers.get(SIGNATURE_HEADER)) if self.secret
                else self.allow_unsigned):
            return 401, {"error": "missing or invalid X-Hub-Signature" if self.secret
                         else "JIRA_WEBHOOK_SECRET is not set: webhooks are refused"}
        try:
            event = parse_event(load_json_body(body), webhook_id=headers.get(WEBHOOK_ID_HEADER))
        except (ValueError, MalformedWebhookError) as exc:  # (UnreadableBodyError: the REST API's reasons)
            return 400, {"error": f"malformed Jira webhook: {exc}"}
        if event is None:
            return 200, {"ignored": "not a comment, a status change or a deletion"}
        key = _key(event)
        claimed, refusal = self.seen.claim(key)
        if not claimed:
            if event.kind == "transition" and event.from_status:  # a refused move's status change, after its
                left = self.unmoved.companion(key, event.from_status)  # comment: the issue is moved back now
                if left is not None:
                    return self._moved_back_late(event, key, left)
            return 200, {"duplicate": True}
        try:
            status, answer = self._post(refusal) if refusal is not None else self._dispatch(event)
        except _Unanswered as exc:  # refused (and audited) or rewound once: the retry gets this answer, nothing else
            self.seen.release(key, exc.answer)
            log.warning("jira webhook %s on issue %s: %s, but Jira did not take the answer: %s", event.webhook_event,
                        event.issue_id, "decided" if exc.answer.decided else "refused", exc.cause)
            return 503, {"error": "Jira is unavailable; send again later"}
        except DeliveryError as exc:
            self.seen.release(key)
            log.warning("jira webhook %s on issue %s: Jira unavailable: %s", event.webhook_event, event.issue_id, exc)
            return 503, {"error": "Jira is unavailable; send again later"}
        except Exception:
            self.seen.release(key)
            raise
        if "ignored" in answer:  # nothing done: a delivery again is ignored again (not a "duplicate", which
            self.seen.release(key)  # reads as if it had decided something)
        return status, answer

    # -- dispatch ---------------------------------------------------------------------------------------

    def _dispatch(self, event: JiraEvent) -> tuple[int, dict[str, Any]]:
        latest = self.hazel.request_by_message_key(key=message_key(event.issue_id))
        if latest is None:
            return 200, {"ignored": "not an issue Hazel created"}
        site = (latest.message_ref or {}).get("site") or (self.channel.own_site() if event.site else None)
        if site and event.site and event.site != site:  # the same issue id on another site (a staging copy of
            # production: s30 F7); an issue created before requests kept their site: Jira's own (s31 F4)
            return 200, {"ignored": f"not an issue Hazel created: it is {event.site}'s, Hazel's are {site}'s"}
        if event.actor.id == self.directory.own_id():
            return 200, {"ignored": "Hazel's own change"}
        if event.kind == "deleted":
            return self._deleted(event, latest)
        if event.kind == "transition":
            self.unmoved.moved(event.issue_id)
        # the request the issue showed when the person acted: a delivery late (Hazel restarting, Jira retrying)
        # answers that one, never a newer version the issue carries since (as a Slack button stays bound)
        shown = (self.hazel.request_by_message_key(key=message_key(event.issue_id), asked_by=event.at)
                 if event.at is not None else None) or latest
        view = self.hazel.request_view(request_id=shown.id)
        if view is None:
            return 200, {"ignored": "the run is gone"}
        newer = latest if latest.id != shown.id else None
        if event.kind == "transition":
            return self._transition(event, view, self.channel.options_for(view.options), newer)
        return self._comment(event, view, newer)

    def _deleted(self, event: JiraEvent, request: SteeringRequest) -> tuple[int, dict[str, Any]]:
        """The issue of ``request`` (the latest it showed) was deleted: a pending request is asked again on a
        new issue (``Hazel.ask_again``), since nobody in Jira could answer it any more and its reminders would
        go nowhere; a settled one is left as it was. A deletion decides nothing."""
        issue = event.issue_key or event.issue_id
        if request.status is not RequestStatus.PENDING or not self.hazel.ask_again(
                request_id=request.id, key=message_key(event.issue_id), actor=self._actor(event),
                why=f"its Jira issue {issue} was deleted"):
            return 200, {"ignored": f"the issue's request {request.id} is not waiting"}
        log.info("jira issue %s of request %s was deleted by %s: the request is asked again on a new issue", issue,
                 request.id, event.actor.id)
        return 200, {"asked_again": request.id}

    def _transition(self, event: JiraEvent, view: RequestView, opts: JiraOptions,
                    newer: SteeringRequest | None) -> tuple[int, dict[str, Any]]:
        if same_status(event.to_status, opts.approve_status):
            moved = "approve"
        elif same_status(event.to_status, opts.reject_status):
            moved = "reject"
        else:
            return 200, {"ignored": f"status {event.to_status!r} decides nothing here"}
        read = _with_its_comment(event, moved)
        if isinstance(read, str):  # the move and its comment's command disagree: neither counts
            return self._post(_Answer(event, read,
                                      lambda: self._agreed(event, view, moved) or self._move_back(event, opts)))
        action, payload = read
        return self._decide(event, view, action, payload, newer=newer,
                            on_refused=lambda: self._agreed(event, view, action) or self._move_back(event, opts))

    def _agreed(self, event: JiraEvent, view: RequestView, action: str) -> str:
        """When the refused transition agrees with how the request was settled (moved to the reject status of a
        request rejected elsewhere, say), the sentence that leaves the issue there; else ``""`` (it is moved
        back: ``_move_back``). Moving it back would make an ended run's issue look open."""
        now = self.hazel.request_view(request_id=view.request.id)
        if now is None or now.request.status is RequestStatus.PENDING or now.request.decided_action != action:
            return ""
        return f" The issue stays in {event.to_status}, as the request was {past_tense(action)}."

    def _move_back(self, event: JiraEvent, opts: JiraOptions) -> str:
        """Move a refused transition's issue back to where the person took it from (through the workflow's
        transitions, never through the approve or reject status) and say truthfully where it is.

        Raises:
            DeliveryError: Jira is unavailable (nothing was answered yet: Jira sends the webhook again).
        """
        if not event.from_status:  # the comment of a transition, delivered before it: the status it left comes
            came = self.unmoved.left(_key(event), event.issue_id, event.to_status or "")  # with the status change
            if came is None:
                return (f" The issue is still in {event.to_status}: Hazel moves it back once Jira reports the "
                        "move (else move it back by hand)." if event.to_status else "")
            event = dataclasses.replace(event, from_status=came)
        try:
            walk = self.channel.walk(event.issue_id, event.from_status, only_from=event.to_status,
                                     avoid=(opts.approve_status, opts.reject_status))
        except PermanentDeliveryError as exc:  # e.g. no permission to read the transitions
            log.warning("jira: could not move issue %s back to %r: %s", event.issue_id, event.from_status, exc)
            return f" Hazel could not move the issue back to {event.from_status} ({exc}): move it back by hand."
        if walk.reached and not walk.taken:
            return f" The issue is back in {walk.status}."  # someone moved it back already
        if walk.reached:
            via = f" (through {', '.join(walk.taken)})" if len(walk.taken) > 1 else ""
            return f" Hazel moved the issue back to {walk.status}{via}."
        if not walk.taken and not same_status(walk.start, event.to_status):  # moved on since (Hazel closed it
            return f" The issue is in {walk.start} now, so Hazel left it there."  # as the request was settled: F2)
        if same_status(walk.status, event.to_status):  # still where the refused move left it: not that move again
            self.unmoved.stays(_key(event), event.issue_id, walk.status)
        where = (f"; it is in {walk.status}" if walk.status != walk.start else "")
        reason = walk.reason.replace("*", "")
        return f" Hazel could not move the issue back to {event.from_status}: {reason}{where}. Move it back by hand."

    def _moved_back_late(self, event: JiraEvent, key: str, left: tuple[str, str]) -> tuple[int, dict[str, Any]]:
        """The status change of a refused move whose comment came first (and was answered, asking for the
        issue to be moved back): move it back now, unless the request was settled as the move says, and tell
        the person where the issue is."""
        latest = self.hazel.request_by_message_key(key=message_key(event.issue_id))
        view = self.hazel.request_view(request_id=latest.id) if latest is not None else None
        if view is None:
            return 200, {"duplicate": True}
        opts = self.channel.options_for(view.options)
        action = "approve" if same_status(event.to_status, opts.approve_status) else "reject"
        try:
            note = self._agreed(event, view, action) or self._move_back(event, opts)
            status, body = self._reply(event, note.strip(), refused=False)
        except DeliveryError as exc:  # Jira down: its retry of this status change moves it back
            self.unmoved.stays(key, *left)
            log.warning("jira: could not move issue %s back yet: %s", event.issue_id, exc)
            return 503, {"error": "Jira is unavailable; send again later"}
        return status, {"duplicate": True, **body}

    def _comment(self, event: JiraEvent, view: RequestView,
                 newer: SteeringRequest | None) -> tuple[int, dict[str, Any]]:
        command = parse_command(event.text, own_words=not event.quoted_opening)  # (a quoted /approve: feedback)
        pending = view.request.status is RequestStatus.PENDING
        # (feedback written on a version answered since is refused, saying so, rather than ignored as a comment;
        # so is feedback on the issue of a run that has ended: the engine says who settled it, and the run ended)
        answering = (pending or (newer is not None and newer.status is RequestStatus.PENDING)
                     or view.run.status.ended or _written_while_pending(event, view.request))
        if pending and event.issue_status:  # the comment of a transition, delivered first: read as the status
            opts = self.channel.options_for(view.options)  # change with it is (``_with_its_comment``), whichever
            # of the two webhooks comes first (s25 F8) ... unless the issue already sat in the approve status:
            # after a vote of a quorum that leaves the request pending, Hazel leaves the issue there, and another
            # approver's comment is then a comment, not a vote (s20: an objection was counted as the approval
            # completing the quorum)
            if ((same_status(event.issue_status, opts.approve_status) and view.request.approvals == 0) or
                    same_status(event.issue_status, opts.reject_status)) and \
                    not self.unmoved.holds(event.issue_id, event.issue_status):  # (left by a refused move: F4)
                moved = dataclasses.replace(event, kind="transition", to_status=event.issue_status)
                return self._transition(moved, view, opts, newer)
        if command.action == "unknown":
            return self._reply(event, f"/{inline(command.argument)} is not a Hazel command. {HELP}", refused=True)
        if command.plain and (not answering or "feedback" not in view.actions or not command.argument):
            return 200, {"ignored": "a comment, not a decision"}
        if command.action == "rewind":
            to, feedback = split_rewind(command.argument)
            return self._decide(event, view, "rewind", {"to": to, "feedback": feedback}, newer=newer)
        if command.action == "reject":
            return self._decide(event, view, "reject", {"reason": command.argument}, newer=newer)
        if command.action == "feedback":
            return self._decide(event, view, "feedback", {"text": command.argument}, newer=newer)
        if command.action == "edit" and pending:  # the engine parses it; an empty one is refused after whether
            return self._decide(event, view, "edit", {"text": command.argument}, newer=newer)  # the person may edit
        return self._decide(event, view, command.action, {}, newer=newer)

    def _decide(self, event: JiraEvent, view: RequestView, action: str, payload: dict[str, Any], *,
                newer: SteeringRequest | None = None,
                on_refused: Callable[[], str] | None = None) -> tuple[int, dict[str, Any]]:
        """Decide on ``view``'s request (the one the issue showed when the person acted; ``newer``: the one it
        shows now, when another); a refusal is answered on the issue, after ``on_refused`` (which returns a
        sentence to add)."""
        actor = self._actor(event)
        run_id, request = view.run.id, view.request
        pending = request.status is RequestStatus.PENDING
        try:
            if action == "rewind":
                outcome = self.hazel.rewind(run_id=run_id, actor=actor, to=payload["to"],
                                            feedback=payload["feedback"], request_id=request.id if pending else None,
                                            delivery_id=event.delivery_id)
            else:
                outcome = self.hazel.decide(run_id=run_id, action=action, actor=actor, payload=payload,
                                            request_id=request.id, delivery_id=event.delivery_id)
        except NotAllowedError as exc:  # the approvers named, not mentioned: a mention notifies each of them, at
            who = inline(plain_mentions(self.hazel.who_may(view.approvers, "jira")))  # every comment anyone writes (F16)
            who = (f"Nobody left may steer this request (of {who}: self-approval is off, or each has voted): cancel "
                   "the run or change the point's approvers" if view.nobody_left  # (s25 F11: it named the starter)
                   else f"Who may steer this request: {who}")
            still = self._still(request.id, action, newer) if on_refused or newer or view.run.status.ended else ""
            return self._post(_Answer(event, f"{inline(exc.message)}. Nothing changed. {who}.{still}", on_refused))
        except HazelError as exc:  # invalid edit, already decided, a second vote, unknown rewind target, …
            return self._post(_Answer(event, f"{_refusal(exc)}. Nothing changed."
                                             f"{self._still(request.id, action, newer)}{_choices(view, exc)}",
                                      on_refused))
        log.info("jira %s on issue %s by %s: %s run %s%s", event.webhook_event, event.issue_id, actor.id, action,
                 run_id, " (duplicate)" if outcome.duplicate else "")
        decided = {"decided": outcome.decision.action.value, "run_id": run_id, "duplicate": outcome.duplicate,
                   "run_status": outcome.run_status.value}
        if outcome.duplicate and event.webhook_event == "comment_updated":  # an edit of a comment that decided
            return self._post(_Answer(event, _counted_already(outcome.decision), decided=decided))
        settled = outcome.request
        if action == "rewind" and not outcome.duplicate and (
                settled is None or settled.message_key != message_key(event.issue_id)):
            # no request of this issue was settled (the run had ended, or waits elsewhere): no outcome comment
            # comes here from the outbox, so the person is answered now
            ended = view.run.status.value if view.run.status.ended else None
            return self._post(_Answer(event, rewound_comment(outcome.decision, next_step=outcome.next_node,
                                                             ended=ended), decided=decided))
        return 200, decided

    def _still(self, request_id: int, action: str, newer: SteeringRequest | None) -> str:
        """The sentence ending a refusal, as the engine has the run now: that the run has ended (``_ended``);
        else the newer version the issue asks about, when the person answered an older one; else whether the
        request is still open (another channel may have settled it while this delivery was refused)."""
        if action == "rewind" and newer is None:
            return ""
        now = self.hazel.request_view(request_id=request_id)
        if now is not None and now.run.status.ended:
            return self._ended(now)
        if newer is not None:
            return (f" This answered an earlier version of the issue; it now asks again (request {newer.id}): "
                    "read it and answer that one.")
        return " The request is still open." if now is not None and now.request.status is RequestStatus.PENDING \
            else ""

    @staticmethod
    def _ended(view: RequestView) -> str:
        """The sentence telling that ``view``'s run has ended, and what moves it again: ``hazel retry`` for a
        failed run, ``/rewind`` where the steering point offers it."""
        run = view.run
        text = f" Run {run.id} has ended ({run.status.value})."
        if run.status is RunStatus.FAILED:
            text += f" {{{{hazel retry {run.id}}}}} resumes it."
        if "rewind" in view.actions:
            text += " To run it again from an earlier step: /rewind STEP [feedback]."
        return text

    def _actor(self, event: JiraEvent) -> Actor:
        """The commenter as the engine's ``Actor``: their groups are read from Jira only when some approver
        list names Jira groups and not this person (the engine asks), and a failure to read them means none."""
        def groups(_wanted: frozenset[str]) -> frozenset[str]:
            if channel_text(event.actor.id) != event.actor.id:  # (no account's: a control character or a lone
                return frozenset()  # surrogate, which the request to Jira could not even encode: s31 F9)
            try:
                return self.directory.groups_of(event.actor.id)
            except PermanentDeliveryError as exc:  # unknown user or no permission to read users: no groups
                log.warning("jira: cannot read the groups of %s: %s", event.actor.id, exc)
                return frozenset()

        return self.hazel.identify(channel="jira", id=event.actor.id, name=event.actor.display_name,
                                   groups=groups, email=event.actor.email)

    def _post(self, answer: _Answer) -> tuple[int, dict[str, Any]]:
        """Post a refusal the engine gave (after ``on_refused``, whose sentence ends it), or what a decision did
        (``answer.decided``: the JSON answer then carries it too).

        Raises:
            _Unanswered: Jira is unavailable (the outcome stands: the retry posts it, deciding nothing again).
        """
        try:
            note = answer.on_refused() if answer.on_refused else ""
            status, body = self._reply(answer.event, answer.text + note, refused=answer.decided is None)
        except DeliveryError as exc:
            raise _Unanswered(answer, exc) from exc
        return status, {**(answer.decided or {}), **body}

    def _reply(self, event: JiraEvent, text: str, *, refused: bool) -> tuple[int, dict[str, Any]]:
        """Answer the person on the issue (raises DeliveryError when Jira is down: the caller answers 503)."""
        tag = mention(event.actor.id, cloud=self.channel.cloud)  # (an id no mention can hold is written as text,
        tag = tag + " " if tag.startswith("[~") else ""  # which the answer then said twice: s30 D4)
        self.channel.comment(event.issue_id, f"{tag}{text}")
        return 200, {"refused" if refused else "answered": text}


def _with_its_comment(event: JiraEvent, moved: str) -> tuple[str, dict[str, Any]] | str:
    """What a move of the issue to the approve (``moved="approve"``) or reject status says together with the
    comment made with it (``event.text``, which the status change and the ``comment_created`` webhook both
    carry: one decides, the other is its duplicate): ``(action, payload)``, or the refusal when they disagree.

    No comment or a plain one: the move (a plain comment is a rejection's reason). A command that agrees: the
    command (``/reject REASON`` rejects with REASON; ``/edit VALUE`` with the approve status edits, as an edit
    approves the edited version). Any other command (``/reject`` with the approve status, ``/approve`` with the
    reject status, ``/feedback``, ``/rewind``, an unknown one): the two disagree and neither counts; the caller
    moves the issue back. Each order of the two webhooks reads the same (s25 F8: the status change approved
    and dropped an ``/edit``, or the comment rejected while the issue stayed approved, by delivery order)."""
    text = event.text.strip()
    command = parse_command(event.text, own_words=not event.quoted_opening)
    if command.plain:
        return (moved, {}) if moved == "approve" else ("reject", {"reason": text or f"moved to {event.to_status} "
                                                                                       "in Jira"})
    if command.action == moved == "approve":
        return "approve", {}
    if command.action == moved == "reject":
        return "reject", {"reason": command.argument or f"moved to {event.to_status} in Jira"}
    if command.action == "edit" and moved == "approve":  # (the engine parses it, and refuses an empty one after
        return "edit", {"text": command.argument}  # whether the person may edit: ``_refusal``, as a comment's)
    said = "not a Hazel command" if command.action == "unknown" else ""
    return (f"The issue was moved to {event.to_status}, which {'approves' if moved == 'approve' else 'rejects'}, "
            f"but the comment made with it says /{inline(command.argument if said else command.action)}"
            f"{' (' + said + ')' if said else ''}: the two disagree, so neither counts. Nothing changed.")


def _written_while_pending(event: JiraEvent, request: SteeringRequest) -> bool:
    """Whether the comment was written (the payload's ``timestamp``: ``event.at``) before ``request`` was
    settled: feedback meant for it, refused saying who settled it first, rather than ignored as a comment (s25
    F13: an SME's feedback delivered just after another channel approved was ignored without a word while the
    run went on). False when either time is unknown."""
    return event.at is not None and request.decided_at is not None and event.at < request.decided_at


def _counted_already(decision: Decision) -> str:
    """The answer to an edit of a comment that has decided already (``comment_updated`` of its comment id): the
    decision stands as first taken, so the person is told so, and how to answer again (s25 F15: a feedback
    comment edited into ``/approve`` was silently taken as its earlier feedback's duplicate)."""
    return (f"This comment was already counted: {past_tense(decision.action.value)} at "
            f"{decision.created_at.strftime('%Y-%m-%d %H:%M UTC')}. Editing it changes nothing; to answer again, "
            "add a new comment.")


def _refusal(exc: HazelError) -> str:
    """The engine's refusal as an answer on the issue says it (wiki text); an edit refused for leaving a value
    empty also says where an empty value can be given, since a comment has no way to (``EmptyEditError``:
    ``…; an empty value can be set with {{hazel edit --allow-empty}} or the REST API's {{allow_empty}}, not
    from a Jira comment``)."""
    if isinstance(exc, MissingEditValueError):  # (in the comment's terms: s25 F1, a person who may not edit
        return "/edit needs the new value after it"  # is told so first, by the engine)
    text = inline(exc.message)
    if isinstance(exc, EmptyEditError):
        text += exc.given_elsewhere("a Jira comment", lambda c: f"{{{{{c}}}}}")
    return text


def _choices(view: RequestView, exc: HazelError) -> str:
    """After a ``/rewind`` the engine refused for its target (none given: ``MissingRewindTargetError``; none the
    run has: ``CheckpointNotFoundError``), the checkpoints the person can name, as the engine offers them
    (``view.rewind``, what Slack's Rewind modal lists too: ``render.rewind_help``); else ``""``."""
    if view.rewind is None or not isinstance(exc, (MissingRewindTargetError, CheckpointNotFoundError)):
        return ""
    return "\n\n" + rewind_help(view.run.id, view.rewind)


def jira_router(hazel: Hazel, settings: Settings, *, channel: JiraChannel,
                directory: JiraDirectory | None = None) -> APIRouter:
    """The ``POST /jira/webhook`` router, answering on ``channel`` (the Jira channel Hazel delivers through)."""
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
