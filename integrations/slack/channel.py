"""``SlackChannel``: steering requests as Block Kit messages, updated in place, with progress in their thread.

Web API methods (scope ``chat:write`` unless noted; https://docs.slack.dev/reference/methods):
``chat.postMessage`` (requests, thread replies, DMs: a user id as ``channel`` posts in the app's DM with
them), ``chat.update`` (the outcome in place), ``files.getUploadURLExternal`` + ``files.completeUploadExternal``
through ``files_upload_v2`` (scope ``files:write``; an artefact too long for a message), and
``usergroups.users.list`` via ``SlackDirectory`` (scope ``usergroups:read``; DMs to group members).

A retried post looks for its message before posting again (``SlackChannel._post``): ``conversations.history``
(top-level messages; scopes ``channels:history``, ``groups:history``) or ``conversations.replies`` (thread
replies; same scopes), and ``conversations.list`` (scopes ``channels:read``, ``groups:read``) to find the id of a
channel given by name.
"""

from __future__ import annotations

import logging
import threading
from datetime import timezone
from typing import Any, Callable

from slack_sdk import WebClient

from integrations.base import Channel, DeliveryError, PermanentDeliveryError
from integrations.slack import blocks as B
from integrations.slack import text as T
from integrations.slack.client import delivery_error
from integrations.slack.directory import DirectoryError, SlackDirectory
from store.models import Approvers, Delivery, ProgressView, RequestStatus, RequestView

log = logging.getLogger("hazel.slack")

METADATA_EVENT = "hazel_delivery"
"""The ``event_type`` of the message metadata (https://docs.slack.dev/messaging/message-metadata) Hazel attaches
to a message it posts for an outbox message; ``event_payload`` is ``{"key": "<Delivery.key>/<part>"}``."""
LOOKBACK_SEC = 300.0
"""How long before an outbox message was queued a lookup starts (``oldest``): room for clock skew between
Hazel's clock and Slack's."""
LOOKUP_PAGES = 10
"""Pages (of 200 messages) a lookup reads at most before posting anyway."""
LOOKUP_REFUSED = frozenset({"missing_scope", "not_in_channel", "channel_not_found", "not_allowed_token_type",
                            "no_permission", "access_denied", "thread_not_found"})
"""``error`` codes with which Slack refuses a lookup for good: Hazel posts without it (logged once)."""


def target(channel: str) -> str:
    """The Web API ``channel`` argument for a Hazel channel string: ``slack:#migrations`` -> ``#migrations``,
    ``slack:C0123`` -> ``C0123``."""
    kind, _, where = channel.partition(":")
    if kind != "slack" or not where:
        raise ValueError(f"not a Slack channel: {channel!r}")
    return where


def slack_copies(ref: dict[str, Any]) -> list[dict[str, Any]]:
    """The copies in a request's ``message_ref["copies"]`` that were posted in Slack (``via`` ``slack:…``, or
    no ``via``), each ``{"channel": "C…"|"D…", "ts": "…", "user"?: "U…", "via"?: "slack:…"}``."""
    return [c for c in ref.get("copies") or () if isinstance(c, dict) and c.get("channel") and c.get("ts")
            and str(c.get("via") or "slack:").startswith("slack:")]


def _slack_error(exc: BaseException) -> str | None:
    """The Web API ``error`` code behind a ``DeliveryError`` from ``SlackChannel._call`` (None: not an API
    error answer, e.g. a network failure)."""
    response = getattr(exc.__cause__, "response", None)
    data = getattr(response, "data", None)
    return data.get("error") if isinstance(data, dict) else None


