"""Errors Hazel raises to callers (CLI, Slack, Jira, REST). Each message is written for the person acting.

    HazelError (Exception)
    ├── WorkflowDefinitionError (ValueError): a workflow fails validation at load
    ├── UnknownWorkflowError (LookupError): no such workflow (or version) is registered
    ├── VersionUnavailableError (LookupError): a run's pinned version is gone and no migration leads on
    ├── RunNotFoundError (LookupError): no run with that id (or prefix)
    ├── CheckpointNotFoundError (LookupError): no checkpoint matches a rewind target
    ├── NoPendingRequestError (LookupError): the run is not waiting on a steering request
    ├── NotAllowedError (PermissionError): this person may not take this action here
    ├── InvalidDecisionError (ValueError): an edit that fails validation, a reject without reason, …
    ├── InvalidInputError (ValueError): a run's input does not fit the workflow's state model
    ├── ConfigurationError (ValueError): a setting is missing or malformed
    ├── AlreadyDecidedError: someone (maybe the same person) decided first; says who and when
    ├── RunStateError (RuntimeError): the run is not in a state that allows this (retry a running run, …)
    └── StepContractError (TypeError): a step returned something that is not its state, or routed to an
        unknown node; the run fails at once (no retry can help)
"""

from __future__ import annotations

from datetime import datetime


class HazelError(Exception):
    """Base of Hazel's errors; ``str(err)`` is a one-line message fit to show the person who acted."""


class WorkflowDefinitionError(HazelError, ValueError):
    pass


class UnknownWorkflowError(HazelError, LookupError):
    pass


class VersionUnavailableError(HazelError, LookupError):
    pass


class RunNotFoundError(HazelError, LookupError):
    pass


class CheckpointNotFoundError(HazelError, LookupError):
    pass


class NoPendingRequestError(HazelError, LookupError):
    pass


class NotAllowedError(HazelError, PermissionError):
    pass


class InvalidDecisionError(HazelError, ValueError):
    pass


class InvalidInputError(HazelError, ValueError):
    pass


class ConfigurationError(HazelError, ValueError):
    """A setting is missing or malformed (the message names the variable, never a secret's value)."""


class RunStateError(HazelError, RuntimeError):
    pass


class StepContractError(HazelError, TypeError):
    pass


class AlreadyDecidedError(HazelError):
    """The request was settled before this decision (or this person already voted).

    Attributes: ``decided_by`` (who won, a label), ``decided_by_id`` and ``channel`` (their channel identity,
    e.g. a Slack user id, for mentions), ``decided_at`` (UTC), ``action`` (what they did), ``own`` (True when
    it was the same person's earlier vote: one person, one vote).
    """

    def __init__(self, message: str, *, decided_by: str | None, decided_at: datetime | None,
                 action: str | None, decided_by_id: str | None = None, channel: str | None = None,
                 own: bool = False) -> None:
        super().__init__(message)
        self.own = own
        self.decided_by = decided_by
        self.decided_by_id = decided_by_id
        self.channel = channel
        self.decided_at = decided_at
        self.action = action
