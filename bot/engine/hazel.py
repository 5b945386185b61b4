"""``Hazel``: the engine's boundary. The Slack, Jira, REST, CLI and scheduler adapters call nothing else.

```python
hazel = Hazel(Settings())                         # store, workflows (HAZEL_WORKFLOWS), people (HAZEL_PEOPLE_FILE)
hazel.prepare()                                   # schema (created on an empty database) + recovery of dead runs
me = hazel.operator()                             # the console operator (HAZEL_OPERATOR or the login name)
run = hazel.start(workflow="migration-plan", input={"request": "…"}, actor=me)
hazel.drive(run_id=run.id)                        # execute here until it waits, ends or fails
hazel.decide(run_id=run.id, action="approve", actor=me)
```

Every method is keyword-only. Who acts is always an ``Actor`` the engine made (``identify``, ``operator``), so
that the person behind every channel identity is resolved in one place. The engine writes outbox rows and
never delivers them: whoever runs delivery (``bot.ops.outbox``) listens with ``on_outbox``; workers listen
with ``on_ready`` and take claims with ``take_claims``. The reading methods are in ``bot.engine.reads``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import secrets
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from bot.engine import permissions
from bot.engine.clock import utcnow
from bot.engine.errors import AlreadyDecidedError, InvalidInputError, NoPendingRequestError, NotAllowedError
from bot.engine.people import EmailSource, People
from bot.engine.reads import Reads
from bot.engine.registry import Registry
from bot.engine.runner import Claim, DriveResult, Head, Runner
from bot.engine.steering import DecisionOutcome, Steering
from bot.engine.steering.edits import format_validation_error
from bot.engine.timeouts import Fired, Timeouts
from bot.engine.versions import runnable_versions, target_workflow
from bot.engine.views import Access, Views
from bot.engine.workflow import START, Workflow
from bot.settings import Settings
from store import NewCheckpoint, Store
from store.models import (
    Action,
    Actor,
    ChannelName,
    OutboxMessage,
    ProgressView,
    RequestView,
    Run,
    RunStatus,
    SteeringRequest,
)

log = logging.getLogger("hazel")
GroupSource = frozenset[str] | Callable[[frozenset[str]], frozenset[str]] | None
"""A channel identity's groups: known, or a function the engine asks with the groups it cares about."""


def _unknown_fields(model: type[BaseModel], data: object) -> list[str]:
    """Keys of an input dict that the state model would silently drop (a typo must not start a run with a
    default in its place). Models that allow extra fields accept anything."""
    if not isinstance(data, dict) or model.model_config.get("extra") == "allow":
        return []
    known = set(model.model_fields)
    for name, field in model.model_fields.items():
        if field.alias:
            known.add(field.alias)
        if isinstance(field.validation_alias, str):
            known.add(field.validation_alias)
    return sorted(str(k) for k in data if k not in known)


def new_run_id() -> str:
    """12 hex characters (48 random bits)."""
    return secrets.token_hex(6)


