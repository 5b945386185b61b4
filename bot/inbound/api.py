"""The REST API (``/api``, JSON): start, list and read runs, read checkpoints and states, and steer runs with
the same rules and permissions as the CLI, Slack and Jira.

Auth: ``Authorization: Bearer <token>``. ``HAZEL_API_TOKEN`` is one token whose caller is ``api``;
``HAZEL_API_TOKENS`` holds ``name=token`` pairs (comma-separated), each caller named by its pair. A caller is
the identity ``<name>`` on channel ``api``, and through it a person (``Hazel.identify``: the people file's, else
the person of that name, the same as the console name): list the name or the person in a steering point's
``Approvers(users=[...])`` / ``Approvers(people=[...])`` to let it decide there. With no token configured
every call answers 503; a missing or unknown token answers 401. Tokens are compared in constant time and
never logged.

Errors answer ``{"error": {"type": "<error class>", "message": "…"}}`` (``bot.inbound.api_errors`` has the
table): 401 bad token, 403 not allowed, 404 unknown run / checkpoint / endpoint, 405 method, 409 already
decided (with ``decided_by``, ``decided_at``, ``action``, ``channel``), nothing pending, the run's state
forbids it or a shortened run id is ambiguous, 413 body too large, 422 invalid input / edit / body, 500
unexpected, 503 API off.

A run id in a path may be shortened to a unique prefix of at least 4 characters, as on the CLI
(``Hazel.resolve``); the answers carry the full id.

A decision (``POST /api/runs/{id}/decisions``) honours an ``Idempotency-Key`` header: the same caller sending
the same key again gets the first decision back (``duplicate: true``, status 200) instead of a new one. So does
a start (``POST /api/runs``): the same caller sending the same key again gets the run the first request started,
as it is now (status 200), never a second run, also when both arrive at once; a key that started a run of
another workflow answers 422 ``IdempotencyKeyReusedError``. After a
start, retry or settling decision the run continues at once: the worker pool of ``hazel serve`` is woken, or,
in a process without one, the run is executed in a background thread; the answer never waits for its steps.
"""


import hashlib
import hmac
import logging
from typing import TYPE_CHECKING, Annotated, Any, Callable, Coroutine

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from bot.inbound.api_models import (
    CancelRun,
    CheckpointList,
    DecisionIn,
    DecisionOut,
    DIGITS,
    INT_MAX,
    ErrorBody,
    RunDetail,
    RunList,
    RunOut,
    StartRun,
    StateOut,
    WorkflowList,
    WorkflowOut,
)
from bot.inbound.continuing import continue_soon
from bot.engine import ConfigurationError, HazelError
from bot.inbound.api_errors import (ApiError, error_response, hazel_error_response, not_utf8_json, unmatched,
                                    validation_message)
from bot.engine import log_context
from bot.settings import Settings, api_token_pairs
from store.models import Actor, RunStatus

if TYPE_CHECKING:
    from bot.engine import Hazel

log = logging.getLogger("hazel.api")

MAX_IDEMPOTENCY_KEY_LEN = 150

