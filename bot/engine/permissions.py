"""Who may take which action at a steering point: the one place permissions are decided.

A steering point lists approvers (``Approvers``: people, and identities per channel) and, per action, whether
approvers or anyone may take it (``permissions``; approvers by default). An empty approver list means anyone.
Every rule compares PEOPLE (``bot.engine.people``), not channel identities:

- an approver list names people directly (``people``) or through one of their identities: Priya listed by
  her Slack id may decide from Jira or the REST API once the people file says those identities are hers;
  group membership (Slack user groups, Jira groups) counts on the channel the group belongs to;
- the console operator (who has the database anyway) counts as an approver of a point that names no console
  or REST API names and no people;
- the self-approval ban (``allow_self_approval=False``) refuses approve and edit by the person who started the
  run, whatever channel either of them used;
- the console acting for someone (``--as NAME``) acts as NAME: NAME's vote, NAME's self-approval ban; on a
  point with a quorum or a self-approval ban that is refused unless the point's ``users`` (console names) name
  NAME (one of NAME's console or REST API names), so that one operator cannot cast other people's votes
  where votes matter. A person link (``hazel link RUN --for NAME``, ``bot.engine.links``) is the same proxy on
  the channel ``web``, held to the same rule (``a link made by operator M may not approve for NAME …``);
- rewind, like retry and cancel (``may_run_action``), is also open to who started the run: the point must
  still allow rewinding (``actions``), and its approvers may rewind as before;
- Hazel itself (timeouts, the system) may always act.

Messages name people, not accounts: an approver list is described with each identity the people file claims
shown as its person, each person once, and the console operator too where they may act (``who_may``).

``check`` raises ``NotAllowedError`` with a message naming the rule; ``reasons`` gives, for each action, why
it is refused (None: allowed), for rendering buttons and "waiting on you" lists.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable

from bot.engine.errors import NotAllowedError, WorkflowDefinitionError
from bot.engine.people import People
from bot.engine.workflow import Approvers, SteeringPoint
from store.models import ALL_ACTIONS, Action, Actor, Run

APPROVING = (Action.APPROVE.value, Action.EDIT.value)
HAZEL_ITSELF = ("timeout", "system")


def is_approver(approvers: Approvers, actor: Actor, people: People) -> bool:
    """True when ``actor``'s person is one of ``approvers`` (or the list is empty; see the module docstring)."""
    if approvers.empty or actor.channel in HAZEL_ITSELF:
        return True
    person = actor.who
    if person in approvers.people:
        return True
    mine = people.identities_of(person)
    if actor.acting_for is None:  # the identity used counts too (it may not be in the file)
        mine = {**mine, actor.channel: mine.get(actor.channel, frozenset()) | {actor.id}}
    names = mine.get("console", frozenset()) | mine.get("api", frozenset()) | mine.get("web", frozenset())
    if names & set(approvers.users) or mine.get("slack", frozenset()) & set(approvers.slack_users) \
            or mine.get("jira", frozenset()) & set(approvers.jira_users):
        return True
    if actor.channel == "slack" and actor.groups & set(approvers.slack_usergroups):
        return True
    if actor.channel == "jira" and actor.groups & set(approvers.jira_groups):
        return True
    # the operator's own standing, not whom they act for: ``--as mallory`` at a point of Slack ids only was
    # recorded as mallory's approval (a fresh-user finding, s30 F11)
    return actor.channel == "console" and actor.acting_for is None and operator_counts(approvers)


def approvers_of(point: SteeringPoint, *, escalated: bool = False) -> list[Approvers]:
    """The approver lists in force: the point's own, plus its backup approvers once escalated."""
    lists = [point.approvers]
    if escalated and point.escalate_to is not None:
        lists.append(point.escalate_to)
    return lists


