"""How a workflow author describes a workflow: steps, steering points and routing.

```python
wf = Workflow("migration-plan", version=1, state=PlanState)

@wf.step
def draft_plan(state: PlanState, ctx: StepContext) -> PlanState: ...

wf.steer("review_plan", title="Approve the migration plan", show="plan",
         approvers=Approvers(slack_users=["U0000000001"]), channel="slack:#migrations",
         on_feedback="draft_plan")
```

Nodes run in the order they are declared; ``next=`` on a step or a steering point, or ``ctx.goto(name)`` inside
a step, routes elsewhere (loops such as re-draft until approved). A steering point is its own node: the run
stops there with a checkpoint and a pending steering request, and a decision routes it on.

Routing, precisely:

- After a step: ``ctx.goto(name)`` if the step called it, else the step's ``next=``, else the node declared
  after it; none (the last node) or ``END`` completes the run.
- After a steering point: approve (and edit) go to its ``next=``, else the node declared after it, else the run
  completes; reject goes to ``on_reject`` (None or ``END``: the run ends ``rejected``); feedback goes to
  ``on_feedback`` (default: the nearest step declared before the point; ``END`` completes the run). A timeout
  that approves or rejects routes as that decision does.
- ``END`` (``"__end__"``) may be named wherever a node may: ``next=``, ``on_reject=``, ``on_feedback=``,
  ``ctx.goto(END)``.
- A *branch* is a node that a steering point names in ``on_reject`` or ``on_feedback`` and that is declared
  after that steering point. A branch runs only when a decision routes there: the node declared just before
  a branch must not fall through into it, so it must have an explicit ``next=`` (often ``next=END``).
  ``validate`` refuses a workflow where one does, naming the branch, the steering point and the node that
  falls through. (Targets declared before their steering point are loops back to steps of the main path,
  such as ``on_feedback="draft_plan"``, and are not branches.) A branch itself continues by the same rules.
"""

from __future__ import annotations

import logging
import math
import random
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.engine.errors import WorkflowDefinitionError, validation_details
from bot.engine.routes import END, problems
from store.codec import StateCodec
from store.models import (ALL_ACTIONS, DB_INT_MAX, HAZEL_NODES, MIGRATE_NODE, REWIND_NODE, START, Approvers,
                          node_label)

__all__ = ["Approvers", "END", "MIGRATE_NODE", "REWIND_NODE", "START", "Step", "StepContext", "SteeringPoint",
           "Workflow", "node_label"]

S = TypeVar("S", bound=BaseModel)
StepFn = Callable[[Any, "StepContext"], Any]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")
TimeoutAction = Literal["approve", "reject", "escalate", "fail", "cancel"]
Role = Literal["approvers", "anyone"]


