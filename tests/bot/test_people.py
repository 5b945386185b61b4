"""People (``bot.engine.people``) and the people-level permission rules (``bot.engine.permissions``).

- the people file: parsing (lists or single strings, emails in lower case, a person's own name as their console
  and REST API name), unknown keys and malformed entries refused, one identity (or email) for two people refused
  naming both, when the file is loaded: by ``People``, when ``Hazel`` is built, and by the CLI (``hazel runs``
  exits 1 with the one-line message);
- who an identity is (claimed, matched by email, else its own person), ``identities_of``, ``person_named``,
  and that the channel is asked for an email only when it could matter (calls counted);
- ``Hazel.identify`` / ``Hazel.operator`` make exactly those actors (both databases);
- ``permissions.refusal``: approver lists naming people, a listed identity standing for its person, the console
  operator as an approver, the self-approval ban between people, and the console-proxy rule (``--as NAME``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest

from bot.engine import permissions
from bot.engine.errors import ConfigurationError
from bot.engine.people import People
from bot.engine.workflow import SteeringPoint, Workflow
from bot.server.app import HazelApp
from bot.settings import Settings
from store.models import TIMEOUT, Actor, Approvers, Run, RunStatus
from tests.support.engine import make_hazel

PRIYA_SLACK, ALICE_SLACK, STRANGER_SLACK = "U0000000001", "U0000000002", "U0000000009"
PRIYA_CLOUD, PRIYA_SERVER = "5b10ac8d82e05b22cc7d4ef5", "priya.k"

FILE = f"""
[people.priya]
email = "Priya@Example.com"
slack = ["{PRIYA_SLACK}"]
jira = ["{PRIYA_CLOUD}", "{PRIYA_SERVER}"]
api = "priya-ci"
console = ["pk"]

[people.alice]
slack = ["{ALICE_SLACK}"]
console = ["al"]
"""


@pytest.fixture
def people(tmp_path: Path) -> People:
    path = tmp_path / "people.toml"
    path.write_text(FILE, encoding="utf-8")
    return People.load(path)


class Asked:
    """A channel's email lookup that counts how often it is asked."""

    def __init__(self, answer: str | None) -> None:
        self.answer, self.calls = answer, 0

    def __call__(self) -> str | None:
        self.calls += 1
        return self.answer


# -- the file ----------------------------------------------------------------------------------------------

def test_a_people_file_lists_people_and_their_identities(people: People) -> None:
    assert len(people) == 2
    priya = people.get("priya")
    assert priya is not None and priya.email == "priya@example.com"  # stored in lower case
    assert people.identities_of("priya") == {
        # her own name is a console and REST API name too, and the two are one namespace; a single string is a
        # list of one
        "console": frozenset({"pk", "priya-ci", "priya"}),
        "api": frozenset({"pk", "priya-ci", "priya"}),
        "slack": frozenset({PRIYA_SLACK}),
        "jira": frozenset({PRIYA_CLOUD, PRIYA_SERVER}),  # a Cloud account id and a Server user name
    }
    assert people.identities_of("alice")["jira"] == frozenset() and people.get("alice").email is None
    for channel, identity in (("slack", PRIYA_SLACK), ("jira", PRIYA_CLOUD), ("jira", PRIYA_SERVER),
                              ("api", "priya-ci"), ("api", "priya"), ("console", "pk"), ("console", "priya")):
        assert people.person_of(channel, identity) == "priya", (channel, identity)
        assert people.claimed(channel, identity) == "priya"
    assert people.person_of("slack", ALICE_SLACK) == "alice" and people.person_of("console", "al") == "alice"
    assert people.has_emails


def test_no_file_means_nobody_and_every_identity_is_its_own_person() -> None:
    for nobody in (People.load(None), People.load(""), People.load("   "), People()):
        assert len(nobody) == 0 and not nobody.has_emails
        assert nobody.person_of("console", "bob") == "bob" == nobody.person_of("api", "bob")  # the same person
        assert nobody.person_of("slack", STRANGER_SLACK) == f"slack:{STRANGER_SLACK}"
        assert nobody.person_of("jira", "557058:x") == "jira:557058:x"
    assert People().identities_of(f"slack:{STRANGER_SLACK}") == {"slack": frozenset({STRANGER_SLACK})}
    assert People().identities_of("jira:557058:x") == {"jira": frozenset({"557058:x"})}
    assert People().identities_of("bob") == {"console": frozenset({"bob"}), "api": frozenset({"bob"})}


