"""Per steering point Jira settings: issue type and the statuses that mean approve, reject, done, rejected.

A point sets them as options of ``wf.steer`` (``jira_issue_type="Story"``, ``jira_approve_status="Approved"``,
``jira_reject_status="Rejected"``, ``jira_done_status="Done"``, ``jira_rejected_status="Won't do"``,
``jira_assignee="<account id or user name>"``); what it leaves out comes from the settings (``JIRA_*``).
Statuses are compared case-insensitively by name, as Jira shows them (``changelog.items[].toString``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

PREFIX = "jira_"


@dataclass(frozen=True)
class JiraOptions:
    """Jira settings of one steering point. ``None`` (or an empty string) turns a status off.

    Attributes:
        issue_type: issue type name of created issues (``Task``, ``Story``…; it must exist in the project).
        approve_status: a person moving the issue to this status approves the request.
        reject_status: a person moving the issue to this status rejects it (the transition's comment, if any,
            is the reason).
        done_status: Hazel moves the issue here once its request is approved or edited, and when the run
            completes.
        rejected_status: Hazel moves the issue here when its request is rejected or the run ends rejected.
        assignee: assign created issues to this account id (Cloud) or user name (Server); None: unassigned.
    """

    issue_type: str = "Task"
    approve_status: str | None = "Approved"
    reject_status: str | None = "Rejected"
    done_status: str | None = "Done"
    rejected_status: str | None = None
    assignee: str | None = None

    def merged(self, options: dict[str, Any] | None) -> "JiraOptions":
        """These defaults overridden by a steering point's ``jira_*`` options (other keys are ignored)."""
        changes: dict[str, Any] = {}
        for f in fields(self):
            key = PREFIX + f.name
            if options and key in options:
                value = options[key]
                changes[f.name] = str(value).strip() if value not in (None, "") else None
        merged = replace(self, **changes)
        return merged if merged.issue_type else replace(merged, issue_type="Task")

    @property
    def closed_statuses(self) -> frozenset[str]:
        """Statuses after which an issue is finished: it is not reused for a new request (casefolded)."""
        return frozenset(s.casefold() for s in (self.approve_status, self.reject_status, self.done_status,
                                                self.rejected_status) if s)

    def as_ref(self) -> dict[str, Any]:
        """The statuses, kept in the request's ``message_ref`` so that later deliveries (progress reports carry
        no options) know them."""
        return {"done_status": self.done_status, "rejected_status": self.rejected_status}


OPTION_NAMES = frozenset(PREFIX + f.name for f in fields(JiraOptions))
"""The steering point options the Jira channel reads: ``jira_issue_type``, ``jira_approve_status``, …"""


def same_status(a: str | None, b: str | None) -> bool:
    """Jira status names are case-insensitive."""
    return bool(a) and bool(b) and a.strip().casefold() == b.strip().casefold()  # type: ignore[union-attr]
