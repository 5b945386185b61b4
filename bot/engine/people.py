"""People: one human, whatever channel identities they use.

A person has one name and identities on each channel: Slack user ids, Jira account ids (Cloud) or user names
(Server / Data Center), REST API token names, console names, and optionally an email. They come from the
people file (``HAZEL_PEOPLE_FILE``, TOML)::

    [people.priya]
    email = "priya@example.com"
    slack = ["U0000000001"]
    jira = ["5b10ac8d82e05b22cc7d4ef5", "priya.k"]
    api = ["priya-ci"]
    console = ["pk"]

Who an identity is (``People.person_of``):

1. the person whose file entry lists it (a person's own name is also their console and REST API name, and
   console and REST API names are one namespace: a name listed under either counts on both);
2. else, when the channel tells the identity's email (Slack ``users.info``, a Jira user whose email is
   visible), the person with that email, unless the file lists that person's identities on this channel: a
   list is the whole list (on Jira Server / Data Center users may edit their own email, so another account
   showing priya's email must not become priya when the file says which accounts are hers). An identity so
   matched stays that person in this process when a later payload shows no email (Jira Cloud shows it in some
   payloads and not in others), until it shows another; a channel that cannot tell the email now raises
   (Slack: ``DirectoryError``) rather than have the identity taken for someone else;
3. else the identity is its own person: a console or REST API name is the person of that name (so a console
   name and a REST token name that are the same string are the same person), a Slack or Jira identity is
   ``slack:<id>`` / ``jira:<id>``.

A file that names one identity (or one email) for two people is refused when it is loaded, with a message
naming both; so is a name or an identity that is not one line of printable text (a line break or another
control character: they are shown in tables and in the audit log). Quorum counts distinct people and the
self-approval ban compares people (``bot.engine.permissions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from bot.engine.errors import ConfigurationError
from bot.settings import name_problem
from store.models import nfc

CHANNELS = ("console", "api", "slack", "jira")
"""The channels a person file entry lists identities for."""
NAMED_CHANNELS = ("console", "api", "web")
"""Channels whose identities are names: an unclaimed one is the person of that name. The run pages (``web``)
act as a REST token's name or a person's name: the console and REST API namespace."""

MAX_MATCHED = 100_000
"""The most channel identities a process remembers as matched to a person by email (``People.person_of``)."""

EmailSource = str | Callable[[], str | None] | None
"""An identity's email as the channel reported it, or a function that asks the channel (called only when the
identity is claimed by nobody and some person has an email)."""


@dataclass(frozen=True)
class Person:
    """One human: ``name`` (the person's key), their identities per channel and their email (lower case)."""

    name: str
    identities: Mapping[str, frozenset[str]] = field(default_factory=dict)
    email: str | None = None

    def on(self, channel: str) -> frozenset[str]:
        """Their identities on ``channel``. Console and REST API names are one namespace: their own name and
        every console or API name listed count on both (a console name and a token name that are the same
        string are the same person)."""
        if channel in NAMED_CHANNELS:
            return frozenset().union(*(self.identities.get(c, frozenset()) for c in NAMED_CHANNELS), {self.name})
        return self.identities.get(channel, frozenset())


class People:
    """The people of a people file (empty without one), answering "who is this identity?".

    Raises (constructor):
        ConfigurationError: an identity or an email named for two people (the message names both), an
            unknown channel, a malformed entry.
    """

    def __init__(self, people: Iterable[Person] = ()) -> None:
        self._people: dict[str, Person] = {}
        self._claims: dict[tuple[str, str], str] = {}
        self._emails: dict[str, str] = {}
        self._matched: dict[tuple[str, str], str] = {}  # (channel, identity) -> person, once matched by email
        self._folded: dict[str, str] | None = None  # names as ``named_like`` compares them: their person
        for person in people:
            if person.name in self._people:
                raise ConfigurationError(f"people file: {person.name!r} is defined twice")
            self._people[person.name] = person
        for person in self._people.values():
            for channel in CHANNELS:
                for identity in person.on(channel):
                    other = self._claims.setdefault((channel, identity), person.name)
                    if other != person.name:
                        what = ("console or REST API name" if channel in NAMED_CHANNELS
                                else f"{channel} identity")
                        raise ConfigurationError(
                            f"people file: {what} {identity!r} is named for both {other!r} and "
                            f"{person.name!r}; one identity can belong to one person only")
            if person.email:
                other = self._emails.setdefault(person.email, person.name)
                if other != person.name:
                    raise ConfigurationError(f"people file: email {person.email!r} is named for both {other!r} "
                                             f"and {person.name!r}")

    @classmethod
    def load(cls, path: str | Path | None) -> "People":
        """The people of the TOML file at ``path`` (None: nobody).

        Raises:
            ConfigurationError: the file cannot be read or parsed, or is inconsistent (see the class).
        """
        if path is None or str(path).strip() == "":
            return cls()
        import tomllib  # only a configured people file is parsed
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(f"HAZEL_PEOPLE_FILE {str(path)!r} cannot be read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigurationError(f"HAZEL_PEOPLE_FILE {str(path)!r} is not UTF-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"HAZEL_PEOPLE_FILE {str(path)!r} is not valid TOML: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "People":
        """People from the parsed file: ``{"people": {name: {"email"?, "slack"?, "jira"?, "api"?,
        "console"?}}}`` (each identity list may also be a single string).

        Raises:
            ConfigurationError: a malformed entry, an unknown key, a name or an identity that is not one line of
                printable text, at most 200 characters, never Hazel's own actor's name (``bot.settings.name_problem``),
                or an inconsistent file (see the class).
        """
        entries = data.get("people", {})
        unknown_top = sorted(set(data) - {"people"})
        if unknown_top or not isinstance(entries, Mapping):
            raise ConfigurationError("people file: expected [people.NAME] tables only"
                                     + (f" (found {', '.join(unknown_top)})" if unknown_top else ""))
        people = []
        for name, entry in entries.items():
            name = nfc(str(name))
            problem = name_problem(str(name)) or (None if str(name).strip() else "is blank")
            if problem:  # (a line break: a forged row in hazel audit)
                raise ConfigurationError(f"people file: the name {str(name)[:60]!r} {problem}")
            if not isinstance(entry, Mapping):
                raise ConfigurationError(f"people file: [people.{name}] must be a table")
            unknown = sorted(set(entry) - {"email", *CHANNELS})
            if unknown:
                raise ConfigurationError(f"people file: [people.{name}] has unknown keys {', '.join(unknown)} "
                                         f"(known: email, {', '.join(CHANNELS)})")
            identities = {}
            for channel in CHANNELS:
                raw = entry.get(channel, [])
                values = [raw] if isinstance(raw, str) else raw
                if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
                    raise ConfigurationError(f"people file: [people.{name}] {channel} must be a list of names")
                bad = next(((v, p) for v in values if (p := name_problem(v.strip()))), None)
                if bad is not None:
                    raise ConfigurationError(f"people file: [people.{name}] {channel} {bad[0][:60]!r} {bad[1]}")
                identities[channel] = frozenset(nfc(v.strip()) for v in values)
            email = entry.get("email")
            if email is not None and (not isinstance(email, str) or "@" not in email):
                raise ConfigurationError(f"people file: [people.{name}] email must be an address")
            people.append(Person(name=str(name), identities=identities,
                                 email=email.strip().lower() if email else None))
        return cls(people)

    # -- who is who -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._people)

    def get(self, name: str) -> Person | None:
        return self._people.get(nfc(name))

    def named_like(self, name: str) -> str | None:
        """The person ``name`` reads as, its case, spacing, width and invisible characters aside (``Priya``,
        ``p r i y a``, ``ｐｒｉｙａ``, ``pri\u200bya`` for the person ``priya``): a person's name, or the
        person whose console or REST API name it reads as; None when it reads as nobody's (s30 F8, s31 F10: only
        the exact name was shown as someone else's). Letters of other scripts that look alike (a Cyrillic і) are
        not caught."""
        if self._folded is None:
            self._folded = {_folded(n): n for n in self._people}
            for (channel, identity), person in self._claims.items():
                if channel in NAMED_CHANNELS:
                    self._folded.setdefault(_folded(identity), person)
        return self._folded.get(_folded(name))

    @property
    def has_emails(self) -> bool:
        """True when matching an identity by its email could find someone."""
        return bool(self._emails)

    def claimed(self, channel: str, identity: str) -> str | None:
        """The person whose entry lists ``identity`` on ``channel``, if any."""
        return self._claims.get((channel, nfc(identity)))

    def person_of(self, channel: str, identity: str, *, email: EmailSource = None) -> str:
        """Who ``identity`` on ``channel`` is (see the module docstring). ``email`` is looked up only when
        nobody claims the identity and some person has an email; it names a person only when the file lists
        none of that person's identities on ``channel``."""
        identity = nfc(identity)
        claimed = self._claims.get(("api" if channel == "web" else channel, identity))
        if claimed is not None:
            return claimed
        if self._emails:
            address = email() if callable(email) else email
            if address:
                found = self._emails.get(address.strip().lower())
                if found is not None and not self._people[found].on(channel):  # (her listed accounts only)
                    if len(self._matched) < MAX_MATCHED:
                        self._matched[(channel, identity)] = found
                    return found
                self._matched.pop((channel, identity), None)  # (another email now: no longer that person)
            else:  # the channel shows no email this time (Jira Cloud: some payloads do not): as it last did
                known = self._matched.get((channel, identity))
                if known is not None:
                    return known
        if channel in NAMED_CHANNELS:
            return identity
        return f"{channel}:{identity}"

    def identities_of(self, person: str) -> dict[str, frozenset[str]]:
        """Every identity of ``person`` known from the file, per channel (a person not in the file: the
        identity their key names)."""
        person = nfc(person)
        found = self._people.get(person)
        if found is not None:
            return {channel: found.on(channel) for channel in CHANNELS}
        channel, sep, identity = person.partition(":")
        if sep and channel in ("slack", "jira"):
            return {channel: frozenset({identity})}
        return {"console": frozenset({person}), "api": frozenset({person})}

    def person_named(self, name: str) -> str:
        """The person a console operator means by ``--as NAME``: a person of the file of that name, else the
        person one of whose identities it is (console and REST API names first, then Slack and Jira ids), else
        the person ``NAME``."""
        name = nfc(name)
        if name in self._people:
            return name
        for channel in ("console", "api", "slack", "jira"):
            claimed = self._claims.get((channel, name))
            if claimed is not None:
                return claimed
        channel, sep, identity = name.partition(":")  # ``slack:U…``, ``jira:…``: an identity's person by its key
        if sep and channel in ("slack", "jira"):  # (s31 F11: recorded as ``slack:U…`` though the file names her)
            return self._claims.get((channel, identity), name)
        return name


def _folded(name: str) -> str:
    """``name`` as ``People.named_like`` compares it: in Unicode's compatibility form (NFKC: ``ｐｒｉｙａ`` is
    ``priya``), case-folded, without spaces, zero-width and format characters (``p r i y a``, ``sam\u200b``)."""
    import unicodedata

    text = unicodedata.normalize("NFKC", name)
    return "".join(c for c in text if not c.isspace() and unicodedata.category(c) != "Cf").casefold()
