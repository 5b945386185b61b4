"""Domain records shared by every package: what a run, a checkpoint, a steering request, a decision,
an audit event and an outbox message look like once read from the database.

These are plain data (pydantic models, frozen). ``bot`` builds them, ``integrations`` renders them, ``store``
reads and writes them. Every timestamp is UTC and timezone-aware; every duration carries its unit in its name.
"""

import enum
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ChannelName = Literal["console", "slack", "jira", "api", "web", "timeout", "system"]
"""Where an actor acted from (``web``: the run pages, as a REST token's name or the person a signed link
names). ``timeout`` and ``system`` are Hazel itself, never a person."""


class RunStatus(str, enum.Enum):
    """Lifecycle of a run.

    ``ready`` runs wait for a worker (new, decided, recovered, or a retry whose ``wake_at`` has come);
    ``running`` runs are leased by exactly one worker; ``waiting`` runs have a pending steering request and
    nothing executing for them. ``completed``, ``failed``, ``rejected`` and ``cancelled`` are ended, though a
    ``failed`` run can be retried and any ended run can be rewound.
    """

    READY = "ready"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.REJECTED, RunStatus.CANCELLED)


class RequestStatus(str, enum.Enum):
    PENDING = "pending"
    DECIDED = "decided"
    CANCELLED = "cancelled"


class Action(str, enum.Enum):
    """What an SME can do at a steering point (``rewind`` also applies to ended runs)."""

    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"
    FEEDBACK = "feedback"
    REWIND = "rewind"


ALL_ACTIONS: tuple[str, ...] = tuple(a.value for a in Action)

PAST_TENSE: dict[str, str] = {
    "approve": "approved", "edit": "edited", "reject": "rejected", "feedback": "answered with feedback",
    "rewind": "rewound", "cancel": "cancelled", "fail": "failed",
}
"""The one table of words for what a decision (or a cancel, or a timeout's ``fail``) did: "already approved by
…", "✅ Approved", "rejected by …". Every channel renders outcomes with it."""


def past_tense(action: str | None) -> str:
    """``approve`` -> ``approved``; an unknown or missing action -> ``decided``."""
    return PAST_TENSE.get(action or "", "decided")


DB_INT_MAX = 2**31 - 1
"""The largest value the database's integer columns hold (PostgreSQL's ``integer``: 2,147,483,647; SQLite's hold
more, so a larger one would work there and fail on PostgreSQL): a workflow's version, a step's ``max_attempts``,
a steering point's ``approvals_required``, and every number a request names (a checkpoint, a request id)
are at most this, refused where they are given rather than sent to the database."""

START = "__start__"
"""Name of the node that produced a run's first checkpoint (the validated input)."""
REWIND_NODE = "__rewind__"
"""Name of the node of the checkpoint a rewind writes (its parent is the checkpoint rewound to)."""
MIGRATE_NODE = "__migrate__"
"""Name of the node of the checkpoint that carries a run's state over to a newer workflow version."""
UPDATE_NODE = "__update__"
"""Name of the step a LangGraph rewind with feedback or edits to the graph's final checkpoint runs next: it
writes them on the fork (``update_state``; ``bot.engine.lgraph_run``)."""


NODES_JOIN = " + "
"""Between the names of the nodes of one LangGraph super-step in a checkpoint's step or next step
(``draft + legal``); a node name a workflow declares never holds it (no spaces)."""

LEASE_KEY = "__hazel_lease__"
"""The ``configurable`` key of a LangGraph config under which a Hazel run's step passes its lease token
(``bot.engine.lgraph_run``): the saver then writes that thread's checkpoints and pending writes only while the run
(its ``thread_id``) is still leased by that token, so a worker that lost its lease (paused, then taken over) cannot
add a checkpoint beside the one its successor wrote. LangGraph passes ``configurable`` to ``put`` and
``put_writes`` as given, and keeps keys starting with ``__`` out of a checkpoint's metadata."""

