"""Buttons and modals: the Slack listeners for ``block_actions`` and ``view_submission`` payloads.

An Approve click is acknowledged once its decision is recorded (or refused): Slack does not send a click
again once it got its 200, so a click acknowledged first and lost to a crash or a database outage in between
would be lost without a word. The decision takes milliseconds, well inside Slack's 3-second window. A click
that opens a modal (Edit, Reject, Feedback, Rewind, with the click's ``trigger_id``) records nothing, and is
acknowledged at once. When the database fails under a click, the person is told that it may not have been
recorded, and the log says so in one line (never the SQL statement or its parameters). The run resumes in a
worker. A modal's submission is checked and decided before it is acknowledged, so that an
invalid edit comes back inline (``response_action: errors``) with nothing changed.

Delivery ids make Slack's retries (``X-Slack-Retry-Num``) harmless: a click is ``click:<user id>:<trigger_id>``, a
submission ``view:<user id>:<view id>``; the same delivery decides once. Two different clicks race in the database and
the loser is told who won.

A button names the run as well as the request (``blocks.button_value``: ``<run id>:<request id>``), and a modal's
``private_metadata`` both: the engine acts on the request only when it is that run's (``Hazel.decide``,
``Hazel.check``, ``Hazel.request_of``), so that a card posted before a database reset or restore (request ids
start again, or go back) never decides another run's request that got the same id; the person is told that the
message belongs to a request that no longer exists, and nothing is recorded. A button of a card an older Hazel
posted names the request only: it acts on it when the message clicked is one posted for that request
(``Hazel.posted_request``: its channel message, an approver's DM, a reminder's or escalation's copy), else it
is refused the same way (a click in App Home has no message: the Home tab is published again, with buttons that
name the run).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any, Callable

from slack_bolt import App
from slack_sdk.errors import SlackApiError

from bot.engine import (
    AlreadyDecidedError,
    EmptyEditError,
    HazelError,
    InvalidDecisionError,
    NotAllowedError,
    RequestNotFoundError,
    RunNotFoundError,
    log_error,
)
from bot.inbound.api_models import INT_MAX
from bot.inbound.slack.bridge import SlackBridge, already_from_error, failure_reason
from integrations.slack import blocks as B
from integrations.slack import modals as M
from integrations.slack import text as T
from integrations.slack.blocks import ACTION_PREFIX, ButtonValue
from integrations.slack.directory import DirectoryError
from store.models import Actor, RequestView, plain_mentions, still_waiting_text

log = logging.getLogger("hazel.slack")
ACK_WITHIN_SEC = 1.5
"""An approve click is acknowledged once its decision is recorded, or after this long, whichever comes first:
Slack shows the person an error past 3 s, and Bolt answers 404 (``didn't call ack()``) when no listener has
acknowledged by then (seen in CI under load). The person hears the outcome in the message and an ephemeral."""

BUTTON = re.compile(r"^hazel_(approve|edit|reject|feedback|rewind)$")
SUBMISSION = re.compile(r"^hazel_(edit|reject|feedback|rewind)$")
MAX_ERROR_CHARS = 1000


def register(app: App, bridge: SlackBridge) -> None:
    """Add the button and modal listeners to ``app``."""

    @app.action(BUTTON)
    def on_button(ack: Callable[..., Any], body: dict[str, Any], client: Any, request: Any) -> None:
        Clicks(bridge, body, client, retried=bool(request.headers.get("x-slack-retry-num")), ack=ack).run()

    @app.view(SUBMISSION)
    def on_submission(ack: Callable[..., Any], body: dict[str, Any], client: Any) -> None:
        Submission(bridge, body).handle(ack)


class Clicks:
    """One button click."""

    def __init__(self, bridge: SlackBridge, body: dict[str, Any], client: Any, *, retried: bool,
                 ack: Callable[..., Any] | None = None) -> None:
        self._ack = ack
        self._ack_lock = threading.Lock()
        self.recorded = False
        """The click's decision is recorded (its answer may still fail to reach the person)."""
        self.bridge = bridge
        self.hazel = bridge.hazel
        self.body = body
        self.client = client
        self.retried = retried
        self.action = body["actions"][0]
        self.kind = self.action["action_id"][len(ACTION_PREFIX):]
        self.user = body["user"]["id"]
        container = body.get("container") or {}
        self.channel = container.get("channel_id") or (body.get("channel") or {}).get("id")
        self.message_ts = container.get("message_ts") or (body.get("message") or {}).get("ts")
        """The message clicked (none in App Home, whose container is a ``view``)."""
        self.from_home = container.get("type") == "view"
        self._views: dict[tuple[str, int], RequestView | None] = {}

    def ack(self) -> None:
        """Acknowledge the click to Slack (HTTP 200), once (from this thread, or the timer of ``run``)."""
        with self._ack_lock:
            ack, self._ack = self._ack, None
        if ack is not None:
            ack()

    def tell(self, text: str) -> None:
        """Answer the person (only they see it); the click is acknowledged first: it is done."""
        self.ack()
        self.bridge.tell(self.client, user=self.user, channel=self.channel, text=text)

    def run(self) -> None:
        """``handle``, acknowledged when the click is done (``ack``). An error under it (the database gone, or
        a bug) is logged in one line when it is the database's (``bot.engine.log_error``: never the SQL or its
        parameters), and the person is told that the click may not have been recorded, unless it was."""
        timer = None
        try:
            if self.kind != "approve":  # (a modal to open: nothing is recorded by the click itself)
                self.ack()
            else:  # acknowledged once recorded, or at ACK_WITHIN_SEC whatever: Slack waits 3 s, Bolt answers 404
                timer = threading.Timer(ACK_WITHIN_SEC, self.ack)  # after (a click slower than that under load)
                timer.daemon = True
                timer.start()
            self.handle()
        except Exception as exc:  # noqa: BLE001 (answered here: Bolt would log the SQL with its traceback)
            named = B.read_button_value(self.action.get("value"))  # (as Hazel writes it, or not logged)
            log_error(log, exc, "a Slack %s click by %s on request %s failed", self.kind, self.user,
                      "?" if named is None else str(named.request_id)[:20])
            if not self.recorded:
                why = failure_reason(exc)
                try:
                    self.tell(f"⚠️ Your click may not have been recorded: {why}. Please click again in a moment: "
                              "if it was recorded, you will be told so." if self.kind == "approve" else
                              f"⚠️ The form could not be opened: {why}. Please click again in a moment.")
                except Exception as telling:  # noqa: BLE001 (Slack or the database: nothing more to do)
                    log_error(log, telling, "telling %s that their click failed failed", self.user)
        finally:
            if timer is not None:
                timer.cancel()
            self.ack()

    def quote(self, exc: Exception, run_id: str, request_id: int) -> str:
        """The engine's message as mrkdwn: escaped (it may quote stored text, such as a person's name), keeping
        the mentions of the request's approvers it names."""
        view = self.view(run_id, request_id)
        return T.escape_keeping(str(exc), B.mentions(view.approvers, view.escalate_to) if view else [])

    def view(self, run_id: str, request_id: int) -> RequestView | None:
        """Request ``request_id`` of run ``run_id`` (``Hazel.request_of``), read once; None when the run has no
        such request."""
        key = (run_id, request_id)
        if key not in self._views:
            try:
                self._views[key] = self.hazel.request_of(run_id=run_id, request_id=request_id)
            except (RunNotFoundError, RequestNotFoundError):
                self._views[key] = None
        return self._views[key]

    def handle(self) -> None:
        named = B.read_button_value(self.action.get("value"))
        if named is None:
            self.tell("This button does not belong to a Hazel steering request.")
            return
        try:
            actor = self.bridge.actor(self.body["user"])
        except DirectoryError as exc:
            self.tell(f"I could not check who you are in Slack, so nothing was done: {T.escape(str(exc))}. "
                      "Please try again.")
            return
        if not 1 <= named.request_id <= INT_MAX:  # (32-bit database ids, as the REST API and the CLI bound
            self.tell(gone_text(named))  # them: a larger one names no request; SQLite's driver overflowed)
            return
        run_id = named.run_id
        if run_id is None:  # an older Hazel's card, whose buttons name the request only: only from its message
            try:
                view = self.hazel.posted_request(request_id=named.request_id, channel=self.channel,
                                                 ts=self.message_ts)
            except RequestNotFoundError:
                self.tell(gone_text(named))
                return
            run_id = view.run.id
            self._views[(run_id, named.request_id)] = view
        if self.kind == "approve":
            if self.approve(named, run_id, actor) and self.from_home:
                self.bridge.publish_home(self.user, client=self.client)  # without the request just decided
        elif not self.retried:  # the first delivery of this click opened the modal already
            self.open_modal(named, run_id, actor)

    def approve(self, named: ButtonValue, run_id: str, actor: Actor) -> bool:
        """Approve request ``named`` of run ``run_id`` through the engine (which refuses a request that is not
        that run's); True when it was recorded (the clicker is told what the run still waits on, if anything),
        False when the clicker was told why not, or that more approvals are needed."""
        # Who clicked is part of the key: Slack's redelivery of one person's click repeats its trigger_id
        # and user; another person's click (the same trigger_id or action_ts) is a decision of its own.
        delivery = f"click:{self.user}:{self.body.get('trigger_id') or self.action.get('action_ts')}"
        rid = named.request_id
        try:
            outcome = self.hazel.decide(run_id=run_id, action="approve", actor=actor, request_id=rid,
                                        delivery_id=delivery)
            self.recorded = True
            self.ack()  # (recorded: Slack gets its 200 now)
        except AlreadyDecidedError as exc:
            self.tell(already_from_error(exc))
            return False
        except (RunNotFoundError, RequestNotFoundError):  # (not that run's request: nothing recorded)
            self.tell(gone_text(named))
            return False
        except NotAllowedError as exc:  # recorded in the audit log by the engine
            self.tell(f"🚫 {self.quote(exc, run_id, rid)}")
            return False
        except HazelError as exc:
            self.tell(self.quote(exc, run_id, rid))
            return False
        if not outcome.duplicate and not outcome.settled and outcome.request is not None:
            r = outcome.request
            self.tell(f"Your approval is counted: {r.approvals} of {r.approvals_required}.")
            return False
        if not outcome.duplicate and outcome.still_pending:  # the engine names what the run still waits on
            self.tell(f"Approved. The run is {T.escape(still_waiting_text(outcome.still_pending))}.")
        return True

    def open_modal(self, named: ButtonValue, run_id: str, actor: Actor) -> None:
        """Open the form of this button's action when the engine says ``actor`` may take it on request
        ``named`` of run ``run_id`` now (``Hazel.check``: that run's request, whether they may, then whether it
        was settled); else tell them why not. The form's ``private_metadata`` names the run and the request."""
        rid = named.request_id
        try:
            view = self.hazel.check(run_id=run_id, request_id=rid, action=self.kind, actor=actor)
        except AlreadyDecidedError as exc:
            self.tell(already_from_error(exc))
            return
        except (RunNotFoundError, RequestNotFoundError):  # (not that run's request: nothing recorded)
            self.tell(gone_text(named))
            return
        except NotAllowedError as exc:  # recorded in the audit log by the engine
            self.tell(f"🚫 {self.quote(exc, run_id, rid)}")
            return
        except HazelError as exc:
            self.tell(self.quote(exc, run_id, rid))
            return
        meta = {"request_id": view.request.id, "run_id": view.run.id, "channel": self.channel}
        if view.newest_decision is not None:  # (a rewind's: sent back as expect_decision)
            meta["decided"] = view.newest_decision
        try:
            if self.kind == "edit":
                modal = M.edit_modal(view, meta)
            elif self.kind == "rewind":  # the engine's choice (view.rewind): #0 and each step's start kept
                modal = M.rewind_modal(view, meta)
            else:
                modal = M.reason_modal(self.kind, view, meta)  # type: ignore[arg-type]
        except M.TooLargeToEditError as exc:
            self.tell(f"{T.escape(str(exc))}. Edit it from the command line: "
                      f"`hazel edit {view.run.id} --file FILE`.")
            return
        try:
            self.client.views_open(trigger_id=self.body["trigger_id"], view=modal)
        except SlackApiError as exc:
            error = exc.response.get("error")
            log.warning("views.open for request %s failed: %s", view.request.id, error)
            if error in ("expired_trigger_id", "exchanged_trigger_id"):
                self.tell("Slack did not let me open the form in time. Please click the button again.")
            else:
                self.tell(f"Slack refused to open the form ({T.escape(str(error))}). Nothing was changed.")


class Submission:
    """One modal submission: read, decide, and answer in the modal."""

    def __init__(self, bridge: SlackBridge, body: dict[str, Any]) -> None:
        self.bridge = bridge
        self.hazel = bridge.hazel
        self.body = body
        self.view = body["view"]
        self.kind = self.view["callback_id"][len(ACTION_PREFIX):]
        self.values = (self.view.get("state") or {}).get("values") or {}

    def handle(self, ack: Callable[..., Any]) -> None:
        first = {"edit": "edit_0_0", "reject": "reason", "feedback": "text", "rewind": "target"}[self.kind]
        try:
            meta = json.loads(self.view.get("private_metadata") or "{}")
            request_id = int(meta["request_id"])
            run_id = meta["run_id"]
            if not (isinstance(run_id, str) and B.RUN_ID.fullmatch(run_id)):
                raise ValueError("not a run id")
            decided = meta.get("decided")  # (a rewind form's; absent from one opened by an earlier Hazel)
            if decided is not None and not (type(decided) is int and 0 <= decided <= INT_MAX):
                raise ValueError("not a decision id")
        except (ValueError, KeyError, TypeError, OverflowError):  # (OverflowError: "Infinity")
            ack(response_action="errors", errors={first: "This form is not from Hazel (its context is missing)."})
            return
        named = ButtonValue(run_id=run_id, request_id=request_id)
        try:  # (that run's request, or refused; a larger id than a 32-bit database id names none)
            view = self.hazel.request_of(run_id=run_id, request_id=request_id) if 1 <= request_id <= INT_MAX \
                else None
        except (RunNotFoundError, RequestNotFoundError):
            view = None
        if view is None:
            ack(response_action="errors", errors={first: _short(gone_text(named, form=True))})
            return
        try:
            actor = self.bridge.actor(self.body["user"])
            self.decide(view, actor, run_id=run_id, request_id=request_id, decided=decided)
        except (RunNotFoundError, RequestNotFoundError):  # (gone since the form was read: nothing recorded)
            ack(response_action="errors", errors={first: _short(gone_text(named, form=True))})
            return
        except InvalidDecisionError as exc:
            ack(response_action="errors", errors={self.block_for(view, str(exc), first): _short(_field_error(exc))})
            return
        except AlreadyDecidedError as exc:  # (a field error is plain text: no mention, no <!date^…>)
            text = already_from_error(exc, plain=True) if exc.changed is None else (
                f"The run changed since this form was opened ({plain_mentions(exc.changed)}). Close it and "
                "click Rewind again.")
            ack(response_action="errors", errors={first: _short(text)})
            return
        except (HazelError, DirectoryError) as exc:
            ack(response_action="errors", errors={first: _short(_field_error(exc))})
            return
        ack()
        try:
            self.bridge.publish_home(actor.id)
        except Exception:  # the decision is made; a stale Home tab is no reason to fail
            log.warning("refreshing the Home tab of %s failed", actor.id, exc_info=True)

    def block_for(self, view: RequestView, message: str, first: str) -> str:
        """The input an engine refusal is shown under: an edit's under the entry it names, a rewind's about
        its feedback (``check_text(what="the feedback")``: too large, a NUL) under the feedback input; else
        ``first``."""
        if self.kind == "edit":
            return M.block_for_error(view.shown_value, view.show, message)
        if self.kind == "rewind" and message.startswith("the feedback"):
            return "feedback"
        return first

    def decide(self, view: RequestView, actor: Actor, *, run_id: str, request_id: int,
               decided: int | None = None) -> None:
        """Take the decision the modal asks for through the engine, on request ``request_id`` of run ``run_id``
        (its ``private_metadata``'s: the engine refuses a request that is not that run's); ``view``: that
        request as it is now; ``decided``: a rewind form's newest decision of the run when it opened (the
        rewind is refused, ``AlreadyDecidedError.changed``, when the run has a newer one: a vote since).

        Raises:
            InvalidDecisionError, AlreadyDecidedError, NotAllowedError, RunNotFoundError, RequestNotFoundError,
            HazelError.
        """
        rid, delivery = request_id, f"view:{actor.id}:{self.view['id']}:{run_id}:{request_id}"  # (whose and what
        # it answers, as a click's: view ids are Slack's and unique, but a submission under another's id, or one
        # of a restored database's, was answered with that decision, silently: s28 F5, s30 F9)
        if self.kind == "edit":
            try:
                payload = M.edit_payload(view.shown_value, view.show, self.values)
            except ValueError as exc:  # a form without one of its inputs
                raise InvalidDecisionError(str(exc)) from exc
        elif self.kind == "reject":
            payload = {"reason": M.read_text(self.values, "reason")}
        elif self.kind == "feedback":
            payload = {"text": M.read_text(self.values, "text")}
        else:
            target = M.read_checkpoint(self.values, "target")  # (a number: http.malformed_reason checked it)
            if target is None:
                raise InvalidDecisionError("choose the checkpoint to continue from")
            self.hazel.rewind(run_id=run_id, actor=actor, to=target, request_id=rid, delivery_id=delivery,
                              feedback=M.read_text(self.values, "feedback") or None, expect_decision=decided)
            return
        self.hazel.decide(run_id=run_id, action=self.kind, actor=actor, payload=payload, request_id=rid,
                          delivery_id=delivery)


def _field_error(exc: Exception) -> str:
    """An error as a modal's field shows it: plain text (Slack renders no mention there: ``<@U0123>`` reads as
    ``Slack user U0123``), without the console's hint appended; an edit refused for leaving a value empty says
    where an empty value can be given, since a modal has no way to (``EmptyEditError``: ``…; an empty value can
    be set with hazel edit --allow-empty or the REST API's allow_empty, not from a Slack form``)."""
    text = plain_mentions(exc.message if isinstance(exc, HazelError) else str(exc))
    if isinstance(exc, EmptyEditError):
        text += exc.given_elsewhere("a Slack form")
    return text


def gone_text(named: ButtonValue, *, form: bool = False) -> str:
    """The answer to a button (or, ``form``, a modal) naming a request the engine does not find there: its run
    has no such request (request ids start again after a database reset and go back after a restore, so the
    id may be another run's now), the run is gone, or (a button of an older Hazel's card, which names no run)
    the request was not posted in the message clicked. Mrkdwn for a button, plain text for a form."""
    what = "form" if form else "message"
    if named.run_id is not None:
        run = named.run_id if form else f"`{T.escape(named.run_id)}`"
        which = f"request {named.request_id} of run {run}"
    else:
        which = (f"request {_short(str(named.request_id))}; this button of an earlier Hazel names no run, and "
                 f"that request was not posted in this message")
    return (f"⚠️ This {what} belongs to a steering request that no longer exists ({which}): Hazel's database may "
            f"have been reset or restored since it was posted. Nothing was done."
            + ("" if form else " `/hazel runs` shows what waits."))


def _short(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