class Hazel(Reads):
    """The engine: store, registered workflows, people, runner and steering.

    Args:
        settings: configuration (default: from the environment).
        store, registry, people: inject instead of building from ``settings``.
        clock: the time (tests); every timestamp is UTC.
        load_workflows: import the modules named by ``HAZEL_WORKFLOWS``.

    Raises:
        ConfigurationError: an invalid people file, hook URLs without a secret, ….
        WorkflowDefinitionError: a workflow module fails to load.
    """

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None,
                 registry: Registry | None = None, people: People | None = None,
                 clock: Callable[[], datetime] = utcnow, load_workflows: bool = True) -> None:
        self.settings = settings or Settings()
        self.clock = clock
        self.settings.check_hooks()
        self.store = store or Store(self.settings.database_url, sqlite_synchronous=self.settings.sqlite_synchronous,
                                    hook_urls=tuple(self.settings.hook_url_list))
        """The engine's database: for the operations that maintain it (outbox delivery, retention)."""
        self.registry = registry or Registry()
        self.people = people if people is not None else People.load(self.settings.people_file)
        if load_workflows:
            self.load_workflows()
        self._ready_listeners: list[Callable[[str], None]] = []
        self._outbox_listeners: list[Callable[[], None]] = []
        self._held: dict[str, Claim] = {}
        self._held_lock = threading.Lock()
        self.runner = Runner(self.store, self.registry, lease_sec=self.settings.lease_sec, clock=clock)
        self.runner.on_outbox = self._outbox
        self.steering = Steering(self.store, self.registry, self.people, self.runner, clock=clock,
                                 on_ready=self._ready, on_outbox=self._outbox)
        self.views = Views(self.store, self.registry.find, lambda run: target_workflow(self.registry, run),
                           self.people)
        self.timeouts = Timeouts(self.store, self.registry, self.steering, clock=clock, on_outbox=self._outbox)

    # -- lifecycle ---------------------------------------------------------------------------------------

    def load_workflows(self) -> list[Workflow]:
        """Register the workflows of ``HAZEL_WORKFLOWS``. The default module is skipped quietly when it
        cannot be found (Hazel running outside its repository); a module named explicitly must load.

        Raises:
            WorkflowDefinitionError: a named module fails to import or defines an invalid workflow.
        """
        modules = self.settings.workflow_modules
        if "workflows" not in self.settings.model_fields_set:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            modules = [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is not None]
        return self.registry.load(modules)

    def prepare(self, *, upgrade_if_empty: bool = True) -> list[str]:
        """Check the schema (creating it on an empty database) and recover runs left ``running`` by a dead
        process. Returns the recovered run ids.

        Raises:
            SchemaNotReadyError: the database needs ``hazel db upgrade``.
        """
        self.store.ensure_schema(upgrade_if_empty=upgrade_if_empty)
        return self.recover()

    def recover(self) -> list[str]:
        """Hand back the runs of dead processes and expired leases (``bot.engine.leases``); wakes workers."""
        recovered = self.runner.recover()
        for run_id in recovered:
            self._ready(run_id)
        return recovered

    def on_ready(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(run_id)`` whenever a run becomes ready (workers use it to wake up)."""
        self._ready_listeners.append(listener)

    def on_outbox(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every commit that wrote outbox rows (the deliverer wakes up)."""
        self._outbox_listeners.append(listener)

    def on_step(self, listener: Callable[[str, str], None] | None) -> None:
        """Call ``listener(run_id, step)`` just before each step executes here (benchmarks, tests)."""
        self.runner.on_step = listener

    def on_step_end(self, listener: Callable[[str, str, float, bool], None]) -> None:
        """Call ``listener(workflow, step, duration_sec, ok)`` after each step function returns or raises."""
        self.runner.on_step_end = listener

    def take_claims(self, submit: Callable[[Claim], None] | None) -> None:
        """Let ``submit`` (a worker pool of this process) execute runs that decisions made runnable here: the
        decision's transaction then leases the run to this process and the next step starts from the state
        in hand, without another read. None: decisions leave runs ``ready`` for any worker."""
        self.steering.on_claimed = submit

    @property
    def has_ready_listeners(self) -> bool:
        """True when something in this process (a worker pool) executes runs as they become ready."""
        return bool(self._ready_listeners)

    def _ready(self, run_id: str) -> None:
        for listener in self._ready_listeners:
            listener(run_id)

    def _outbox(self) -> None:
        for listener in self._outbox_listeners:
            listener()

    def close(self) -> None:
        self.runner.close()
        self.store.dispose()

    # -- who ---------------------------------------------------------------------------------------------

    def identify(self, *, channel: ChannelName, id: str, name: str | None = None, groups: GroupSource = None,
                 email: EmailSource = None) -> Actor:
        """The actor behind channel identity ``id``: its person (``bot.engine.people``) and, when some
        workflow names groups of that channel, the groups it is in (``groups`` is asked with those only).

        ``email``: the identity's email, or a function asking the channel (called only when the people file
        does not claim the identity and some person has an email).
        """
        wanted = self._groups_in_use(channel, id)
        found: frozenset[str] = frozenset()
        if callable(groups):
            found = groups(wanted) if wanted else frozenset()
        elif groups:
            found = frozenset(groups)
        person = self.people.person_of(channel, id, email=email)
        return Actor(id=id, channel=channel, name=name or None, groups=found, person=person)

    def operator(self, *, acting_for: str | None = None) -> Actor:
        """The console operator (``HAZEL_OPERATOR``, else the login name); ``acting_for``: ``--as NAME``, the
        person the operator acts for (recorded as "operator X for NAME"; see ``bot.engine.permissions``).

        Raises:
            InvalidInputError: ``acting_for`` is given but empty.
        """
        me = self.settings.operator.strip() or "operator"
        if acting_for is None:
            return Actor(id=me, channel="console", name=me, person=self.people.person_of("console", me))
        if not acting_for.strip():
            raise InvalidInputError("--as needs a name")
        person = self.people.person_named(acting_for.strip())
        return Actor(id=me, channel="console", name=me, person=person, acting_for=person)

    def _groups_in_use(self, channel: str, identity: str) -> frozenset[str]:
        """The groups of ``channel`` some approver list names, unless every such list already names the
        identity itself (no lookup needed then)."""
        out: set[str] = set()
        for wf in self.registry.all():
            lists = [wf.starters] + [a for p in wf.steering_points() for a in (p.approvers, p.escalate_to) if a]
            for approvers in lists:
                named = approvers.slack_usergroups if channel == "slack" else \
                    approvers.jira_groups if channel == "jira" else ()
                listed = approvers.slack_users if channel == "slack" else approvers.jira_users
                if named and identity not in listed:
                    out.update(named)
        return frozenset(out)

    # -- starting and executing ------------------------------------------------------------------------

    def start(self, *, workflow: str, input: dict[str, Any] | BaseModel | None, actor: Actor,
              version: int | None = None, claim: bool = False) -> Run:
        """Create a run of ``workflow`` (its latest version unless ``version``) with ``input`` validated
        against the state model, checkpoint #0 holding it. ``claim``: lease it for the caller, whose
        ``drive`` then starts without reading anything; else it is ``ready`` for any worker.

        Raises:
            UnknownWorkflowError, InvalidInputError, NotAllowedError (recorded in the audit log).
        """
        wf = self.registry.get(workflow, version)
        if not wf.starters.empty and not permissions.is_approver(wf.starters, actor, self.people):
            reason = f"{actor.label} may not start {wf.label}: only {wf.starters.describe()} may"
            self.steering.refuse(run_id=None, request_id=None, actor=actor, action="start", reason=reason)
            raise NotAllowedError(reason)
        unknown = _unknown_fields(wf.state, input)
        if unknown:
            raise InvalidInputError(f"invalid input for {wf.label}: unknown field {', '.join(map(repr, unknown))} "
                                    f"(fields: {', '.join(wf.state.model_fields)})")
        try:
            state = wf.codec.validate(input if input is not None else {})
        except ValidationError as exc:
            raise InvalidInputError(f"invalid input for {wf.label}: {format_validation_error(exc)}") from None
        now = self.clock()
        run_id = new_run_id()
        tree = wf.codec.encode(state)
        with self.store.transaction() as tx:
            tx.runs.insert(run_id=run_id, workflow=wf.name, workflow_version=wf.version, started_by=actor.id,
                           started_via=actor.channel, started_by_person=actor.who, now=now)
            position = tx.checkpoints.write(NewCheckpoint(
                run_id=run_id, seq=0, parent_seq=None, branch=0, step=START, next_step=wf.first,
                workflow_version=wf.version, created_at=now), tree, None)
            tx.events.add(action="run.started", actor=actor, now=now, run_id=run_id, workflow=wf.name,
                          version=wf.version)
            leased = claim and tx.runs.claim(owner=self.runner.owner, token=secrets.token_hex(8), now=now,
                                             lease_until=self.runner.leases.until(now), run_id=run_id,
                                             runnable=runnable_versions(self.registry))
            if not leased:
                tx.notify_ready(run_id)
            run = leased or tx.runs.get(run_id)
        assert run is not None
        if leased:
            self._hold(Claim(run, Head(position, wf.first, None, 0)))
        else:
            self._ready(run_id)
        return run

    def drive(self, *, run_id: str, wait_for_retries: bool = True,
              on_retry: Callable[[Run], None] | None = None) -> DriveResult:
        """Execute ``run_id`` in this thread until it waits, ends or fails (sleeping through retry backoffs
        when ``wait_for_retries``). A run this caller claimed (``start``/``decide``/``rewind`` with
        ``claim=True``) continues from the state in hand. If another worker holds the run, returns at once
        with nothing done."""
        total = DriveResult(run_id=run_id, store=self.store)
        while True:
            claimed = self._take_held(run_id) or self.runner.claim(run_id)
            if claimed is None:
                current = self.get(run_id=run_id)
                if (wait_for_retries and current.status is RunStatus.READY and current.wake_at is not None
                        and current.lease_owner is None):
                    if on_retry is not None:
                        on_retry(current)
                    time.sleep(max(0.0, (current.wake_at - self.clock()).total_seconds()) + 0.01)
                    continue
                total._run = current
                return total
            result = self.runner.drive(claimed)
            total.steps.extend(result.steps)
            total.lease_lost = total.lease_lost or result.lease_lost
            total.status = result.status
            if result.status is not RunStatus.READY or not wait_for_retries:
                return total

    def claim_next(self) -> Claim | None:
        """Lease the oldest ready run this process can execute (a worker's next job), or None."""
        return self.runner.claim()

    def execute(self, *, claim: Claim, hand_back: threading.Event | None = None) -> DriveResult:
        """Execute a claimed run (``claim_next``, or one handed to ``take_claims``'s ``submit``)."""
        return self.runner.drive(claim, hand_back=hand_back)

    def release(self, *, claim: Claim) -> bool:
        """Hand back a claimed run this process will not execute after all (``ready`` for any worker)."""
        return self.runner.release(claim)

    def _hold(self, claim: Claim) -> None:
        """Keep a claim made for the caller until its ``drive`` (its lease is renewed only once it executes:
        a caller that never drives leaves the run to recovery when the lease runs out)."""
        with self._held_lock:
            self._held[claim.run.id] = claim

    def _take_held(self, run_id: str) -> Claim | None:
        with self._held_lock:
            return self._held.pop(run_id, None)

    # -- steering ----------------------------------------------------------------------------------------

    def decide(self, *, run_id: str, action: str | Action, actor: Actor, payload: dict[str, Any] | None = None,
               request_id: int | None = None, point: str | None = None, delivery_id: str | None = None,
               claim: bool = False) -> DecisionOutcome:
        """Approve, edit, reject, give feedback on (or rewind) the run's pending request: see
        ``bot.engine.steering.decide`` for the payloads and the one transaction it is. ``request_id`` /
        ``point`` bind the decision to the request the person saw; ``delivery_id`` (a channel's delivery or
        message id) makes a redelivery harmless; ``claim``: the caller will ``drive`` the run next.

        Raises:
            RunNotFoundError, NoPendingRequestError, NotAllowedError, InvalidDecisionError,
            AlreadyDecidedError, VersionUnavailableError, RunStateError.
        """
        outcome = self.steering.decide(run_id, action, actor, payload=payload, request_id=request_id, point=point,
                                       delivery_id=delivery_id, claim=claim)
        return self._keep(outcome)

    def rewind(self, *, run_id: str, actor: Actor, to: int | str | None, feedback: str | None = None,
               edits: dict[str, Any] | None = None, request_id: int | None = None,
               delivery_id: str | None = None, claim: bool = False) -> DecisionOutcome:
        """Fork the run from checkpoint ``to`` (a number, or a step name: just before it ran), optionally with
        ``feedback`` for the next step and state ``edits``. One transaction (``bot.engine.steering.rewind``).

        Raises:
            RunNotFoundError, CheckpointNotFoundError, NotAllowedError, InvalidDecisionError,
            AlreadyDecidedError, RunStateError, VersionUnavailableError.
        """
        outcome = self.steering.rewind(run_id, actor, to=to, feedback=feedback, edits=edits,
                                       request_id=request_id, delivery_id=delivery_id, claim=claim)
        return self._keep(outcome)

    def _keep(self, outcome: DecisionOutcome) -> DecisionOutcome:
        if outcome.claim is None:
            return outcome
        self._hold(outcome.claim)
        return replace(outcome, claim=None)

    def retry(self, *, run_id: str, actor: Actor) -> Run:
        """Queue a failed run again from its last good checkpoint.

        Raises:
            RunNotFoundError, RunStateError (not failed), NotAllowedError.
        """
        return self.steering.retry(run_id, actor)

    def cancel(self, *, run_id: str, actor: Actor, reason: str | None = None) -> Run:
        """Cancel a run that has not ended; its pending request is closed.

        Raises:
            RunNotFoundError, RunStateError (already ended), NotAllowedError.
        """
        return self.steering.cancel(run_id, actor, reason=reason)

    def access(self, *, request_id: int, actor: Actor) -> Access:
        """What ``actor`` may do on the request now (to render buttons and refusals).

        Raises:
            NoPendingRequestError: no such request.
        """
        with self.store.read() as tx:
            request = tx.requests.get(request_id)
            run = tx.runs.get(request.run_id) if request is not None else None
            if request is None or run is None:
                raise NoPendingRequestError(f"steering request {request_id} does not exist")
            return self.views.access(tx, request, run, actor)

    def check(self, *, request_id: int, action: str, actor: Actor) -> RequestView:
        """Before a form opens: the request's view if ``actor`` may take ``action`` on it now.

        Raises:
            NoPendingRequestError: no such request. AlreadyDecidedError: it was settled (by whom, when).
            InvalidDecisionError: the point does not allow ``action``. NotAllowedError: this person may not
            (recorded in the audit log, as the decision itself would).
        """
        from bot.engine.errors import InvalidDecisionError

        view = self.request_view(request_id=request_id)
        if view is None:
            raise NoPendingRequestError(f"steering request {request_id} does not exist")
        if view.request.status.value != "pending":
            with self.store.read() as tx:
                raise self.steering._already(tx, view.request)
        access = self.access(request_id=request_id, actor=actor)
        if access.may(action):
            return view
        if action not in view.actions:
            raise InvalidDecisionError(f"{action!r} is not allowed at {view.title!r} "
                                       f"(allowed: {', '.join(view.actions)})")
        reason = access.refused.get(action, "not allowed")
        self.steering.refuse(run_id=view.run.id, request_id=request_id, actor=actor, action=action, reason=reason)
        if "one person has one vote" in reason:
            raise AlreadyDecidedError(reason, decided_by=actor.label, decided_at=None, action=None,
                                      decided_by_id=actor.id, channel=actor.channel, own=True)
        raise NotAllowedError(reason)

    def waiting_on(self, *, actor: Actor, limit: int = 50) -> list[RequestView]:
        """Pending requests ``actor`` may decide, oldest first (App Home, ``/hazel runs``)."""
        return self.views.waiting_on(actor, limit=limit)

    def request_view(self, *, request_id: int, reminder: bool = False, escalation: bool = False) -> RequestView | None:
        """The request as channels render it now (None: no such request)."""
        with self.store.read() as tx:
            return self.views.request_view(tx, request_id, reminder=reminder, escalation=escalation)

    def outbox_view(self, *, message: OutboxMessage) -> RequestView | ProgressView | None:
        """What a channel needs to deliver an outbox message (None: its run or request is gone)."""
        with self.store.read() as tx:
            return self.views.outbox_view(tx, message)

    def request_by_message_key(self, *, key: str) -> SteeringRequest | None:
        """The latest request a channel posted under ``key`` (a Jira issue id, ``C…:ts`` on Slack)."""
        with self.store.read() as tx:
            return tx.requests.by_message_key(key)

    def request_for(self, *, run_id: str, request_id: int | None = None, point: str | None = None) -> SteeringRequest:
        """The pending request a decision would apply to (``decide``'s ``request_id`` and ``point``).

        Raises:
            RunNotFoundError, NoPendingRequestError, AlreadyDecidedError (with who and when).
        """
        with self.store.read() as tx:
            return self.steering._request(tx, self.steering._run(tx, run_id), request_id, point)

    # -- the scheduler -----------------------------------------------------------------------------------

    def due_request_ids(self, *, now: datetime, limit: int = 100) -> list[int]:
        """Pending requests whose reminder, escalation or timeout is due at ``now``, most overdue first."""
        with self.store.read() as tx:
            return tx.timers.due_request_ids(now=now, limit=limit)

    def fire_request(self, *, request_id: int, now: datetime) -> Fired:
        """Send what is due on one request (``bot.engine.timeouts``)."""
        return self.timeouts.fire(request_id, now=now)

    def postpone_request(self, *, request_id: int, until: datetime) -> None:
        """Look at a request again at ``until`` (after its firing failed)."""
        self.timeouts.postpone(request_id, until)

    def wake_due_retries(self, *, now: datetime, limit: int = 100) -> list[str]:
        """Wake the workers for each ready run whose retry backoff has ended. Returns their ids."""
        with self.store.read() as tx:
            due = tx.timers.due_retries(now=now, limit=limit)
        for run_id in due:
            self._ready(run_id)
        return due

    def next_due_at(self) -> datetime | None:
        """The earliest moment anything is due: a request's next action or a retry's wake-up (None: none)."""
        with self.store.read() as tx:
            times = [tx.timers.earliest_request_action(), tx.timers.earliest_retry()]
        present = [t for t in times if t is not None]
        return min(present) if present else None