def test_unclaimed_identities_in_a_file(people: People) -> None:
    assert people.person_of("console", "bob") == "bob" and people.person_of("api", "bob") == "bob"
    assert people.person_of("slack", STRANGER_SLACK) == f"slack:{STRANGER_SLACK}"
    assert people.claimed("slack", STRANGER_SLACK) is None
    # a Slack id that happens to be a person's name is not that person: only named channels are names
    assert people.person_of("slack", "priya") == "slack:priya" and people.person_of("jira", "alice") == "jira:alice"


def test_person_named_is_who_the_console_means_by_as(people: People) -> None:
    assert people.person_named("priya") == "priya"
    assert people.person_named("pk") == "priya" and people.person_named("al") == "alice"  # console identities
    assert people.person_named("bob") == "bob"                                              # nobody's: bob
    # any identity a person's table lists is that person (console and REST API names first)
    assert people.person_named(PRIYA_SLACK) == "priya"


@pytest.mark.parametrize("data, message", [
    ({"people": {"priya": {"emial": "p@example.com"}}},
     "[people.priya] has unknown keys emial (known: email, console, api, slack, jira)"),
    ({"people": {"priya": {"slack": ["U1"], "teams": ["x"], "github": "p"}}}, "has unknown keys github, teams"),
    ({"persons": {"priya": {}}}, "expected [people.NAME] tables only (found persons)"),
    ({"people": {}, "groups": {}}, "found groups"),
    ({"people": ["priya"]}, "expected [people.NAME] tables only"),
    ({"people": {"priya": "U0000000001"}}, "[people.priya] must be a table"),
    ({"people": {"priya": {"slack": [1]}}}, "[people.priya] slack must be a list of names"),
    ({"people": {"priya": {"jira": ["  "]}}}, "[people.priya] jira must be a list of names"),
    ({"people": {"priya": {"api": {"x": 1}}}}, "[people.priya] api must be a list of names"),
    ({"people": {"priya": {"email": "priya at example"}}}, "[people.priya] email must be an address"),
    ({"people": {"priya": {"email": 7}}}, "[people.priya] email must be an address"),
])
def test_unknown_keys_and_malformed_entries_are_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        People.from_dict(data)
    assert message in str(err.value) and str(err.value).startswith("people file:")


