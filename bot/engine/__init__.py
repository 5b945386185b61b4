"""The engine: workflows, runs, steering, people and permissions.

``Hazel`` is its boundary: adapters (Slack, Jira, REST, CLI, scheduler, workers) import from this package
only, never from its modules. The types they see come with it.
"""

from bot.engine.errors import (
    AlreadyDecidedError,
    AmbiguousRunIdError,
    CheckpointNotFoundError,
    ConfigurationError,
    HazelError,
    InvalidDecisionError,
    InvalidInputError,
    NoPendingRequestError,
    NotAllowedError,
    RunNotFoundError,
    RunStateError,
    StepContractError,
    UnaskedPointError,
    UnknownWorkflowError,
    VersionUnavailableError,
    WorkflowDefinitionError,
)
from bot.engine.clock import utcnow
from bot.engine.hazel import Hazel
from bot.engine.logcontext import VARS as LOG_CONTEXT_VARS
from bot.engine.logcontext import bind_log_context, log_context
from bot.engine.people import People, Person
from bot.engine.registry import Registry
from bot.engine.reads import Shown
from bot.engine.runner import Claim, DriveResult, is_transient, transient_error_classes
from bot.engine.steering import DecisionOutcome
from bot.engine.steering.edits import UNDECLARED, entry_value, value_from_text
from bot.engine.timeouts import TIMEOUT_RETRY_SEC, Fired
from bot.engine.views import DECIDING, Access
from bot.engine.workflow import Approvers, Step, StepContext, SteeringPoint, Workflow

__all__ = [
    "Access", "AlreadyDecidedError", "AmbiguousRunIdError", "Approvers", "CheckpointNotFoundError", "Claim", "ConfigurationError",
    "DECIDING", "DecisionOutcome", "DriveResult", "Fired", "Hazel", "HazelError", "InvalidDecisionError",
    "InvalidInputError", "LOG_CONTEXT_VARS", "NoPendingRequestError", "NotAllowedError", "People", "Person",
    "Registry", "RunNotFoundError", "RunStateError", "Shown", "Step", "StepContext", "SteeringPoint",
    "StepContractError", "TIMEOUT_RETRY_SEC", "UnaskedPointError", "UnknownWorkflowError", "VersionUnavailableError", "Workflow",
    "WorkflowDefinitionError", "bind_log_context", "is_transient", "log_context", "transient_error_classes",
    "utcnow", "entry_value", "value_from_text", "UNDECLARED",
]