STEP_KEYS = (LEASE_KEY, "hazel_run", "hazel_seq")
"""The ``configurable`` keys of a Hazel run's step's LangGraph config: its lease token (``LEASE_KEY``) and the
tags of the graph checkpoints it writes (the run, and the Hazel checkpoint the step started from: LangGraph puts
``configurable``'s plain keys in a checkpoint's metadata). The saver keeps them on the configs its ``get_tuple``
hands back for such a config, so that a checkpoint LangGraph writes from one of those (``update_state``'s copy,
``as_node="__copy__"``, is written under the ``parent_config`` it read) is fenced and tagged as the step's
others are."""


def node_names(step: str | None) -> list[str]:
    """The node names a checkpoint's step or next step stands for: ``"draft + legal"`` -> ``["draft",
    "legal"]`` (a LangGraph super-step that runs both), a plain name -> ``[name]``, None -> ``[]``."""
    if not step:
        return []
    return step.split(NODES_JOIN) if NODES_JOIN in step else [step]


HAZEL_NODES = {START: "start", REWIND_NODE: "↩ rewind", MIGRATE_NODE: "⇪ migrate", UPDATE_NODE: "✎ update"}
"""The nodes Hazel writes itself (never a workflow's), with their names for people."""


def node_label(step: str) -> str:
    """A checkpoint's node for people: Hazel's own nodes (``HAZEL_NODES``) as ``start``, ``↩ rewind``,
    ``⇪ migrate``, ``✎ update``."""
    return HAZEL_NODES.get(step, step)


class OutboxKind(str, enum.Enum):
    """What an outbox message asks its channel (or sender) to do. See ``OutboxMessage``."""

    REQUEST_OPENED = "request.opened"
    REQUEST_VOTE = "request.vote"
    REQUEST_CLOSED = "request.closed"
    RUN_PROGRESS = "run.progress"
    REMINDER = "reminder"
    ESCALATION = "escalation"
    HOOK_EVENT = "hook.event"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)


def claimed_person(person: str | None) -> str | None:
    """``person`` when it names a person (the people file's name, or a console or REST API name, which is its
    own person); None for an identity no person claims (``slack:U…`` / ``jira:…``, ``bot.engine.people``)."""
    return person if person and not person.startswith(("slack:", "jira:")) else None


def person_label(person: str | None, name: str | None, identity: str) -> str:
    """How messages name who acted: ``person`` when it is one (``claimed_person``); else (an identity no person
    claims) the channel's name for the identity (``name``, e.g. Slack's ``user.name``), else the identity."""
    return claimed_person(person) or name or identity


_SLACK_MENTION = re.compile(r"<@([UW][A-Z0-9]+)>|<!subteam\^([A-Z0-9]+)(?:\|[^>]*)?>")


def plain_mentions(text: str) -> str:
    """``text`` with the Slack mentions the engine's messages carry for identities no person claims, as a
    channel that is not Slack shows them: ``<@U0123>`` as ``Slack user U0123``, ``<!subteam^S0123>`` as
    ``Slack group S0123`` (Slack itself shows them as the user's and the group's names: https://api.slack.com/
    reference/surfaces/formatting#mentioning-users)."""
    if "<" not in text:
        return text
    return _SLACK_MENTION.sub(lambda m: f"Slack user {m.group(1)}" if m.group(1) else f"Slack group {m.group(2)}",
                              text)