class SlackChannel(Channel):
    """Posts steering requests to Slack.

    A call that fails raises ``DeliveryError`` so that the outbox retries. A request needs several calls (the
    message, a file, DMs); what already succeeded is remembered per request in this process, so a retry
    continues where the failed attempt stopped instead of posting the message twice. A message whose post had
    an unknown outcome (a timeout, a dropped connection, a 5xx, a crash) is looked for before it is posted again
    (``_post``): the channel message, thread replies and an escalation post, not DMs.

    Args:
        client: a ``WebClient`` (``integrations.slack.client.make_client``).
        directory: user group members, to DM group approvers (default: one on ``client``).
        on_change: called with the view after a request was posted or updated (Hazel refreshes App Home tabs);
            its failures are logged, never raised.
        link_for: ``run_id -> URL | None``, the signed "View run" link each request message carries.
        identities: ``person -> their Slack user ids`` (the people file), so that approvers listed as ``people``
            are mentioned and DMed by their Slack identity (``with_identities``); None (also settable later as
            ``.identities``, as ``bot.server.app.HazelApp`` does): people are named by name and not DMed.
        waits_on: ``(view, Slack user id) -> bool``, the engine's word on whether the request waits on that
            user (``bot.engine.views.Access.waits_on``, or they already voted): an approver it does not wait
            on (the run's starter under a self-approval ban) gets no DM; None: every approver is DMed.
    """

    name = "slack"

    def __init__(self, client: WebClient, *, directory: SlackDirectory | None = None,
                 on_change: Callable[[RequestView], None] | None = None,
                 link_for: Callable[[str], str | None] | None = None,
                 identities: Callable[[str], frozenset[str]] | None = None,
                 waits_on: Callable[[RequestView, str], bool] | None = None) -> None:
        self.client = client
        self.identities = identities
        self.waits_on = waits_on
        self.link_for = link_for
        self.directory = directory or SlackDirectory(client)
        self.on_change = on_change
        self._done: dict[tuple, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._channel_ids: dict[str, str] = {}
        """``#name`` -> channel id, learnt from posts' answers and ``conversations.list``."""
        self._refused: set[str] = set()
        """Lookup refusals already logged (one warning per ``error`` code)."""

    def _message(self, view: RequestView, **kwargs: Any) -> tuple[str, list[dict[str, Any]], bool]:
        """``blocks.request_message`` with the run's "View run" link."""
        return B.request_message(view, link=self.link_for(view.run.id) if self.link_for else None, **kwargs)

    def with_identities(self, view: RequestView) -> RequestView:
        """``view`` with every approver list (``approvers``, ``escalate_to``, ``waiting_for``) showing a person
        listed in ``people`` who has a Slack identity (``identities``) as that Slack user (the first of their
        ids, in order) instead of by name, once: as a mention (``<@U…>``), DMed with ``notify_approvers`` and on
        escalation, their Home tab refreshed. A person one of whose Slack ids is listed already is left out
        (``permissions.shown_approvers`` already named them by it)."""
        if self.identities is None:
            return view
        update = {key: self._slack_approvers(getattr(view, key)) for key in ("approvers", "escalate_to",
                                                                              "waiting_for", "not_starter")
                  if isinstance(getattr(view, key, None), Approvers)}
        return view.model_copy(update=update)

    def _slack_approvers(self, approvers: Approvers) -> Approvers:
        """``approvers`` with its ``people`` who have Slack ids moved to ``slack_users`` (see
        ``with_identities``)."""
        people, users = [], list(approvers.slack_users)
        for name in approvers.people:
            ids = sorted(self.identities(name)) if self.identities is not None else []
            if not ids:
                people.append(name)
            elif not set(ids) & set(users):
                users.append(ids[0])
        return approvers.model_copy(update={"people": tuple(people), "slack_users": tuple(users)})

    # -- the Channel interface ---------------------------------------------------------------------------------

    def open_request(self, view: RequestView) -> dict[str, Any]:
        """Post the request in its channel (plus the whole artefact as a file in the thread when it is too long,
        plus a DM to each approver when the point has ``notify_approvers``).

        Returns:
            ``{"channel": "C…", "ts": "…", "key": "C…:ts", "dms": [{"channel": "D…", "ts": "…", "user": "U…"}]}``.

        Raises:
            DeliveryError: a call failed (429 after slack_sdk's own retries carries ``retry_after_sec``).
            PermanentDeliveryError: Slack refused the message as invalid.
        """
        view = self.with_identities(view)
        memo = self._memo(("open", view.request.id))
        if "ts" not in memo:
            fallback, blocks, _ = self._message(view)
            response = self._post(view.delivery, "request", view.request.channel, channel=target(view.request.channel),
                                  text=fallback, blocks=blocks, unfurl_links=False, unfurl_media=False)
            memo.update(channel=response["channel"], ts=response["ts"])
        ref = {"channel": memo["channel"], "ts": memo["ts"], "key": f"{memo['channel']}:{memo['ts']}"}
        _, _, needs_file = self._message(view)
        if needs_file and "file" not in memo:
            memo["file"] = self._upload(view, memo["channel"], memo["ts"])
        if view.notify_approvers:
            dms = memo.setdefault("dms", {})
            where = f"in the thread of the request in <#{memo['channel']}>"
            fallback, blocks, _ = self._message(view, file_where=where)
            for user in self._approver_ids(view.approvers, view):
                if user not in dms:
                    response = self._call("chat.postMessage", f"DM {user}", self.client.chat_postMessage,
                                          channel=user, text=fallback, blocks=blocks, unfurl_links=False)
                    dms[user] = {"channel": response["channel"], "ts": response["ts"], "user": user}
            ref["dms"] = list(dms.values())
        self._forget(("open", view.request.id))
        self._changed(view)
        return ref

    def update_request(self, view: RequestView) -> None:
        """Show the request as it is now (votes, or the outcome with who and when and no buttons) in place,
        with ``chat.update`` on every Slack message that shows it with its buttons: the channel message, each
        approver's DM, and the copies reminders and escalations posted later (``message_ref["copies"]``
        delivered through Slack: the whole request in an ``escalate_channel``, DMs to backup approvers and to
        approvers who had none). A copy Slack no longer has (``message_not_found``, deleted by its reader) is
        skipped with a warning: it must not keep the others stale. A request with no Slack message was never
        posted (its post is dead: logged at INFO); one whose post is still pending cannot get here, as the
        outbox delivers a run's messages to one channel in order (``OutboxRepo.claim_due``).

        Raises:
            DeliveryError: a call failed (the outbox retries the whole update: ``chat.update`` is idempotent).
            PermanentDeliveryError: Slack refused the channel message or a DM as invalid.
        """
        view = self.with_identities(view)
        ref = view.request.message_ref or {}
        messages = ([{"channel": ref["channel"], "ts": ref["ts"]}] if ref.get("channel") and ref.get("ts") else [])
        if not messages and not ref.get("copies"):
            log.info("request %s has no Slack message to update (not posted in Slack)", view.request.id)
        elsewhere = (f"in the thread of the request in <#{ref['channel']}>" if ref.get("channel")
                     else "where the request was first asked")
        for i, message in enumerate(messages + list(ref.get("dms") or [])):
            where = "in this message's thread" if i == 0 and messages else elsewhere
            fallback, blocks, _ = self._message(view, file_where=where)
            self._call("chat.update", message["channel"], self.client.chat_update, channel=message["channel"],
                       ts=message["ts"], text=fallback, blocks=blocks)
        fallback, blocks, _ = self._message(view, file_where=elsewhere)
        for copy in slack_copies(ref):
            try:
                self._call("chat.update", copy["channel"], self.client.chat_update, channel=copy["channel"],
                           ts=copy["ts"], text=fallback, blocks=blocks)
            except PermanentDeliveryError as exc:
                log.warning("request %s: a copy of its message was not updated: %s", view.request.id, exc)
        self._changed(view)

    def progress(self, view: ProgressView) -> None:
        """Post the run's progress in the thread of its previous request (top level in that request's channel
        when it has no Slack message).

        Raises:
            DeliveryError: the call failed.
        """
        if view.request is None:
            return
        ref = view.request.message_ref or {}
        text = B.progress_text(view)
        if ref.get("channel") and ref.get("ts"):
            self._post(view.delivery, "progress", ref["channel"], channel=ref["channel"], thread_ts=ref["ts"],
                       text=text, unfurl_links=False)
        else:
            self._post(view.delivery, "progress", view.request.channel, channel=target(view.request.channel),
                       text=text, unfurl_links=False)

    def remind(self, view: RequestView) -> dict[str, Any] | None:
        """A reminder (or an escalation notice) in the request's thread, also sent to the backup approvers on
        escalation and to each approver when the point notifies approvers. An escalation to another Slack
        channel (``escalate_channel``) posts the whole request there, with its buttons.

        A person who already has a message with the request's buttons (their DM from ``open_request``, or an
        earlier reminder's) gets the reminder as a reply in its thread, also shown in the DM
        (``reply_broadcast``), without more buttons; anyone else gets a DM with the whole request and its
        buttons. A request settled meanwhile is not reminded of (nothing is posted).

        Returns:
            ``{"copies": [{"channel": …, "ts": …, "user"?: "U…"}]}``: the messages posted with the request's
            buttons (the escalation post, the new DMs), which the outbox adds to ``message_ref["copies"]`` so
            that ``update_request`` updates them after the decision; None when nothing was posted.

        Raises:
            DeliveryError: a call failed; its ``message_ref`` holds the copies posted before it (a retry in this
                process does not post them again).
        """
        if view.request.status is not RequestStatus.PENDING:
            return None
        view = self.with_identities(view)
        key = ("remind", view.request.id, view.escalation, view.request.reminders_sent)
        memo = self._memo(key)
        copies: list[dict[str, Any]] = memo.setdefault("copies", [])
        try:
            self._remind(view, memo, copies)
        except DeliveryError as exc:
            exc.message_ref = {"copies": list(copies)}  # type: ignore[attr-defined]
            raise
        self._forget(key)
        if view.escalation:  # the backup approvers may decide it now: their Home tabs show it
            self._changed(view)
        return {"copies": copies} if copies else None

    def _remind(self, view: RequestView, memo: dict[str, Any], copies: list[dict[str, Any]]) -> None:
        text = B.reminder_text(view)
        ref = view.request.message_ref or {}
        elsewhere = (view.escalation and view.escalate_channel is not None
                     and view.escalate_channel.startswith("slack:") and view.escalate_channel != view.request.channel)
        if "thread" not in memo:
            if elsewhere:  # escalated to another channel (the request may even live in Jira): the whole
                # request, with its buttons, so that the backup approvers can decide from there
                _, blocks, _ = self._message(view, file_where="where the request was first asked")
                response = self._post(view.delivery, "escalation", view.escalate_channel,
                                      channel=target(view.escalate_channel), text=text, blocks=blocks,
                                      unfurl_links=False)
                copies.append({"channel": response["channel"], "ts": response["ts"]})
            elif ref.get("channel") and ref.get("ts"):
                self._post(view.delivery, "reminder", ref["channel"], channel=ref["channel"], thread_ts=ref["ts"],
                           text=text, reply_broadcast=True)
            else:
                self._post(view.delivery, "reminder", view.request.channel, channel=target(view.request.channel),
                           text=text)
            memo["thread"] = True
        if view.escalation and view.escalate_to:
            people = view.escalate_to
        elif view.notify_approvers and not view.nobody_left:  # those who can still decide (the engine's view)
            people = view.waiting_for or view.approvers
        else:
            people = None
        if people is None:
            return
        sent = memo.setdefault("dms", set())
        have = {m["user"]: m for m in [*(ref.get("dms") or []), *slack_copies(ref)] if m.get("user")}
        fallback, blocks, _ = self._message(view, file_where=f"in the thread of the request in "
                                                                   f"<#{ref.get('channel', '')}>")
        for user in self._approver_ids(people, view):
            if user in sent:
                continue
            mine = have.get(user)
            if mine is not None:  # their message with the buttons is there already: remind them in its thread
                try:
                    self._call("chat.postMessage", f"DM {user}", self.client.chat_postMessage,
                               channel=mine["channel"], thread_ts=mine["ts"], text=text, reply_broadcast=True,
                               unfurl_links=False)
                except DeliveryError as exc:
                    if _slack_error(exc) != "thread_not_found":
                        raise
                    mine = None  # they deleted it: the whole request again, below
            if mine is None:
                response = self._call("chat.postMessage", f"DM {user}", self.client.chat_postMessage, channel=user,
                                      text=text, blocks=blocks, unfurl_links=False)
                copies.append({"channel": response["channel"], "ts": response["ts"], "user": user})
            sent.add(user)

    # -- helpers ----------------------------------------------------------------------------------------------

    def _upload(self, view: RequestView, channel: str, thread_ts: str) -> str | None:
        """Attach the whole artefact as a file in the request's thread (``files_upload_v2``)."""
        content = T.plain(view.shown_value)
        response = self._call("files_upload_v2", channel, self.client.files_upload_v2, channel=channel,
                              thread_ts=thread_ts, content=content, filename=B.file_name(view),
                              title=f"{view.title}: {view.show or 'state'} (run {view.run.id})",
                              initial_comment=f"The whole of `{T.escape(view.show or 'the state')}` "
                                              f"({len(content):,} characters).")
        file = response.get("file") or {}
        return file.get("id")

    def _approver_ids(self, approvers: Approvers, view: RequestView) -> list[str]:
        """Slack users named as approvers (people by their Slack id: ``with_identities``) plus the members of
        their user groups, in a stable order, less those the request does not wait on (``waits_on``: the run's
        starter under a self-approval ban).

        Raises:
            DeliveryError: Slack could not list a group's members, or tell who a user is, now.
        """
        users = list(dict.fromkeys(approvers.slack_users))
        for group in approvers.slack_usergroups:
            try:
                members = self.directory.members(group)
            except DirectoryError as exc:
                raise DeliveryError(str(exc)) from exc
            users += [u for u in sorted(members) if u not in users]
        if self.waits_on is None:
            return users
        try:
            return [u for u in users if self.waits_on(view, u)]
        except DirectoryError as exc:
            raise DeliveryError(str(exc)) from exc

    def _post(self, delivery: Delivery | None, part: str, where: str, *, channel: str, thread_ts: str | None = None,
              **kwargs: Any) -> dict[str, Any]:
        """``chat.postMessage`` once per outbox message: the message carries metadata naming ``delivery``'s
        key and ``part`` (which of the delivery's posts it is); on a retry (``delivery.attempt > 1``: an earlier
        attempt may have posted it without Hazel learning so) it is first looked for (``_find``) and, when
        found, not posted again. Without ``delivery`` it is simply posted.

        Returns:
            ``{"channel": "C…", "ts": "…"}`` of the message posted or found.

        Raises:
            DeliveryError, PermanentDeliveryError: the post, or the lookup (unless Slack refuses it for good:
                then it is posted without), failed.
        """
        if thread_ts is not None:
            kwargs["thread_ts"] = thread_ts
        if delivery is None:
            response = self._call("chat.postMessage", where, self.client.chat_postMessage, channel=channel, **kwargs)
            return {"channel": response["channel"], "ts": response["ts"]}
        key = f"{delivery.key}/{part}"
        if delivery.attempt > 1:
            found = self._find(channel, thread_ts, key, since_sec=delivery.queued_at.replace(
                tzinfo=delivery.queued_at.tzinfo or timezone.utc).timestamp() - LOOKBACK_SEC)
            if found is not None:
                log.info("%s: found the message an earlier attempt posted (%s); not posting it again", where,
                         found["ts"])
                return found
        response = self._call("chat.postMessage", where, self.client.chat_postMessage, channel=channel,
                              metadata={"event_type": METADATA_EVENT, "event_payload": {"key": key}}, **kwargs)
        if channel.startswith("#"):
            with self._lock:
                self._channel_ids[channel] = response["channel"]
        return {"channel": response["channel"], "ts": response["ts"]}

    def _find(self, channel: str, thread_ts: str | None, key: str, *, since_sec: float) -> dict[str, Any] | None:
        """The message tagged with ``key`` posted in ``channel`` (a thread's replies with ``thread_ts``) since
        ``since_sec`` (epoch seconds), as ``{"channel", "ts"}``; None when there is none, or when it cannot be
        looked for: a DM (a user id), or Slack refusing the lookup (a missing scope, the bot not in the channel;
        logged once per reason).

        Raises:
            DeliveryError: Slack could not answer now.
        """
        try:
            channel_id = self._channel_id(channel)
            if channel_id is None:
                return None
            args: dict[str, Any] = {"channel": channel_id, "oldest": f"{since_sec:.6f}", "include_all_metadata": True,
                                    "limit": 200}
            if thread_ts is not None:
                pages = self._call("conversations.replies", channel, self.client.conversations_replies,
                                   ts=thread_ts, **args)
            else:
                pages = self._call("conversations.history", channel, self.client.conversations_history, **args)
            for number, page in enumerate(pages):  # SlackResponse follows next_cursor
                for message in page.get("messages") or ():
                    meta = message.get("metadata") or {}
                    if meta.get("event_type") == METADATA_EVENT and (meta.get("event_payload") or {}).get("key") == key:
                        return {"channel": channel_id, "ts": message["ts"]}
                if number + 1 >= LOOKUP_PAGES:
                    break
        except DeliveryError as exc:
            code = _slack_error(exc)
            if code not in LOOKUP_REFUSED:
                raise
            if code not in self._refused:
                self._refused.add(code)
                log.warning("Slack refused to look for a message a failed post may have left (%s): posting again "
                            "without looking, which may show it twice; see README, Slack, Failures", exc)
            return None
        return None

    def _channel_id(self, channel: str) -> str | None:
        """The id of ``channel`` (an id already, or ``#name``: ``conversations.list``, cached); None for a user id
        (a DM: not looked up) or a name Slack does not list.

        Raises:
            DeliveryError: Slack could not answer now (or refused: ``_find`` decides).
        """
        if not channel.startswith("#"):
            return None if channel[:1] in ("U", "W") else channel
        with self._lock:
            known = self._channel_ids.get(channel)
        if known is not None:
            return known
        pages = self._call("conversations.list", channel, self.client.conversations_list,
                           types="public_channel,private_channel", exclude_archived=True, limit=1000)
        for page in pages:
            for found in page.get("channels") or ():
                if isinstance(found, dict) and found.get("name") == channel[1:] and found.get("id"):
                    with self._lock:
                        self._channel_ids[channel] = found["id"]
                    return found["id"]
        return None

    @staticmethod
    def _call(method: str, where: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except Exception as exc:
            raise delivery_error(exc, f"{method} to {where}") from exc

    def _memo(self, key: tuple) -> dict[str, Any]:
        with self._lock:
            return self._done.setdefault(key, {})

    def _forget(self, key: tuple) -> None:
        with self._lock:
            self._done.pop(key, None)

    def _changed(self, view: RequestView) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change(view)
        except Exception:  # a refresh of App Home tabs must not make a delivered message fail
            log.exception("refreshing Slack views after request %s changed failed", view.request.id)
