"""LangGraph graphs as Hazel workflows: one engine path for both.

A compiled LangGraph graph registered with Hazel (``hazel.langgraph.register``) becomes a
``LangGraphWorkflow``: a ``Workflow`` whose steps are the graph's nodes and whose steering points are the
graph's pending ``interrupt()`` calls. The run is the graph's thread (``thread_id`` = the run id); the graph's
checkpoints live in its own checkpointer (``HazelSaver``); each Hazel checkpoint of the run holds only a
pointer to one of them (``lg_checkpoint``) and what the run waits on. So the runner, the steering requests, the
decisions, the audit log, the outbox, reminders, timeouts and rewinds are the native ones:

- a step runs ONE super-step of the graph (``bot.engine.lgraph_run``): one Hazel checkpoint per graph
  checkpoint, so ``hazel history`` lists the graph's checkpoints with their branches and a rewind can fork the
  graph at any of them;
- a super-step that ends with pending interrupts leaves the run ``waiting`` with one steering request per
  interrupt, opened in the step's transaction (``points_asked``). An interrupt's payload made by
  ``hazel.langgraph.steer`` carries its steering point's settings; a plain ``interrupt(value)`` gets the
  settings given to ``register``;
- a decision is recorded as for any steering request; when the last request of the super-step is settled
  (``route_decision``), the run is ready and the next step resumes the graph with
  ``Command(resume={interrupt_id: value, ...})``, the values shaped by ``resume_value``;
- a rewind forks at a Hazel checkpoint: ``graph.update_state`` there makes the fork, with the rewind's feedback
  and edits as graph state values (``fork_tree``).

The Hazel state tree of such a run (``GraphRunState``) is small: a pointer, the input, and for each pending
interrupt the value it shows, under the steering point's name (which is what the point's ``show`` names, so
channels render it and edits replace it as for a native field). What people see of a checkpoint
(``state_view``: ``hazel show --seq``, the REST state, the run pages and their diffs, ``hazel rewind --set``)
is the graph's values there, not this tree.
"""

from __future__ import annotations

import json
import logging
import typing
from functools import cached_property, lru_cache
from typing import Any, Callable

import typing_extensions
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from bot.engine.errors import (CheckpointNotFoundError, InvalidDecisionError, WorkflowDefinitionError,
                               validation_details)
from bot.engine.limits import not_text
from bot.engine.transitions import close_request
from bot.engine.lgraph_run import (MARK, UPDATE_STEP, GraphRunState, graph_values, has_checkpoint, nodes_label,
                                   superstep, writers_at, written)
from bot.engine.routes import point_settings_problems
from bot.engine.workflow import _NAME, Step, retry_problems, SteeringPoint, Workflow, _blank
from store.codec import StateCodec, is_text, json_value
from store.interrupts import answers_at
from store.models import ALL_ACTIONS, START, Action, Actor, RequestStatus, Run, RunStatus, SteeringRequest

__all__ = ["MARK", "GraphRunState", "LangGraphWorkflow", "find_node", "check_point", "close_siblings", "node_at",
           "paused_nodes", "pending_siblings", "point_from", "points_of_run", "points_asked", "resume_value"]

_log = logging.getLogger("hazel.langgraph")

POINT_SETTINGS = ("title", "actions", "approvers", "channel", "approvals_required", "allow_self_approval",
                  "permissions", "notify_approvers", "remind_after_sec", "remind_every_sec", "escalate_after_sec",
                  "escalate_to", "escalate_channel", "timeout_sec", "on_timeout", "options")
"""The settings of a steering point that an interrupt may carry (see ``Workflow.steer`` for each)."""


class _GraphCodec(StateCodec[GraphRunState]):
    """A run's input is the graph's input (``{"topic": "…"}``): wrapped as ``lg_input``. A whole Hazel tree
    (an edit, a checkpoint) is validated as it is."""

    def validate(self, data: Any) -> GraphRunState:
        if isinstance(data, GraphRunState):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json")
        if isinstance(data, dict) and "lg_input" in data:
            return GraphRunState.model_validate(data)
        if not isinstance(data, dict):
            raise ValueError(f"a LangGraph run's input must be a JSON object, not {type(data).__name__}")
        return GraphRunState(lg_input=data)


def resume_value(action: str, payload: dict[str, Any], by: str) -> dict[str, Any]:
    """What the graph's ``interrupt()`` (or ``steer()``) returns for a decision:

    ``{"action": "approve", "by": who}``, ``{"action": "edit", "value": new value, "by": who}``,
    ``{"action": "reject", "reason": str, "by": who}``, ``{"action": "feedback", "text": str, "by": who}``;
    ``by`` is the person's name as the audit log gives it (``"timeout"`` for a timeout's decision).
    """
    out: dict[str, Any] = {"action": action}
    if action == Action.EDIT.value:
        out["value"] = payload.get("value")
    elif action == Action.REJECT.value:
        out["reason"] = payload.get("reason")
    elif action == Action.FEEDBACK.value:
        out["text"] = payload.get("text")
    out["by"] = by
    return out