class Actor(_Record):
    """A person (or Hazel itself) acting through one of their channel identities.

    ``id`` is the channel identity: a console name (the operator), a REST token's name, a Slack user id
    (``U…``), a Jira account id (Cloud) or user name (Server). ``groups`` are the groups the channel resolved
    for it (Slack user group ids, Jira group names). ``person`` is who that is across channels (the name of a
    person of the people file, else the identity itself; see ``bot.engine.people``): quorum counts people and
    the self-approval ban compares them. ``acting_for`` is set when the console operator ``id`` acts for the
    person ``person`` (``hazel approve --as NAME``, channel ``console``; or a person link that operator made,
    ``hazel link RUN --for NAME``, channel ``web``): the decision is NAME's, recorded as "operator X for NAME".
    Actors are made by the engine (``Hazel.identify``, ``Hazel.operator``, ``Hazel.link_actor``), never
    assembled by adapters.
    """

    id: str
    channel: ChannelName
    name: str | None = None
    groups: frozenset[str] = frozenset()
    person: str | None = None
    acting_for: str | None = None

    @property
    def label(self) -> str:
        """How messages name the actor: the person's name, or "operator X for NAME" for a console proxy; an
        identity that is no known person (``slack:U…``, ``jira:…``) by the channel's name for it (``name``),
        else its id."""
        if self.acting_for is not None:
            return f"operator {self.id} for {self.acting_for}"
        if self.channel in ("system", "timeout"):  # Hazel itself
            return self.name or self.id
        return person_label(self.person, self.name, self.id)

    @property
    def who(self) -> str:
        """The person (for people-level comparisons), falling back to the identity."""
        return self.person or self.id

    @property
    def via(self) -> str:
        """The channel identity used, e.g. ``slack U0000000001`` or ``console olga``."""
        return f"{self.channel} {self.id}"


SYSTEM = Actor(id="hazel", channel="system", name="Hazel", person="hazel")
"""Hazel itself (recoveries, migrations, failed steps, retention, outbox failures)."""
TIMEOUT = Actor(id="timeout", channel="timeout", name="timeout", person="timeout")
"""What a timeout's decision (and reminders and escalations) is recorded as: never a person."""


class Run(_Record):
    id: str
    workflow: str
    workflow_version: int
    status: RunStatus
    head_seq: int
    """Sequence number of the checkpoint the run continues from."""
    last_seq: int
    """Highest sequence number written for this run, on any branch."""
    branch: int
    """Branch the head is on; 0 until the first rewind, then one more per rewind."""
    last_branch: int = 0
    """Highest branch number used by this run."""
    started_by: str
    """The channel identity that started the run (a console name, a Slack user id, …)."""
    started_via: ChannelName
    created_at: datetime
    updated_at: datetime
    started_by_person: str | None = None
    """The person who started it (compared by the self-approval ban); None for runs from before people."""
    attempt: int = 0
    """Failed attempts of the step at the head so far (0 when the last step succeeded)."""
    wake_at: datetime | None = None
    """When a ``ready`` run may be claimed again (retry backoff); None means now."""
    lease_owner: str | None = None
    """``host:pid:nonce`` of the process executing the run (status ``running``)."""
    lease_token: str | None = None
    """Fencing token of the current claim: every write by the executing worker requires it."""
    lease_expires_at: datetime | None = None
    error: str | None = None
    """The last failure, ``Type: text`` as the step raised it, whole (printed cut: ``shown_error``)."""
    error_traceback: str | None = None
    """Its traceback, whole (printed by ``hazel show RUN --full``; cut in ``--json``: ``shown_error``)."""


ERROR_SHOWN_CHARS = 2_000
"""Characters of a run's error printed for a person (the CLI's lines and ``hazel show``, the console channel, the
engine's log line): a step that raised an error of megabytes fills no terminal or log with it."""

ERROR_JSON_CHARS = 20_000
"""Characters of a run's error and of its traceback in the CLI's ``--json`` documents: an ordinary traceback
whole, an error of megabytes not."""


