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
with ``on_ready`` and take claims with ``take_claims``; the scheduler (``bot.ops.scheduler``) listens with
``on_deadline``. The reading methods are in ``bot.engine.reads``; those of requests and timers in
``bot.engine.requests``; those of person links (``hazel link --for``) in ``bot.engine.links``.
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
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError

from bot.engine import permissions
from bot.engine.clock import utcnow
from bot.engine.errors import (
    InvalidInputError,
    NotAllowedError,
)
from bot.engine.people import EmailSource, People
from bot.engine.inputs import check_hooks, validate_input
from bot.engine.lgraph import LangGraphWorkflow
from bot.engine.links import Links
from bot.engine.limits import channel_text, refuse_not_text, state_tree
from bot.engine.reads import Reads
from bot.engine.requests import Requests
from bot.engine.registry import Registry
from bot.engine.runner import Claim, DriveResult, Head, Runner
from bot.engine.transitions import NEVER_ASKED
from bot.engine.versions import target_workflow
from bot.engine.workflow import START, Workflow
from bot.settings import Redactor, Settings, secret_values
from store import NewCheckpoint, Store
from store.codec import is_text
from store.models import (
    Action,
    Actor,
    Approvers,
    ChannelName,
    Run,
    RunStatus,
    nfc,
)
from store.runs import duplicate_start

if TYPE_CHECKING:  # built on first use (``Hazel.steering``, ``views``, ``timeouts``)
    from bot.engine.steering import DecisionOutcome, Steering
    from bot.engine.timeouts import Timeouts
    from bot.engine.views import Views

log = logging.getLogger("hazel")
GroupSource = frozenset[str] | Callable[[frozenset[str]], frozenset[str]] | None
"""A channel identity's groups: known, or a function the engine asks with the groups it cares about."""


def new_run_id() -> str:
    """12 hex characters (48 random bits)."""
    return secrets.token_hex(6)


class StartedRun(Run):
    """What ``Hazel.start`` returns: the run, and whether it was started before with the same delivery id."""

    duplicate: bool = False
    """True: a start with this delivery id was recorded before; nothing new was started and this is that run,
    as it is now."""



def _an_actor(actor: Any) -> Actor:
    """``actor`` when it is an ``Actor``.

    Raises:
        TypeError: it is not (``actor="olga"`` was an ``AttributeError: 'str' object has no attribute 'id'``
            deep in the engine: a fresh-user finding, s33 F11).
    """
    if not isinstance(actor, Actor):
        raise TypeError(f"actor must be an Actor (hazel.operator(), hazel.identify(channel=…, id=…), or "
                        f"Actor(id=…, channel=…)), not {type(actor).__name__} {actor!r:.60}")
    return actor