@lru_cache(maxsize=4096)
def _point(name: str, settings_json: str) -> SteeringPoint:
    return SteeringPoint(name=name, show=name, **json.loads(settings_json))


def point_from(name: str, settings: dict[str, Any]) -> SteeringPoint:
    """The steering point ``name`` with ``settings`` (``POINT_SETTINGS``); it shows the field ``name``.

    Raises:
        WorkflowDefinitionError: a setting is unknown or invalid (pydantic's message).
    """
    unknown = sorted(set(settings) - set(POINT_SETTINGS))
    if unknown:
        raise WorkflowDefinitionError(f"steering point {name!r}: unknown settings {unknown}")
    try:
        settings = {"title": name.replace("_", " ").capitalize(), **settings}
        return _point(name, json.dumps(settings, sort_keys=True, default=_jsonable))
    except ValidationError as exc:
        details = validation_details(exc)
        raise WorkflowDefinitionError(f"steering point {name!r}: {details}") from None


def _graph_problems(graph: Any) -> list[str]:
    """What in a compiled graph Hazel cannot keep its word on: LangGraph's static breakpoints
    (``compile(interrupt_before=…, interrupt_after=…)``), which Hazel's super-step by super-step drive passes
    without stopping (the gated node ran with nobody asked: a fresh-user finding, s27 F2), and a checkpointer
    that keeps a thread in one process (``InMemorySaver``): a decision taken in another process, or after a
    restart, would find no graph checkpoint to resume (s27 F1)."""
    out = []
    for option in ("interrupt_before", "interrupt_after"):
        nodes = getattr(graph, f"{option}_nodes", None)
        if nodes:
            named = "every node" if nodes == "*" else ", ".join(map(repr, nodes))
            out.append(f"its graph is compiled with {option}= ({named}): Hazel does not stop at LangGraph's "
                       f"static breakpoints; call interrupt() or hazel.langgraph.steer() in the node where a "
                       f"person must decide, and compile without {option}")
    saver = getattr(graph, "checkpointer", None)
    if saver is True:  # (a subgraph's setting: every run failed at its first step, s32 F6)
        out.append("its graph is compiled with checkpointer=True, which LangGraph takes for subgraphs only (a root "
                   "graph fails at its first step); compile it without a checkpointer (Hazel gives it a HazelSaver "
                   "on its own database) or with a durable one")
    from langgraph.checkpoint.memory import InMemorySaver  # (MemorySaver is its old name; subclasses too: s29 F5)

    if isinstance(saver, InMemorySaver):
        out.append("its graph is compiled with an InMemorySaver, which keeps a run's graph state in one process: "
                   "a decision taken in another process (the CLI, a second server) or after a restart would find "
                   "nothing to resume; compile without a checkpointer (Hazel gives the graph a HazelSaver on its "
                   "own database) or with a durable one every process shares")
    return out


def check_point(point: SteeringPoint) -> SteeringPoint:
    """``point`` when its settings make sense together (as ``Workflow.validate`` checks a native one).

    Raises:
        WorkflowDefinitionError: naming every problem (unknown actions, an invalid channel, …).
    """
    problems = []
    unknown = [a for a in point.actions if a not in ALL_ACTIONS]
    if unknown or not point.actions:
        problems.append(f"actions {list(point.actions)} (allowed: {list(ALL_ACTIONS)})")
    problems += point_settings_problems(point)
    if problems:
        raise WorkflowDefinitionError(f"steering point {point.name!r}: " + "; ".join(problems))
    return point


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _shown_json(value: Any) -> Any:
    """``_jsonable``, else the value as the state codec writes it (``store.codec.json_value``: a datetime in ISO
    8601, a ``Decimal`` as its text, bytes as ``{"$bytes": …}``, as the request view of the same value shows them;
    they were Python reprs, ``"datetime.datetime(2026, 1, 1, …)"``: s21), else its ``repr`` (shown all the same)."""
    try:
        return _jsonable(value)
    except TypeError:
        pass
    try:
        return json_value(value)
    except PydanticSerializationError:
        return repr(value)


