"""``SlackChannel``: steering requests as Block Kit messages, updated in place, with progress in their thread.

Web API methods (scope ``chat:write`` unless noted; https://docs.slack.dev/reference/methods):
``chat.postMessage`` (requests, thread replies, DMs: a user id as ``channel`` posts in the app's DM with
them), ``chat.update`` (the outcome in place), ``files.getUploadURLExternal`` + ``files.completeUploadExternal``
through ``files_upload_v2`` (scope ``files:write``; an artefact too long for a message), and
``usergroups.users.list`` via ``SlackDirectory`` (scope ``usergroups:read``; DMs to group members).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from slack_sdk import WebClient

from integrations.base import Channel, DeliveryError
from integrations.slack import blocks as B
from integrations.slack import text as T
from integrations.slack.client import delivery_error
from integrations.slack.directory import DirectoryError, SlackDirectory
from store.models import Approvers, ProgressView, RequestView

log = logging.getLogger("hazel.slack")


def target(channel: str) -> str:
    """The Web API ``channel`` argument for a Hazel channel string: ``slack:#migrations`` -> ``#migrations``,
    ``slack:C0123`` -> ``C0123``."""
    kind, _, where = channel.partition(":")
    if kind != "slack" or not where:
        raise ValueError(f"not a Slack channel: {channel!r}")
    return where


class SlackChannel(Channel):
    """Posts steering requests to Slack.

    A call that fails raises ``DeliveryError`` so that the outbox retries. A request needs several calls (the
    message, a file, DMs); what already succeeded is remembered per request in this process, so a retry
    continues where the failed attempt stopped instead of posting the message twice.

    Args:
        client: a ``WebClient`` (``integrations.slack.client.make_client``).
        directory: user group members, to DM group approvers (default: one on ``client``).
        on_change: called with the view after a request was posted or updated (Hazel refreshes App Home tabs);
            its failures are logged, never raised.
        link_for: ``run_id -> URL | None``, the signed "View run" link each request message carries.
    """

    name = "slack"

    def __init__(self, client: WebClient, *, directory: SlackDirectory | None = None,
                 on_change: Callable[[RequestView], None] | None = None,
                 link_for: Callable[[str], str | None] | None = None) -> None:
        self.client = client
        self.link_for = link_for
        self.directory = directory or SlackDirectory(client)
        self.on_change = on_change
        self._done: dict[tuple, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _message(self, view: RequestView, **kwargs: Any) -> tuple[str, list[dict[str, Any]], bool]:
        """``blocks.request_message`` with the run's "View run" link."""
        return B.request_message(view, link=self.link_for(view.run.id) if self.link_for else None, **kwargs)

    # -- the Channel interface ---------------------------------------------------------------------------------

    def open_request(self, view: RequestView) -> dict[str, Any]:
        """Post the request in its channel (plus the whole artefact as a file in the thread when it is too long,
        plus a DM to each approver when the point has ``notify_approvers``).

        Returns:
            ``{"channel": "C…", "ts": "…", "key": "C…:ts", "dms": [{"channel": "D…", "ts": "…"}]}``.

        Raises:
            DeliveryError: a call failed (429 after slack_sdk's own retries carries ``retry_after_sec``).
            PermanentDeliveryError: Slack refused the message as invalid.
        """
        memo = self._memo(("open", view.request.id))
        if "ts" not in memo:
            fallback, blocks, _ = self._message(view)
            response = self._call("chat.postMessage", view.request.channel, self.client.chat_postMessage,
                                  channel=target(view.request.channel), text=fallback, blocks=blocks,
                                  unfurl_links=False, unfurl_media=False)
            memo.update(channel=response["channel"], ts=response["ts"])
        ref = {"channel": memo["channel"], "ts": memo["ts"], "key": f"{memo['channel']}:{memo['ts']}"}
        _, _, needs_file = self._message(view)
        if needs_file and "file" not in memo:
            memo["file"] = self._upload(view, memo["channel"], memo["ts"])
        if view.notify_approvers:
            dms = memo.setdefault("dms", {})
            where = f"in the thread of the request in <#{memo['channel']}>"
            fallback, blocks, _ = self._message(view, file_where=where)
            for user in self._approver_ids(view.approvers):
                if user not in dms:
                    response = self._call("chat.postMessage", f"DM {user}", self.client.chat_postMessage,
                                          channel=user, text=fallback, blocks=blocks, unfurl_links=False)
                    dms[user] = {"channel": response["channel"], "ts": response["ts"]}
            ref["dms"] = list(dms.values())
        self._forget(("open", view.request.id))
        self._changed(view)
        return ref

    def update_request(self, view: RequestView) -> None:
        """Show the request as it is now (votes, or the outcome with who and when and no buttons) in place,
        with ``chat.update`` on the channel message and each DM.

        Raises:
            DeliveryError: a call failed.
        """
        ref = view.request.message_ref or {}
        messages = ([{"channel": ref["channel"], "ts": ref["ts"]}] if ref.get("channel") and ref.get("ts") else [])
        if not messages:
            log.info("request %s has no Slack message to update (not posted in Slack)", view.request.id)
        for i, message in enumerate(messages + list(ref.get("dms") or [])):
            where = "in this message's thread" if i == 0 else f"in the thread of the request in <#{ref['channel']}>"
            fallback, blocks, _ = self._message(view, file_where=where)
            self._call("chat.update", message["channel"], self.client.chat_update, channel=message["channel"],
                       ts=message["ts"], text=fallback, blocks=blocks)
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
            self._call("chat.postMessage", ref["channel"], self.client.chat_postMessage, channel=ref["channel"],
                       thread_ts=ref["ts"], text=text, unfurl_links=False)
        else:
            self._call("chat.postMessage", view.request.channel, self.client.chat_postMessage,
                       channel=target(view.request.channel), text=text, unfurl_links=False)

    def remind(self, view: RequestView) -> None:
        """A reminder (or an escalation notice) in the request's thread, also sent to the backup approvers on
        escalation and to each approver when the point notifies approvers. An escalation to another Slack
        channel (``escalate_channel``) posts the whole request there, with its buttons.

        Raises:
            DeliveryError: a call failed.
        """
        key = ("remind", view.request.id, view.escalation, view.request.reminders_sent)
        memo = self._memo(key)
        text = B.reminder_text(view)
        ref = view.request.message_ref or {}
        elsewhere = (view.escalation and view.escalate_channel is not None
                     and view.escalate_channel.startswith("slack:") and view.escalate_channel != view.request.channel)
        if "thread" not in memo:
            if elsewhere:  # escalated to another channel (the request may even live in Jira): the whole
                # request, with its buttons, so that the backup approvers can decide from there
                _, blocks, _ = self._message(view, file_where="where the request was first asked")
                self._call("chat.postMessage", view.escalate_channel, self.client.chat_postMessage,
                           channel=target(view.escalate_channel), text=text, blocks=blocks, unfurl_links=False)
            elif ref.get("channel") and ref.get("ts"):
                self._call("chat.postMessage", ref["channel"], self.client.chat_postMessage,
                           channel=ref["channel"], thread_ts=ref["ts"], text=text, reply_broadcast=True)
            else:
                self._call("chat.postMessage", view.request.channel, self.client.chat_postMessage,
                           channel=target(view.request.channel), text=text)
            memo["thread"] = True
        people = view.escalate_to if view.escalation and view.escalate_to else (
            view.approvers if view.notify_approvers else None)
        if people is not None:
            sent = memo.setdefault("dms", set())
            fallback, blocks, _ = self._message(view, file_where=f"in the thread of the request in "
                                                                       f"<#{ref.get('channel', '')}>")
            for user in self._approver_ids(people):
                if user not in sent:
                    self._call("chat.postMessage", f"DM {user}", self.client.chat_postMessage, channel=user,
                               text=text, blocks=blocks, unfurl_links=False)
                    sent.add(user)
        self._forget(key)

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

    def _approver_ids(self, approvers: Approvers) -> list[str]:
        """Slack users named as approvers plus the members of their user groups, in a stable order."""
        users = list(dict.fromkeys(approvers.slack_users))
        for group in approvers.slack_usergroups:
            try:
                members = self.directory.members(group)
            except DirectoryError as exc:
                raise DeliveryError(str(exc)) from exc
            users += [u for u in sorted(members) if u not in users]
        return users

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
