"""``steer()``: a LangGraph ``interrupt()`` that Hazel turns into a steering request with these settings.

::

    from hazel import Approvers
    from hazel.langgraph import steer

    def review(state: ReviewState) -> dict:
        answer = steer(title="Approve the draft", show=state["draft"], channel="slack:#reviews",
                       approvers=Approvers(slack_users=["U0000000001"]), approvals_required=1,
                       remind_after_sec=4 * 3600, timeout_sec=72 * 3600, on_timeout="reject")
        if answer["action"] == "edit":
            return {"draft": answer["value"]}
        ...

Called inside a node of a graph registered with ``hazel.langgraph.register``, it pauses the graph (LangGraph's
``interrupt``: the node runs again from its start when the run resumes, and ``steer`` then returns) and the run
waits at a Hazel steering request on ``channel`` showing ``show``. What it returns is the SME's decision
(``bot.engine.lgraph.resume_value``)::

    {"action": "approve", "by": "Priya"}
    {"action": "edit", "value": <the new value, JSON>, "by": "Priya"}
    {"action": "reject", "reason": "…", "by": "Priya"}
    {"action": "feedback", "text": "…", "by": "Priya"}

A rewind does not return here: it forks the graph at an earlier checkpoint (``hazel rewind``).
"""

from __future__ import annotations

from typing import Any, Sequence

from bot.engine.lgraph import POINT_SETTINGS, check_point, point_from
from bot.engine.lgraph_run import MARK
from bot.engine.workflow import Approvers, Role, TimeoutAction


def steer(*, title: str | None = None, show: Any = None, name: str | None = None,
          actions: Sequence[str] | None = None, approvers: Approvers | None = None, channel: str | None = None,
          approvals_required: int | None = None, allow_self_approval: bool | None = None,
          permissions: dict[str, Role] | None = None, notify_approvers: bool | None = None,
          remind_after_sec: float | None = None, remind_every_sec: float | None = None,
          escalate_after_sec: float | None = None, escalate_to: Approvers | None = None,
          escalate_channel: str | None = None, timeout_sec: float | None = None,
          on_timeout: TimeoutAction | None = None, **options: Any) -> dict[str, Any]:
    """Ask an SME through Hazel and return their decision (see the module docstring).

    Args:
        title: what the SME is asked (default: the node's name, humanised).
        show: the value the SME sees and may edit (JSON: text, numbers, lists, objects).
        name: the steering point's name (default: the node's name); two ``steer`` calls pending in one
            super-step need different names (else the second is named ``NAME.2``).
        actions, approvers, channel, approvals_required, allow_self_approval, permissions, notify_approvers,
        remind_after_sec, remind_every_sec, escalate_after_sec, escalate_to, escalate_channel, timeout_sec,
        on_timeout, options: as for ``Workflow.steer``; unset ones take the defaults given to ``register``
        (console, anyone, approve/edit/reject/feedback/rewind).

    Raises:
        WorkflowDefinitionError: invalid settings (raised in the node: the step fails, with the message, which
            names the steering point: ``name``, else the node).
        langgraph.errors.GraphInterrupt: how LangGraph pauses the node (do not catch it).
    """
    from langgraph.types import interrupt

    given = dict(title=title, actions=list(actions) if actions is not None else None, approvers=approvers,
                 channel=channel, approvals_required=approvals_required, allow_self_approval=allow_self_approval,
                 permissions=permissions, notify_approvers=notify_approvers, remind_after_sec=remind_after_sec,
                 remind_every_sec=remind_every_sec, escalate_after_sec=escalate_after_sec, escalate_to=escalate_to,
                 escalate_channel=escalate_channel, timeout_sec=timeout_sec, on_timeout=on_timeout,
                 options=options or None)
    settings = {k: _plain(v) for k, v in given.items() if v is not None and k in POINT_SETTINGS}
    # invalid settings fail here, in the node, with a clear message naming the point (the node, by default)
    check_point(point_from(name or _node() or "steer", settings))
    return interrupt({MARK: 1, "name": name, "show": show, "point": settings})


def _node() -> str | None:
    """The name of the graph node ``steer`` is called in (LangGraph's run config), None outside a graph run."""
    try:
        from langgraph.config import get_config

        node = (get_config().get("metadata") or {}).get("langgraph_node")
    except (ImportError, RuntimeError):
        return None
    return node if isinstance(node, str) and node else None


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, Approvers) else value