class ApiRoute(APIRoute):
    """Answers Hazel's errors, auth failures and malformed requests with the API's error body, and binds the
    path's run id to the log context."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            with log_context(run_id=request.path_params.get("run_id")):
                if request.method in ("POST", "PUT", "PATCH"):  # FastAPI's json.loads of the bytes would take
                    refused = not_utf8_json(await request.body())  # UTF-16 and UTF-32 too (read once: cached)
                    if refused is not None:
                        return error_response(422, "InvalidRequestError", refused)
                try:
                    return await handler(request)
                except ApiError as exc:
                    return error_response(exc.status, exc.type, str(exc), headers=exc.headers)
                except HazelError as exc:
                    return hazel_error_response(exc)
                except RequestValidationError as exc:
                    unparsed = any(err.get("type") == "json_invalid" for err in exc.errors())
                    body = await request.body() if unparsed else None  # (FastAPI read it already: cached)
                    return error_response(422, "InvalidRequestError", validation_message(exc, body))

        return route


def idempotency_delivery(caller_id: str, key: str) -> str:
    """The delivery id of a REST decision or start sent with ``Idempotency-Key: key`` by the token named
    ``caller_id``: ``caller:key``, the caller's ``%`` and ``:`` percent-encoded, so that two callers never share
    one (``x`` with key ``y:k`` and ``x:y`` with key ``k`` were both ``x:y:k``: the second was told the first's
    decision was its own). Names without ``%`` or ``:`` keep the form earlier versions stored."""
    return f"{caller_id.replace('%', '%25').replace(':', '%3A')}:{key}"


def check_idempotency_key(key: str | None, *, nothing: str) -> None:
    """Refuse an ``Idempotency-Key`` header that is not 1 to ``MAX_IDEMPOTENCY_KEY_LEN`` characters of printable
    ASCII, not all spaces (the header's ``max_length`` refuses a longer one first); None (no header) passes.

    Raises:
        ApiError: 422 ``InvalidRequestError``, its message ending with ``nothing`` (what was not done).
    """
    if key is not None and not (key.isascii() and key.isprintable() and key.strip()):
        # (HTTP header values arrive as Latin-1: "ключ" would be stored and echoed as mojibake; an empty one,
        # a shell's unset variable, would make the retry it was meant for a second decision or run)
        raise ApiError(422, "InvalidRequestError", "Idempotency-Key must be 1 to "
                       f"{MAX_IDEMPOTENCY_KEY_LEN} characters of printable ASCII, not all spaces: {nothing}")


def api_tokens(settings: Settings) -> list[tuple[str, SecretStr]]:
    """``(identity, token)`` for each configured token (``bot.settings.api_token_pairs``: ``Settings`` checks
    them when it is made, for every command).

    Raises:
        ConfigurationError: a ``HAZEL_API_TOKENS`` entry is not ``name=token``, or a name or token repeats
            (the message says which entry, never a token), in settings made without their checks.
    """
    try:
        return api_token_pairs(settings.api_token, settings.api_tokens)
    except ValueError as exc:
        raise ConfigurationError(f"HAZEL_API_TOKENS: {exc}") from None


class TokenAuth:
    """The bearer-token check: a FastAPI dependency returning the caller as an ``api`` actor."""

    scheme = HTTPBearer(auto_error=False, description="HAZEL_API_TOKEN, or a token of HAZEL_API_TOKENS")

    def __init__(self, tokens: list[tuple[str, SecretStr]], identify: Callable[[str], Actor]) -> None:
        self.identify_caller = identify
        self._digests = [(name, hashlib.sha256(token.get_secret_value().encode()).digest())
                         for name, token in tokens]

    def identify(self, presented: str) -> str | None:
        """The identity whose token is ``presented``; every configured token is compared (in constant time)."""
        digest = hashlib.sha256(presented.encode()).digest()
        found = None
        for name, expected in self._digests:
            if hmac.compare_digest(digest, expected) and found is None:
                found = name
        return found

    def __call__(self, request: Request,
                 credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(scheme)]) -> Actor:
        if not self._digests:
            raise ApiError(503, "ApiDisabledError", "the REST API is off: set HAZEL_API_TOKEN or HAZEL_API_TOKENS")
        challenge = {"WWW-Authenticate": "Bearer"}
        if credentials is None or not credentials.credentials:
            raise ApiError(401, "AuthenticationError", "send Authorization: Bearer <token>", headers=challenge)
        identity = self.identify(credentials.credentials)
        if identity is None:
            client = request.client.host if request.client else "?"
            log.warning("api: refused a request with an unknown token from %s", client)
            raise ApiError(401, "AuthenticationError", "unknown API token", headers=challenge)
        return self.identify_caller(identity)


RunId = Annotated[str, Path(min_length=1, max_length=32, description="The run's id (12 hex characters), or a "
                                                                    "unique prefix of at least 4.")]
RUN_ID_CHARS = 12
"""Characters of a full run id (``bot.engine.hazel.new_run_id``): shorter ones are resolved as prefixes."""
ERRORS = {status: {"model": ErrorBody} for status in (401, 403, 404, 409, 413, 422, 500, 503)}


def api_router(hazel: "Hazel", settings: Settings) -> APIRouter:
    """The ``/api`` router for ``hazel`` (see the module docstring).

    Raises:
        ConfigurationError: malformed ``HAZEL_API_TOKENS``.
    """
    auth = TokenAuth(api_tokens(settings), lambda name: hazel.identify(channel="api", id=name, name=name))
    Caller = Annotated[Actor, Depends(auth)]
    router = APIRouter(prefix="/api", tags=["runs"], route_class=ApiRoute, responses=ERRORS)

    def full(run_id: str) -> str:
        """The run id a path names: shorter than a full id (or not only letters and digits), a unique prefix (an
        extra read, for those only; ``resolve`` refuses what no run id holds, such as NUL).

        Raises:
            RunNotFoundError: no run starts so; AmbiguousRunIdError: several do.
        """
        return run_id if len(run_id) >= RUN_ID_CHARS and run_id.isalnum() else hazel.resolve(ref=run_id)

    def resume(run_id: str) -> None:
        """Let the run continue (``bot.inbound.continuing``)."""
        continue_soon(hazel, run_id, origin="api")

    @router.get("/workflows", response_model=WorkflowList, summary="Registered workflows")
    def workflows(caller: Caller) -> WorkflowList:
        """Every registered workflow version, with the JSON schema of a run's ``input`` (its state; a LangGraph
        graph's input schema)."""
        return WorkflowList(workflows=[
            WorkflowOut(name=wf.name, version=wf.version, description=wf.description,
                        input_schema=wf.input_json_schema())
            for wf in hazel.workflows()])

    @router.post("/runs", status_code=201, response_model=RunOut, summary="Start a run",
                 responses={200: {"model": RunOut, "description": "A repeated Idempotency-Key: the run the "
                                  "first request started, as it is now; nothing new started."}})
    def start_run(body: StartRun, caller: Caller, response: Response,
                  idempotency_key: Annotated[str | None, Header(
                      alias="Idempotency-Key", max_length=MAX_IDEMPOTENCY_KEY_LEN,
                      description="Send the same key to retry safely: one run is started.")] = None,
                  ) -> RunOut:
        """Create a run and start executing it; answers at once with the run (status ``ready``). 200: the
        caller sent this Idempotency-Key with a start before, which started the run answered (as it is now)."""
        check_idempotency_key(idempotency_key, nothing="nothing was started")
        delivery_id = idempotency_delivery(caller.id, idempotency_key) if idempotency_key else None
        run = hazel.start(workflow=body.workflow, input=body.input, actor=caller, version=body.version,
                          delivery_id=delivery_id)
        if run.duplicate:
            if run.workflow != body.workflow:
                raise ApiError(422, "IdempotencyKeyReusedError",
                               f"Idempotency-Key {idempotency_key!r} was used to start run {run.id} of another "
                               f"workflow ({run.workflow})")
            response.status_code = 200
            with log_context(run_id=run.id):
                log.info("api: %s repeated the start of run %s of %s", caller.id, run.id, run.workflow)
            return RunOut.of(run)
        with log_context(run_id=run.id):  # (s24 F9: a log query on the run missed its start)
            log.info("api: %s started run %s of %s", caller.id, run.id, run.workflow)
        resume(run.id)
        return RunOut.of(run)

    @router.get("/runs", response_model=RunList, summary="List runs")
    def list_runs(caller: Caller,
                  status: Annotated[list[RunStatus] | None, Query(description="Repeat to allow several.")] = None,
                  workflow: Annotated[list[str] | None, Query(description="One workflow's name.")] = None,
                  limit: Annotated[int, Query(ge=1, le=500), DIGITS] = 50,
                  offset: Annotated[int, Query(ge=0, le=INT_MAX), DIGITS] = 0) -> RunList:
        """Runs, newest first, filtered by status (several: any of them) and by one workflow."""
        if workflow is not None and (len(workflow) > 1 or not workflow[0]):  # (a list: a repeat is seen, not dropped)
            raise ApiError(422, "InvalidRequestError",
                           "workflow: give one workflow's name, once" if workflow[0] else "workflow: is empty")
        found = hazel.runs(statuses=[s.value for s in status] if status else None,
                           workflow=workflow[0] if workflow else None, limit=limit + 1, offset=offset)
        # (one more than the page: a page that is exactly the last one says so, s26 F2)
        return RunList(runs=[RunOut.of(r) for r in found[:limit]], limit=limit, offset=offset,
                       next_offset=offset + limit if len(found) > limit else None)

    @router.get("/runs/{run_id}", response_model=RunDetail, summary="A run and its pending requests")
    def get_run(run_id: RunId, caller: Caller) -> RunDetail:
        run = hazel.get(run_id=(run_id := full(run_id)))
        waiting = hazel.pending_requests_of(run_id=run_id) if run.status is RunStatus.WAITING else []
        return RunDetail(**RunOut.of(run).model_dump(), pending_requests=waiting,
                         pending_request=max(waiting, key=lambda r: r.id) if waiting else None)

    @router.get("/runs/{run_id}/checkpoints", response_model=CheckpointList, summary="A run's checkpoints")
    def checkpoints(run_id: RunId, caller: Caller) -> CheckpointList:
        """Every checkpoint of the run, on every branch, by sequence number (``parent_seq`` draws the tree)."""
        found = hazel.checkpoints(run_id=(run_id := full(run_id)))
        return CheckpointList(run_id=run_id, head_seq=hazel.get(run_id=run_id).head_seq, checkpoints=found)

    @router.get("/runs/{run_id}/checkpoints/{seq}/state", response_model=StateOut,
                summary="The state at a checkpoint")
    def state(run_id: RunId, seq: Annotated[int, Path(ge=0, le=INT_MAX), DIGITS], caller: Caller) -> StateOut:
        """The run's state at checkpoint ``seq`` (JSON, as the workflow's state model dumps it; for a LangGraph
        run, the graph's values at that checkpoint)."""
        tree = hazel.state_tree_at(run_id=(run_id := full(run_id)), seq=seq)
        if tree is None:
            raise hazel.missing_checkpoint(run_id=run_id, seq=seq)
        return StateOut(run_id=run_id, seq=seq, state=tree)

    @router.post("/runs/{run_id}/decisions", status_code=201, response_model=DecisionOut,
                 summary="Decide the pending steering request", responses={200: {"model": DecisionOut,
                 "description": "A repeated Idempotency-Key: the earlier decision, nothing new done."}})
    def decide(run_id: RunId, body: DecisionIn, caller: Caller, response: Response,
               idempotency_key: Annotated[str | None, Header(
                   alias="Idempotency-Key", max_length=MAX_IDEMPOTENCY_KEY_LEN,
                   description="Send the same key to retry safely: the decision is recorded once.")] = None,
               ) -> DecisionOut:
        """Approve, edit, reject, give feedback or rewind, with the same payloads and rules as the other
        channels. 201: recorded; the run continues at once when it settled the request."""
        run_id = full(run_id)
        check_idempotency_key(idempotency_key, nothing="nothing was decided")
        payload = body.payload.for_engine()  # (approve's: empty)
        delivery_id = idempotency_delivery(caller.id, idempotency_key) if idempotency_key else None
        outcome = hazel.decide(run_id=run_id, action=body.action, actor=caller, payload=payload,
                               request_id=body.request_id, delivery_id=delivery_id)
        if outcome.duplicate:
            earlier = outcome.decision
            if (earlier.run_id != run_id or earlier.action.value != body.action
                    or (body.request_id is not None and earlier.request_id != body.request_id)):
                raise ApiError(422, "IdempotencyKeyReusedError",
                               f"Idempotency-Key {idempotency_key!r} was used for another decision "
                               f"({earlier.action.value} of request {earlier.request_id} on run {earlier.run_id})")
            response.status_code = 200
        else:
            with log_context(request_id=outcome.decision.request_id):  # (the request it settled or voted on)
                log.info("api: %s decided %s on run %s", caller.id, body.action, run_id)
            if outcome.run_status is RunStatus.READY:  # (RUNNING: this process's workers have it already)
                resume(run_id)
        return DecisionOut(decision=outcome.decision, request=outcome.request, settled=outcome.settled,
                           run_status=outcome.run_status, next_node=outcome.next_node, duplicate=outcome.duplicate,
                           still_pending=list(outcome.still_pending))

    @router.post("/runs/{run_id}/retry", response_model=RunOut, summary="Retry a failed run")
    def retry(run_id: RunId, caller: Caller) -> RunOut:
        """Resume a failed run from its last good checkpoint (who started it, or an approver, may)."""
        run = hazel.retry(run_id=(run_id := full(run_id)), actor=caller)
        with log_context(run_id=run_id):
            log.info("api: %s retried run %s", caller.id, run_id)
        resume(run_id)
        return RunOut.of(run)

    @router.post("/runs/{run_id}/cancel", response_model=RunOut, summary="Cancel a run")
    def cancel(run_id: RunId, caller: Caller, body: CancelRun | None = None) -> RunOut:
        """Cancel a run that has not ended; its pending request is closed (who started it, or an approver,
        may)."""
        run = hazel.cancel(run_id=(run_id := full(run_id)), actor=caller, reason=body.reason if body else None)
        with log_context(run_id=run_id):  # (s24 F9: an API cancel logged nothing)
            log.info("api: %s cancelled run %s", caller.id, run_id)
        return RunOut.of(run)

    @router.api_route("/{path:path}", methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                      include_in_schema=False)
    def no_route(request: Request, path: str) -> None:
        """Unknown API paths (404) and methods (405) answer in the error shape, whatever the app mounts after
        the API (a catch-all of its own)."""
        raise unmatched(request)

    return router

