"""One step of a LangGraph run: one super-step of its graph (``bot.engine.lgraph``).

The step continues the graph's thread (``thread_id`` = the run id) from the graph checkpoint the Hazel
checkpoint points at (``lg_checkpoint``), with, in this order of precedence:

- ``lg_fork`` (a rewind): ``graph.update_state`` on that checkpoint, with the rewind's feedback and edits as
  graph state values (``lg_update``) or none: a new checkpoint after it, so that the nodes that ran from it
  on the abandoned branch run again (their writes stay there), then on;
- ``lg_resume`` (the decisions): ``Command(resume={interrupt_id: value, ...})``;
- no pointer (the first step, or a rewind to the run's start): the run's input (with a rewind's values, written as
  ``update_state`` writes them: ``written``), from the thread's first checkpoint when it has one (a fork);
- else nothing (``None``: the next super-step).

It runs exactly one super-step (``interrupt_after="*"``) so that every graph checkpoint is a Hazel checkpoint,
then reads the thread's newest checkpoint: its pending interrupts become the steering points the run waits at,
else its next node is the next step, else the graph has finished and so has the run.

Every graph checkpoint the step writes carries ``hazel_seq`` (the Hazel checkpoint the step started from) in
its metadata. A step that runs again after its process died (SIGKILL, a lost lease) finds the super-step
its first attempt completed and records it instead of running its nodes again; only a super-step that had
not finished runs again (LangGraph keeps the writes of its nodes that did finish). A step that runs again after
its node raised (a retry, or ``hazel retry`` of the failed run) finds no such super-step and runs it again.
From the run's input (the first step, a rewind to the run's start) LangGraph writes two checkpoints before
the nodes run (the input's, ``source`` "input", and the one after its hidden ``__start__`` node, ``source``
"loop"): they say that the input was taken, not that the nodes finished (``_input_taken``), and a step that
runs again continues from them. After a rewind, the step's fork (``update_state``'s checkpoint, or its copy) is
made once: a step that runs again continues from the fork an earlier attempt made (``_fork_made``), as LangGraph
resumes a thread, so the nodes that finished there keep their writes. The step's lease token goes to the saver
in ``configurable`` (``store.models.LEASE_KEY``, with the tags: ``STEP_KEYS``): a worker that lost its lease in
the middle of a super-step (paused, then taken over) has its graph writes refused (``LeaseLostError``), so it
cannot add a checkpoint beside the one its successor wrote.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from bot.engine.errors import StepContractError, WorkflowDefinitionError
from bot.engine.workflow import StepContext
from store.models import LEASE_KEY, NODES_JOIN, UPDATE_NODE, node_names

_log = logging.getLogger("hazel.langgraph")

MARK = "hazel.steer"
"""Key of an interrupt payload made by ``hazel.langgraph.steer`` (its value: the payload's format, 1)."""
RESERVED_PREFIX = "lg_"
"""Fields of ``GraphRunState``; a steering point's name never starts with it."""
COPY = "__copy__"
"""``update_state``'s ``as_node`` that copies a checkpoint as it is (a fork without values: LangGraph's own)."""
UPDATE_STEP = UPDATE_NODE
"""The step after a rewind with feedback or edits to a graph checkpoint from which no node runs next (the
graph had finished there): ``update_state`` writes the values on the fork, and the graph goes on from there
(nowhere, unless its edges say otherwise), so that the values are not dropped."""
RESUME_WRITE = "__resume__"
"""The channel of a task's pending write that lists the answers its ``interrupt()`` calls took, in order
(LangGraph's ``RESUME``, private since LangGraph 1.0)."""
INTERRUPT_WRITE = "__interrupt__"
"""The channel of a task's pending write that holds the last question(s) its ``interrupt()`` asked (LangGraph's
``INTERRUPT``): answered when the task has an output write besides its control writes (``CONTROL_WRITES``)."""
CONTROL_WRITES = frozenset((RESUME_WRITE, INTERRUPT_WRITE, "__error__", "__error_source_node__"))
"""The channels of a task's pending writes that say what happened to it, not what it wrote (LangGraph's
``CONTROL_WRITES``, ``langgraph.pregel._task_status``): any other write means the task finished."""
SOURCE_INPUT = "input"
SOURCE_LOOP = "loop"
SOURCE_UPDATE = "update"
SOURCE_FORK = "fork"
"""``source`` in the metadata of a graph checkpoint written for a run's input / by a super-step / by
``update_state`` / by ``update_state``'s copy (``COPY``)."""


class GraphRunState(BaseModel):
    """A LangGraph run's Hazel state: a pointer into the graph's checkpoints and what the run waits on.

    ``lg_input``: the run's input (the graph's first input). ``lg_checkpoint``: the graph checkpoint id this
    Hazel checkpoint stands for (None before the first super-step). ``lg_asks``: per steering point name, the
    pending interrupt it asks about (``{"interrupt_id", "node", "point": settings}``); the value it shows is the
    extra field of the same name. ``lg_resume``: the resume values the next step passes to the graph
    (``{interrupt_id: value}``). ``lg_fork``: the next step forks the graph at ``lg_checkpoint`` (a rewind), with
    ``lg_update`` as graph state values (``update_state``; None: a plain copy), and ``lg_reask`` the ids of the
    interrupts pending at that checkpoint, which the fork asks again with the answers their tasks had taken before
    them kept (``_keep_answers``: a node's second ``interrupt()`` is asked again, not its first).
    """

    model_config = ConfigDict(extra="allow")

    lg_input: dict[str, Any] = {}
    lg_checkpoint: str | None = None
    lg_asks: dict[str, dict[str, Any]] = {}
    lg_resume: dict[str, Any] | None = None
    lg_update: dict[str, Any] | None = None
    lg_fork: bool = False
    lg_reask: list[str] = []


def superstep(wf: Any, state: Any, ctx: StepContext) -> Any:
    """Run one super-step of ``wf.graph`` for the run of ``ctx`` from ``state`` (a ``GraphRunState``);
    returns the next ``GraphRunState`` and routes the run with ``ctx.goto`` (a steering point, the next graph
    node, or nothing: the run completes).

    Raises:
        whatever the graph's node raised (the step's retries apply: the super-step runs again).
    """
    from langgraph.types import Command

    graph = _Async(wf.graph) if _is_async(wf.graph) else wf.graph
    thread = {"thread_id": ctx.run_id, "checkpoint_ns": ""}
    fence = {} if ctx._lease is None else {LEASE_KEY: ctx._lease}  # the saver writes only under the run's lease
    meta = {"hazel_run": ctx.run_id, "hazel_seq": ctx.seq}
    latest = graph.get_state({"configurable": thread})
    if state.lg_checkpoint is not None:
        _refuse_lost(wf.graph, ctx, state.lg_checkpoint, latest)
    taken = state.lg_checkpoint is None and _input_taken(wf.graph, latest, ctx.seq)
    done_before = (not taken and _meta(latest).get("hazel_seq") == ctx.seq
                   and _meta(latest).get("source") == SOURCE_LOOP)
    if not done_before:
        inp: Any = None
        config = {"configurable": dict(thread)} if taken else _at(graph, thread, state.lg_checkpoint, latest)
        goes_on = "checkpoint_id" not in config["configurable"]  # (from latest, not a fork of it)
        if state.lg_checkpoint is None:  # the first super-step, or a rewind to the run's start: the input,
            # unless an earlier attempt took it and its nodes did not finish (taken): on from there, not twice
            inp = None if taken else written(wf.graph, state.lg_input, state.lg_update or {}, strict=True)
        elif state.lg_fork:
            goes_on = _fork_made(latest, ctx.seq)
            if goes_on:  # by an earlier attempt (its process died in the super-step after
                # it, or a node raised): not twice; on from it as LangGraph resumes a thread, so that the
                # nodes that finished there keep their writes (a config naming it would replay it: run them again)
                config = {"configurable": dict(thread)}
            elif not state.lg_update and writers_at(wf.graph, config):  # nodes wrote it at once: a copy
                config = graph.update_state(_with(config, fence, meta), None, as_node=COPY)
            else:  # a new checkpoint after the one rewound to (its old nodes' writes stay on the old branch)
                config = graph.update_state(_with(config, fence, meta), state.lg_update or None)
            if state.lg_reask and _keep_answers(wf.graph, ctx.run_id, state, _with(config, fence, meta)):
                config = {"configurable": dict(thread)}  # (naming the fork would replay it: answers dropped)
        elif state.lg_resume:
            resume = _not_taken(wf, ctx, state, latest)
            # (none left: an earlier attempt's tasks took every answer, then raised: on as LangGraph goes on)
            inp = Command(resume=resume) if resume else None
        if goes_on:
            _warn_routes_lost(ctx, latest)
        try:
            for _ in graph.stream(inp, _with(config, fence, meta), stream_mode="updates", interrupt_after="*",
                                 durability="sync"):
                pass
        except WorkflowDefinitionError as exc:  # an invalid steer() in a node: the same every time (s32 F11: each
            raise StepContractError(exc.message) from None  # retry ran the node's side effects again)
        except TypeError as exc:  # the checkpointer's serializer: the same every time, so not retried (s32 F3:
            if "serializable" not in str(exc):  # three tries, each running the node again, then LangGraph's words)
                raise
            raise StepContractError(
                f"the graph wrote a value its checkpointer cannot store ({exc}): an integer past 64 bits, or an "
                "object that is not plain data, in a node's update or an interrupt()'s value; convert it (a string, "
                "a dict) in the node") from None
        latest = graph.get_state({"configurable": thread})
    pointer = latest.config["configurable"]["checkpoint_id"]
    asks: dict[str, dict[str, Any]] = {}
    shown: dict[str, Any] = {}
    for task in latest.tasks:
        for interrupt in task.interrupts:
            name, value, settings = _ask(wf, task.name, interrupt.value)
            try:
                wf.check_ask(name, settings)  # invalid settings: the step fails, saying why, at once (the same
            except WorkflowDefinitionError as exc:  # every time: a retry only ran the node again, s32 F11)
                raise StepContractError(exc.message) from None
            name = _point_name(name)
            base, n = name, 2
            while name in asks:  # two interrupts of one node in one super-step (Send): review, review.2
                name, n = f"{base}.{n}", n + 1
            asks[name] = {"interrupt_id": interrupt.id, "node": task.name, "point": settings}
            shown[name] = value
    if asks:  # the points it waits at, all of them (the runner opens a request for each: lgraph.points_asked)
        ctx.goto(nodes_label(list(asks)))
    elif latest.next:  # every node of the next super-step
        ctx.goto(nodes_label(list(latest.next)))
    return GraphRunState(lg_input=state.lg_input, lg_checkpoint=pointer, lg_asks=asks, **shown)


def _warn_routes_lost(ctx: StepContext, latest: Any) -> None:
    """Log a warning when the step goes on from ``latest`` (the thread's newest snapshot, read already: no read
    here) where a node finished and then raised (its task has an error and a result: its conditional edge's
    router raised, or LangGraph's validation of the state after it; s34 F7). LangGraph keeps the node's writes
    and runs neither it nor its router again, so the nodes the router would have chosen do not run: the graph
    goes on without them, and completes if nothing else is scheduled."""
    failed = sorted({task.name for task in (getattr(latest, "tasks", ()) or ())
                     if getattr(task, "error", None) and getattr(task, "result", None) is not None})
    if failed:
        _log.warning(
            "run %s #%s: going on after %s finished and then raised (a conditional edge's router, or the "
            "state's validation): as LangGraph's invoke(None), their writes are kept and neither they nor their "
            "routers run again, so the nodes those routers would have chosen do not run (rewind the run to a "
            "checkpoint before them to run them and their routers again)", ctx.run_id, ctx.seq, ", ".join(failed))


def _refuse_lost(graph: Any, ctx: StepContext, pointer: str, latest: Any) -> None:
    """Raise ``StepContractError`` (the run fails at once, not retried) when the graph checkpoint ``pointer``
    the run goes on from is not in the graph's checkpointer any more: LangGraph would start the thread again
    from its beginning, running nodes that ran already, with no input (a fresh-user finding, s27 F1: a graph
    compiled with its own ``InMemorySaver``, resumed by another process). Free when ``pointer`` is the thread's
    newest checkpoint (``latest``, read already); one ``get_tuple`` otherwise."""
    newest = (getattr(latest, "config", None) or {}).get("configurable", {}).get("checkpoint_id")
    if newest == pointer or (newest is not None and has_checkpoint(graph, ctx.run_id, pointer)):
        return
    raise StepContractError(
        f"the graph checkpoint run {ctx.run_id} goes on from ({pointer}) is not in its graph's checkpointer any "
        f"more (a checkpointer that keeps threads in one process, such as InMemorySaver, loses them to other "
        f"processes and restarts; HazelSaver.delete_thread and prune delete them): LangGraph would start the "
        f"graph again from its beginning; rewind the run to checkpoint #0 to run it again from its input")


def _not_taken(wf: Any, ctx: StepContext, state: Any, latest: Any) -> dict[str, Any]:
    """The answers of ``state.lg_resume`` (``{interrupt id: value}``) that the step still sends the graph
    (``Command(resume=...)``): those no task has taken yet. An earlier attempt of the step may have run a node
    that took its answer (``interrupt()`` returned it, and LangGraph keeps it in the task's ``RESUME`` write)
    and then raised, in the node or after it (its conditional-edge router, LangGraph's validation of the state:
    the task then has an error and the node's writes, and no interrupt waiting, s33 F2). LangGraph goes on from
    there with the answers it keeps (``invoke(None)``); sent again, an answer would be appended to the task's
    answers, and a node's next ``interrupt()`` would return it as its own. ``{}``: every answer was taken.

    Free on a first attempt (every answer's interrupt waits, no task has an error: ``latest`` says so); else
    one read of the checkpoint's pending writes (``_taken``).

    Raises:
        StepContractError: an answer no task took and none waits on (``_refuse_unheard``).
    """
    resume = dict(state.lg_resume)
    config = (getattr(latest, "config", None) or {}).get("configurable", {})
    if config.get("checkpoint_id") != state.lg_checkpoint:
        return resume  # (another checkpoint: nothing read here to tell by)
    tasks = list(getattr(latest, "tasks", ()) or ())
    waiting = {i.id for task in tasks for i in getattr(task, "interrupts", ())}
    if set(resume) <= waiting and not any(getattr(task, "error", None) for task in tasks):
        return resume
    taken = _taken(wf.graph, latest, tasks)
    left = {iid: value for iid, value in resume.items() if iid not in taken}
    _refuse_unheard(wf, ctx, set(left) - waiting)
    return left


def _taken(graph: Any, latest: Any, tasks: list[Any]) -> set[str]:
    """The ids of the interrupts whose answers the tasks of ``latest`` (the thread's newest snapshot) took
    already: a task's ``RESUME`` pending write lists its answers in the order its ``interrupt()`` calls took
    them, and its n-th interrupt's id is LangGraph's hash of the task's namespace and n (``_interrupt_id``).
    A task that finished (it has an output write: the node returned, then its router raised) took the answer to
    the last question it asked too (its ``INTERRUPT`` write), which its ``RESUME`` write may not list: saved with
    the node's output, the longer list does not replace the one saved when it asked (s34 F6: a node's second
    answer). One ``get_tuple``; ``set()`` when the checkpoint is not found.

    Raises:
        whatever the graph's checkpointer raises.
    """
    saved = _saved(graph, latest.config)
    answers = _answers(saved)
    finished: set[str] = set()
    asked: dict[str, set[str]] = {}
    for task_id, channel, value in (getattr(saved, "pending_writes", None) or ()):
        if channel == INTERRUPT_WRITE:
            asked.setdefault(task_id, set()).update(
                i.id for i in (value if isinstance(value, (list, tuple)) else [value]) if hasattr(i, "id"))
        elif channel not in CONTROL_WRITES:
            finished.add(task_id)
    return {_interrupt_id(f"{task.name}:{task.id}", n)
            for task in tasks for n in range(len(answers.get(task.id, ())))} | {
        iid for task in tasks if task.id in finished for iid in asked.get(task.id, ())}


def _keep_answers(graph: Any, run_id: str, state: Any, fork: dict[str, Any]) -> bool:
    """On a rewind's fork (``fork``: its config, with the step's lease and tags), give each task that asked one
    of ``state.lg_reask`` (interrupt ids pending at graph checkpoint ``state.lg_checkpoint``, the checkpoint
    rewound to) the answers it had taken before that question, as LangGraph keeps them: the task's ``RESUME``
    pending write (s33 F7). The node then runs again from its start, its earlier ``interrupt()`` calls return
    those answers, and the one pending there asks again; without them it asked its first question again and the
    earlier answers were lost. A task of the fork is its old one when it has the same node and path (task ids
    are the checkpoint's). Nothing for a question asked first (no answer before it), nor for a fork task that has
    answers already (an earlier attempt of the step wrote them). Returns whether any were written: the step then
    goes on from the thread's newest checkpoint (the fork), as a config naming it replays it, dropping them.

    A few reads (the old and the fork's checkpoints and their tasks), only on a rewind to a checkpoint where a
    node had asked after answers.

    Raises:
        whatever the graph's checkpointer raises.
    """
    g = _Async(graph) if _is_async(graph) else graph
    old = {"configurable": {"thread_id": run_id, "checkpoint_ns": "", "checkpoint_id": state.lg_checkpoint}}
    taken = _answers(_saved(graph, old))
    if not taken:
        return False
    keep: dict[tuple[str, tuple[Any, ...]], list[Any]] = {}
    for task in g.get_state(old).tasks:
        answers = taken.get(task.id, [])
        for n in range(1, len(answers) + 1):  # (the first question, n = 0, keeps nothing)
            if _interrupt_id(f"{task.name}:{task.id}", n) in state.lg_reask:
                keep[(task.name, tuple(task.path))] = answers[:n]
    if not keep:
        return False
    made = _answers(_saved(graph, fork))
    saver = graph.checkpointer
    wrote = False
    for task in g.get_state(fork).tasks:
        answers = keep.get((task.name, tuple(task.path)))
        if answers is None or task.id in made:
            continue
        if _is_async(graph):
            _run(saver.aput_writes(fork, [(RESUME_WRITE, answers)], task.id))
        else:
            saver.put_writes(fork, [(RESUME_WRITE, answers)], task.id)
        wrote = True
    return wrote or bool(made)


def _answers(saved: Any) -> dict[str, list[Any]]:
    """Per task id, the answers its ``interrupt()`` calls took (its ``RESUME`` pending write) at the checkpoint
    of ``saved`` (a ``CheckpointTuple``; None: ``{}``)."""
    out: dict[str, list[Any]] = {}
    for task_id, channel, value in (getattr(saved, "pending_writes", None) or ()):
        if channel == RESUME_WRITE:
            out[task_id] = list(value) if isinstance(value, list) else [value]
    return out


def _interrupt_id(ns: str, answered: int) -> str:
    """The id LangGraph gives the interrupt a task of namespace ``ns`` (``"node:task id"``) asks after
    ``answered`` answers (``langgraph.types._interrupt_id``, private: its formula where it is missing)."""
    try:
        from langgraph.types import _interrupt_id as lg_interrupt_id
    except ImportError:
        from xxhash import xxh3_128_hexdigest

        return xxh3_128_hexdigest((f"{ns}|{answered}" if answered else ns).encode())
    return lg_interrupt_id(ns, answered)


def _refuse_unheard(wf: Any, ctx: StepContext, unheard: set[str]) -> None:
    """Raise ``StepContractError`` (the run fails at once, not retried) when answers the run resumes with
    (``unheard``: their interrupt ids) belong to interrupts that no task of the graph waits on at the checkpoint
    it goes on from, nor took (``_not_taken``): their node is not in the graph deployed any more (renamed or
    removed under the same version). LangGraph then ran nothing and the run completed as if the answer had been
    taken (a fresh-user finding, s32 F1). Nothing when ``unheard`` is empty."""
    if not unheard:
        return
    raise StepContractError(
        f"the answer run {ctx.run_id} resumes with reaches no node: the graph deployed as {wf.label} has no task "
        "waiting on it (the node that asked renamed or removed under the same version?); deploy the graph the run "
        "was written with, or rewind the run, or cancel it")


def _with(config: dict[str, Any], fence: dict[str, str], meta: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the step's lease token (``fence``) and tags (``meta``) in ``configurable``
    (``store.models.STEP_KEYS``: the saver keeps them on the configs it reads for it, so that ``update_state``'s
    copy is fenced and tagged too) and ``meta`` as its metadata."""
    return {**config, "configurable": {**config["configurable"], **fence, **meta}, "metadata": meta}


JOIN = NODES_JOIN
"""Between the names of the nodes of one super-step in a checkpoint's step or next step (``draft + legal``):
``store.models.NODES_JOIN``."""
MAX_LABEL = 200
"""The longest step name a checkpoint stores (``store.schema``: ``step``, ``next_step``)."""


def written(graph: Any, values: dict[str, Any], update: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """``values`` with ``update`` written as ``graph.update_state`` writes it: a channel with a reducer
    (``Annotated[list, operator.add]``, ``add_messages``: LangGraph's ``BinaryOperatorAggregate``) combines its
    value with the new one, any other channel takes the new value. A rewind to the run's start hands the graph
    its input so written (a reducer channel's edit is added to the input's value, as at any other checkpoint);
    a view shows a fork's values so. ``strict``: a reducer that raises raises (else, for a view, the channel
    shows the new value as it is)."""
    channels = getattr(graph, "channels", None) or {}
    out = dict(values)
    for key, value in update.items():
        reducer = getattr(channels.get(key), "operator", None)
        if reducer is not None and key in out:
            try:
                out[key] = reducer(out[key], value)
                continue
            except Exception:  # noqa: BLE001
                if strict:
                    raise
        out[key] = value
    return out


def nodes_label(names: list[str]) -> str:
    """The step name of a super-step that runs ``names`` (or of the steering points a run waits at after it),
    each once, in order, joined by ``JOIN``: ``"draft + legal"``; one name is itself. Cut to ``MAX_LABEL``
    characters (ending ``…``) when longer, so that it fits the checkpoint's column."""
    label = JOIN.join(dict.fromkeys(names))
    return label if len(label) <= MAX_LABEL else label[:MAX_LABEL - 1] + "…"


def label_names(label: str | None) -> list[str]:
    """The node names of a step name made by ``nodes_label`` (``"draft + legal"`` -> ``["draft", "legal"]``);
    a plain name: ``[name]``; None: ``[]`` (``store.models.node_names``)."""
    return node_names(label)


def writers_at(graph: Any, config: dict[str, Any]) -> list[str]:
    """The nodes that wrote the graph checkpoint ``config`` names (``_at``) in one super-step, by name, when
    they are several: ``graph.update_state`` there needs ``as_node`` (LangGraph: "Ambiguous update"), so values
    cannot be written on a fork there, only a copy made (``COPY``). ``[]`` when LangGraph can tell which node
    an update comes from (one node wrote it, or it is the input's), or the checkpoint is not found."""
    saved = _saved(graph, config)
    if saved is None:
        return []
    seen = saved.checkpoint.get("versions_seen") or {}
    infer = getattr(graph, "_infer_as_node", None)  # LangGraph's own choice, when it offers it
    if infer is not None and infer(seen) is not None:
        return []
    try:
        from langgraph.pregel._checkpoint import versions_seen_without_bumps
        seen = versions_seen_without_bumps(seen)
    except ImportError:  # a LangGraph without snapshot bumps
        pass
    nodes = getattr(graph, "nodes", {}) or {}
    last = sorted((v, n) for n, by in seen.items() if n in nodes for v in by.values())
    tied = sorted({n for v, n in last if v == last[-1][0]}) if last else []
    if infer is not None:  # LangGraph found it ambiguous
        return tied or ["(none)"]
    ambiguous = len(nodes) > 1 and len(last) > 1 and last[-1][0] == last[-2][0]  # as LangGraph 1.x decides
    return tied if ambiguous else []


def graph_values(graph: Any, run_id: str, checkpoint_id: str) -> Any:
    """The channel values of ``graph`` at its checkpoint ``checkpoint_id`` of thread ``run_id`` (LangGraph's
    ``get_state``; a dict for a graph whose state is a mapping), as LangGraph gives them (not yet JSON);
    None when the thread has no such checkpoint.

    Raises:
        whatever the graph's checkpointer raises.
    """
    g = _Async(graph) if _is_async(graph) else graph
    snapshot = g.get_state({"configurable": {"thread_id": run_id, "checkpoint_ns": "",
                                             "checkpoint_id": checkpoint_id}})
    if snapshot is None or getattr(snapshot, "created_at", None) is None:  # LangGraph's empty snapshot
        return None
    return snapshot.values


def _ask(wf: Any, node: str, value: Any) -> tuple[str, Any, dict[str, Any]]:
    """``(steering point name, value shown, its settings)`` of one interrupt's payload."""
    settings = dict(wf.point_defaults)
    if isinstance(value, dict) and value.get(MARK) == 1:
        settings.update(value.get("point") or {})
        settings.setdefault("title", node.replace("_", " ").capitalize())
        return str(value.get("name") or node), value.get("show"), settings
    settings.setdefault("title", node.replace("_", " ").capitalize())
    return node, value, settings


def _point_name(raw: str) -> str:
    """A steering point name from a node's (or ``steer(name=...)``): letters, digits, ``_ . -``, at most 100
    characters, starting with a letter or ``_``, never ``lg_…`` (``GraphRunState``'s own fields) nor a name of
    Hazel's or LangGraph's own (``__end__``, ``__update__``, any ``__…__``: ``steer(name=END)`` passed the point
    with nobody asked, the run completing, s32 F11): such a name is asked as ``ask_…``."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", raw.strip())[:100] or "interrupt"
    if not (name[0].isalpha() or name[0] == "_"):
        name = ("_" + name)[:100]
    reserved = name.startswith(RESERVED_PREFIX) or (len(name) > 4 and name.startswith("__") and name.endswith("__"))
    return "ask_" + name[:96] if reserved else name


def _is_async(graph: Any) -> bool:
    """True when a node of ``graph`` is an ``async def`` only (LangGraph runs it through its async API)."""
    nodes = getattr(getattr(graph, "builder", None), "nodes", {}) or {}
    return any(getattr(n.runnable, "func", True) is None and getattr(n.runnable, "afunc", None) is not None
               for n in nodes.values())


def _run(coro: Any) -> Any:
    """``coro`` run to its end on an event loop of its own: in this thread when it has none (a worker thread),
    else in a short-lived thread (a caller that already runs a loop here: an async application, a test harness),
    where ``asyncio.run`` would refuse."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor  # (and queue): only inside a running event loop

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hazel-lg-async") as pool:
        return pool.submit(asyncio.run, coro).result()


class _Async:
    """The graph calls a step makes, through LangGraph's async API (an event loop per call: ``_run``)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def get_state(self, config: Any) -> Any:
        return _run(self.graph.aget_state(config))

    def update_state(self, config: Any, values: Any, as_node: str | None = None) -> Any:
        return _run(self.graph.aupdate_state(config, values, as_node=as_node))

    def get_state_history(self, config: Any) -> list[Any]:
        async def collect() -> list[Any]:
            return [s async for s in self.graph.aget_state_history(config)]
        return _run(collect())

    def stream(self, inp: Any, config: Any, **kwargs: Any) -> list[Any]:
        async def collect() -> list[Any]:
            return [chunk async for chunk in self.graph.astream(inp, config, **kwargs)]
        return _run(collect())


def _meta(snapshot: Any) -> dict[str, Any]:
    return dict(getattr(snapshot, "metadata", None) or {})


def has_checkpoint(graph: Any, run_id: str, checkpoint_id: str) -> bool:
    """Whether the graph's checkpointer still holds checkpoint ``checkpoint_id`` of thread ``run_id`` (one
    ``get_tuple``); True when the graph has no checkpointer of its own (nothing to ask).

    Raises:
        whatever the graph's checkpointer raises.
    """
    if getattr(graph, "checkpointer", None) in (None, False, True):
        return True
    return _saved(graph, {"configurable": {"thread_id": run_id, "checkpoint_ns": "",
                                           "checkpoint_id": checkpoint_id}}) is not None


def _saved(graph: Any, config: dict[str, Any]) -> Any:
    """The checkpointer's ``CheckpointTuple`` of the graph checkpoint ``config`` names (``get_tuple``, or
    ``aget_tuple`` for an async graph); None when it has none, or the graph has no checkpointer of its own.

    Raises:
        whatever the graph's checkpointer raises.
    """
    saver = getattr(graph, "checkpointer", None)
    if saver in (None, False, True):
        return None
    return _run(saver.aget_tuple(config)) if _is_async(graph) else saver.get_tuple(config)


def _fork_made(latest: Any, seq: int) -> bool:
    """Whether ``latest`` (the thread's newest snapshot) is the fork an earlier attempt of the rewind's step from
    Hazel checkpoint ``seq`` made and whose super-step did not finish: ``update_state``'s checkpoint (``source``
    "update"), or its copy of a checkpoint several nodes wrote (``source`` "fork"), tagged ``hazel_seq`` =
    ``seq``. A fork made by another step (an earlier rewind to the same checkpoint) is not this one."""
    meta = _meta(latest)
    return meta.get("hazel_seq") == seq and meta.get("source") in (SOURCE_UPDATE, SOURCE_FORK)


def _input_taken(graph: Any, latest: Any, seq: int) -> bool:
    """Whether ``latest`` (the thread's newest snapshot) is where an earlier attempt of the step from Hazel
    checkpoint ``seq`` left the run's input before its nodes finished (they raised, or the process died):

    - LangGraph's checkpoint of the input (``source`` "input", ``hazel_seq`` = ``seq``), or
    - the checkpoint after the input's own super-step (its hidden ``__start__`` node: ``source`` "loop",
      ``hazel_seq`` = ``seq``, whose parent is that input checkpoint), written before the first nodes run.

    The step then continues from there with no input (LangGraph runs the nodes that did not finish and keeps
    the writes of those that did), rather than take the second one for its finished super-step (the node that
    raised was recorded as run, and got ``max_attempts`` more attempts) or send the input again. One read of
    the parent checkpoint, only when ``latest`` is a "loop" checkpoint of this step (a step that runs again).

    Raises:
        whatever the graph's checkpointer raises.
    """
    meta = _meta(latest)
    if meta.get("hazel_seq") != seq:
        return False
    if meta.get("source") == SOURCE_INPUT:
        return True
    parent = getattr(latest, "parent_config", None)
    if meta.get("source") != SOURCE_LOOP or not parent:
        return False
    saved = _saved(graph, parent)
    before = dict(getattr(saved, "metadata", None) or {})
    return before.get("source") == SOURCE_INPUT and before.get("hazel_seq") == seq


def _at(graph: Any, thread: dict[str, str], checkpoint_id: str | None, latest: Any) -> dict[str, Any]:
    """The config to continue from graph checkpoint ``checkpoint_id``: the bare thread when it is the thread's
    newest (so that LangGraph resumes it, keeping the writes of the nodes that finished there before a crash; a
    config naming a checkpoint replays it, running them again), else that checkpoint (the step forks there).
    With none, the thread's first checkpoint when it has any (a rewind to the run's start forks there), else
    the bare thread (a first run)."""
    newest = (getattr(latest, "config", None) or {}).get("configurable", {}).get("checkpoint_id")
    if checkpoint_id is not None and checkpoint_id == newest:
        return {"configurable": dict(thread)}
    if checkpoint_id is not None:
        return {"configurable": {**thread, "checkpoint_id": checkpoint_id}}
    first = None
    for snapshot in graph.get_state_history({"configurable": thread}):
        first = snapshot
    if first is None:
        return {"configurable": dict(thread)}
    return first.config