class Hazel(Reads, Requests, Links):
    """The engine: store, registered workflows, people, runner and steering.

    Args:
        settings: configuration (default: from the environment).
        store, registry, people: inject instead of building from ``settings``.
        clock: the time (tests); every timestamp is UTC.
        load_workflows: import the modules named by ``HAZEL_WORKFLOWS``.

    Raises:
        ConfigurationError: an invalid people file, hook URLs without a secret, ….
        WorkflowDefinitionError: a workflow module fails to load, a steering point's quorum is more than the
            people who may ever approve it (``permissions.quorum_problem``: known once the people file is), or an
            approver list's ``people`` name a person's identity instead of the person
            (``permissions.listed_problem``).
    """

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None,
                 registry: Registry | None = None, people: People | None = None,
                 clock: Callable[[], datetime] = utcnow, load_workflows: bool = True) -> None:
        self.settings = settings or Settings()
        self.clock = clock
        check_hooks(self.settings)
        self.store = store or Store(self.settings.database_url, sqlite_synchronous=self.settings.sqlite_synchronous,
                                    pool_size=self.settings.db_pool_size, hook_urls=tuple(self.settings.hook_url_list),
                                    head_cache_bytes=self.settings.head_cache_bytes,
                                    wal_preallocate_pages=self.settings.sqlite_wal_preallocate_pages)
        """The engine's database: for the operations that maintain it (outbox delivery, retention)."""
        self.registry = registry or Registry()
        self.people = people if people is not None else People.load(self.settings.people_file)
        if load_workflows:
            self.load_workflows()
        for wf in self.registry.all():  # a LangGraph graph compiled without a checkpointer: one on this store
            if isinstance(wf, LangGraphWorkflow):
                wf.bind(self.store)
        for wf in self.registry.all():  # a quorum more people than may ever approve: known with the people file
            points = wf.known_points() if isinstance(wf, LangGraphWorkflow) else wf.steering_points()
            permissions.check_quorums(points, self.people, label=wf.label, starters=wf.starters)
        self._ready_listeners: list[Callable[[str], None]] = []
        self._outbox_listeners: list[Callable[[], None]] = []
        self._deadline_listeners: list[Callable[[datetime], None]] = []
        self._held: dict[str, Claim] = {}
        self._held_lock = threading.Lock()
        self.runner = Runner(self.store, self.registry, lease_sec=self.settings.lease_sec, clock=clock)
        self.runner.on_outbox = self._outbox
        self.redact = Redactor(secret_values(self.settings))
        """``redact(text)``: ``text`` with every secret setting's value as ``**********``, for what Hazel stores or
        shows of an error it did not write (a step's exception, a channel's API answer quoting a token)."""
        self.runner.redact = self.redact
        self.store.on_deadline = self._deadline  # (after every commit that set a deadline: the scheduler re-arms)
        self._parts_lock = threading.RLock()  # (timeouts asks for steering while it is built)

    # -- the parts a command that only reads never uses: built on first use ------------------------------

    @cached_property
    def steering(self) -> Steering:
        """Decisions, rewinds, retries and cancels (``bot.engine.steering``)."""
        from bot.engine.steering import Steering

        return self._part("steering", lambda: Steering(
            self.store, self.registry, self.people, self.runner, clock=self.clock, on_ready=self._ready,
            on_outbox=self._outbox, max_state_bytes=self.settings.max_state_bytes))

    @cached_property
    def views(self) -> Views:
        """What a person sees of a request and may do on it (``bot.engine.views``)."""
        from bot.engine.views import Views

        return self._part("views", lambda: Views(self.store, lambda run: target_workflow(self.registry, run),
                                                 self.people))

    @cached_property
    def timeouts(self) -> Timeouts:
        """Reminders, escalations and timeouts as they fall due (``bot.engine.timeouts``)."""
        from bot.engine.timeouts import Timeouts

        return self._part("timeouts", lambda: Timeouts(self.store, self.registry, self.steering, clock=self.clock,
                                                       on_outbox=self._outbox))

    def _part(self, name: str, build: Callable[[], Any]) -> Any:
        """The part ``name``, built once even when threads ask for it together: stored in the instance under the
        lock (as ``cached_property`` stores it after; from then on it is a plain attribute, at no cost per call).
        ``hazel runs`` and ``hazel show`` never import these modules."""
        with self._parts_lock:
            if name not in self.__dict__:
                self.__dict__[name] = build()
            return self.__dict__[name]

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

    def graph_snapshots(self, workflow: str, version: int) -> Callable[..., Any] | None:
        """How the graph checkpoints of a LangGraph run of ``workflow`` at ``version`` are rewritten as
        standalone snapshots (its checkpointer's ``snapshots``: ``store.lgraph.Snapshots``), for retention
        (``bot.ops.retention.prune``); None for a native workflow, one not deployed here, or a checkpointer
        that is not Hazel's."""
        wf = self.registry.find(workflow, version)
        if not isinstance(wf, LangGraphWorkflow):
            return None
        return getattr(getattr(wf.graph, "checkpointer", None), "snapshots", None)

    def on_ready(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(run_id)`` whenever a run becomes ready (workers use it to wake up)."""
        self._ready_listeners.append(listener)

    def on_outbox(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every commit that wrote outbox rows (the deliverer wakes up)."""
        self._outbox_listeners.append(listener)

    def on_deadline(self, listener: Callable[[datetime], None]) -> None:
        """Call ``listener(at)`` when something is newly due at ``at`` (UTC, timezone-aware; may be past): a
        steering request was opened with a reminder, escalation or timeout (its first one), or a failed step's
        retry was scheduled. Called right after this process's own commits, from the committing thread, and,
        on PostgreSQL, for other processes' commits while this process listens (``ready_listener``, which
        the worker pool starts), from the listening thread. The listener must be quick (the scheduler
        re-arms its one timer, with no database round trip)."""
        self._deadline_listeners.append(listener)

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

    def _deadline(self, at: datetime) -> None:
        for listener in self._deadline_listeners:
            try:
                listener(at)
            except Exception:  # the commit is done: a listener's fault must not fail the caller's drive
                log.exception("deadline listener failed")

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
        id, name = channel_text(id), channel_text(name) if name else name  # (stored as given: s30 F1, F3, F9)
        wanted = self._groups_in_use(channel, id)
        found: frozenset[str] = frozenset()
        if callable(groups):
            found = groups(wanted) if wanted else frozenset()
        elif groups:
            found = frozenset(groups)
        person = self.people.person_of(channel, id, email=email)
        shown = name or None
        like = self._a_persons(shown) if shown and channel in ("slack", "jira") and person.startswith(
            f"{channel}:") else None
        if like is not None:
            shown = f"{shown} ({channel.capitalize()} {id}, not the person {like})"  # (s23 F8, s31 F10)
        return Actor(id=id, channel=channel, name=shown, groups=found, person=person)

    def _a_persons(self, name: str) -> str | None:
        """The person ``name`` names or reads as (a person of the people file, or one whose console or REST
        API name it is: ``People.named_like``), else None: a Slack or Jira identity no person claims whose
        channel name it is (a Slack user name, a Jira display name: their users choose them) is shown with its
        id and that person's name, so that history, pages and refusals never name it as that person."""
        if self.people.get(name) is not None:
            return nfc(name)
        claimed = self.people.person_of("console", name)
        return claimed if claimed != nfc(name) else self.people.named_like(name)

    def operator(self, *, acting_for: str | None = None) -> Actor:
        """The console operator (``HAZEL_OPERATOR``, else the login name); ``acting_for``: ``--as NAME``, the
        person the operator acts for (recorded as "operator X for NAME"; see ``bot.engine.permissions``).

        Raises:
            InvalidInputError: ``acting_for`` is given but empty, or is not UTF-8 text.
        """
        me = nfc(self.settings.operator.strip()) or "operator"  # (composed: as the people file's names, s30 F13)
        if acting_for is None:
            return Actor(id=me, channel="console", name=me, person=self.people.person_of("console", me))
        if not acting_for.strip():
            raise InvalidInputError("--as needs a name")
        if not is_text(acting_for):
            raise InvalidInputError("--as: the name is not UTF-8 text")
        person = self.people.person_named(acting_for.strip())
        return Actor(id=me, channel="console", name=me, person=person, acting_for=person)

    def who_may(self, approvers: Approvers, channel: str = "") -> str:
        """Who ``approvers`` let decide, as every refusal names them (``permissions.who_may``): people by name,
        each once (a Jira account or Slack id the people file claims is its person), others as listed (a Jira
        account as ``jira:ID`` but to a person on ``channel`` ``jira``), and ``the console operator`` when the
        list admits them; ``"anyone"`` when it names nobody."""
        return permissions.who_may([approvers], self.people, channel) or "anyone"

    def workflow_warnings(self, *, name: str, version: int) -> list[str]:
        """What may make runs of workflow ``name`` at ``version`` wait forever without being an error of its
        definition: a quorum that needs every possible approver where self-approval is off
        (``permissions.quorum_warning``); backup approvers no escalation reaches, Slack approvers that are not
        Slack ids (``routes.point_warnings``). Empty: nothing.

        Raises:
            UnknownWorkflowError.
        """
        from bot.engine.routes import point_warnings

        wf = self.registry.get(name, version)
        points = wf.known_points() if isinstance(wf, LangGraphWorkflow) else wf.steering_points()
        return ([w for p in points if (w := permissions.quorum_warning(p, self.people)) is not None]
                + [w for p in points for w in point_warnings(p)])

    def knows_name(self, *, run_id: str, name: str, token_names: Iterable[str] = ()) -> bool:
        """Whether the configuration names ``name`` (a person's name, or a console or REST API name: what a run
        page link acts as, ``hazel link RUN --for NAME``) for run ``run_id``: a person of the people file or
        one of their console or REST API names, one of ``token_names`` (the REST API's token names, which its
        adapter reads), the console operator, who started the run, or a name that an approver list of the
        run's workflow names (``people`` or ``users`` of a steering point, of its escalation, or ``starters``).
        False does not make ``name`` invalid: an identity nobody lists is a person of its own
        (``bot.engine.people``), who may decide only where anyone may; it may be a misspelt name.

        Raises:
            RunNotFoundError.
        """
        run = self.get(run_id=run_id)
        if name in token_names or name == self.settings.operator.strip():
            return True
        if self.people.get(name) is not None or self.people.claimed("console", name) or \
                self.people.claimed("api", name):
            return True
        if name in (run.started_by_person, run.started_by if run.started_via in ("console", "api", "web")
                    else None):
            return True
        wf = self.registry.find(run.workflow, run.workflow_version)
        if wf is None:
            return False
        points = wf.known_points() if isinstance(wf, LangGraphWorkflow) else wf.steering_points()
        lists = [wf.starters] + [a for p in points for a in (p.approvers, p.escalate_to) if a]
        person = self.people.person_named(name)
        return any(name in a.users or name in a.people or person in a.people for a in lists)

    def _groups_in_use(self, channel: str, identity: str) -> frozenset[str]:
        """The groups of ``channel`` some approver list names, unless every such list already names the
        identity itself (no lookup needed then)."""
        out: set[str] = set()
        for wf in self.registry.all():
            points = wf.known_points() if isinstance(wf, LangGraphWorkflow) else wf.steering_points()
            lists = [wf.starters] + [a for p in points for a in (p.approvers, p.escalate_to) if a]
            for approvers in lists:
                named = approvers.slack_usergroups if channel == "slack" else \
                    approvers.jira_groups if channel == "jira" else ()
                listed = approvers.slack_users if channel == "slack" else approvers.jira_users
                if named and identity not in listed:
                    out.update(named)
        return frozenset(out)

    # -- starting and executing ------------------------------------------------------------------------

    def start(self, *, workflow: str, input: dict[str, Any] | BaseModel | None, actor: Actor,
              version: int | None = None, claim: bool = False, delivery_id: str | None = None) -> StartedRun:
        """Create a run of ``workflow`` (its latest version unless ``version``) with ``input`` validated
        against the state model, checkpoint #0 holding it. ``claim``: lease it for the caller, whose
        ``drive`` then starts without reading anything; else it is ``ready`` for any worker.

        ``delivery_id`` (a channel's id of this start, e.g. a REST ``Idempotency-Key`` scoped to its caller):
        a start with an id already recorded on ``actor.channel`` starts nothing and returns the run it started,
        as it is now, with ``duplicate`` set (nothing checked, claimed or audited: not even whether it was the
        same workflow, which the caller compares), also when both are sent at once (the database's unique key
        decides which one starts the run). Kept as long as the run is (retention keeps runs, dropping
        only their checkpoint history).

        Raises:
            UnknownWorkflowError, NotAllowedError (recorded in the audit log), InvalidInputError (also when
                the state is over ``HAZEL_MAX_STATE_BYTES`` or nested too deeply: ``bot.engine.limits``).
            SchemaNotReadyError: the database's schema is older than this Hazel needs (a ``hazel db downgrade``
                under this process): nothing is written, with or without ``delivery_id``
                (``store.Tx.require_schema``).
        """
        earlier = self._started_before(_an_actor(actor), delivery_id)
        if earlier is not None:
            return earlier
        wf = self.registry.get(workflow, version)
        if not wf.starters.empty and not permissions.is_approver(wf.starters, actor, self.people):
            who = permissions.who_may([wf.starters], self.people, actor.channel)  # (people by name, each once; the operator)
            reason = f"{actor.label} may not start {wf.label}: only {who} may"
            self.steering.refuse(run_id=None, request_id=None, actor=actor, action="start", reason=reason)
            raise NotAllowedError(reason)
        state = validate_input(wf, input)
        now = self.clock()
        run_id = new_run_id()
        tree = state_tree(wf, state, max_bytes=self.settings.max_state_bytes, what=f"the input of {wf.label}",
                          refuse=InvalidInputError)
        if isinstance(input, dict):  # a key that is not Unicode text (the dump above wrote it as U+FFFD)
            refuse_not_text(input, what=f"the input of {wf.label}", refuse=InvalidInputError)
        # Leased at its insert when the caller continues it (the version is this registry's: runnable here).
        lease = (self.runner.owner, secrets.token_hex(8), self.runner.leases.until(now)) if claim else None
        try:
            # PostgreSQL: one round trip, commit included
            with self.store.transaction() as tx, tx.pipeline(commit=True):
                tx.require_schema()  # (a statement more in the same round trip: its failure writes nothing)
                run = tx.runs.insert(run_id=run_id, workflow=wf.name, workflow_version=wf.version,
                                     started_by=actor.id, started_via=actor.channel, started_by_person=actor.who,
                                     now=now, lease=lease, delivery_id=delivery_id)
                position = tx.checkpoints.write(NewCheckpoint(
                    run_id=run_id, seq=0, parent_seq=None, branch=0, step=START, next_step=wf.first,
                    workflow_version=wf.version, created_at=now), tree, None)
                tx.events.add(action="run.started", actor=actor, now=now, run_id=run_id, workflow=wf.name,
                              version=wf.version)
                if lease is None:
                    tx.notify_ready(run_id)
        except IntegrityError as exc:  # the same delivery sent at once: the one that committed first started it
            earlier = self._started_before(actor, delivery_id) if duplicate_start(exc) else None
            if earlier is None:
                raise
            return earlier
        if lease is not None:
            self._hold(Claim(run, Head(position, wf.first, None, 0, NEVER_ASKED)))
        else:
            self._ready(run_id)
        return StartedRun.model_construct(**dict(run))  # (validated once already: by the insert)

    def _started_before(self, actor: Actor, delivery_id: str | None) -> StartedRun | None:
        """The run a start with ``delivery_id`` on ``actor``'s channel started, as it is now, marked
        ``duplicate``; None when there is none (or no ``delivery_id``)."""
        if delivery_id is None:
            return None
        with self.store.read() as tx:
            earlier = tx.runs.by_start_key(actor.channel, delivery_id)
        return StartedRun(**earlier.model_dump(), duplicate=True) if earlier is not None else None

    def drive(self, *, run_id: str, wait_for_retries: bool = True,
              on_retry: Callable[[Run], None] | None = None) -> DriveResult:
        """Execute ``run_id`` in this thread until it waits, ends or fails (sleeping through retry backoffs
        when ``wait_for_retries``). A run this caller claimed (``start``/``decide``/``rewind`` with
        ``claim=True``) continues from the state in hand. If another worker holds the run, returns at once
        with nothing done. ``DriveResult.started_at``: when this call began (what happened to the run since, e.g.
        a cancel, is this drive's to report)."""
        total = DriveResult(run_id=run_id, store=self.store, started_at=self.clock())
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
        message id) makes a redelivery harmless; ``claim``: the caller will ``drive`` the run next. Whether
        ``actor`` may is answered first: a person who may not take ``action`` at the request's point gets
        ``NotAllowedError`` whether the request waits or was settled; only a person who may is told who settled
        it (``AlreadyDecidedError``).

        Raises:
            RunNotFoundError, NoPendingRequestError, NotAllowedError, InvalidDecisionError,
            AlreadyDecidedError, VersionUnavailableError, RunStateError.
        """
        if payload is not None and not isinstance(payload, dict):  # (s33 F11: "dictionary update sequence …")
            raise InvalidInputError(f"payload must be a dict ({{'text': …}} for feedback, {{'reason': …}} for a "
                                    f"rejection, {{'value': …}} for an edit), not {type(payload).__name__}")
        outcome = self.steering.decide(run_id, action, _an_actor(actor), payload=payload, request_id=request_id,
                                       point=point, delivery_id=delivery_id, claim=claim)
        return self._keep(outcome)

    def rewind(self, *, run_id: str, actor: Actor, to: int | str | None, feedback: str | None = None,
               edits: dict[str, Any] | None = None, request_id: int | None = None,
               delivery_id: str | None = None, claim: bool = False, allow_empty: bool = False,
               expect_head: int | None = None, expect_decision: int | None = None) -> DecisionOutcome:
        """Fork the run from checkpoint ``to`` (a number, or a step name: just before it ran), optionally with
        ``feedback`` for the next step and state ``edits`` (an edit leaving a field or an entry empty or blank
        is refused unless ``allow_empty``, as an edit's). One transaction (``bot.engine.steering.rewind``).
        ``edits`` need what an edit needs besides the rewind permission: ``edit`` at the steering point the
        target asks at next for a field it shows, else at the point of the nearest approval behind the target
        (``bot.engine.steering.rewind_edits``); refused as ``NotAllowedError``, audited, nothing written.
        ``expect_head``: the head checkpoint the caller showed (a run page's); if the run's head is another
        one by the time the rewind's transaction locks the run, nothing is written and the rewind is refused
        (``AlreadyDecidedError``: ``the run changed since this page was loaded (it is now at #7, waiting, not
        #3; last rewound to #0 by sam at …): reload the page``). None (the default): not checked.
        ``expect_decision``: the id of the run's newest decision the caller showed (0: none); a newer one (a
        quorum's vote, a decision on one of a graph's parallel requests: neither writes a checkpoint) refuses
        the rewind the same way (s32 F7: a page's stale rewind discarded bob's edit unseen; a Slack rewind
        form's too: ``check(action="rewind")``'s ``newest_decision``). Either refusal's ``changed`` says where
        the run is now, for a channel to word its own answer.

        Raises:
            RunNotFoundError, CheckpointNotFoundError, NotAllowedError (also: edits the person may not make
            there), InvalidDecisionError, AlreadyDecidedError (also: the head is not ``expect_head``), RunStateError,
            VersionUnavailableError.
        """
        outcome = self.steering.rewind(run_id, _an_actor(actor), to=to, feedback=feedback, edits=edits,
                                       request_id=request_id, delivery_id=delivery_id, claim=claim,
                                       allow_empty=allow_empty, expect_head=expect_head,
                                       expect_decision=expect_decision)
        return self._keep(outcome)

    def rewind_target(self, *, run_id: str, to: int | str | None) -> int:
        """The checkpoint number a ``rewind`` to ``to`` would fork from (a number, or a step name: the latest
        checkpoint on the current branch from which that step runs next), without rewinding.

        Raises:
            RunNotFoundError, InvalidDecisionError, CheckpointNotFoundError.
        """
        return self.steering.target_seq(run_id, to)

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
        return self.steering.retry(run_id, _an_actor(actor))

    def cancel(self, *, run_id: str, actor: Actor, reason: str | None = None) -> Run:
        """Cancel a run that has not ended; its pending request is closed.

        Raises:
            RunNotFoundError, RunStateError (already ended), NotAllowedError.
        """
        return self.steering.cancel(run_id, _an_actor(actor), reason=reason)