def shown_error(text: str, *, run_id: str, max_chars: int = ERROR_SHOWN_CHARS, command: str = "hazel",
                one_line: bool = False, whole: str | None = None) -> str:
    """``text`` (a run's stored error or traceback, kept whole in the database) as printed: whole up to
    ``max_chars`` characters, else its first ``max_chars`` followed, on a line of its own (on the same one with
    ``one_line``), by how much was left out and where the whole text is: ``… (2,998,000 more characters: hazel
    show 1a2b3c4d5e6f --full)``. ``command``: how the reader invokes the CLI; ``whole``: where the whole text
    is, when not ``hazel show RUN --full`` (an audit record's value: ``hazel audit RUN --json``)."""
    if len(text) <= max_chars:
        return text
    between = "" if one_line else "\n"
    where = whole or f"{command} show {run_id} --full"
    return f"{text[:max_chars]}{between}… ({len(text) - max_chars:,} more characters: {where})"


class CheckpointInfo(_Record):
    """A checkpoint's metadata (its state is loaded separately: ``tx.checkpoints.load(run_id, seq)``)."""

    run_id: str
    seq: int
    parent_seq: int | None
    branch: int
    step: str
    """The node that produced this checkpoint: a step, a steering point (its decision applied) or ``__start__``."""
    next_step: str | None
    """The node the run executes from here; None when the run ended at this checkpoint."""
    workflow_version: int
    created_at: datetime
    is_snapshot: bool
    stored_bytes: int
    """Bytes of the stored payload (a full snapshot or the change since the parent)."""
    decision_id: int | None = None
    handoff: dict[str, Any] | None = None
    """What the next step receives from a decision: ``{"feedback": str, "by": str}`` or ``{"rejection": ...}``."""


class RewindChoices(_Record):
    """The checkpoints a rewind of a run offers to choose from, as every channel lists them (Slack's Rewind
    modal in its select, Jira's issue and ``/rewind`` answers); chosen by the engine
    (``bot.engine.choices.rewind_choices``), at most ``bot.engine.choices.REWIND_CHOICES`` (100) of them."""

    checkpoints: tuple[CheckpointInfo, ...] = ()
    """The checkpoints offered, newest first: each one the run can continue from (it has a ``next_step``), or,
    when there are more, #0 (the run's input), where each step starts, and the newest."""
    total: int = 0
    """How many checkpoints the run can continue from in all (kept ones: a pruned history has fewer)."""

    @property
    def cut(self) -> bool:
        """True when some checkpoints the run can continue from are not offered (``total`` is more)."""
        return self.total > len(self.checkpoints)

    @property
    def steps(self) -> list[str]:
        """The node names the offered checkpoints run next, sorted, each once (``draft + legal``: both);
        Hazel's own nodes (``HAZEL_NODES``) left out."""
        return sorted({n for cp in self.checkpoints for n in node_names(cp.next_step)} - HAZEL_NODES.keys())


def continuation(parent: CheckpointInfo, children: list[CheckpointInfo]) -> CheckpointInfo | None:
    """The child that continues ``parent``'s line in a drawing of the checkpoint tree: its only child when that
    child is on the same branch; None when every child starts a branch of its own (a fork: several children, or
    one on another branch, e.g. a rewind to the last checkpoint of an abandoned branch)."""
    if len(children) == 1 and children[0].branch == parent.branch:
        return children[0]
    return None


def branch_heading(parent: CheckpointInfo, child: CheckpointInfo) -> str:
    """The heading of a branch drawn below ``parent`` where its line splits (``continuation`` None): ``fork
    from #1 → branch 2`` for a branch a rewind started, ``branch 0, on from #1`` for the line that went on
    from there before any fork (it is no fork)."""
    if child.branch == parent.branch:
        return f"branch {child.branch}, on from #{parent.seq}"
    return f"fork from #{parent.seq} → branch {child.branch}"