def possible_approvers(point: SteeringPoint, people: People) -> frozenset[str] | None:
    """The people who may ever approve at ``point`` (its approvers, and its backup approvers ``escalate_to``),
    when its settings bound them; None when they do not: approve is open to anyone, a list is empty (anyone),
    names a Slack user group or a Jira group (whose members change), or names no console or REST API names
    and no people (the console operator counts then, and who operates is not known in advance). A listed
    identity counts as its person (the people file); one the file does not claim as a person of its own (an
    upper bound: Slack or Jira may still show by its email that it is someone's). A ``people`` entry that is a
    person's identity counts as that person (such a list is refused at load: ``listed_problem``)."""
    if point.role_for(Action.APPROVE.value) == "anyone":
        return None
    found: set[str] = set()
    for approvers in approvers_of(point, escalated=True):
        if approvers.empty or approvers.slack_usergroups or approvers.jira_groups or operator_counts(approvers):
            return None
        found.update(people.person_named(name) for name in approvers.people)  # (as ``listed_problem``)
        found.update(people.person_of("console", name) for name in approvers.users)
        found.update(people.person_of("slack", user) for user in approvers.slack_users)
        found.update(people.person_of("jira", user) for user in approvers.jira_users)
    return frozenset(found)


def quorum_problem(point: SteeringPoint, people: People) -> str | None:
    """Why ``point``'s quorum can never be met (None: it can, or its approvers are open): ``approvals_required``
    is more than the people who may ever approve there (``possible_approvers``), so a run would wait there
    forever. The message names the point, N and those people."""
    possible = possible_approvers(point, people)
    if possible is None or point.approvals_required <= len(possible):
        return None
    who = ", ".join(sorted(possible)) or "nobody"
    backup = " (with its escalate_to)" if point.escalate_to is not None else ""
    many = "person" if len(possible) == 1 else "people"
    return (f"steering point {point.name!r} needs approvals_required={point.approvals_required} approvals, but "
            f"only {len(possible)} {many} may ever approve it{backup}: {who}; a run would wait there forever "
            "(list more approvers, or lower approvals_required)")


def quorum_warning(point: SteeringPoint, people: People) -> str | None:
    """Why ``point``'s quorum may never be met for some runs (None: it always can, or its approvers are open):
    self-approval is off and ``approvals_required`` is as many as the people who may ever approve there, so a
    run that one of them starts would wait there forever."""
    possible = possible_approvers(point, people)
    if point.allow_self_approval or possible is None or point.approvals_required != len(possible):
        return None
    return (f"steering point {point.name!r} needs approvals_required={point.approvals_required} of the "
            f"{len(possible)} who may ever approve it ({', '.join(sorted(possible))}) and self-approval is off: "
            "a run one of them starts would wait there forever")


def listed_problem(approvers: Approvers, people: People, *, where: str) -> str | None:
    """Why ``approvers``' ``people`` cannot stand as written (None: they can): an entry that is no person of the
    people file but one of a person's identities (``pk``, Priya's console name). ``people=`` names people, and
    a decision is compared with each entry as a person's name (``is_approver``), so such an entry would admit
    nobody and count as one more approver than there are (a quorum of ``people=["priya", "pk"]`` would wait
    forever). An entry that is neither a person nor an identity of one is the person of that name, as a console
    or REST API name nobody claims is (``People.person_of``). ``where``: what lists them, for the message
    (``steering point 'review'``). The message names the entry, whose identity it is, and how to list it."""
    for entry in approvers.people:
        if people.get(entry) is not None:
            continue
        for channel, key, what in (("console", "users", "console or REST API name"),
                                   ("api", "users", "console or REST API name"),
                                   ("slack", "slack_users", "Slack user id"), ("jira", "jira_users", "Jira account")):
            owner = people.claimed(channel, entry)
            if owner is not None:
                return (f"{where} lists {entry!r} in people=, but {entry!r} is not a person of the people file: it "
                        f"is {owner}'s {what} (list the person, people=[{owner!r}], or the identity, "
                        f"{key}=[{entry!r}])")
    return None


