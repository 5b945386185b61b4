"""Hazel: durable AI-agent workflows that pause for a human expert and resume where they stopped.

What a workflow author writes::

    from hazel import Approvers, StepContext, Workflow

    wf = Workflow("migration-plan", version=1, state=PlanState)

    @wf.step
    def draft_plan(state: PlanState, ctx: StepContext) -> PlanState: ...

    wf.steer("review_plan", show="plan", approvers=Approvers(people=["priya"]), channel="slack:#migrations")

A workflow module's own settings: ``env("MY_CHANNEL", "console")`` reads the environment, else the working
directory's ``.env`` (as Hazel's own settings are read), else the default.

``END`` is the end target (``next=END``, ``on_reject=END``, ``on_feedback=END``, ``ctx.goto(END)``); the routing
rules are in ``bot.engine.workflow``'s docstring.

and, to embed Hazel in a program of your own, ``Hazel`` (the engine with its channels and notification
delivery; its methods are keyword-only)::

    hz = Hazel()                                   # settings from the environment (HAZEL_*)
    hz.prepare()
    run = hz.start(workflow="migration-plan", input={"request": "…"}, actor=hz.operator())
    hz.drive(run_id=run.id)

The errors a caller catches (all subclasses of ``HazelError``, itself an ``Exception``)::

    HazelError
    ├── WorkflowDefinitionError (ValueError)      a workflow fails validation when it is loaded
    ├── UnknownWorkflowError (LookupError)        no such workflow (or version) is registered
    ├── VersionUnavailableError (LookupError)     a run's version is gone and nothing migrates it
    ├── RunNotFoundError (LookupError)            no run with that id (or prefix)
    ├── CheckpointNotFoundError (LookupError)     no checkpoint matches a rewind target
    ├── NoPendingRequestError (LookupError)       the run waits on no steering request
    ├── NotAllowedError (PermissionError)         this person may not take this action here
    ├── InvalidDecisionError (ValueError)         an invalid edit, a reject without a reason, …
    ├── InvalidInputError (ValueError)            a run's input does not fit the state model
    ├── ConfigurationError (ValueError)           a setting is missing or malformed
    ├── AlreadyDecidedError                       someone (maybe this person) decided first
    ├── RunStateError (RuntimeError)              the run's status forbids it
    └── StepContractError (TypeError)             a step returned something that is not its state
"""

from bot.engine.errors import (
    AlreadyDecidedError,
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
    UnknownWorkflowError,
    VersionUnavailableError,
    WorkflowDefinitionError,
)
from bot.engine.workflow import END, Approvers, Step, StepContext, SteeringPoint, Workflow
from bot.settings import Settings
from bot.settings import env_value as env


def __getattr__(name: str) -> object:
    """``Hazel`` is imported on first use: a workflow module importing ``Workflow`` does not load the
    server's dependencies."""
    if name == "Hazel":
        from bot.server.app import HazelApp

        return HazelApp
    raise AttributeError(f"module 'hazel' has no attribute {name!r}")

__all__ = [
    "AlreadyDecidedError", "Approvers", "CheckpointNotFoundError", "ConfigurationError", "END", "Hazel", "HazelError",
    "InvalidDecisionError", "env", "InvalidInputError", "NoPendingRequestError", "NotAllowedError", "RunNotFoundError",
    "RunStateError", "Settings", "Step", "StepContext", "SteeringPoint", "StepContractError", "UnknownWorkflowError",
    "VersionUnavailableError", "Workflow", "WorkflowDefinitionError",
]