class LangGraphWorkflow(Workflow[GraphRunState]):
    """A compiled LangGraph graph as a Hazel workflow (see the module docstring).

    Args:
        graph: a compiled graph with a checkpointer (``HazelSaver``: the graph's checkpoints in Hazel's store).
        name, version, description, starters: as for ``Workflow``.
        point_defaults: settings (``POINT_SETTINGS``) of the steering point of a plain ``interrupt(value)``,
            and the defaults under those a ``steer()`` call gives.
        feedback_key: the graph state key a rewind's feedback is written to (``update_state`` on the fork).
        saver_for: ``store -> checkpointer`` for a graph compiled without one (``bind``).
        max_attempts, backoff_sec: retries of a super-step whose node raised (as for ``Workflow.step``).

    Raises:
        WorkflowDefinitionError: the graph has no checkpointer, or ``point_defaults`` are invalid.
    """

    def __init__(self, graph: Any, *, name: str, version: int = 1, description: str = "",
                 starters: Any = None, point_defaults: dict[str, Any] | None = None,
                 feedback_key: str = "feedback", max_attempts: int = 3, backoff_sec: float = 1.0,
                 saver_for: Callable[[Any], Any] | None = None) -> None:
        super().__init__(name, version=version, state=GraphRunState, description=description, starters=starters)
        self.codec = _GraphCodec(GraphRunState)
        self.graph = graph
        self.feedback_key = feedback_key
        self.point_defaults = {"actions": list(ALL_ACTIONS), **(point_defaults or {})}
        try:
            self.default_point = check_point(point_from("interrupt", self.point_defaults))
        except WorkflowDefinitionError as exc:  # (s29 F8: said as "steering point 'interrupt': …", no workflow)
            said = str(exc).removeprefix("steering point 'interrupt': ")
            raise WorkflowDefinitionError(f"workflow {self.label} is invalid: the steering point of a plain "
                                          f"interrupt() (register()'s title=, actions=, approvers=, …): {said}"
                                          ) from None
        self._max_attempts, self._backoff_sec = max_attempts, backoff_sec
        self._problems.extend(retry_problems(max_attempts, backoff_sec, Step.max_backoff_sec))
        self._seen: dict[str, SteeringPoint] = {}
        self._unbound, self._saver_for = graph, saver_for
        if getattr(graph, "checkpointer", None) in (None, False) and saver_for is None:
            self._problems.append("its graph has no checkpointer: compile it with checkpointer=HazelSaver(...)")
        self._problems.extend(_graph_problems(graph))
        for node in getattr(graph, "nodes", {}):
            if node != START and _NAME.match(node):  # (any other name still runs: node_at)
                self._add(self._step(node))
        self._first = _first_node(graph)

    def bind(self, store: Any) -> None:
        """Give a graph compiled without a checkpointer one on Hazel's database ``store`` (``saver_for``);
        called by the engine when it starts with this workflow registered."""
        if getattr(self._unbound, "checkpointer", None) in (None, False) and self._saver_for is not None:
            self.graph = self._unbound.copy(update={"checkpointer": self._saver_for(store)})

    def _step(self, name: str) -> Step:
        return Step(name, lambda state, ctx: superstep(self, state, ctx), None, self._max_attempts,
                    self._backoff_sec)

    # -- the Workflow interface, for a graph ---------------------------------------------------------------

    @property
    def first(self) -> str | None:
        return self._first

    def next_of(self, name: str) -> str | None:
        return None  # a step names where the graph goes next (ctx.goto); none: the graph finished

    def steering_points(self) -> list[SteeringPoint]:
        """The point of a plain ``interrupt()`` (who may rewind or retry a run that waits on nothing)."""
        return [self.default_point]

    def state_view(self, tree: Any, *, run_id: str) -> Any:
        """What people see of a Hazel checkpoint of this graph's run ``run_id`` whose stored tree is ``tree``
        (a ``GraphRunState``): the graph's values at the graph checkpoint it points at (``lg_checkpoint``), as
        JSON (pydantic models dumped, tuples and sets as lists, anything else as its ``repr``); before the
        first super-step (no pointer), the input the graph starts from (with a rewind's values); at a rewind's
        fork (``lg_fork``), those values with what the rewind changes written as ``update_state`` writes them
        (``written``: a reducer channel combines). ``tree`` itself when the graph checkpoint is not found or
        cannot be read (logged as a WARNING, which a CLI command prints): a view never fails here."""
        if not isinstance(tree, dict):
            return tree
        pointer = tree.get("lg_checkpoint")
        if pointer is None:
            start = tree.get("lg_input")
            return written(self.graph, start, tree.get("lg_update") or {}) if isinstance(start, dict) else tree
        try:
            values = graph_values(self.graph, run_id, str(pointer))
        except Exception:  # noqa: BLE001  (a view of the stored tree rather than none)
            _log.warning("run %s: the values of graph checkpoint %s could not be read; showing Hazel's pointer "
                         "state", run_id, pointer, exc_info=True)
            return tree
        if values is None:  # (said: a CLI user sees the warning, not a log, and would read lg_* as the state)
            _log.warning("run %s: graph checkpoint %s is gone (HazelSaver.delete_thread or prune, or a checkpointer "
                         "this process cannot read): showing Hazel's pointer state (lg_*) instead of the graph's "
                         "values", run_id, pointer)
            return tree
        if tree.get("lg_fork") and isinstance(tree.get("lg_update"), dict) and isinstance(values, dict):
            values = written(self.graph, values, tree["lg_update"])  # a rewind's fork: with what it changes
        return json.loads(json.dumps(values, default=_shown_json, ensure_ascii=False))

    def fork_next(self, tree: Any, next_step: str | None) -> str | None:
        """The step a rewind's fork with ``tree`` (``fork_tree``'s) continues at, when the checkpoint rewound
        to runs ``next_step`` next: ``next_step``, or ``UPDATE_STEP`` when it runs nothing next (the graph had
        finished there) and the rewind brings feedback or edits: that step writes them on the fork
        (``update_state``) rather than the run completing again without them."""
        if next_step is None and isinstance(tree, dict) and tree.get("lg_update") and tree.get("lg_checkpoint"):
            return UPDATE_STEP
        return next_step

    @cached_property
    def input_adapter(self) -> TypeAdapter[Any] | None:
        """What a run's input is validated with (``bot.engine.inputs.validate_input``): the graph's input
        schema (``StateGraph``'s ``input_schema``, its state schema unless it was given one) as a pydantic
        ``TypeAdapter``. A ``TypedDict`` refuses keys it does not declare (with its own required and optional
        keys; a ``typing.TypedDict`` is rebuilt as ``typing_extensions``', which pydantic needs before Python
        3.12). None when the graph does not say, or its schema cannot be made one (logged): the input is then
        taken as it is, as before."""
        schema = getattr(getattr(self._unbound, "builder", None), "input_schema", None)
        if schema is None:
            return None
        try:
            if typing.is_typeddict(schema):
                schema = _forbidding_typeddict(schema)
            return TypeAdapter(schema)
        except Exception:  # noqa: BLE001  (an input schema pydantic cannot read: no check rather than none)
            _log.warning("workflow %s: the graph's input schema %r cannot be validated; inputs are taken as "
                         "they are", self.label, schema, exc_info=True)
            return None

    linear = False

    @property
    def input_strict(self) -> bool:
        """Whether the run's input must be of the input schema's types as it is (``fits``): LangGraph validates
        (and converts) a pydantic model's values, none of a ``TypedDict``'s."""
        return _converts_nothing(getattr(getattr(self._unbound, "builder", None), "input_schema", None))

    @property
    def state_label(self) -> str:
        """``LangGraph graph over ReviewState``: the graph's state schema, not Hazel's pointer state."""
        schema = getattr(getattr(self._unbound, "builder", None), "state_schema", None)
        return f"LangGraph graph over {getattr(schema, '__name__', 'its state')}"

    def input_fields(self) -> list[str] | None:
        """The keys the graph's input schema declares (None: it does not say)."""
        schema = getattr(getattr(self._unbound, "builder", None), "input_schema", None)
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return list(schema.model_fields)
        try:
            return list(typing.get_type_hints(schema)) if typing.is_typeddict(schema) else None
        except Exception:  # noqa: BLE001
            return None

    def input_json_schema(self) -> dict[str, Any]:
        """The JSON schema of the graph's input (``input_adapter``), not Hazel's pointer state; ``{"type":
        "object"}`` when the graph does not say."""
        adapter = self.input_adapter
        if adapter is not None:
            try:
                return adapter.json_schema()
            except Exception:  # noqa: BLE001  (a type with no JSON schema: validated, described as an object)
                _log.warning("workflow %s: no JSON schema for the graph's input", self.label, exc_info=True)
        return {"type": "object", "title": self.name}

    def declared_entries(self) -> dict[str, Any]:
        """``{}``: a new entry of a channel's mapping is parsed as its other entries are (``entry_value``)."""
        return {}

    def declared_fields(self) -> dict[str, Any]:
        """The channels of the graph's state (``StateGraph``'s, its private ones too; LangGraph's own
        ``__…__`` and ``branch:…`` channels left out), written yet or not, each with the value a new value
        for it is parsed like: ``""`` for a channel of text, else None (JSON). ``{}`` when the graph does not
        say (not a ``StateGraph``)."""
        builder = getattr(self._unbound, "builder", None)
        channels = [c for c in (getattr(builder, "channels", None) or {})
                    if not c.startswith("__") and not c.startswith("branch:")]
        hints: dict[str, Any] = {}
        for schema in (getattr(builder, "schemas", None) or {}):
            try:
                hints.update(typing.get_type_hints(schema, include_extras=True))
            except Exception:  # noqa: BLE001  (a schema whose hints cannot be resolved: JSON for its channels)
                continue
        return {c: _blank(hints.get(c)) for c in channels}

    @cached_property
    def _channel_adapters(self) -> dict[str, tuple[TypeAdapter[Any], bool]]:
        """``(TypeAdapter, strict)`` per channel whose type the graph's state schemas declare (a reducer's
        ``Annotated`` metadata is left to pydantic, which ignores it); channels it cannot read are left out.
        ``strict``: the schema is no pydantic model, so LangGraph converts nothing and a value must be of the
        type as it is (``"3"`` is no ``int``); a pydantic schema's values LangGraph validates, converting."""
        builder = getattr(self._unbound, "builder", None)
        adapters: dict[str, tuple[TypeAdapter[Any], bool]] = {}
        for schema in (getattr(builder, "schemas", None) or {}):
            strict = _converts_nothing(schema)
            try:
                hints = typing.get_type_hints(schema, include_extras=True)
            except Exception:  # noqa: BLE001  (hints that cannot be resolved: not checked)
                continue
            for name, hint in hints.items():
                try:
                    adapters[name] = (TypeAdapter(hint), strict)
                except Exception:  # noqa: BLE001  (a type pydantic cannot validate: not checked)
                    continue
        return adapters

    def edit_errors(self, edits: dict[str, Any]) -> str:
        """Why ``edits`` (a rewind's ``{channel: value}``) do not fit the channels' declared types, on one line
        (``revisions: Input should be a valid integer, …``), as the run's input is checked (``fits``); ``""``
        when they do. The values are checked, not converted: the graph gets them as they were given."""
        problems = []
        for name, value in edits.items():
            adapter = self._channel_adapters.get(name)
            if adapter is not None:
                problems += fits(adapter[0], value, strict=adapter[1], where=(name,))
        return "; ".join(problems)

    def validate(self) -> None:
        if self._problems:
            raise WorkflowDefinitionError(f"workflow {self.label} is invalid: " + "; ".join(self._problems))

    # -- steering points that come and go --------------------------------------------------------------------

    @staticmethod
    def check_ask(name: str, settings: dict[str, Any]) -> SteeringPoint:
        """The steering point an interrupt asks at (``check_point``); raises WorkflowDefinitionError."""
        return check_point(point_from(name, settings))

    def points_in(self, tree: Any) -> dict[str, SteeringPoint]:
        """The steering points a Hazel checkpoint's tree waits at, by name, in the order they were asked."""
        asks = tree.get("lg_asks") if isinstance(tree, dict) else None
        points = {name: point_from(name, ask.get("point") or {}) for name, ask in (asks or {}).items()}
        for name, point in points.items():
            if len(self._seen) < 256 or name in self._seen:
                self._seen[name] = point
        return points

    def known_points(self) -> list[SteeringPoint]:
        """The point of a plain ``interrupt()`` and the points this process has seen asked (the channels'
        groups they name are looked up when a person acts: ``Hazel.identify``)."""
        return [self.default_point, *self._seen.values()]

    def node_at(self, name: str, tree: Any) -> Step | SteeringPoint:
        """Node ``name`` at a checkpoint with ``tree``: a steering point it waits at (``name`` naming all of
        them, ``nodes_label``: the first one; the runner opens a request for each), else a step that continues
        the graph (named after the graph nodes that run next: ``nodes_label``)."""
        points = self.points_in(tree)
        point = points.get(name)
        if point is None and points and name == nodes_label(list(points)):  # all of them: the first one
            point = next(iter(points.values()))
        if point is not None:
            return point
        return self.nodes.get(name) or self._step(name)

    def route_decision(self, tx: Any, *, run: Run, request: SteeringRequest, tree: Any, action: str,
                       actor: Actor, payload: dict[str, Any]) -> tuple[str, RunStatus, None, dict] | None:
        """After ``request`` was settled by this decision: None while other requests of the same super-step
        are pending (the run keeps waiting), else ``(next node, ready, no handoff, tree)``: the tree with the
        resume values of every request of the super-step (``lg_resume``) and nothing asked any more; the next
        node names every node that interrupted (``nodes_label``: they all run again, resumed)."""
        answers = answers_at(tx, run.id, request.checkpoint_seq).get()
        if any(a["status"] == RequestStatus.PENDING.value for p, a in answers.items() if p != request.point):
            return None
        asks = dict(tree.get("lg_asks") or {})
        resume: dict[str, Any] = {}
        for name, ask in asks.items():
            if name == request.point:
                resume[ask["interrupt_id"]] = resume_value(action, payload, actor.acting_for or actor.label)
            elif "action" in answers.get(name, {}):
                answer = answers[name]
                resume[ask["interrupt_id"]] = resume_value(answer["action"], answer["payload"], answer["label"])
        node = nodes_label([ask.get("node") or name for name, ask in asks.items()]) or request.point
        return node, RunStatus.READY, None, {**_without_asks(tree), "lg_resume": resume}

    def refuse_unknown_channels(self, edits: dict[str, Any] | None) -> None:
        """Refuse edits of channels the graph does not declare (``declared_fields``; none declared: any).

        Raises:
            InvalidDecisionError: ``the graph of G v1 has no channel 'x' (channels: …)``.
        """
        declared = self.declared_fields()
        unknown = sorted(set(edits or {}) - set(declared)) if declared else []
        if unknown:  # LangGraph's update_state would drop them without a word
            raise InvalidDecisionError(
                f"the graph of {self.label} has no channel {', '.join(map(repr, unknown))} (channels: "
                f"{', '.join(declared)})")

    def fork_tree(self, tree: Any, *, feedback: str | None, edits: dict[str, Any] | None,
                  run_id: str | None = None, seq: int | None = None,
                  earlier: Callable[[], int | None] | None = None) -> Any:
        """The tree a rewind forks with: nothing asked (a node that interrupted there runs again and asks
        again: the question it asked there, ``lg_reask`` naming its interrupt, with the answers it had before
        kept), ``lg_fork`` set and ``lg_update`` holding ``{feedback_key: feedback, **edits}`` (None: none).
        When ``tree`` is itself a rewind's fork (the ``↩`` checkpoint: its pointer still the graph checkpoint it
        forked from), its own ``lg_update`` comes first and these are written over it (``written``: a reducer
        channel combines), so the fork starts from the values that checkpoint shows.

        Raises:
            CheckpointNotFoundError: the graph checkpoint ``tree`` points at is gone (``HazelSaver.delete_thread``
                or ``prune`` deleted it): the fork would start the graph from nothing.
            InvalidDecisionError: an edit of a channel the graph does not declare (``declared_fields``), or
                feedback where it declares no ``feedback_key`` channel; at the run's start (no graph checkpoint
                yet), feedback or an edit of a channel the graph's input schema does not declare
                (``_refuse_past_input``);
                feedback or edits for a graph checkpoint that several nodes wrote at once
                (``writers_at``: LangGraph cannot tell which node the values would come from); ``seq`` (the
                Hazel checkpoint) and ``earlier()`` (the nearest one before it that takes them: one node wrote
                it, or the input; None: none) name them in the message.
        """
        declared = self.declared_fields()
        self.refuse_unknown_channels(edits)
        if feedback and declared and self.feedback_key not in declared:  # update_state would drop it too
            raise InvalidDecisionError(
                f"the graph of {self.label} has no channel {self.feedback_key!r} for a rewind's feedback (channels: "
                f"{', '.join(declared)}): declare it in the graph's state, or give register() another "
                f"feedback_key")
        update = dict(edits or {})
        if feedback:
            update[self.feedback_key] = feedback
        forked = tree.get("lg_update") if isinstance(tree, dict) and tree.get("lg_fork") else None
        if isinstance(forked, dict) and forked:  # a rewind to a rewind's own fork: from what it shows (s22 F5)
            update = written(self.graph, forked, update)
        pointer = tree.get("lg_checkpoint") if isinstance(tree, dict) else None
        if pointer is None and update:
            self._refuse_past_input(update, feedback=bool(feedback))
        if pointer is not None and run_id is not None and not has_checkpoint(self.graph, run_id, pointer):
            raise CheckpointNotFoundError(
                f"checkpoint #{seq} of run {run_id} points at a graph checkpoint that was deleted "
                f"(HazelSaver.delete_thread or prune): LangGraph has nothing to fork from there; rewind to "
                f"checkpoint #0 (the run's input) instead")
        if update and pointer is not None and run_id is not None:
            config = {"configurable": {"thread_id": run_id, "checkpoint_ns": "", "checkpoint_id": pointer}}
            writers = writers_at(self.graph, config)
            if writers:
                takes = earlier() if earlier is not None else None
                before = f"checkpoint #{takes}" if takes is not None else "a checkpoint one node wrote"
                raise InvalidDecisionError(
                    f"checkpoint #{seq} of run {run_id} is at a graph checkpoint {', '.join(writers)} wrote at "
                    f"once: LangGraph cannot tell which of them feedback or edits would come from; rewind there "
                    f"without feedback or edits, or to {before}")
        asks = (tree.get("lg_asks") or {}) if isinstance(tree, dict) else {}
        asked = [ask["interrupt_id"] for ask in asks.values() if ask.get("interrupt_id")]
        if not asked and isinstance(tree, dict) and tree.get("lg_fork"):  # to a rewind's fork: what it re-asks
            asked = list(tree.get("lg_reask") or [])
        return {**_without_asks(tree), "lg_fork": True, "lg_update": update or None,
                "lg_reask": asked if pointer is not None else []}


    def _refuse_past_input(self, update: dict[str, Any], *, feedback: bool) -> None:
        """Refuse ``update`` (a rewind's values for the run's start) when it holds channels the graph's input
        schema does not declare (``input_fields``): the start hands the graph its input, and LangGraph keeps
        of an input only its input schema's keys (``StateGraph(..., input_schema=...)``), so the rest would be
        shown on the rewind's checkpoint and reach no node (a fresh-user finding, s22).

        Raises:
            InvalidDecisionError: ``at the run's start the graph of G v1 takes its input only (topic): …``.
        """
        fields = self.input_fields()
        if fields is None:
            return
        past = [k for k in update if k not in fields]
        if not past:
            return
        named = [f"the feedback (channel {k!r})" if feedback and k == self.feedback_key else f"channel {k!r}"
                 for k in past]
        raise InvalidDecisionError(
            f"at the run's start the graph of {self.label} takes its input only ({', '.join(fields)}), and "
            f"LangGraph drops any other channel of an input: {', '.join(named)} would reach no node; rewind to a "
            f"later checkpoint to give {'it' if len(past) == 1 else 'them'}, or declare "
            f"{'it' if len(past) == 1 else 'them'} in the graph's input schema")