def line_of(checkpoints: "list[CheckpointInfo]", head_seq: int | None = None) -> set[int]:
    """The checkpoint numbers on the line from ``head_seq`` back to #0 (the branch the run is on), through each
    checkpoint's parent; ``head_seq`` None: the newest checkpoint. A pruned history ends the walk at the first
    parent not in ``checkpoints``; an empty ``checkpoints`` gives an empty set."""
    by_seq = {cp.seq: cp for cp in checkpoints}
    line: set[int] = set()
    at = by_seq.get(max(by_seq) if head_seq is None and by_seq else head_seq)  # type: ignore[arg-type]
    while at is not None and at.seq not in line:
        line.add(at.seq)
        at = by_seq.get(at.parent_seq) if at.parent_seq is not None else None
    return line


def rewound_fields(cp: CheckpointInfo, decision: "Decision") -> list[str]:
    """The state fields a rewind's edits set, for a drawing of the tree: the names in ``decision``'s payload
    when ``cp`` is that rewind's checkpoint; empty otherwise (another node's, or a rewind without edits)."""
    edits = decision.payload.get("edits") if cp.step == REWIND_NODE else None
    return [str(name) for name in edits] if isinstance(edits, dict) else []


class LoadedCheckpoint(_Record):
    info: CheckpointInfo
    tree: Any
    """The full state as a JSON tree (decode with the workflow's state codec)."""
    base_seq: int
    chain_len: int
    """Deltas applied on top of the full snapshot at ``base_seq`` (0 for a snapshot)."""
    delta_bytes: int
    """Bytes of those deltas."""
    rows_read: int
    base_bytes: int = 0
    """Bytes of the snapshot at ``base_seq`` (the snapshot policy weighs the deltas against it)."""


class SteeringRequest(_Record):
    id: int
    run_id: str
    checkpoint_seq: int
    point: str
    title: str
    channel: str
    """Where it was asked: ``console``, ``slack:#channel`` or ``slack:C…``, ``jira:PROJECTKEY``."""
    status: RequestStatus
    approvals_required: int
    approvals: int
    created_at: datetime
    due_at: datetime | None = None
    decided_at: datetime | None = None
    decided_by: str | None = None
    decided_action: str | None = None
    message_ref: dict[str, Any] | None = None
    """Where the channel put it: ``{"channel": "C…", "ts": "…"}`` for Slack, ``{"key": "MIG-1"}`` for Jira; Slack
    adds the approvers' DMs (``"dms": [{"channel": "D…", "ts": "…", "user": "U…"}]``), and the outbox the copies
    reminders and escalations posted with its buttons (``"copies": [{"channel", "ts", "via", "user"?}]``)."""
    message_key: str | None = None
    """The channel's own key for it (``ref["key"]``), indexed to find the request when the channel calls back."""
    escalated_at: datetime | None = None
    reminders_sent: int = 0
    next_action_at: datetime | None = None
    """When the scheduler must next look at it (reminder, escalation, timeout); None: nothing scheduled."""

    @property
    def settled_action(self) -> str | None:
        """What settled it, as ``past_tense`` words it: ``decided_action``, ``cancel`` for a request cancelled
        without one (the run cancelled, a timeout's ``on_timeout``), None while it is pending."""
        return self.decided_action or ("cancel" if self.status is RequestStatus.CANCELLED else None)

    def posted_in(self, channel: str | None, ts: str | None) -> bool:
        """Whether message ``ts`` of conversation ``channel`` (a Slack channel or DM id and the message's
        timestamp) is one posted for this request: its message, an approver's DM or a copy a reminder or an
        escalation posted (``message_ref``). False when either is missing or empty."""
        if not (isinstance(channel, str) and channel and isinstance(ts, str) and ts):
            return False
        ref = self.message_ref if isinstance(self.message_ref, dict) else {}
        posted = [ref, *(ref.get("dms") or ()), *(ref.get("copies") or ())]
        return any(isinstance(m, dict) and m.get("channel") == channel and m.get("ts") == ts for m in posted)