@pytest.mark.parametrize("text, message", [
    ('[people."evil\\n 2026-12-06 | priya"]\nconsole = ["ev"]\n',
     "people file: the name 'evil\\n 2026-12-06 | priya' must be one line of printable text (no line break or "
     "control character: the audit log and the CLI's tables show it)"),
    ('[people."sam\\u202e"]\n', "people file: the name 'sam\\u202e' must be one line of printable text"),
    ('[people."ev\\u2028il"]\n', "people file: the name 'ev\\u2028il' must be one line of printable text"),
    ('[people." bob"]\nconsole = ["q"]\n[people.bob]\n',
     "people file: the name ' bob' starts or ends with a space: it would read as another name ('bob')"),
    ('[people.priya]\nconsole = ["pk\\r| olga"]\n',
     "people file: [people.priya] console 'pk\\r| olga' must be one line of printable text (no line break or "
     "control character"),
    ('[people.timeout]\nconsole = ["tim"]\n',
     "people file: the name 'timeout' is the name of Hazel's own actor ('timeout'); choose another name"),
    ('[people.priya]\napi = ["hazel"]\n',
     "people file: [people.priya] api 'hazel' is the name of Hazel's own actor"),
    (f'[people.{"a" * 201}]\n', f"people file: the name '{'a' * 60}' is 201 characters long: at most 200"),
    ('[people." "]\n', "people file: the name ' ' is blank"),
])
def test_a_name_or_identity_with_a_control_character_is_refused_in_one_line(
        text: str, message: str, db_url: str, tmp_path: Path, cli: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's name is shown in ``hazel runs`` and ``hazel audit`` tables: a line break in it would forge
    rows, so the file is refused as ``HAZEL_OPERATOR`` and ``--as`` are."""
    path = tmp_path / "people.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigurationError) as err:
        People.load(path)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)

    monkeypatch.setenv("HAZEL_PEOPLE_FILE", str(path))
    result = cli("runs", code=1)
    assert result.stderr == f"error: {err.value}\n"  # one line, the same message


def test_an_unreadable_or_invalid_file_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigurationError, match=f"HAZEL_PEOPLE_FILE '{missing}' cannot be read"):
        People.load(missing)
    broken = tmp_path / "broken.toml"
    broken.write_text("[people.priya\nslack = 1\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=f"HAZEL_PEOPLE_FILE '{broken}' is not valid TOML"):
        People.load(str(broken))


@pytest.mark.parametrize("priya, sam, named", [
    ({"slack": [PRIYA_SLACK]}, {"slack": ["U0000000003", PRIYA_SLACK]}, f"slack identity '{PRIYA_SLACK}'"),
    ({"jira": [PRIYA_CLOUD]}, {"jira": PRIYA_CLOUD}, f"jira identity '{PRIYA_CLOUD}'"),
    ({"api": ["ci-bot"]}, {"api": ["ci-bot"]}, "console or REST API name 'ci-bot'"),
    ({"console": ["x"]}, {"api": ["x"]}, "console or REST API name 'x'"),  # one namespace
    ({}, {"console": ["priya"]}, "console or REST API name 'priya'"),  # sam claims priya's own name
    ({"email": "priya@example.com"}, {"email": "PRIYA@example.com"}, "email 'priya@example.com'"),
])
def test_one_identity_or_email_for_two_people_is_refused_naming_both(priya: dict, sam: dict, named: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        People.from_dict({"people": {"priya": priya, "sam": sam}})
    text = str(err.value)
    assert named in text and "'priya'" in text and "'sam'" in text and "\n" not in text, text


CONFLICT = f"""
[people.priya]
slack = ["{PRIYA_SLACK}"]

[people.sam]
slack = ["U0000000003", "{PRIYA_SLACK}"]
"""
EMAIL_CONFLICT = """
[people.priya]
email = "priya@example.com"

[people.sam]
email = "Priya@Example.com"
"""


@pytest.mark.parametrize("text, named", [(CONFLICT, f"slack identity '{PRIYA_SLACK}'"),
                                         (EMAIL_CONFLICT, "email 'priya@example.com'")])
def test_a_conflicting_people_file_stops_hazel_and_the_cli(text: str, named: str, db_url: str, tmp_path: Path,
                                                           cli: Callable[..., Any],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "people.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigurationError) as err:
        HazelApp(Settings(HAZEL_DATABASE_URL=db_url, HAZEL_PEOPLE_FILE=str(path)), load_workflows=False)
    message = str(err.value)
    assert named in message and "'priya'" in message and "'sam'" in message

    monkeypatch.setenv("HAZEL_PEOPLE_FILE", str(path))
    result = cli("runs", code=1)
    assert result.stdout == ""
    assert result.stderr == f"error: {message}\n"  # one line, the same message


# -- who is who, and when the channel is asked -----------------------------------------------------------

def test_console_and_api_names_are_one_namespace(people: People, tmp_path: Path) -> None:
    assert people.person_of("console", "priya-ci") == "priya"  # her token's name, typed at the console
    assert people.person_of("api", "pk") == "priya"  # her console name, as a token's name
    assert people.person_of("api", "al") == "alice"
    assert people.identities_of("priya")["console"] == people.identities_of("priya")["api"] == {
        "priya", "priya-ci", "pk"}
    clash = tmp_path / "clash.toml"
    clash.write_text('[people.priya]\nconsole = ["x"]\n[people.sam]\napi = ["x"]\n', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="name 'x' is named for both 'priya' and 'sam'"):
        People.load(clash)


EMAIL_ONLY = People.from_dict({"people": {"sam": {"email": "Sam@Example.com"}, "alice": {"slack": [ALICE_SLACK]}}})
"""Sam has an email and no Slack or Jira identity listed: the channels' emails say which accounts are his."""


def test_email_matches_an_unclaimed_identity_whatever_its_case() -> None:
    for nothing in (None, "", "someone@example.com"):
        assert EMAIL_ONLY.person_of("slack", STRANGER_SLACK, email=nothing) == f"slack:{STRANGER_SLACK}"
    assert EMAIL_ONLY.person_of("slack", STRANGER_SLACK, email=" SAM@example.COM ") == "sam"
    assert EMAIL_ONLY.person_of("jira", "557058:new", email="sam@example.com") == "sam"
    # an identity the file gives to someone is theirs, whatever email the channel reports
    assert EMAIL_ONLY.person_of("slack", ALICE_SLACK, email="sam@example.com") == "alice"


def test_an_identity_matched_by_email_stays_that_person_when_a_payload_shows_none() -> None:
    """s23 F7: Jira Cloud shows ``emailAddress`` in a comment's payload and not in a transition's: the same
    account was sam for the comment and a stranger seconds later, whose vote completed sam's quorum alone."""
    people = People.from_dict({"people": {"sam": {"email": "sam@example.com"}}})
    assert people.person_of("jira", "acct-1", email=None) == "jira:acct-1"  # never shown: a stranger
    assert people.person_of("jira", "acct-1", email="sam@example.com") == "sam"
    for nothing in (None, "", Asked(None)):
        assert people.person_of("jira", "acct-1", email=nothing) == "sam"
    assert people.person_of("jira", "acct-1", email="other@example.com") == "jira:acct-1"  # another now
    assert people.person_of("jira", "acct-1", email=None) == "jira:acct-1"
    assert people.person_of("slack", "acct-1", email=None) == "slack:acct-1"  # (per channel)


def test_an_email_is_no_one_on_a_channel_where_the_file_lists_their_accounts(people: People) -> None:
    """Priya's Slack and Jira accounts are listed: another account showing her email (on Jira Server / Data
    Center users may edit their own) is its own person, not priya (fresh-user s13 F4); console and REST names
    are names, never matched by email."""
    assert people.person_of("jira", "mallory-jira-000000000000", email="PRIYA@example.com") == \
        "jira:mallory-jira-000000000000"
    assert people.person_of("slack", STRANGER_SLACK, email="priya@example.com") == f"slack:{STRANGER_SLACK}"
    assert people.person_of("console", "pkumar", email="priya@example.com") == "pkumar"
    assert people.person_of("jira", PRIYA_SERVER, email="someone@example.com") == "priya"  # (listed: hers)


def test_the_email_is_asked_for_only_when_it_could_matter(people: People) -> None:
    claimed = Asked("priya@example.com")
    assert people.person_of("slack", ALICE_SLACK, email=claimed) == "alice" and claimed.calls == 0
    assert people.person_of("console", "priya", email=claimed) == "priya" and claimed.calls == 0

    unclaimed = Asked("sam@example.com")
    assert EMAIL_ONLY.person_of("slack", STRANGER_SLACK, email=unclaimed) == "sam" and unclaimed.calls == 1
    silent = Asked(None)  # the channel shows no email (of an identity never matched by one)
    assert EMAIL_ONLY.person_of("slack", "U0SILENT00", email=silent) == "slack:U0SILENT00"
    assert silent.calls == 1

    without_emails = People.from_dict({"people": {"alice": {"slack": [ALICE_SLACK]}}})
    never = Asked("priya@example.com")
    assert without_emails.person_of("slack", STRANGER_SLACK, email=never) == f"slack:{STRANGER_SLACK}"
    assert People().person_of("jira", "x", email=never) == "jira:x" and never.calls == 0


def _workflow(approvers: Approvers) -> Workflow:
    from pydantic import BaseModel

    class Doc(BaseModel):
        text: str = "x"

    wf = Workflow("people-doc", state=Doc)

    @wf.step
    def write(state: Doc, ctx) -> Doc:  # noqa: ANN001
        return state

    wf.steer("sign_off", title="Sign off", approvers=approvers)
    return wf


def test_identify_and_operator_make_the_actors_of_people(db_url: str, people: People,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_OPERATOR", "pk")
    hazel = make_hazel(db_url, _workflow(Approvers(people=("priya",), slack_usergroups=("S0000000001",))),
                       people=people)
    email, groups = Asked("priya@example.com"), []

    def group_lookup(wanted: frozenset[str]) -> frozenset[str]:
        groups.append(wanted)
        return frozenset({"S0000000001"})

    alice = hazel.identify(channel="slack", id=ALICE_SLACK, name="alice.s", groups=group_lookup, email=email)
    assert alice == Actor(id=ALICE_SLACK, channel="slack", name="alice.s", groups=frozenset({"S0000000001"}),
                          person="alice")
    assert email.calls == 0 and groups == [frozenset({"S0000000001"})]  # the groups some workflow names
    stranger = hazel.identify(channel="slack", id=STRANGER_SLACK, email=email)  # (priya's Slack ids are listed)
    assert stranger.person == f"slack:{STRANGER_SLACK}" and email.calls == 1
    assert stranger.via == f"slack {STRANGER_SLACK}"
    hazel.people = EMAIL_ONLY  # (identify reads it at each call)
    found = hazel.identify(channel="slack", id=STRANGER_SLACK, email=Asked("sam@example.com"))
    assert found.person == "sam" and found.who == "sam" and found.label == "sam"
    hazel.people = people
    jira = hazel.identify(channel="jira", id="557058:nobody", name="No Body", groups=lambda w: frozenset({"x"}))
    assert jira.person == "jira:557058:nobody" and jira.groups == frozenset()  # no workflow names Jira groups
    assert hazel.identify(channel="api", id="priya-ci").person == "priya"

    me = hazel.operator()
    assert me == Actor(id="pk", channel="console", name="pk", person="priya") and me.acting_for is None
    proxy = hazel.operator(acting_for=" al ")
    assert (proxy.id, proxy.person, proxy.acting_for) == ("pk", "alice", "alice")
    assert proxy.label == "operator pk for alice"
    assert hazel.operator(acting_for="bob").person == "bob"


# -- permissions.refusal -------------------------------------------------------------------------------------

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def ident(people: People, channel: str, identity: str) -> Actor:
    """The actor ``Hazel.identify`` makes (see test_identify_and_operator_make_the_actors_of_people)."""
    return Actor(id=identity, channel=channel, name=None, person=people.person_of(channel, identity))


def operator(people: People, me: str = "olga", *, acting_for: str | None = None) -> Actor:
    """The actor ``Hazel.operator`` makes."""
    if acting_for is None:
        return Actor(id=me, channel="console", name=me, person=people.person_of("console", me))
    person = people.person_named(acting_for)
    return Actor(id=me, channel="console", name=me, person=person, acting_for=person)


def a_run(started_by: str = "bob", via: str = "api", person: str | None = "bob") -> Run:
    return Run(id="0123456789ab", workflow="w", workflow_version=1, status=RunStatus.WAITING, head_seq=1,
               last_seq=1, branch=0, started_by=started_by, started_via=via, created_at=NOW, updated_at=NOW,
               started_by_person=person)


def a_point(approvers: Approvers, **kwargs: Any) -> SteeringPoint:
    return SteeringPoint(name="sign_off", title="Sign off", actions=("approve", "edit", "reject", "feedback"),
                         approvers=approvers, **kwargs)


def test_an_approver_list_naming_people_admits_them_through_every_identity(people: People) -> None:
    point, run = a_point(Approvers(people=("priya",))), a_run()
    for actor in (ident(people, "slack", PRIYA_SLACK), ident(people, "jira", PRIYA_SERVER),
                  ident(people, "api", "priya-ci"), ident(people, "api", "priya"), operator(people, "priya"),
                  operator(people, "pk")):
        assert permissions.refusal(point, "approve", actor, run, people) is None, actor
    for actor in (ident(people, "slack", ALICE_SLACK), ident(people, "slack", STRANGER_SLACK),
                  ident(people, "api", "bob"), operator(people, "olga")):  # the console is no approver here
        reason = permissions.refusal(point, "approve", actor, run, people)
        assert reason is not None and reason.endswith("may not approve at 'Sign off': only priya may"), reason
    assert permissions.reasons(point, ident(people, "api", "priya-ci"), run, people)["approve"] is None


def test_a_listed_identity_stands_for_its_person(people: People) -> None:
    run = a_run()
    by_slack = a_point(Approvers(slack_users=(PRIYA_SLACK,)))
    for actor in (ident(people, "jira", PRIYA_CLOUD), ident(people, "api", "priya-ci"), operator(people, "pk")):
        assert permissions.refusal(by_slack, "approve", actor, run, people) is None, actor
    reason = permissions.refusal(by_slack, "approve", ident(people, "slack", ALICE_SLACK), run, people)
    # (the person, not her account; and the console operator, who counts where no console name or person is listed)
    assert reason == "alice may not approve at 'Sign off': only priya, the console operator may"

    by_console_name = a_point(Approvers(users=("pk",)))
    assert permissions.refusal(by_console_name, "approve", ident(people, "slack", PRIYA_SLACK), run, people) is None
    assert permissions.refusal(by_console_name, "approve", ident(people, "api", "al"), run, people) is not None

    # an identity nobody claims, listed by id, is its own person
    unknown = a_point(Approvers(slack_users=(STRANGER_SLACK,)))
    assert permissions.refusal(unknown, "approve", ident(people, "slack", STRANGER_SLACK), run, people) is None


def test_the_console_operator_is_an_approver_only_where_no_console_names_or_people_are_listed(
        people: People) -> None:
    run, olga = a_run(), operator(people, "olga")
    assert permissions.refusal(a_point(Approvers(slack_users=(PRIYA_SLACK,))), "approve", olga, run, people) is None
    assert permissions.refusal(a_point(Approvers()), "approve", olga, run, people) is None
    for approvers in (Approvers(users=("alice",)), Approvers(people=("alice",))):
        assert permissions.refusal(a_point(approvers), "approve", olga, run, people) is not None


def test_the_self_approval_ban_compares_people_whatever_channels(people: People) -> None:
    point = a_point(Approvers(people=("priya", "alice")), allow_self_approval=False)
    run = a_run(started_by=PRIYA_SLACK, via="slack", person="priya")  # started in Slack
    for actor in (ident(people, "api", "priya-ci"), ident(people, "jira", PRIYA_CLOUD), operator(people, "pk")):
        for action in ("approve", "edit"):
            reason = permissions.refusal(point, action, actor, run, people)
            assert reason is not None and ": priya started this run" in reason and \
                "self-approval is off" in reason, (actor, action)
        assert permissions.refusal(point, "reject", actor, run, people) is None  # the ban is on approving only
    assert permissions.refusal(point, "approve", ident(people, "slack", ALICE_SLACK), run, people) is None
    # the console acting for her is her: the ban applies first, even where the point lists her console name
    listed = a_point(Approvers(users=("priya", "alice")), allow_self_approval=False)
    reason = permissions.refusal(listed, "approve", operator(people, acting_for="priya"), run, people)
    assert reason == ("operator olga for priya may not approve at 'Sign off': priya started this run "
                      "(self-approval is off: someone else must)")


def test_the_console_acting_for_someone_at_a_quorum_or_a_ban_needs_them_listed_by_console_name(
        people: People) -> None:
    run = a_run()
    listed = a_point(Approvers(users=("priya", "alice")), approvals_required=2)
    assert permissions.refusal(listed, "approve", operator(people, acting_for="alice"), run, people) is None
    assert permissions.refusal(listed, "approve", operator(people, acting_for="pk"), run, people) is None
    # listed by a console identity of theirs from the people file
    by_alias = a_point(Approvers(users=("al",)), approvals_required=2)
    assert permissions.refusal(by_alias, "approve", operator(people, acting_for="alice"), run, people) is None

    quorum = a_point(Approvers(people=("priya", "alice")), approvals_required=2)
    for action in ("approve", "edit"):
        reason = permissions.refusal(quorum, action, operator(people, acting_for="alice"), run, people)
        assert reason == (f"the console may not {action} for alice at 'Sign off': the point has a quorum, so "
                          "alice decides through their own identity (or the point lists 'alice' in its console "
                          "users)")
    for action in ("reject", "feedback"):  # only votes that count are guarded
        assert permissions.refusal(quorum, action, operator(people, acting_for="alice"), run, people) is None
    assert permissions.refusal(quorum, "approve", ident(people, "slack", ALICE_SLACK), run, people) is None

    ban = a_point(Approvers(), allow_self_approval=False)
    reason = permissions.refusal(ban, "approve", operator(people, acting_for="alice"), run, people)
    assert reason is not None and "the point has a self-approval ban, so alice decides through their own" in reason
    assert permissions.refusal(ban, "approve", operator(people), run, people) is None  # the operator's own vote

    plain = a_point(Approvers(people=("alice",)))  # no quorum, no ban: the console may act for her
    assert permissions.refusal(plain, "approve", operator(people, acting_for="alice"), run, people) is None
    # acting for someone who is not an approver at all is refused by the approver list first
    reason = permissions.refusal(listed, "approve", operator(people, acting_for="bob"), run, people)
    assert reason == "operator olga for bob may not approve at 'Sign off': only priya, alice may"


def test_hazel_itself_may_always_decide(people: People) -> None:
    point = a_point(Approvers(people=("priya",)), approvals_required=2, allow_self_approval=False)
    assert permissions.refusal(point, "approve", TIMEOUT, a_run(), people) is None
    assert permissions.refusal(point, "rewind", TIMEOUT, a_run(), people) == \
        "'rewind' is not allowed at 'Sign off' (allowed: approve, edit, reject, feedback)"


def test_the_operator_name_blank_is_the_login_name_and_hazels_own_names_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass

    from pydantic import ValidationError

    monkeypatch.setattr(getpass, "getuser", lambda: "olga")
    for blank in ("", "   "):
        assert Settings(HAZEL_OPERATOR=blank).operator == "olga"
    assert Settings(HAZEL_OPERATOR=" pk ").operator == "pk"
    for reserved in ("hazel", "timeout"):
        with pytest.raises(ValidationError, match="the name of Hazel's own actor"):
            Settings(HAZEL_OPERATOR=reserved)


def test_as_a_channel_identity_key_is_the_person_the_file_makes_of_it() -> None:
    """A fresh-user finding (s31 F11): ``--as slack:U0000000001`` was recorded as ``slack:U0000000001`` though
    the people file makes priya of that Slack id (her vote counted, the texts named the key)."""
    people = People.from_dict({"people": {"priya": {"slack": ["U0000000001"], "jira": ["557058:p"]}}})
    assert people.person_named("slack:U0000000001") == people.person_named("jira:557058:p") == "priya"
    assert people.person_named("slack:U0000000009") == "slack:U0000000009"  # (nobody's: the identity's own)


def test_names_are_compared_in_their_composed_form() -> None:
    """A fresh-user finding (s30 F13): ``José`` typed as ``e`` and a combining accent (one keyboard, a macOS
    file name) and as one character (another) were two people: ``José may not approve at 'P': only José may``,
    and two votes of one person. Names and identities compare in Unicode's composed form (NFC)."""
    composed, decomposed = "Jos\u00e9", "Jose\u0301"
    people = People.from_dict({"people": {decomposed: {"console": ["jo"], "jira": ["Re\u0301ne"]}}})
    assert people.get(composed) is not None and people.person_of("console", decomposed) == composed
    assert people.person_of("jira", "R\u00e9ne") == people.person_of("jira", "Re\u0301ne") == composed
    assert people.person_named(decomposed) == composed
    point = SteeringPoint(name="p", title="P", actions=["approve"], approvers=Approvers(people=[decomposed]))
    operator = Actor(id=composed, channel="console", name=composed, person=people.person_of("console", composed))
    assert permissions.refusal(point, "approve", operator, None, people) is None