def _without_asks(tree: dict[str, Any]) -> dict[str, Any]:
    asks = tree.get("lg_asks") or {}
    return {**{k: v for k, v in tree.items() if k not in asks}, "lg_asks": {}, "lg_resume": None,
            "lg_update": None, "lg_fork": False, "lg_reask": []}


def _first_node(graph: Any) -> str | None:
    """The name of the run's first step: the graph nodes its first super-step runs (the edges from START),
    ``nodes_label``; a graph whose entry is conditional: its first node."""
    builder = getattr(graph, "builder", None)
    ends = sorted(end for start, end in getattr(builder, "edges", ()) if start == START)
    if ends:
        return nodes_label(ends)
    nodes = [n for n in getattr(graph, "nodes", {}) if n != START]
    return nodes[0] if nodes else None


# -- what the engine asks of any workflow (one function each, native workflows unchanged) ---------------------

def node_at(wf: Workflow, name: str, tree_of: Callable[[], Any]) -> Step | SteeringPoint:
    """``wf.nodes[name]``; for a LangGraph workflow, the node at the checkpoint whose tree ``tree_of()`` gives
    (called only then). Raises KeyError as ``wf.nodes[name]`` does."""
    if isinstance(wf, LangGraphWorkflow):
        return wf.node_at(name, tree_of())
    return wf.nodes[name]


