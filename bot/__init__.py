"""Hazel's engine: workflows with steering points, durable runs, decisions, rewind; the HTTP app, the
scheduler and the CLI. The only package that wires ``store`` and ``integrations`` together.

Workflow authors import from here::

    from bot import Approvers, StepContext, Workflow
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.engine.errors import (
        AlreadyDecidedError,
        CheckpointNotFoundError,
        HazelError,
        InvalidDecisionError,
        InvalidInputError,
        NoPendingRequestError,
        NotAllowedError,
        RunNotFoundError,
        RunStateError,
        UnknownWorkflowError,
        VersionUnavailableError,
        WorkflowDefinitionError,
    )
    from bot.engine.workflow import Approvers, Step, StepContext, SteeringPoint, Workflow


def __getattr__(name: str) -> object:
    """The names of ``__all__``, imported on first use: every ``bot.*`` module (the CLI's ``hazel --help``
    among them) imports this package first, and need not load the engine."""
    if name in ("Approvers", "Step", "StepContext", "SteeringPoint", "Workflow"):
        from bot.engine import workflow as module
    elif name in __all__:
        from bot.engine import errors as module
    else:
        raise AttributeError(f"module 'bot' has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)
    return value


__all__ = [
    "AlreadyDecidedError", "Approvers", "CheckpointNotFoundError", "HazelError", "InvalidDecisionError",
    "InvalidInputError", "NoPendingRequestError", "NotAllowedError", "RunNotFoundError", "RunStateError", "Step",
    "StepContext", "SteeringPoint", "UnknownWorkflowError", "VersionUnavailableError", "Workflow",
    "WorkflowDefinitionError",
]
