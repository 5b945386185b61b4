"""The decisions on the steering requests of one checkpoint, read in one query (a LangGraph run's super-step
asks several at once and resumes with all their answers: ``bot.engine.lgraph``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, bindparam, select

from store import fast
from store.schema import decisions, steering_requests

_r, _d = steering_requests.c, decisions.c
_ANSWERS = (
    select(_r.id, _r.point, _r.status, _d.action, _d.payload, _d.actor_id, _d.actor_name, _d.person, _d.acting_for)
    .select_from(steering_requests.outerjoin(decisions, and_(_d.request_id == _r.id, _d.action == _r.decided_action)))
    .where((_r.run_id == bindparam("run_id")) & (_r.checkpoint_seq == bindparam("seq")))
    .order_by(_r.id, _d.id)
)


def answers_at(tx: Any, run_id: str, checkpoint_seq: int) -> fast.Later[dict[str, dict[str, Any]]]:
    """In transaction ``tx`` (``store.Tx``), per steering point name of the requests asked at checkpoint ``checkpoint_seq`` of ``run_id``: its
    ``id``, ``status`` and, once settled, the decision that settled it (``action``, ``payload``, ``label``: the
    person); the last vote of a quorum stands for it. One statement (pipeline-safe)."""
    res = fast.execute(tx.conn, _ANSWERS, {"run_id": run_id, "seq": checkpoint_seq})

    def read() -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for row in res.rows():
            entry: dict[str, Any] = {"id": row["id"], "status": row["status"]}
            if row["action"] is not None:
                entry.update(action=row["action"], payload=row["payload"] or {}, label=_label(row))
            out[row["point"]] = entry
        return out
    return fast.Later(read)


def _label(row: dict[str, Any]) -> str:
    if row["acting_for"]:  # the person a console operator acted for (as the handoff of a native decision)
        return row["acting_for"]
    return row["actor_name"] or row["person"] or row["actor_id"]