def find_node(wf: Workflow, name: str, tree_of: Callable[[], Any]) -> Step | SteeringPoint | None:
    """``node_at``, None when ``wf`` has no such node."""
    try:
        return node_at(wf, name, tree_of)
    except KeyError:
        return None


def close_siblings(tx: Any, wf: Workflow | None, request: SteeringRequest, *, now: Any, by: Actor, action: str,
                   status: RequestStatus = RequestStatus.DECIDED, **facts: Any) -> None:
    """When a rewind, a cancel or a timeout that ends the run closes ``request``: the other requests still
    pending at its checkpoint (a LangGraph super-step's other interrupts) are closed the same way, so that
    none is left to resume a run that moved on. Nothing for a native workflow (one request at a time). With
    ``wf`` None (the run's version is not deployed: whether it is a graph is not known), every other pending
    request of the run is closed."""
    if wf is None:
        for other in tx.requests.pending(run_ids=[request.run_id]):
            if other.id != request.id:
                close_request(tx, other, now=now, by=by, action=action, status=status, **facts)
        return
    if not isinstance(wf, LangGraphWorkflow):
        return
    for name, answer in answers_at(tx, request.run_id, request.checkpoint_seq).get().items():
        if answer["id"] != request.id and answer["status"] == RequestStatus.PENDING.value:
            other = tx.requests.get(answer["id"])
            if other is not None:
                close_request(tx, other, now=now, by=by, action=action, status=status, **facts)


