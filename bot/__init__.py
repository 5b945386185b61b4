"""Hazel's engine: workflows with steering points, durable runs, decisions, rewind; the HTTP app, the
scheduler and the CLI. The only package that wires ``store`` and ``integrations`` together.

Workflow authors import from here::

    from bot import Approvers, StepContext, Workflow
"""

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

__all__ = [
    "AlreadyDecidedError", "Approvers", "CheckpointNotFoundError", "HazelError", "InvalidDecisionError",
    "InvalidInputError", "NoPendingRequestError", "NotAllowedError", "RunNotFoundError", "RunStateError", "Step",
    "StepContext", "SteeringPoint", "UnknownWorkflowError", "VersionUnavailableError", "Workflow",
    "WorkflowDefinitionError",
]