def check_quorums(points: list[SteeringPoint], people: People, *, label: str,
                  starters: Approvers | None = None) -> None:
    """Refuse a workflow (``label``: ``name vN``) with a steering point whose quorum can never be met, or an
    approver list (a point's ``approvers`` or ``escalate_to``, the workflow's ``starters``) whose ``people``
    name an identity of a person instead of the person (``listed_problem``).

    Raises:
        WorkflowDefinitionError: naming every such point and list (``listed_problem``, ``quorum_problem``).
    """
    found = []
    if starters is not None:
        found.append(listed_problem(starters, people, where="starters"))
    for point in points:
        found.append(listed_problem(point.approvers, people, where=f"steering point {point.name!r}"))
        if point.escalate_to is not None:
            found.append(listed_problem(point.escalate_to, people,
                                        where=f"steering point {point.name!r} (its escalate_to)"))
        found.append(quorum_problem(point, people))
    problems = [problem for problem in found if problem is not None]
    if problems:
        raise WorkflowDefinitionError(f"workflow {label} is invalid: " + "; ".join(problems))


CONSOLE_OPERATOR = "the console operator"
"""How a refusal's ``only … may`` names the console operator (``HAZEL_OPERATOR``) where they count as an
approver (``operator_counts``)."""


def operator_counts(approvers: Approvers) -> bool:
    """Whether the console operator is one of ``approvers`` by ``is_approver``'s own rule: the list names
    someone, and no console or REST API names and no people."""
    return not approvers.empty and not approvers.users and not approvers.people


def who_may(lists: Iterable[Approvers], people: People, channel: str = "") -> str:
    """Who ``lists`` (approver lists, any of which admits) let act, for a refusal's ``only … may``, naming
    people: each identity the people file claims (a console or REST API name, a Slack user id, a Jira account)
    as its person, others as ``Approvers.describe`` does (a Slack id as ``<@U…>``; a Jira account as listed to a
    person on Jira, ``channel`` ``jira``, elsewhere as ``jira:ID``, the identity ``--as`` takes: s31 F12), user
    groups as groups, each
    person once (``priya`` listed by name and by her Slack id is ``priya``), and ``the console operator`` last
    when a list admits them (``operator_counts``): ``priya, <@U0123>, <!subteam^S0456>, the console operator``.
    ``""`` when the lists name nobody."""
    lists = list(lists)
    names = dict.fromkeys(name for a in lists for name in _described(a, people, channel))
    if any(operator_counts(a) for a in lists):
        names[CONSOLE_OPERATOR] = None
    return ", ".join(names)


def _described(approvers: Approvers, people: People, channel: str) -> list[str]:
    """The names ``who_may`` joins of ``approvers``, each once, in the list's order."""
    parts = [*approvers.people]
    parts += [people.claimed("console", u) or people.claimed("api", u) or u for u in approvers.users]
    parts += [people.claimed("slack", u) or f"<@{u}>" for u in approvers.slack_users]
    parts += [f"<!subteam^{g}>" for g in approvers.slack_usergroups]
    bare = channel == "jira"
    parts += [people.claimed("jira", u) or (u if bare else f"jira:{u}") for u in approvers.jira_users]
    parts += [f"group {g}" for g in approvers.jira_groups]
    return list(dict.fromkeys(parts))


def shown_approvers(approvers: Approvers, people: People, channel: str) -> Approvers:
    """``approvers`` as a request's channel (``slack:#…``, ``jira:KEY``, ``console``) shows them, each person
    once: an entry whose person another entry already names is left out (the people file says whose an
    identity is). The channel's own identities stay (Slack user ids on Slack, Jira accounts on Jira: they are
    the channel's mentions, and whom it notifies), and a person named by one is not named again by name or by
    a console name; elsewhere people's names stay and their identities go. Only for rendering: who may decide
    is ``refusal``'s, at the point's own list."""
    def named(kind: str, ident: str) -> str:
        if kind == "console":
            return people.person_of("console", ident)
        return people.claimed(kind, ident) or f"{kind}:{ident}"

    kept: dict[str, list[str]] = {"people": [], "users": [], "slack_users": [], "jira_users": []}
    seen: set[str] = set()
    own = "slack_users" if channel.startswith("slack") else "jira_users" if channel.startswith("jira") else None
    order = ["people", "users", "slack_users", "jira_users"]
    if own is not None:  # the channel's own identities first: they are what it mentions and notifies
        order.remove(own)
        order.insert(0, own)
    kinds = {"people": None, "users": "console", "slack_users": "slack", "jira_users": "jira"}
    for key in order:
        for ident in getattr(approvers, key):
            kind = kinds[key]
            who = ident if kind is None else named(kind, ident)
            if key == own:  # every identity of the channel stays (two Slack ids of one person: both notified)
                kept[key].append(ident)
                seen.add(who)
            elif who not in seen:
                kept[key].append(ident)
                seen.add(who)
    return approvers.model_copy(update={key: tuple(values) for key, values in kept.items()})


