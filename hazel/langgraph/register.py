"""``register()``: a compiled LangGraph graph as a Hazel workflow, in one line.

In a module named by ``HAZEL_WORKFLOWS``::

    from hazel.langgraph import register

    graph = builder.compile()                      # or compile(checkpointer=HazelSaver(...)) / from_conn_string
    register(graph, name="langgraph-review", version=1)

Then ``hazel run langgraph-review --input '{"topic": "…"}'``, ``POST /api/runs`` and ``/hazel start`` start it
as any workflow: the run is the graph's thread (``thread_id`` = the run id), executed one super-step per step by
Hazel's workers, and each ``interrupt()`` / ``steer()`` it reaches is a Hazel steering request
(``bot.engine.lgraph``). A graph compiled without a checkpointer gets a ``HazelSaver`` on Hazel's own database
when Hazel loads it.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

from bot.engine.lgraph import LangGraphWorkflow
from bot.engine.workflow import Approvers, Role, TimeoutAction


def register(graph: Any, *, name: str, version: int = 1, description: str = "", starters: Approvers | None = None,
             title: str | None = None, actions: Sequence[str] | None = None, approvers: Approvers | None = None,
             channel: str | None = None, approvals_required: int | None = None,
             allow_self_approval: bool | None = None, permissions: dict[str, Role] | None = None,
             remind_after_sec: float | None = None, remind_every_sec: float | None = None,
             escalate_after_sec: float | None = None, escalate_to: Approvers | None = None,
             escalate_channel: str | None = None, timeout_sec: float | None = None,
             on_timeout: TimeoutAction | None = None, feedback_key: str = "feedback", max_attempts: int = 3,
             backoff_sec: float = 1.0, module: str | None = None) -> LangGraphWorkflow:
    """Register ``graph`` (a compiled LangGraph graph) as workflow ``name`` at ``version`` with the module
    that calls it (Hazel's registry finds it when it loads the module named by ``HAZEL_WORKFLOWS``).

    Args:
        name, version, description, starters: as for ``hazel.Workflow`` (a run pins its version; bump it when
            the graph changes in a way waiting runs must not meet).
        title, actions, approvers, channel, approvals_required, …, on_timeout: the steering point of a plain
            ``interrupt(value)``, and the defaults of ``steer()``'s (as for ``Workflow.steer``).
        feedback_key: the graph state key a rewind's feedback text is written to, on the fork.
        max_attempts, backoff_sec: a super-step whose node raised runs again this many times in all.
        module: the module to register with (default: the caller's).

    Returns the workflow (assigning it is optional).

    Raises:
        WorkflowDefinitionError: invalid settings.
    """
    given = dict(title=title, actions=list(actions) if actions is not None else None, approvers=approvers,
                 channel=channel, approvals_required=approvals_required, allow_self_approval=allow_self_approval,
                 permissions=permissions, remind_after_sec=remind_after_sec, remind_every_sec=remind_every_sec,
                 escalate_after_sec=escalate_after_sec, escalate_to=escalate_to, escalate_channel=escalate_channel,
                 timeout_sec=timeout_sec, on_timeout=on_timeout)
    defaults = {k: v.model_dump(mode="json") if isinstance(v, Approvers) else v
                for k, v in given.items() if v is not None}
    wf = LangGraphWorkflow(graph, name=name, version=version, description=description, starters=starters,
                           point_defaults=defaults, feedback_key=feedback_key, max_attempts=max_attempts,
                           backoff_sec=backoff_sec, saver_for=_hazel_saver)
    caller = sys.modules.get(module or sys._getframe(1).f_globals.get("__name__", ""))
    if caller is not None:
        found = caller.__dict__.setdefault("__hazel_workflows__", [])
        found[:] = [w for w in found if (w.name, w.version) != (wf.name, wf.version)] + [wf]
    return wf


def _hazel_saver(store: Any) -> Any:
    from hazel.langgraph.saver import HazelSaver

    return HazelSaver(store)
