"""Request views and decisions for Slack rendering tests (plain ``store.models`` records, no database)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from store.models import (
    Action,
    Approvers,
    CheckpointInfo,
    Decision,
    RequestStatus,
    RequestView,
    RewindChoices,
    Run,
    RunStatus,
    SteeringRequest,
)

T0 = datetime(2026, 11, 29, 14, 5, tzinfo=timezone.utc)


def make_view(*, shown: Any = "# Plan\n\n1. expand\n2. backfill", show: str | None = "plan",
              actions: tuple[str, ...] = ("approve", "edit", "reject", "feedback", "rewind"),
              status: RequestStatus = RequestStatus.PENDING, decided_action: str | None = None,
              decisions: tuple[Decision, ...] = (), approvals_required: int = 1, approvals: int = 0,
              message_ref: dict | None = None, approvers: Approvers | None = None, notify: bool = False,
              channel: str = "slack:#migrations", request_id: int = 7, **extra: Any) -> RequestView:
    run = Run(id="abcdef123456", workflow="migration-plan", workflow_version=1, status=RunStatus.WAITING,
              head_seq=1, last_seq=1, branch=0, started_by="U0000000009", started_via="slack", created_at=T0,
              updated_at=T0)
    request = SteeringRequest(
        id=request_id, run_id=run.id, checkpoint_seq=1, point="review_plan", title="Approve the migration plan",
        channel=channel, status=status, approvals_required=approvals_required, approvals=approvals,
        created_at=T0, due_at=T0 + timedelta(hours=4),
        decided_at=T0 + timedelta(minutes=3) if status is not RequestStatus.PENDING else None,
        decided_by=decisions[-1].actor_name if decisions and status is not RequestStatus.PENDING else None,
        decided_action=decided_action, message_ref=message_ref)
    checkpoints = tuple(CheckpointInfo(run_id=run.id, seq=s, parent_seq=s - 1 if s else None, branch=0,
                                       step=step, next_step=nxt, workflow_version=1, created_at=T0,
                                       is_snapshot=s == 0, stored_bytes=10)
                        for s, step, nxt in ((1, "draft_plan", "review_plan"), (0, "__start__", "draft_plan")))
    if "rewind" in actions and "rewind" not in extra:  # (what the engine offers: every one, newest first)
        extra["rewind"] = RewindChoices(checkpoints=checkpoints, total=len(checkpoints))
    return RequestView(request=request, run=run, workflow="migration-plan", workflow_version=1,
                       point="review_plan", title=request.title, show=show, shown_value=shown, actions=actions,
                       approvers=approvers or Approvers(slack_users=("U0000000001",),
                                                        slack_usergroups=("S0000000001",)),
                       notify_approvers=notify, decisions=decisions, checkpoints=checkpoints, **extra)


def decision(action: str, *, actor_id: str = "U0000000001", name: str = "priya", payload: dict | None = None,
             decision_id: int = 1) -> Decision:
    return Decision(id=decision_id, run_id="abcdef123456", request_id=7, action=Action(action), actor_id=actor_id,
                    actor_name=name, channel="slack", payload=payload or {},
                    created_at=T0 + timedelta(minutes=3))