@dataclass(frozen=True)
class Step:
    """A step: ``fn(state, ctx) -> state`` (or None to keep the state).

    ``max_attempts`` tries in all; between tries the delay is ``backoff_sec * 2**(try-1)`` capped at
    ``max_backoff_sec``, times a random factor in [0.5, 1] (jitter)."""

    name: str
    fn: StepFn
    next: str | None = None
    max_attempts: int = 3
    backoff_sec: float = 1.0
    max_backoff_sec: float = 60.0

    def backoff_for(self, failed_attempts: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before try ``failed_attempts + 1``."""
        base = min(self.max_backoff_sec, self.backoff_sec * (2 ** max(failed_attempts - 1, 0)))
        return base * (rng or random).uniform(0.5, 1.0)


INT_COLUMNS = "what the database's integer columns hold"
"""Why a number a workflow gives is at most ``DB_INT_MAX`` (said after the bound in each refusal)."""


def version_problem(version: Any) -> str | None:
    """Why ``version`` cannot be a workflow's version (a whole number, not a bool, from 1 to ``DB_INT_MAX``:
    the runs, checkpoints and requests store it in an integer column, and a larger one, a date stamp such as
    202612061530, failed every start on PostgreSQL while SQLite took it), or None when it can."""
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= DB_INT_MAX:
        return f"version must be a whole number from 1 to {DB_INT_MAX:,} ({INT_COLUMNS}), not {version!r}"
    return None


def retry_problems(max_attempts: Any, backoff_sec: Any, max_backoff_sec: Any) -> list[str]:
    """The problems of a step's retry settings: ``max_attempts`` a whole number (not a bool) from 1 to
    ``DB_INT_MAX`` (a run's ``attempt`` column counts up to it), the backoffs numbers of seconds (not bools, not text), finite, 0 or more and at most ``MAX_DURATION_SEC``
    (NaN, infinity, ``True`` or -5 were taken: a NaN backoff waited a default, -5 retried at once)."""
    out = []
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        out.append(f"max_attempts must be a whole number, not {max_attempts!r}")
    elif max_attempts < 1:
        out.append("max_attempts must be at least 1")
    elif max_attempts > DB_INT_MAX:
        out.append(f"max_attempts must be at most {DB_INT_MAX:,} ({INT_COLUMNS}), not {max_attempts}")
    for sec_name, value in (("backoff_sec", backoff_sec), ("max_backoff_sec", max_backoff_sec)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            out.append(f"{sec_name} must be a number of seconds, not {value!r}")
        elif not math.isfinite(value) or not 0 <= value <= MAX_DURATION_SEC:
            out.append(f"{sec_name} must be a finite number of seconds, 0 or more and at most "
                       f"{MAX_DURATION_SEC}, not {value!r}")
    return out


MAX_DURATION_SEC = 2**31 - 1
"""The longest duration a steering point's ``*_sec`` setting takes (68 years), as for Hazel's settings."""

Seconds = Annotated[float, Field(strict=True, gt=0, le=MAX_DURATION_SEC, allow_inf_nan=False)]
"""A steering point's duration: a number of seconds (not a bool, not text), finite, positive, at most
``MAX_DURATION_SEC``. NaN, infinity or 1e300 used to pass and then fail every run at the point."""


class SteeringPoint(BaseModel):
    """Where a run stops for an SME. See ``Workflow.steer`` for the meaning of each field."""

    model_config = ConfigDict(frozen=True)

    name: str
    title: str
    show: str | None = None
    actions: tuple[str, ...] = ALL_ACTIONS
    approvers: Approvers = Field(default_factory=Approvers)
    channel: str = "console"
    on_feedback: str | None = None
    on_reject: str | None = None
    next: str | None = None
    approvals_required: Annotated[int, Field(strict=True)] = 1
    allow_self_approval: bool = True
    permissions: dict[str, Role] = Field(default_factory=dict)
    notify_approvers: bool = False
    remind_after_sec: Seconds | None = None
    remind_every_sec: Seconds | None = None
    escalate_after_sec: Seconds | None = None
    escalate_to: Approvers | None = None
    escalate_channel: str | None = None
    timeout_sec: Seconds | None = None
    on_timeout: TimeoutAction | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    def role_for(self, action: str) -> Role:
        return self.permissions.get(action, "approvers")


def callable_problems(fn: Any) -> list[str]:
    """Why ``fn`` cannot be a step, called ``fn(state, ctx)`` in a worker thread: not callable, an ``async``
    function (it would return a coroutine, not a state), or one that cannot take those two arguments. A callable
    whose signature Python cannot read (some built-ins) is taken as it is."""
    import inspect

    if not callable(fn):
        return [f"{fn!r} is not a function"]
    call = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", fn)  # (an object's
    # async ``__call__`` too: s35 F6)
    if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
        return ["is an async function: steps are plain functions (run a coroutine inside with asyncio.run)"]
    if inspect.isgeneratorfunction(fn):  # (s33 F15: it failed every run at the step, "got generator")
        return ["is a generator function: a step returns the new state (or a dict of changes, or None), it does "
                "not yield"]
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        return [f"must take two arguments, (state, ctx); its signature is {inspect.signature(fn)}"]
    except ValueError:  # (no signature to read)
        pass
    return []


@dataclass
class StepContext:
    """What a step receives besides the state.

    ``idempotency_key`` is ``"{run_id}:{seq}:{step}"``: the same for every attempt of this step from this
    checkpoint, different after a rewind or on another run; pass it to external APIs so a step that runs again
    after a crash does not repeat its side effects. ``feedback`` / ``rejection`` carry the SME's words when a
    decision routed the run here (``feedback_by`` names who). ``attempt`` starts at 1. ``log`` is the step's
    logger, ``hazel.step.<workflow>.<step>`` (``Workflow.step_log``).
    """

    run_id: str
    step: str
    seq: int
    attempt: int
    idempotency_key: str
    started_by: str
    workflow: str
    workflow_version: int
    feedback: str | None = None
    rejection: str | None = None
    feedback_by: str | None = None
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("hazel.step"))
    _goto: str | None = None
    _lease: str | None = None
    """The lease token the runner executes the step under (``bot.engine.lgraph_run`` fences the graph's writes
    with it); None outside a runner."""

    def goto(self, node: str) -> None:
        """Continue at ``node`` (a step or steering point) after this step instead of the declared next;
        ``goto(END)`` completes the run after this step."""
        self._goto = node


class Workflow(Generic[S]):
    """A named, versioned definition of steps and steering points over a pydantic state model.

    Args:
        name: unique name (letters, digits, ``_ . -``), used by ``hazel run NAME``.
        version: a whole number from 1 to ``DB_INT_MAX`` (2,147,483,647: the database's integer columns); a run
            pins the version it started on.
        state: the pydantic model of the run's state; the run's input is validated against it.
        starters: who may start runs, on every channel (the CLI, the REST API, Slack; default: anyone).

    Raises:
        WorkflowDefinitionError: an invalid name, a state that is not a pydantic model, a version that is not a
            whole number from 1 to ``DB_INT_MAX`` (``version_problem``). The rest is checked by ``validate``.
    """

    def __init__(self, name: str, *, version: int = 1, state: type[S], description: str = "",
                 starters: Approvers | None = None) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise WorkflowDefinitionError(f"workflow name {name!r} must match {_NAME.pattern}")
        if not (isinstance(state, type) and issubclass(state, BaseModel)):
            raise WorkflowDefinitionError(f"workflow {name!r}: state must be a pydantic BaseModel class")
        problem = version_problem(version)
        if problem:
            raise WorkflowDefinitionError(f"workflow {name!r}: {problem}")
        self.name = name
        self.version = int(version)
        self.state = state
        self.description = description
        self.starters = starters or Approvers()
        self.codec: StateCodec[S] = StateCodec(state)
        self.nodes: dict[str, Step | SteeringPoint] = {}
        self._order: list[str] = []
        self._after: dict[str, str | None] = {}  # each node's successor in ``_order`` (a step's default next)
        self._problems: list[str] = []
        self._step_logs: dict[str, logging.Logger] = {}
        self.migrations: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def state_label(self) -> str:
        """What ``hazel workflows`` says the workflow's state is: its model's name."""
        return self.state.__name__

    linear: bool = True
    """Whether ``nodes`` run one after another in their order (``hazel workflows`` joins them with arrows); a
    LangGraph graph's nodes need not."""

    # -- declaring --------------------------------------------------------------------------------------

    def step(self, fn: StepFn | None = None, *, name: str | None = None, next: str | None = None,
             max_attempts: int = 3, backoff_sec: float = 1.0, max_backoff_sec: float = 60.0) -> Any:
        """Declare a step (usable as ``@wf.step`` or ``@wf.step(max_attempts=5, next="x")``).

        ``next``: the node after it (default: the node declared after it; ``END`` completes the run)."""

        def register(f: StepFn) -> StepFn:
            step_name = name or getattr(f, "__name__", None)
            if step_name is None:  # (a functools.partial, a callable object: s29 F6 stopped the module's loading)
                self._problems.append(f"step {f!r} has no __name__: give it one with name=")
                return f
            self._problems.extend(f"step {step_name!r}: {problem}"
                                  for problem in (*retry_problems(max_attempts, backoff_sec, max_backoff_sec),
                                                  *callable_problems(f)))
            self._add(Step(step_name, f, next, max_attempts, backoff_sec, max_backoff_sec))
            return f

        return register(fn) if fn is not None else register

    def steer(self, name: str, *, title: str | None = None, show: str | None = None,
              actions: list[str] | tuple[str, ...] = ALL_ACTIONS, approvers: Approvers | None = None,
              channel: str = "console", on_feedback: str | None = None, on_reject: str | None = None,
              next: str | None = None, approvals_required: int = 1, allow_self_approval: bool = True,
              permissions: dict[str, Role] | None = None, notify_approvers: bool = False,
              remind_after_sec: float | None = None, remind_every_sec: float | None = None,
              escalate_after_sec: float | None = None, escalate_to: Approvers | None = None,
              escalate_channel: str | None = None, timeout_sec: float | None = None,
              on_timeout: TimeoutAction | None = None, **options: Any) -> SteeringPoint:
        """Declare a steering point.

        Args:
            title: what the SME is asked (default: the name, humanised).
            show: the state field the SME sees and may edit (None: the whole state, read-only for edits
                of single fields).
            actions: allowed decisions, a subset of approve, edit, reject, feedback, rewind.
            approvers: who may decide; empty means anyone.
            channel: ``console``, ``slack:#channel`` / ``slack:C…`` or ``jira:PROJECTKEY``.
            on_feedback: node that receives the feedback text (default: the step declared just before;
                ``END`` completes the run).
            on_reject: node that receives the rejection reason; None or ``END`` ends the run as ``rejected``.
            next: node after approval (default: the next declared node; none, or ``END``, means the run
                completes). A reject or feedback target declared after this point needs the node declared just
                before it to have an explicit ``next`` (see the module docstring: branches).
            approvals_required: distinct approvers needed to approve (quorum).
            allow_self_approval: False forbids the person who started the run from approving it.
            permissions: per action, ``"approvers"`` (default) or ``"anyone"``.
            notify_approvers: also notify each approver directly (Slack DM).
            remind_after_sec, remind_every_sec: first reminder after, then every (seconds).
            escalate_after_sec, escalate_to, escalate_channel: escalation to backup approvers / a channel.
            timeout_sec, on_timeout: what happens when nobody decided in time.
            options: channel-specific settings (for example ``jira_issue_type``, ``jira_approve_status``).
        """
        if on_reject == END:  # the same as no on_reject: the run ends rejected
            on_reject = None
        try:
            point = SteeringPoint(
                name=name, title=title or name.replace("_", " ").capitalize(), show=show, actions=tuple(actions),
                approvers=approvers or Approvers(), channel=channel, on_feedback=on_feedback, on_reject=on_reject,
                next=next, approvals_required=approvals_required, allow_self_approval=allow_self_approval,
                permissions=dict(permissions or {}), notify_approvers=notify_approvers,
                remind_after_sec=remind_after_sec, remind_every_sec=remind_every_sec,
                escalate_after_sec=escalate_after_sec, escalate_to=escalate_to, escalate_channel=escalate_channel,
                timeout_sec=timeout_sec, on_timeout=on_timeout, options=options,
            )
        except ValidationError as exc:
            details = validation_details(exc)
            raise WorkflowDefinitionError(
                f"workflow {self.label} is invalid: steering point {name!r}: {details}") from None
        self._add(point)
        return point


    def migration(self, from_version: int | None = None) -> Callable[[Callable[[dict], dict]], Callable[[dict], dict]]:
        """Declare how a state tree of ``from_version`` becomes one of this version (a function on dicts):
        ``@wf.migration(from_version=1)`` over ``def m(tree): return {...}``.

        Raises:
            WorkflowDefinitionError: ``from_version`` is not an earlier version of this workflow (a bare
                ``@wf.migration`` passed the function as it, and registered nothing: a fresh-user finding, s33
                F5), a migration from it is declared already, or the function does not take one argument.
        """
        bad = f"workflow {self.label} is invalid: @migration"
        if callable(from_version) or isinstance(from_version, bool) or not isinstance(from_version, int):  # (also
            # ``@wf.migration()``, s35 F7)
            raise WorkflowDefinitionError(f"{bad} needs the version it migrates from: "
                                          f"@{self.name}.migration(from_version=N), N below {self.version}")
        if not 1 <= from_version < self.version:
            raise WorkflowDefinitionError(f"{bad}(from_version={from_version}): a migration comes from an earlier "
                                          f"version, 1 to {self.version - 1}")
        if from_version in self.migrations:
            raise WorkflowDefinitionError(f"{bad}(from_version={from_version}) is declared twice")

        def register(fn: Callable[[dict], dict]) -> Callable[[dict], dict]:
            import inspect

            call = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", fn)
            if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call) \
                    or inspect.isgeneratorfunction(call):
                raise WorkflowDefinitionError(f"{bad}(from_version={from_version}): {getattr(fn, '__name__', fn)!r} "
                                              "must be a plain function returning the new state tree (not async, "
                                              "not a generator)")  # (s34 F9: it failed at the first decision)
            try:
                inspect.signature(fn).bind(object())
            except TypeError:
                raise WorkflowDefinitionError(f"{bad}(from_version={from_version}): "
                                              f"{getattr(fn, '__name__', fn)!r} must take one argument, the state "
                                              "tree (a dict)") from None
            except ValueError:  # (no signature to read: a builtin)
                pass
            self.migrations[from_version] = fn
            return fn

        return register

    def _add(self, node: Step | SteeringPoint) -> None:
        if not isinstance(node.name, str) or not _NAME.match(node.name) or node.name in (START, END):
            self._problems.append(f"node name {node.name!r} is not a valid name")
        elif node.name in HAZEL_NODES:  # (s33 F16: history drew such a step as a rewind, and no rewind reached it)
            self._problems.append(f"node name {node.name!r} is one of Hazel's own steps "
                                  f"({', '.join(n for n in HAZEL_NODES if n != START)}): choose another")
        if node.name in self.nodes:
            self._problems.append(f"duplicate name {node.name!r}")
            return
        self.nodes[node.name] = node
        if isinstance(node, Step):
            self.step_log(node.name)  # made here, once: a new logger costs a step about 20 µs (its parents' fixup)
        if self._order:
            self._after[self._order[-1]] = node.name
        self._after[node.name] = None
        self._order.append(node.name)

    # -- reading ------------------------------------------------------------------------------------------

    @property
    def first(self) -> str | None:
        return self._order[0] if self._order else None

    def node(self, name: str) -> Step | SteeringPoint:
        return self.nodes[name]

    def step_log(self, step: str) -> logging.Logger:
        """The logger a step's ``StepContext.log`` writes to: ``hazel.step.<workflow>.<step>``."""
        log = self._step_logs.get(step)
        if log is None:
            log = self._step_logs[step] = logging.getLogger(f"hazel.step.{self.name}.{step}")
        return log

    def point(self, name: str) -> SteeringPoint:
        node = self.nodes.get(name)
        if not isinstance(node, SteeringPoint):
            raise KeyError(name)
        return node

    def steering_points(self) -> list[SteeringPoint]:
        return [n for n in self.nodes.values() if isinstance(n, SteeringPoint)]

    def state_view(self, tree: Any, *, run_id: str) -> Any:
        """The state a person sees (and ``--set`` edits) of the checkpoint of run ``run_id`` whose stored JSON
        tree is ``tree``: the tree itself. ``LangGraphWorkflow`` gives its graph's values instead."""
        return tree

    def input_json_schema(self) -> dict[str, Any]:
        """The JSON schema of what a run's input is (``GET /api/workflows``): the state model's.
        ``LangGraphWorkflow``: its graph's input schema."""
        return self.state.model_json_schema()

    def declared_fields(self) -> dict[str, Any]:
        """The state's fields, each with the value a new value for it is parsed like (``value_from_text``):
        ``""`` for a text field (the text as it is), else None (JSON). ``LangGraphWorkflow``: its graph's
        channels."""
        return {name: _blank(f.annotation) for name, f in self.state.model_fields.items()}

    def declared_entries(self) -> dict[str, Any]:
        """The state's mapping fields (``dict[str, V]``, ``Mapping[str, V]``, optional or not), each with the value
        a new entry's text is parsed like (``value_from_text``): ``""`` when ``V`` is text, else None (JSON).
        ``LangGraphWorkflow``: ``{}`` (a graph's channels declare no entry types Hazel reads)."""
        found = {}
        for name, f in self.state.model_fields.items():
            entry = _entry_annotation(f.annotation)
            if entry is not _NOT_A_MAPPING:
                found[name] = _blank(entry)
        return found

    def declared_after(self, name: str) -> str | None:
        """The node declared after ``name`` (None for the last). Raises KeyError for an unknown name."""
        return self._after[name]

    @staticmethod
    def target(name: str) -> str | None:
        """A route target as the runner follows it: ``END`` is None (the run completes), any other name itself."""
        return None if name == END else name

    def next_of(self, name: str) -> str | None:
        """Where the run goes after ``name`` completes normally, or after its approval (None: the run
        completes): its ``next=`` (``END``: None), else the node declared after it."""
        node = self.nodes[name]
        return self.target(node.next) if node.next else self.declared_after(name)

    def feedback_target(self, point: SteeringPoint) -> str | None:
        """The node that receives ``point``'s feedback: ``on_feedback`` (``END``: None, the run completes), else
        the nearest step declared before ``point`` (None when there is none)."""
        if point.on_feedback:
            return self.target(point.on_feedback)
        i = self._order.index(point.name)
        for prev in reversed(self._order[:i]):
            if isinstance(self.nodes[prev], Step):
                return prev
        return None

    # -- validation ----------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the definition as a whole (``bot.engine.routes``).

        Raises:
            WorkflowDefinitionError: naming every problem (unknown route targets, duplicate names, a shown
                field the state lacks, unknown actions or channels, impossible quorum, a branch fallen into, …).
        """
        found = problems(self)
        if found:
            raise WorkflowDefinitionError(f"workflow {self.label} is invalid: " + "; ".join(found))


_NOT_A_MAPPING = object()


def _entry_annotation(annotation: Any) -> Any:
    """The value type of a mapping annotation (``dict[str, V]``, ``Mapping[str, V]``, ``… | None``,
    ``Annotated[…]``; a bare ``dict``: ``Any``), else ``_NOT_A_MAPPING``."""
    import collections.abc
    import typing

    args = _not_none(annotation)
    if len(args) != 1:
        return _NOT_A_MAPPING
    annotation = args[0]
    if annotation is dict:
        return Any
    if typing.get_origin(annotation) in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        args = typing.get_args(annotation)
        return args[1] if len(args) == 2 else Any
    return _NOT_A_MAPPING


def _not_none(annotation: Any) -> list[Any]:
    """The types ``annotation`` admits besides None: ``Annotated[X, …]`` is ``X``, a union gives its members but
    ``None`` (``str | None``: ``[str]``), any other annotation itself."""
    import types
    import typing

    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _blank(annotation: Any) -> Any:
    """``""`` when ``annotation`` is text (``str``, ``str | None``, ``Annotated[str, …]``), else None."""
    args = _not_none(annotation)
    return "" if args and all(a is str for a in args) else None


def unknown_fields(model: type[BaseModel], data: object) -> list[str]:
    """Keys of a dict that the state model would silently drop (a typo must not start a run with a default in
    its place, nor lose a step's output: ``bot.engine.runner``), sorted; a field's name and its aliases are
    known. Models that allow extra fields accept anything."""
    if not isinstance(data, dict) or model.model_config.get("extra") == "allow":
        return []
    known = set(model.model_fields)
    for name, field in model.model_fields.items():
        if field.alias:
            known.add(field.alias)
        if isinstance(field.validation_alias, str):
            known.add(field.validation_alias)
    return sorted(str(k) for k in data if k not in known)
