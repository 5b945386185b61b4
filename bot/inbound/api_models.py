"""The REST API's request and response bodies (pydantic), which are also its OpenAPI schemas (``/openapi.json``).

Responses reuse the store's records where they fit (``Run`` without its lease internals, ``SteeringRequest``,
``CheckpointInfo``, ``Decision``); timestamps are ISO 8601 UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr,
                      model_validator)

from store.models import CheckpointInfo, Decision, Run, RunStatus, SteeringRequest

INT_MAX = 2**31 - 1
"""The largest number a request may name (a checkpoint, a request id, an offset): what the database's integer
columns hold; larger ones are refused as invalid (422), not sent to the database."""

# The numbers of a request body are strict JSON integers (``StrictInt``): ``true`` is not 1 and ``1.0`` or
# ``"1"`` is not a number, so a body that says something else answers 422 naming the field, never a decision on
# request 1 or a rewind to checkpoint #1. Query parameters and path segments are text by nature (``?offset=5``):
# their numbers are digits only (``DIGITS``), so ``?limit=1.0`` or ``/checkpoints/1.0`` answers 422 too.


def _digits(value: Any) -> Any:
    """A number in a query or a path as digits (a ``-`` before them: refused by the bound, in its words):
    pydantic's lax integers also take ``1.0``, ``1_0`` and `` 1 ``.

    Raises:
        ValueError: ``must be a whole number written in digits``.
    """
    if isinstance(value, str) and not (value.isascii() and value.removeprefix("-").isdigit()):
        raise ValueError("must be a whole number written in digits")
    return value


DIGITS = BeforeValidator(_digits)
"""Put beside a query's or a path's ``int`` (``Annotated[int, Query(...), DIGITS]``): digits only."""


class ErrorDetail(BaseModel):
    type: str = Field(description="The error's class: RunNotFoundError, AlreadyDecidedError, NotAllowedError, "
                                  "InvalidDecisionError, InvalidInputError, InvalidRequestError, "
                                  "AuthenticationError, AmbiguousRunIdError, PayloadTooLargeError, NotFound, "
                                  "MethodNotAllowed, InternalError, …")
    message: str = Field(description="A one-line message for the person who acted.")
    decided_by: str | None = Field(None, description="AlreadyDecidedError: who decided first.")
    decided_at: datetime | None = Field(None, description="AlreadyDecidedError: when (UTC).")
    action: str | None = Field(None, description="AlreadyDecidedError: what they did.")
    channel: str | None = Field(None, description="AlreadyDecidedError: through which channel.")


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"type": …, "message": …}}``."""

    error: ErrorDetail


class WorkflowOut(BaseModel):
    name: str
    version: int
    description: str = ""
    input_schema: dict[str, Any] = Field(description="JSON schema of what a run's input is validated against: "
                                                     "the workflow's state (a LangGraph graph's input schema).")


class WorkflowList(BaseModel):
    workflows: list[WorkflowOut]


# -- runs ------------------------------------------------------------------------------------------------------

class StartRun(BaseModel):
    """Start a run of ``workflow`` (its latest registered version unless ``version``) with ``input`` as the
    initial state, validated against the workflow's state model."""

    model_config = ConfigDict(extra="forbid")

    workflow: str = Field(min_length=1, max_length=200, examples=["migration-plan"])
    version: StrictInt | None = Field(None, ge=1, le=INT_MAX,
                                      description="A registered version (default: the latest).")
    input: dict[str, Any] = Field(default_factory=dict, examples=[{"request": "split users.name"}])


class RunOut(BaseModel):
    """A run (see ``hazel show``)."""

    id: str
    workflow: str
    workflow_version: int
    status: RunStatus
    head_seq: int = Field(description="The checkpoint the run continues from.")
    last_seq: int = Field(description="The highest checkpoint number written, on any branch.")
    branch: int
    started_by: str = Field(description="The channel identity that started the run (a Slack user id, a console "
                            "or API name, a Jira account).")
    started_via: str
    started_by_person: str | None = Field(None, description="The person that identity is (the people file's "
                                          "name; else the identity itself), as refusals and the CLI name them; "
                                          "null for a run recorded before people were.")
    created_at: datetime
    updated_at: datetime
    attempt: int = Field(description="Failed attempts of the step at the head so far.")
    wake_at: datetime | None = Field(None, description="When a retry is due (status ready).")
    error: str | None = None

    @classmethod
    def of(cls, run: Run) -> "RunOut":
        return cls.model_validate(run.model_dump(include=set(cls.model_fields)))


class RunDetail(RunOut):
    pending_request: SteeringRequest | None = Field(
        None, description="The steering request the run waits on (status waiting), else null; when it waits on "
        "several (a LangGraph super-step's parallel interrupts), the newest of pending_requests: the one a "
        "decision without request_id settles.")
    pending_requests: list[SteeringRequest] = Field(
        default_factory=list, description="Every steering request the run waits on (status waiting), oldest "
        "first: one for a native workflow, one per interrupt of a LangGraph super-step; else empty.")


class RunList(BaseModel):
    runs: list[RunOut]
    limit: int
    offset: int
    next_offset: int | None = Field(None, description="Pass as offset for the next page; null on the last page.")


class CheckpointList(BaseModel):
    run_id: str
    head_seq: int
    checkpoints: list[CheckpointInfo]


class StateOut(BaseModel):
    run_id: str
    seq: int
    state: Any = Field(description="The run's state at that checkpoint, as JSON (the workflow's state model).")


class CancelRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = None


# -- decisions -------------------------------------------------------------------------------------------------