def pending_siblings(tx: Any, wf: Workflow | None, request: SteeringRequest) -> list[SteeringRequest]:
    """The other requests asked at ``request``'s checkpoint that are still pending (a LangGraph super-step's
    other interrupts), oldest first: what the run still waits on once ``request`` is settled. ``[]`` for a
    native workflow (one request at a time)."""
    if not isinstance(wf, LangGraphWorkflow):
        return []
    answers = answers_at(tx, request.run_id, request.checkpoint_seq).get()
    ids = sorted(a["id"] for a in answers.values()
                 if a["id"] != request.id and a["status"] == RequestStatus.PENDING.value)
    return [r for r in (tx.requests.get(i) for i in ids) if r is not None]


def sibling_points(tx: Any, wf: Workflow | None, request: SteeringRequest
                   ) -> list[tuple[SteeringRequest, SteeringPoint]]:
    """``pending_siblings`` with the steering point each waits at (read from their checkpoint once)."""
    siblings = pending_siblings(tx, wf, request)
    if not siblings:
        return []
    loaded = tx.checkpoints.load(request.run_id, request.checkpoint_seq)
    points = wf.points_in(loaded.tree if loaded is not None else None)  # type: ignore[union-attr]
    return [(s, points[s.point]) for s in siblings if s.point in points]