def still_deciding(lists: list[Approvers], people: People, channel: str, *, voted: set[str],
                   starter: str | None) -> Approvers | None:
    """Who can still move a pending request, as its channel (``slack:#…``, ``jira:KEY``, ``console``) shows
    them (``shown_approvers``): the entries of ``lists`` (the approvers in force, ``approvers_of``) whose
    person (the people file; a listed identity nobody claims is its own person) is not in ``voted`` (the
    people whose vote is in) and is not ``starter`` (the person who started the run, when self-approval is
    off; None: no ban). Groups (Slack user groups, Jira groups) stay: their members are not known here.
    ``Approvers()`` (empty) when the lists name nobody (anyone may); None when they name people and none of
    them is left (nobody can decide). One empty list is enough for anyone (``is_approver``): a point open to
    everyone stays so once its backup approvers are added by an escalation."""
    if any(a.empty for a in lists):
        return Approvers()
    merged = Approvers(**{key: tuple(dict.fromkeys(v for a in lists for v in getattr(a, key)))
                          for key in ("people", "users", "slack_users", "slack_usergroups", "jira_users",
                                      "jira_groups")})
    if merged.empty:
        return merged
    gone = set(voted) | ({starter} if starter else set())
    shown = shown_approvers(merged, people, channel)
    kinds = {"people": None, "users": "console", "slack_users": "slack", "jira_users": "jira"}
    kept = {key: tuple(i for i in getattr(shown, key)
                       if (i if kind is None else people.person_of(kind, i)) not in gone)
            for key, kind in kinds.items()}
    left = shown.model_copy(update=kept)
    return None if left.empty else left


def started_it(run: Run, actor: Actor) -> bool:
    """True when ``actor``'s person started ``run``."""
    if run.started_by_person is not None:
        return run.started_by_person == actor.who
    return run.started_by == actor.id and run.started_via == actor.channel


def not_offered(action: str, title: str, actions: Iterable[str]) -> str:
    """Why ``action`` cannot be taken at the steering point titled ``title``, which offers ``actions``:
    ``'edit' is not allowed at 'Sign off' (allowed: approve, reject)``."""
    return f"{action!r} is not allowed at {title!r} (allowed: {', '.join(actions)})"


def refusal(point: SteeringPoint, action: str, actor: Actor, run: Run | None, people: People, *,
            escalated: bool = False) -> str | None:
    """Why ``actor`` may not take ``action`` at ``point`` for ``run`` (None: they may). ``run`` None: for a
    run ``actor`` did not start (what holds at the point whoever started the run: "waiting on me")."""
    if action not in point.actions:
        return not_offered(action, point.title, point.actions)
    lists = approvers_of(point, escalated=escalated)
    starter_may = action == Action.REWIND.value and run is not None and started_it(run, actor)
    if point.role_for(action) == "approvers" and not starter_may and not any(
            is_approver(a, actor, people) for a in lists):
        who = who_may(lists, people, actor.channel)
        also = ", or who started the run" if action == Action.REWIND.value else ""
        verb = "give feedback" if action == Action.FEEDBACK.value else action  # (not "may not feedback")
        proxy = (" (the console operator as itself, without --as: acting for someone takes their right)"
                 if actor.acting_for is not None and actor.channel == "console" and any(
                     operator_counts(a) for a in lists) else "")  # (s31 F12: "only …, the console operator may")
        return f"{actor.label} may not {verb} at {point.title!r}: only {who} may{also}{proxy}"
    if action in APPROVING and not point.allow_self_approval and run is not None and started_it(run, actor):
        starter = run.started_by_person or run.started_by
        return (f"{actor.label} may not {action} at {point.title!r}: {starter} started this run "
                "(self-approval is off: someone else must)")
    if actor.acting_for is not None and action in APPROVING and (
            point.approvals_required > 1 or not point.allow_self_approval):
        mine = people.identities_of(actor.who)
        names = mine.get("console", frozenset()) | mine.get("api", frozenset())
        if not any(names & set(a.users) for a in lists):
            rule = "a quorum" if point.approvals_required > 1 else "a self-approval ban"
            return (f"{proxy_name(actor)} may not {action} for {actor.acting_for} at {point.title!r}: the point "
                    f"has {rule}, so {actor.acting_for} decides through their own identity (or the point lists "
                    f"{actor.acting_for!r} in its console users)")
    return None