class _DecisionBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: StrictInt | None = Field(None, ge=1, le=INT_MAX,
                                   description="The steering request decided (default: the run's pending "
                                                      "one). Naming it refuses a decision on a request that has "
                                                      "since been settled.")


class _Payload(BaseModel):
    """A decision's payload; ``for_engine`` is what ``Hazel.decide`` takes."""

    model_config = ConfigDict(extra="forbid")

    def for_engine(self) -> dict[str, Any]:
        return self.model_dump()


class ApprovePayload(_Payload):
    """An approval carries nothing: an empty object is taken (a client that always sends a ``payload``), any
    member refused (422)."""


class ApproveDecision(_DecisionBase):
    action: Literal["approve"]
    payload: ApprovePayload = Field(default_factory=ApprovePayload)


class EditPayload(_Payload):
    value: Any = Field(None, description="The new value of the point's shown field (the whole state when the "
                                         "point shows the whole state); validated against the state model.")
    text: str | None = Field(None, description="Instead of value: the new value as typed, parsed as the CLI and "
                                               "Jira parse typed edits (text as it is for a text field, JSON "
                                               "otherwise).")
    allow_empty: StrictBool = Field(False, description="Accept an empty or blank new text (value or text): without "
                                                 "it such an edit is refused (422), as it would replace the field "
                                                 "with nothing (the CLI's --allow-empty).")

    @model_validator(mode="after")
    def _one_of(self) -> "EditPayload":
        """Not both ``value`` and ``text`` (neither: the engine refuses the edit, once it checked that the caller
        may edit: ``InvalidDecisionError``, 422)."""
        if {"value", "text"} <= self.model_fields_set:
            raise ValueError("give either value (the new value as JSON) or text (the new value as typed)")
        return self

    def for_engine(self) -> dict[str, Any]:
        """The engine's edit payload: ``{"value": v}`` or ``{"text": s}`` (neither when neither was given), with
        ``allow_empty`` (the engine refuses an empty edit without it: ``bot.engine.steering.edits``)."""
        given = ({"text": self.text} if "text" in self.model_fields_set else
                 {"value": self.value} if "value" in self.model_fields_set else {})
        return {**given, "allow_empty": self.allow_empty}


# A payload left out, or a reason or text left empty, is the engine's to refuse (``InvalidDecisionError``, 422)
# once it checked that the caller may take the action: a caller who may not is told so (403) whatever the
# payload holds, as on every other channel.

class EditDecision(_DecisionBase):
    action: Literal["edit"]
    payload: EditPayload = Field(default_factory=EditPayload)


class RejectPayload(_Payload):
    reason: str = Field("", description="Why (required: an empty reason is refused, 422).")


class RejectDecision(_DecisionBase):
    action: Literal["reject"]
    payload: RejectPayload = Field(default_factory=RejectPayload)


class FeedbackPayload(_Payload):
    text: str = Field("", description="The feedback (required: an empty text is refused, 422).")


class FeedbackDecision(_DecisionBase):
    action: Literal["feedback"]
    payload: FeedbackPayload = Field(default_factory=FeedbackPayload)


class RewindPayload(_Payload):
    to: Annotated[StrictInt, Field(ge=0, le=INT_MAX)] | StrictStr | None = Field(
        None, description="A checkpoint number (a JSON integer; a string of digits such as \"3\" names checkpoint #3 "
                    "too, as the CLI's --to 3 does), or a node name (the latest checkpoint on the current branch "
                    "from which that node runs next). true, false and 1.0 are refused (422); left out, the engine "
                    "refuses the rewind (422) once it checked that the caller may rewind.")
    feedback: str | None = Field(None, description="Handed to the node that runs next.")
    edits: dict[str, Any] | None = Field(None, description="State fields to replace, validated.")
    allow_empty: StrictBool = Field(False, description="Accept edits that leave a field (or an entry of a mapping) "
                                                 "empty or blank: without it such a rewind is refused (422), as "
                                                 "an edit is (the CLI's hazel rewind --allow-empty).")


class RewindDecision(_DecisionBase):
    action: Literal["rewind"]
    payload: RewindPayload = Field(default_factory=RewindPayload)


DecisionIn = Annotated[Union[ApproveDecision, EditDecision, RejectDecision, FeedbackDecision, RewindDecision],
                       Field(discriminator="action")]
"""A decision, the same payloads as ``Hazel.decide``: approve (none), edit ``{"value"}``, reject ``{"reason"}``,
feedback ``{"text"}``, rewind ``{"to", "feedback"?, "edits"?}``."""

DECISION_ACTIONS = tuple(get_args(m.model_fields["action"].annotation)[0] for m in get_args(get_args(DecisionIn)[0]))
"""The ``action`` a decision's body may name, in ``DecisionIn``'s order."""


class DecisionOut(BaseModel):
    """What a decision did."""

    decision: Decision
    request: SteeringRequest | None = Field(None, description="The request after the decision (null for a rewind "
                                                              "of a run that waited on nothing).")
    settled: bool = Field(description="False: a quorum vote was counted and more approvals are needed.")
    run_status: RunStatus = Field(description="The run's status right after; ready means it resumes now.")
    next_node: str | None = Field(None, description="The step the run continues at (a duplicate: the one the "
                                  "earlier decision continued at); null when the run waits or ended there.")
    duplicate: bool = Field(description="True: this Idempotency-Key was seen before; nothing new happened and "
                                        "the earlier decision is returned.")
    still_pending: list[SteeringRequest] = Field(
        default_factory=list, description="The other requests the run still waits on after this decision (a "
        "LangGraph super-step's other interrupts, oldest first); it resumes once they are answered too.")