class Decision(_Record):
    id: int
    run_id: str
    request_id: int | None
    action: Action
    actor_id: str
    actor_name: str | None
    channel: ChannelName
    payload: dict[str, Any] = Field(default_factory=dict)
    """``edit``: {"value": …}; ``reject``: {"reason": str}; ``feedback``: {"text": str};
    ``rewind``: {"to": int, "feedback": str | None, "edits": {field: value} | None}."""
    created_at: datetime
    delivery_id: str | None = None
    person: str | None = None
    """Whose vote it is (one per person per request); ``actor_id``/``channel`` is the identity used."""
    acting_for: str | None = None
    """Set when the console operator ``actor_id`` decided for ``person`` (``--as`` on the channel ``console``,
    a person link that operator made on the channel ``web``)."""

    @property
    def label(self) -> str:
        """Who decided, for people: the person, or "operator X for NAME"."""
        if self.acting_for:
            return f"operator {self.actor_id} for {self.acting_for}"
        if self.channel in ("system", "timeout"):  # Hazel itself
            return self.actor_name or self.actor_id
        return person_label(self.person, self.actor_name, self.actor_id)


class AuditEvent(_Record):
    id: int
    run_id: str | None
    request_id: int | None
    actor_id: str
    actor_name: str | None
    channel: ChannelName
    action: str
    """Dotted verb: ``run.started``, ``decision.approve``, ``decision.refused``, ``step.failed``, ``run.cancelled``…"""
    detail: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    person: str | None = None
    """Who acted, as a person (the actor fields hold the channel identity used)."""


class OutboxStatus(str, enum.Enum):
    """Where an outbox message is: ``pending`` (due at ``next_attempt_at``, or being sent), ``sent``, ``dead``
    (given up: ``hazel outbox retry`` queues it again), or ``superseded`` (a reminder or escalation not sent
    because, before it could be delivered, a later reminder or escalation of its request was queued on its
    channel or the request was settled; ``last_error`` says which: ``bot.ops.outbox.Deliverer``). A superseded
    message is final: not part of the backlog, never retried."""

    PENDING = "pending"
    SENT = "sent"
    DEAD = "dead"
    SUPERSEDED = "superseded"


class OutboxMessage(_Record):
    """A notification committed with the transaction that caused it and delivered afterwards.

    ``kind`` is an ``OutboxKind``: ``request.opened`` (post a steering request), ``request.vote`` (a quorum
    vote counted: update it in place; its payload carries the vote, ``Vote.payload``), ``request.closed``
    (decided or cancelled: update it in place),
    ``run.progress`` (steps done, completion or failure, in the thread of the previous request), ``reminder``,
    ``escalation``, and ``hook.event`` (a signed JSON event POSTed to a configured hook URL, channel ``hook``).
    ``payload`` carries ids and small facts; the deliverer reads the rest from the store at delivery time.
    """

    id: int
    run_id: str | None
    request_id: int | None
    channel: str
    kind: str
    payload: dict[str, Any] = Field(default_factory=dict)
    status: OutboxStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None = None
    created_at: datetime
    sent_at: datetime | None = None


def nfc(text: str) -> str:
    """``text`` in Unicode's composed form (NFC): names and identities are compared so, as a person reads them
    (``José`` typed as ``e`` + a combining accent on one keyboard, as one character on another, was two people:
    ``José may not approve at 'P': only José may``, a fresh-user finding, s30 F13)."""
    import unicodedata

    return text if text.isascii() else unicodedata.normalize("NFC", text)