def points_of_run(tx: Any, wf: Workflow | None, run: Run,
                  request: SteeringRequest | None = None) -> list[SteeringPoint] | None:
    """Whose approvers may rewind, retry or cancel a LangGraph run: the steering points of ``request`` (else of
    the run's latest request) and the others asked in the same super-step; when it never asked anyone, the
    point of a plain ``interrupt()`` (``register``'s settings). None for a native workflow (its declared
    points decide)."""
    if not isinstance(wf, LangGraphWorkflow):
        return None
    request = request or tx.requests.latest_for_run(run.id)
    if request is None:
        return [wf.default_point]
    loaded = tx.checkpoints.load(run.id, request.checkpoint_seq)
    return list(wf.points_in(loaded.tree if loaded is not None else None).values()) or [wf.default_point]


def points_asked(wf: Workflow, first: SteeringPoint, tree: Any) -> list[SteeringPoint]:
    """The steering points a run waits at once it reaches ``first``: ``[first]``; for a LangGraph workflow,
    one per pending interrupt of the super-step."""
    if isinstance(wf, LangGraphWorkflow):
        return list(wf.points_in(tree).values()) or [first]
    return [first]


def paused_nodes(wf: Workflow, tree: Any) -> list[str]:
    """The graph nodes whose ``interrupt()`` a LangGraph run now waits on (each once, in the order asked):
    they stopped to ask rather than finished. ``[]`` for a native workflow (a steering point is its own node)."""
    if not isinstance(wf, LangGraphWorkflow) or not isinstance(tree, dict):
        return []
    return list(dict.fromkeys(ask.get("node") or name for name, ask in (tree.get("lg_asks") or {}).items()))


