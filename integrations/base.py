"""The one small interface every channel implements, and the errors delivery can raise.

    DeliveryError (Exception): the channel could not deliver now; the outbox retries with backoff
    └── PermanentDeliveryError: retrying cannot help (bad channel name, message refused as invalid);
        the outbox marks the message dead and shows it in ``hazel outbox`` and the audit log
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from store.models import ProgressView, RequestView


class DeliveryError(Exception):
    """Transient: network, 5xx, rate limits. ``retry_after_sec`` is the channel's own hint, if it gave one."""

    def __init__(self, message: str, *, retry_after_sec: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_sec = retry_after_sec


class PermanentDeliveryError(DeliveryError):
    """Retrying the same message cannot succeed."""


class Channel(ABC):
    """Posts steering requests and run progress, and updates them after decisions.

    Implementations raise ``DeliveryError`` (or ``PermanentDeliveryError``) when a call fails; they never
    swallow a failure, so that the outbox can retry and nothing is lost.
    """

    name: ClassVar[str]

    @abstractmethod
    def open_request(self, view: RequestView) -> dict[str, Any] | None:
        """Post a new steering request. Returns where it was posted (stored as the request's ``message_ref``),
        e.g. ``{"channel": "C…", "ts": "…", "key": "C…:ts"}`` or ``{"key": "MIG-12"}``; ``key``, when given, is
        indexed so that the channel's callbacks can find the request (``RequestRepo.by_message_key``).

        Raises:
            DeliveryError: not posted; the outbox retries.
        """

    @abstractmethod
    def update_request(self, view: RequestView) -> None:
        """Show the request's new state in place (a quorum vote, the decision, a cancellation).

        Raises:
            DeliveryError: not updated; the outbox retries.
        """

    @abstractmethod
    def progress(self, view: ProgressView) -> None:
        """Report a run's progress next to its previous request (a Slack thread reply, a Jira comment).

        Raises:
            DeliveryError: not posted; the outbox retries.
        """

    def remind(self, view: RequestView) -> dict[str, Any] | None:
        """Remind the approvers of a pending request (``view.reminder``) or tell the backup approvers it was
        escalated to them (``view.escalation``). Default: post it again as a new message.

        Returns:
            None, or ``{"copies": [{"channel": …, "ts": …}, …]}``: messages it posted that carry the request's
            buttons; they are added to the request's ``message_ref["copies"]`` (with ``via``, the channel
            string) and ``update_request`` must update them too.

        Raises:
            DeliveryError: not posted; the outbox retries.
        """
        self.open_request(view)
