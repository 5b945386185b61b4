"""The half of the engine's boundary about person links (``Hazel`` inherits it): ``hazel link RUN --for PERSON``
prints a signed link to the run's page whose holder acts on that run for PERSON (``bot.inbound.web.links`` signs
it; the engine never sees the token).

Such a link is a console proxy, as ``--as PERSON`` is: the operator who made it vouches that its holder is
PERSON. So its minting is recorded on the run (``record_link``: an audit event ``link.minted`` by the operator,
detail ``{"for": PERSON, "ttl_sec": N}``), and whoever opens it acts as the actor ``link_actor`` makes: the
operator ``id`` on the channel ``web``, ``acting_for`` PERSON, recorded and shown as "operator M for PERSON",
held to ``--as``'s rules (``bot.engine.permissions.refusal``: PERSON's one vote, PERSON's self-approval ban, and
no approve or edit at a point with a quorum or a self-approval ban unless the point's ``users`` name PERSON).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Callable

from bot.engine.errors import InvalidInputError
from bot.engine.reads import run_in
from store.codec import is_text
from store.models import Actor

if TYPE_CHECKING:
    from bot.engine.people import People
    from store import Store

LINK_MINTED = "link.minted"
"""The audit action of ``record_link``."""


class Links:
    """Person-link methods of ``Hazel`` (needs ``store``, ``people``, ``clock``)."""

    store: "Store"
    people: "People"
    clock: Callable[[], datetime]

    def record_link(self, *, run_id: str, person: str, actor: Actor, ttl_sec: float) -> None:
        """Record in ``run_id``'s audit log that ``actor`` (the console operator, ``Hazel.operator()``) made a
        link acting for ``person`` (the name ``hazel link --for`` took) that lasts ``ttl_sec`` seconds: the event
        ``link.minted``, detail ``{"for": person, "ttl_sec": ttl_sec}``. One transaction; call it before the
        link is handed out, so that no link exists that the audit log does not show.

        Raises:
            RunNotFoundError: no run ``run_id``.
            InvalidInputError: ``person`` is blank or not text, or ``actor`` is not the operator acting as
                themself (a link is made by the operator, never for someone through ``--as``).
        """
        if not person.strip() or not is_text(person):
            raise InvalidInputError("a link needs the name of the person it acts for")
        if actor.channel != "console" or actor.acting_for is not None:
            raise InvalidInputError("a person link is made by the console operator acting as themself")
        seconds = int(ttl_sec) if float(ttl_sec).is_integer() else ttl_sec  # (604800, not 604800.0)
        with self.store.transaction() as tx:
            run_in(tx, run_id)
            tx.events.add(action=LINK_MINTED, actor=actor, now=self.clock(), run_id=run_id,
                          **{"for": person, "ttl_sec": seconds})

    def link_actor(self, *, minted_by: str, person: str) -> Actor:
        """Who acts through a person link: the console operator ``minted_by`` (who ran ``hazel link``) for
        ``person`` (the link's ``--for`` name, resolved as ``--as`` resolves it: ``People.person_named``), on the
        channel ``web``. Its label is "operator M for PERSON"; it decides as ``--as`` does (see the module).

        Raises:
            InvalidInputError: ``minted_by`` or ``person`` is blank or not text.
        """
        if not minted_by.strip() or not person.strip() or not is_text(minted_by) or not is_text(person):
            raise InvalidInputError("a person link names who made it and whom it acts for")
        who = self.people.person_named(person.strip())
        return Actor(id=minted_by, channel="web", name=minted_by, person=who, acting_for=who)