class Approvers(_Record):
    """Who may decide at a steering point.

    ``people``: names of people of the people file (``HAZEL_PEOPLE_FILE``), whatever channel they use (one of a
    person's identities there is refused when the workflow is loaded: list it under its channel instead).
    ``users``: console and REST API names. ``slack_users``: Slack user ids (``U…``). ``slack_usergroups``: Slack
    user group ids (``S…``, members resolved with ``usergroups.users.list``). ``jira_users``: Jira Cloud account
    ids or Jira Server user names. ``jira_groups``: Jira group names. A listed identity stands for its person:
    Priya listed by her Slack id may also decide from Jira or the REST API once the people file says those
    identities are hers. No one listed at all means anyone may.
    """

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")  # (``peple=``: open to anyone)

    people: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    slack_users: tuple[str, ...] = ()
    slack_usergroups: tuple[str, ...] = ()
    jira_users: tuple[str, ...] = ()
    jira_groups: tuple[str, ...] = ()

    @field_validator("people", "users", "jira_users", "jira_groups")
    @classmethod
    def _composed(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        """Names in Unicode's composed form (``nfc``), as the people file's and the console's are compared."""
        return tuple(nfc(n) for n in names)

    @property
    def empty(self) -> bool:
        return not (self.people or self.users or self.slack_users or self.slack_usergroups or self.jira_users
                    or self.jira_groups)

    def describe(self) -> str:
        parts = [*self.people, *self.users, *(f"<@{u}>" for u in self.slack_users),
                 *(f"<!subteam^{g}>" for g in self.slack_usergroups), *self.jira_users,
                 *(f"group {g}" for g in self.jira_groups)]
        return ", ".join(dict.fromkeys(parts)) if parts else "anyone"


class Delivery(_Record):
    """Which outbox message a view is rendered for, so that a channel can make a retried post idempotent.

    ``key``: unique per outbox message and installation (``"<run id>/<outbox id>"``, or ``"outbox/<id>"``
    without a run); a channel tags what it posts with it (Slack message metadata, a Jira comment property) and,
    on a retry, looks for it before posting again. ``attempt``: this delivery attempt, 1 for the first (an
    attempt > 1 follows one whose outcome may be unknown: a timeout, a dropped connection, a crash).
    ``queued_at``: when the message was queued (UTC), no later than its first attempt.
    """

    key: str
    attempt: int
    queued_at: datetime


class Vote(_Record):
    """One quorum vote as it was counted, which its ``request.vote`` outbox message carries (the message's payload,
    written when the vote is counted): ``by``, who voted as messages name them (``Actor.label``: ``priya``);
    ``approvals``, the request's approvals with this one counted (k of ``required``, the quorum n; k < n, as
    the vote that reaches the quorum settles the request and queues ``request.closed`` instead).

    A channel that adds a line per message (a Jira comment, a console line) says this, not the request as it is
    when the message is delivered: a vote delivered after the request settled (Jira unreachable for a while, the
    outbox retrying it) is still "Approval 1 of 2 from priya", never a second copy of the outcome."""

    by: str
    approvals: int
    required: int

    def payload(self) -> dict[str, Any]:
        """The outbox message's payload that carries it (``from_payload`` reads it back)."""
        return {"vote": self.model_dump()}

    @classmethod
    def from_payload(cls, payload: dict[str, Any] | None) -> "Vote | None":
        """The vote a ``request.vote`` message's payload carries; None for a message queued before votes carried
        one (or a ``copies_only`` one), which channels render from the request as it is then."""
        vote = (payload or {}).get("vote")
        return cls.model_validate(vote) if isinstance(vote, dict) else None


class RequestView(_Record):
    """Everything a channel needs to render a steering request (built by ``bot`` at delivery time).

    ``shown_value`` is the shown field's value as a JSON tree (the whole state when ``show`` is None).
    ``decisions`` are the decisions on this request so far (votes, then the settling one).
    ``checkpoints`` are the run's newest checkpoints, newest first, at most 100 (a long run's #0 is not among
    them). ``rewind`` is what a rewind offers to choose from (``RewindChoices``: on a long run, #0 and where
    each step starts too), when the point offers ``rewind``; else None.
    """

    request: SteeringRequest
    run: Run
    workflow: str
    workflow_version: int
    point: str
    title: str
    show: str | None
    shown_value: Any = None
    actions: tuple[str, ...]
    approvers: Approvers
    escalate_to: Approvers | None = None
    escalate_channel: str | None = None
    """Where an escalation is announced (the point's ``escalate_channel``; None: the request's own channel)."""
    notify_approvers: bool = False
    options: dict[str, Any] = Field(default_factory=dict)
    decisions: tuple[Decision, ...] = ()
    checkpoints: tuple[CheckpointInfo, ...] = ()
    rewind: RewindChoices | None = None
    reminder: bool = False
    escalation: bool = False
    still_pending: tuple[SteeringRequest, ...] = ()
    """Once this request is settled: the other requests asked with it (a LangGraph super-step's other
    interrupts) that are still pending, oldest first; the run waits on them (``still_waiting_text``)."""
    waiting_for: Approvers | None = None
    """A pending request: who can still move it now, as its channel shows them (``bot.engine.permissions.
    still_deciding``): its approvers, plus the backup approvers once escalated, minus the people whose vote is
    in and the starter where self-approval is off; ``Approvers()`` (empty): anyone; None: not known (a view
    built elsewhere: channels fall back to ``approvers``) or, with ``nobody_left``, nobody."""
    nobody_left: bool = False
    """True when the request has approvers but none of them can still decide (``waiting_for`` is None)."""
    not_starter: Approvers | None = None
    """A pending request at a point whose self-approval is off: its approvers (not the backup ones) without the
    person who started the run, who may not approve it (a card listing them would mention them); None
    otherwise, and when that leaves nobody: channels show ``approvers``."""
    delivery: Delivery | None = None
    """The outbox message this view is delivered for (None: built elsewhere, e.g. for a Home tab)."""
    settled_by_id: str | None = None
    settled_by_channel: str | None = None
    """For the ``request.closed`` message of a request cancelled (no decision names who): the identity the
    person who cancelled it acted as (``Actor.id``, ``Actor.channel``), so that a channel names them as it names
    a decider (Slack: a mention); None otherwise (and for such a message queued before it carried them)."""
    vote: Vote | None = None
    """For a ``request.vote`` message: the vote it reports, as it was counted (``Vote``); None otherwise (and for
    such a message queued before votes carried it)."""
    newest_decision: int | None = None
    """For a rewind form (``Hazel.check(action="rewind")``): the id of the run's newest decision when the form
    opened (0: none), read before the rest of the view; the form sends it back as the rewind's
    ``expect_decision``. None otherwise."""
    point_known: bool = True
    """False when the steering point is not known here (the run's workflow version is not deployed, or no
    longer has the point): ``actions`` and ``approvers`` are then placeholders, and who may decide is not known."""


def still_waiting_text(requests: "tuple[SteeringRequest, ...] | list[SteeringRequest]") -> str:
    """The one sentence every channel says after a decision that leaves the run waiting on other requests:
    ``still waiting on: security (steering request 12), …``; ``""`` when ``requests`` is empty. Plain text:
    each channel escapes it as it escapes any stored text."""
    if not requests:
        return ""
    return "still waiting on: " + ", ".join(f"{r.point} (steering request {r.id})" for r in requests)


class ProgressView(_Record):
    """A run's progress to report in the thread of its previous steering request (``request``, None when the
    run never asked anyone). ``event``: waiting, completed, failed, rejected, cancelled. ``steps``: steps
    done since. ``paused``: the LangGraph nodes that stopped to ask for steering instead (event ``waiting``: a
    super-step's interrupts; not in ``steps``). ``next_request``: the request the run now waits on (event
    ``waiting``)."""

    run: Run
    workflow: str
    event: str
    request: SteeringRequest | None = None
    next_request: SteeringRequest | None = None
    steps: tuple[str, ...] = ()
    paused: tuple[str, ...] = ()
    facts: dict[str, Any] = Field(default_factory=dict)
    delivery: Delivery | None = None
    """The outbox message this view is delivered for (see ``Delivery``)."""
