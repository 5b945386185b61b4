"""The engine: workflows, runs, steering, people and permissions.

``Hazel`` is its boundary: adapters (Slack, Jira, REST, CLI, scheduler, workers) import from this package
only, never from its modules. The types they see come with it, each imported on first use (``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_ERRORS = (
    "AlreadyDecidedError", "AmbiguousRunIdError", "CheckpointNotFoundError", "ConfigurationError", "EmptyEditError",
    "HazelError",
    "InvalidDecisionError", "InvalidInputError", "MissingEditValueError", "MissingRewindTargetError",
    "NoPendingRequestError", "NotAllowedError", "RequestNotFoundError",
    "RunNotFoundError", "RunStateError", "StepContractError", "UnaskedPointError", "UnknownWorkflowError", "VersionUnavailableError",
    "WorkflowDefinitionError",
)
_WHERE: dict[str, tuple[str, str]] = {
    **{name: ("errors", name) for name in _ERRORS},
    "utcnow": ("clock", "utcnow"), "Hazel": ("hazel", "Hazel"), "LOG_CONTEXT_VARS": ("logcontext", "VARS"),
    "bind_log_context": ("logcontext", "bind_log_context"), "log_context": ("logcontext", "log_context"),
    "People": ("people", "People"), "Person": ("people", "Person"), "Registry": ("registry", "Registry"),
    "Shown": ("reads", "Shown"), "Claim": ("runner", "Claim"), "DriveResult": ("runner", "DriveResult"),
    "LEASE_LOST": ("runner", "LEASE_LOST"),
    "is_transient": ("runner", "is_transient"), "error_line": ("errors", "error_line"), "first_line": ("errors", "first_line"), "log_error": ("errors", "log_error"),
    "traceback_text": ("errors", "traceback_text"), "is_database_error": ("errors", "is_database_error"), "without_statements": ("errors", "without_statements"),
    "transient_error_classes": ("runner", "transient_error_classes"),
    "DecisionOutcome": ("steering", "DecisionOutcome"), "UNDECLARED": ("steering.edits", "UNDECLARED"),
    "entry_value": ("steering.edits", "entry_value"), "value_from_text": ("steering.edits", "value_from_text"),
    "TIMEOUT_RETRY_SEC": ("timeouts", "TIMEOUT_RETRY_SEC"), "Fired": ("timeouts", "Fired"),
    "DECIDING": ("views", "DECIDING"), "Access": ("views", "Access"), "Approvers": ("workflow", "Approvers"),
    "rewind_choices": ("choices", "rewind_choices"), "REWIND_CHOICES": ("choices", "REWIND_CHOICES"),
    "Step": ("workflow", "Step"), "StepContext": ("workflow", "StepContext"),
    "SteeringPoint": ("workflow", "SteeringPoint"), "Workflow": ("workflow", "Workflow"),
}
"""Where each name of the boundary is defined: ``(module of this package, name there)``."""


def __getattr__(name: str) -> Any:
    """The boundary's names, each imported from its module when first asked for (PEP 562), so that a process
    imports the modules it uses: a workflow module (``bot.engine.workflow``) or ``hazel runs`` does not import
    steering, timeouts or views."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _WHERE[name]
    value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    return value


if TYPE_CHECKING:  # the names as the type checker sees them (imported when used, above)
    from bot.engine.choices import REWIND_CHOICES, rewind_choices
    from bot.engine.clock import utcnow
    from bot.engine.errors import (
        AlreadyDecidedError,
        AmbiguousRunIdError,
        CheckpointNotFoundError,
        ConfigurationError,
        EmptyEditError,
        HazelError,
        InvalidDecisionError,
        InvalidInputError,
        MissingEditValueError,
        MissingRewindTargetError,
        NoPendingRequestError,
        NotAllowedError,
        RequestNotFoundError,
        RunNotFoundError,
        RunStateError,
        StepContractError,
        UnaskedPointError,
        UnknownWorkflowError,
        VersionUnavailableError,
        WorkflowDefinitionError,
        error_line,
        first_line,
        is_database_error,
        log_error,
        traceback_text,
        without_statements,
    )
    from bot.engine.hazel import Hazel
    from bot.engine.logcontext import VARS as LOG_CONTEXT_VARS
    from bot.engine.logcontext import bind_log_context, log_context
    from bot.engine.people import People, Person
    from bot.engine.reads import Shown
    from bot.engine.registry import Registry
    from bot.engine.runner import LEASE_LOST, Claim, DriveResult, is_transient, transient_error_classes
    from bot.engine.steering import DecisionOutcome
    from bot.engine.steering.edits import UNDECLARED, entry_value, value_from_text
    from bot.engine.timeouts import TIMEOUT_RETRY_SEC, Fired
    from bot.engine.views import DECIDING, Access
    from bot.engine.workflow import Approvers, Step, StepContext, SteeringPoint, Workflow

__all__ = [
    "Access", "AlreadyDecidedError", "AmbiguousRunIdError", "Approvers", "CheckpointNotFoundError", "Claim", "ConfigurationError",
    "DECIDING", "EmptyEditError", "DecisionOutcome", "DriveResult", "Fired", "Hazel", "HazelError", "InvalidDecisionError",
    "InvalidInputError", "LEASE_LOST", "LOG_CONTEXT_VARS", "MissingEditValueError", "MissingRewindTargetError", "NoPendingRequestError", "NotAllowedError", "People", "Person",
    "Registry", "RequestNotFoundError", "RunNotFoundError", "RunStateError", "Shown", "Step", "StepContext", "SteeringPoint",
    "StepContractError", "TIMEOUT_RETRY_SEC", "UnaskedPointError", "UnknownWorkflowError", "VersionUnavailableError", "Workflow",
    "WorkflowDefinitionError", "bind_log_context", "error_line", "first_line", "is_database_error", "is_transient", "log_context", "log_error", "transient_error_classes",
    "traceback_text", "utcnow", "without_statements", "entry_value", "value_from_text", "UNDECLARED",
]