def _converts_nothing(schema: Any) -> bool:
    """Whether LangGraph takes a graph schema's values as they are: anything but a pydantic model (which it
    validates, converting), a ``TypedDict`` first."""
    return not (isinstance(schema, type) and issubclass(schema, BaseModel))


INT64 = (-(2 ** 63), 2 ** 64 - 1)
"""The integers LangGraph's serializer stores (msgpack: 64 bits)."""


def fits(adapter: TypeAdapter[Any], value: Any, *, strict: bool, where: tuple[str, ...] = ()) -> list[str]:
    """Why ``value`` (JSON, as a person sent it) does not fit ``adapter``'s type, one ``loc: message`` each;
    ``[]`` when it does. ``strict``: of the type as it is, without conversion (``"3"`` is no ``int``, ``"yes"``
    no ``bool``, an ISO text no ``datetime``): what a ``TypedDict`` graph holds is what it was given. An integer
    past 64 bits never fits: the graph's serializer cannot store it (its step would fail at every attempt)."""
    try:
        if strict:  # (a lone surrogate in a text: said as every channel says it, before pydantic sees it)
            dumped = json.dumps(value, ensure_ascii=False)
            if not is_text(dumped):
                return [f"{'.'.join(where) or 'the value'} {not_text(dumped)}"]
        big = int64_problem(value, where=where)
        if big is not None:
            return [big]
        adapter.validate_python(value, strict=strict)
    except ValidationError as exc:
        return [f"{'.'.join(str(x) for x in (*where, *e.get('loc', ()))) or 'value'}: {e.get('msg')}"
                for e in exc.errors()]
    except RecursionError:  # (the state's own depth limit says it better, where it applies first)
        return [f"{'.'.join(where) or 'value'}: nested too deeply to be checked"]
    return []


def int64_problem(value: Any, *, where: tuple[str, ...] = ()) -> str | None:
    """Why ``value`` cannot be stored in a graph's checkpoint for its integers: ``ask.q: 99999999999999999999999
    is past the 64-bit integers the graph's checkpoints hold`` (``where``: the path to ``value``); None when
    every integer in it fits ``INT64``."""
    big = _past_int64(value)
    if big is None:
        return None
    path = ".".join((*where, *big[0])) or "value"
    return f"{path}: {big[1]} is past the 64-bit integers the graph's checkpoints hold"


def _past_int64(value: Any) -> tuple[tuple[str, ...], int] | None:
    """The path and value of the first integer in ``value`` outside ``INT64``; None when there is none (walked
    without recursion: a value may be nested as deep as JSON allows)."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            if not INT64[0] <= item <= INT64[1]:
                return path, item
        elif isinstance(item, dict):
            stack.extend(((*path, str(k)), v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend(((*path, str(i)), v) for i, v in reversed(list(enumerate(item))))
    return None


def _forbidding_typeddict(schema: Any) -> Any:
    """``schema`` (a ``TypedDict``) as a ``typing_extensions.TypedDict`` with the same keys, types and required
    keys, whose pydantic validation refuses undeclared keys (``extra="forbid"``)."""
    hints = typing.get_type_hints(schema, include_extras=True)
    required = getattr(schema, "__required_keys__", frozenset())
    fields = {k: typing_extensions.Required[v] if k in required else typing_extensions.NotRequired[v]
              for k, v in hints.items()}
    rebuilt = typing_extensions.TypedDict(schema.__name__, fields)  # type: ignore[operator]
    rebuilt.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    rebuilt.__doc__ = schema.__doc__
    return rebuilt
