"""Domain records shared by every package: what a run, a checkpoint, a steering request, a decision,
an audit event and an outbox message look like once read from the database.

These are plain data (pydantic models, frozen). ``bot`` builds them, ``integrations`` renders them, ``store``
reads and writes them. Every timestamp is UTC and timezone-aware; every duration carries its unit in its name.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ChannelName = Literal["console", "slack", "jira", "api", "timeout", "system"]
"""Where an actor acted from. ``timeout`` and ``system`` are Hazel itself, never a person."""


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


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


class Actor(_Record):
    """A person (or Hazel itself) acting through a channel.

    ``id`` is channel-specific: a console/API name, a Slack user id (``U…``), a Jira account id (Cloud) or user
    name (Server). ``groups`` are the groups the integration resolved for this actor (Slack user group ids,
    Jira group names); the permission check matches them against a steering point's approvers.
    """

    id: str
    channel: ChannelName
    name: str | None = None
    groups: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return self.name or self.id


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
    started_via: ChannelName
    created_at: datetime
    updated_at: datetime
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
    error_traceback: str | None = None


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
    """Where the channel put it: ``{"channel": "C…", "ts": "…"}`` for Slack, ``{"key": "MIG-1"}`` for Jira."""
    message_key: str | None = None
    """The channel's own key for it (``ref["key"]``), indexed to find the request when the channel calls back."""
    escalated_at: datetime | None = None
    reminders_sent: int = 0
    next_action_at: datetime | None = None
    """When the scheduler must next look at it (reminder, escalation, timeout); None: nothing scheduled."""


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
    ``rewind``: {"to_seq": int, "feedback": str | None, "edits": {field: value} | None}."""
    created_at: datetime
    delivery_id: str | None = None


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


class OutboxStatus(str, enum.Enum):
    PENDING = "pending"
    SENT = "sent"
    DEAD = "dead"


class OutboxMessage(_Record):
    """A notification committed with the transaction that caused it and delivered afterwards.

    ``kind`` is one of ``request.opened`` (post a steering request), ``request.vote`` (a quorum vote counted:
    update it in place), ``request.closed`` (decided or cancelled: update it in place), ``run.progress`` (steps
    done, completion or failure, in the thread of the previous request), ``reminder``, ``escalation``, and
    ``hook.event`` (a signed JSON event POSTed to a configured hook URL, channel ``hook``).
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


class Approvers(_Record):
    """Who may decide at a steering point, per channel.

    ``users``: console and REST API names. ``slack_users``: Slack user ids (``U…``). ``slack_usergroups``: Slack
    user group ids (``S…``, members resolved with ``usergroups.users.list``). ``jira_users``: Jira Cloud account
    ids or Jira Server user names. ``jira_groups``: Jira group names. No one listed at all means anyone may.
    """

    users: tuple[str, ...] = ()
    slack_users: tuple[str, ...] = ()
    slack_usergroups: tuple[str, ...] = ()
    jira_users: tuple[str, ...] = ()
    jira_groups: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.users or self.slack_users or self.slack_usergroups or self.jira_users or self.jira_groups)

    def describe(self) -> str:
        parts = [*self.users, *(f"<@{u}>" for u in self.slack_users),
                 *(f"<!subteam^{g}>" for g in self.slack_usergroups), *self.jira_users,
                 *(f"group {g}" for g in self.jira_groups)]
        return ", ".join(parts) if parts else "anyone"


class RequestView(_Record):
    """Everything a channel needs to render a steering request (built by ``bot`` at delivery time).

    ``shown_value`` is the shown field's value as a JSON tree (the whole state when ``show`` is None).
    ``decisions`` are the decisions on this request so far (votes, then the settling one).
    ``checkpoints`` are the run's checkpoints (for a rewind picker), newest first, at most 100.
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
    reminder: bool = False
    escalation: bool = False


class ProgressView(_Record):
    """A run's progress to report in the thread of its previous steering request (``request``, None when the
    run never asked anyone). ``event``: waiting, completed, failed, rejected, cancelled. ``steps``: steps
    executed since. ``next_request``: the request the run now waits on (event ``waiting``)."""

    run: Run
    workflow: str
    event: str
    request: SteeringRequest | None = None
    next_request: SteeringRequest | None = None
    steps: tuple[str, ...] = ()
    facts: dict[str, Any] = Field(default_factory=dict)