def proxy_name(actor: Actor) -> str:
    """Who acts for someone, as a proxy refusal names them: ``the console`` (``--as``), or ``a link made by
    operator M`` (a person link, ``hazel link --for``: an actor on the channel ``web`` whose ``id`` is the
    operator who made it, ``Hazel.link_actor``)."""
    return "the console" if actor.channel == "console" else f"a link made by operator {actor.id}"


def permission_key(point: SteeringPoint) -> str:
    """A digest (32 hex digits) of the settings of ``point`` that decide who may take which action there:
    two points with the same key refuse the same people the same actions (``refusal``), for the same run."""
    settings = [point.actions, point.approvers.model_dump(mode="json"), point.approvals_required,
                point.allow_self_approval, sorted(point.permissions.items()),
                point.escalate_to.model_dump(mode="json") if point.escalate_to is not None else None]
    return hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=16).hexdigest()


def check(point: SteeringPoint, action: str, actor: Actor, run: Run, people: People, *,
          escalated: bool = False) -> None:
    """Raise if ``actor`` may not take ``action`` at ``point`` for ``run``.

    Raises:
        NotAllowedError: with a message that names the rule (who may, self-approval, the console proxy).
    """
    reason = refusal(point, action, actor, run, people, escalated=escalated)
    if reason is not None:
        raise NotAllowedError(reason)


def reasons(point: SteeringPoint, actor: Actor, run: Run, people: People, *,
            escalated: bool = False) -> dict[str, str | None]:
    """Every action of ``ALL_ACTIONS`` with why ``actor`` may not take it (None: allowed)."""
    return {a: refusal(point, a, actor, run, people, escalated=escalated) for a in ALL_ACTIONS}


def may_run_action(points: list[SteeringPoint], actor: Actor, run: Run, people: People) -> bool:
    """Whether ``actor`` may retry or cancel ``run``: who started it, Hazel itself, or an approver of one of
    ``points`` (the pending request's point, else every point of the workflow). The console operator is one
    person like any other (``--as NAME`` acts for one who may), as a rewind's rule has it on every channel."""
    if actor.channel in HAZEL_ITSELF or started_it(run, actor):
        return True
    return any(is_approver(p.approvers, actor, people) for p in points)


def run_action_refusal(points: list[SteeringPoint], verb: str, actor: Actor, run: Run, people: People) -> str:
    """Why ``actor`` may not ``verb`` (``retry``, ``cancel``) ``run``, naming who may as a rewind refusal
    does: ``sam may not cancel run 1a2b: only priya, dan may, or who started the run`` (the approvers of
    ``points``, each person once, and the console operator where they count: ``who_may``); ``only who started
    the run may`` when ``points`` name nobody (for ``may_run_action``'s refusals: it does not check)."""
    who = who_may((p.approvers for p in points), people, actor.channel)
    rule = f"only {who} may, or who started the run" if who else "only who started the run may"
    return f"{actor.label} may not {verb} run {run.id}: {rule}"
