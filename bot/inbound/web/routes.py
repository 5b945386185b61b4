"""The run pages of ``hazel serve`` (server-rendered HTML, Jinja2 with autoescape; no script, nothing from
another host):

- ``GET /runs``: runs, newest first, filtered by status, workflow and "waiting on me", paged;
- ``GET /runs/{id}``: the checkpoint tree, a page at a time (``?page=``, 0: the newest), the pending request and
  its actions; ``?t=`` opens a signed link;
- ``GET /runs/{id}/checkpoints/{seq}``: the state at a checkpoint;
- ``GET /runs/{id}/diff?a=&b=``: a field-by-field diff of two checkpoints' states;
- ``GET /runs/{id}/audit``: the audit log;
- ``POST /runs/{id}/decide`` (approve, reject, feedback) and ``POST /runs/{id}/rewind``: through
  ``Hazel.decide`` / ``Hazel.rewind`` as the person the session names, on the channel ``web``;
- ``GET|POST /login``, ``POST /logout``; ``GET /static/hazel.css``;
- any other ``GET /runs/...`` (``/runs/abc%2Fdef``: the server decodes ``%2F`` before routing): the "no run"
  page (404), as for any unknown run id.

A malformed query, path or form (``page=-1``, ``a=x``, a number past ``INT_MAX``, a form that is not UTF-8:
``feedback=%FF``) answers an HTML page (422) with one line saying what was wrong (``WebRoute``); stored text is
printed with its control characters shown as escapes (``shown``).

Who may see what is ``bot.inbound.web.auth``; what a page holds is ``bot.inbound.web.pages``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

import jinja2
from fastapi import APIRouter, Form, Path as InPath, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.convertors import PathConvertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException

from bot.engine import (AlreadyDecidedError, HazelError, InvalidDecisionError, NotAllowedError, RunNotFoundError,
                        log_context)
from bot.inbound import forms
from bot.inbound.api import api_tokens, hazel_error_response
from bot.inbound.api_errors import validation_message
from bot.inbound.api_models import DIGITS, INT_MAX
from bot.inbound.continuing import continue_soon
from bot.inbound.web import history, pages
from bot.inbound.web.auth import HEADERS, Refused, WebAuth
from bot.inbound.web.links import Signer
from bot.settings import Settings
from integrations.terminal import for_terminal, unsafe
from store.models import RunStatus, node_label, past_tense, plain_mentions, still_waiting_text

if TYPE_CHECKING:
    from bot.engine import Hazel
    from bot.inbound.web.links import Session

log = logging.getLogger("hazel.web")
HERE = Path(__file__).parent
WEB_ACTIONS = ("approve", "reject", "feedback")
"""Decisions the pages offer (``edit`` stays with Slack, Jira, the CLI and the REST API)."""
Page = Annotated[int, Query(ge=0, le=INT_MAX), DIGITS]
Seq = Annotated[int | None, Query(ge=0, le=INT_MAX), DIGITS]
FormSeq = Annotated[int | None, Form(ge=0, le=INT_MAX)]
FormHead = Annotated[int, Form(ge=0, le=INT_MAX)]
FormId = Annotated[int | None, Form(ge=1, le=INT_MAX)]


class UnroutedRunPath(PathConvertor):
    """The ``{run_id:unrouted}`` of the last route under ``/runs/``: a path no page took (``/runs/abc%2Fdef``,
    decoded to ``/runs/abc/def`` before routing), answered as an unknown run. Unlike ``{run_id:path}``, never
    one ending in ``/``: Starlette's ``redirect_slashes`` still sends ``/runs/ID/`` to ``/runs/ID``."""

    regex = r".*[^/]"


register_url_convertor("unrouted", UnroutedRunPath())


def shown(value: Any) -> Any:
    """What ``{{ value }}`` prints, before autoescape: text with its terminal and bidi control characters as
    visible escapes (``integrations.terminal.for_terminal``: ``\\x1b``, ``\\u202e``; newlines and tabs
    stay), so stored text cannot set a terminal's title when copied nor reorder what a reader sees (U+202E,
    CVE-2021-42574). ``Markup`` (a macro's output, already shown) and numbers pass as they are."""
    if isinstance(value, str):
        return value if hasattr(value, "__html__") else for_terminal(value)
    if value is None or isinstance(value, (int, float)) or hasattr(value, "__html__"):
        return value
    text = str(value)
    return for_terminal(text) if unsafe(text) else value


def environment() -> jinja2.Environment:
    """The templates, every one autoescaped, every printed value ``shown`` first (stored text is escaped
    everywhere, its control characters shown as escapes)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                             finalize=shown)
    env.filters.update(pretty=pages.pretty, node=node_label, past=past_tense, plain=plain_mentions,
                       when=lambda t: f"{t:%Y-%m-%d %H:%M:%S} UTC" if t else "",
                       short=lambda t: f"{t:%d %b %H:%M}" if t else "")
    env.globals.update(fields_of=pages.fields_of, label=pages.label, statuses=[s.value for s in RunStatus])
    return env


def typed(text: str) -> str:
    """Text typed into a page's form as the CLI and the REST API store it: newlines as ``\\n`` (browsers send
    a textarea's line breaks as ``\\r\\n``; a lone ``\\r`` is a line break too), surrounding blanks dropped."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def form_part_bytes(max_state_bytes: int) -> int:
    """The largest form field the pages parse (``max_part_size``): a text of ``HAZEL_MAX_STATE_BYTES`` bytes
    however it is sent (URL-encoding writes a byte as ``%XX``, three), plus room for the form's other fields,
    so that a text the engine would refuse reaches it and is refused with the engine's own line."""
    return 3 * max_state_bytes + 4096


def form_delivery(actor_id: str, nonce: str, request_id: int | None, action: str) -> str | None:
    """The delivery id of one form's submission: a page's nonce with the form's request and action, so that a
    second submit of the same form is recorded once while another card's form (or another button) of the same
    page is a decision of its own (None: no nonce). At most 200 characters (longer ones are hashed)."""
    if not nonce:
        return None
    key = f"{actor_id}:{nonce}:{request_id if request_id is not None else '-'}:{action}"
    return key if len(key) <= 200 else "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def web_router(hazel: "Hazel", settings: Settings) -> APIRouter:
    """The run pages' router (see the module docstring). Without ``HAZEL_WEB_SECRET`` every page answers 503
    saying so.

    Raises:
        ConfigurationError: malformed ``HAZEL_API_TOKENS``.
    """
    env = environment()
    tokens = api_tokens(settings)
    auth: WebAuth | None = None  # (made below; None while the pages are off)
    state_bytes = hazel.settings.max_state_bytes  # the engine's limit on a decision's text
    part_bytes = form_part_bytes(state_bytes)

    def html(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        context = {"session": None, "flash": None, "path": "", "sign_in": False, "link": None, **context}
        session, on_run = context["session"], re.match(r"^/runs/([^/]+)", context["path"] or "")
        # a page of a run opened by a link that names a person: the header names who acts (``hazel link --for``)
        grant = (session.link_for(on_run.group(1)) if session is not None and on_run and not session.all_runs
                 else None)
        context["link_grant"] = grant if grant is not None and grant.person is not None else None
        return HTMLResponse(env.get_template(name).render(**context), status_code=status, headers=HEADERS)

    def message_page(request: Request, status: int, title: str, message: str,
                     link: tuple[str, str] | None = None) -> HTMLResponse:
        """A page that says one thing (an error), its header showing who is signed in; ``link``: ``(href,
        text)`` of where to go instead (the runs list, for an unknown run)."""
        session = auth.session(request) if auth is not None else None
        return html("message.html", status, title=title, message=message, session=session, path=request.url.path,
                    link=link)

    class WebRoute(APIRoute):
        """A page's malformed query, path or form (``page=-1``, ``a=x``, a number past ``INT_MAX``) answers
        an HTML page with pydantic's errors on one line (422), not FastAPI's JSON; a form the parser refuses
        (a field over ``form_part_bytes``: 413) an HTML page too. A URL-encoded form that is not UTF-8
        (``feedback=%FF``, which the parser would read as U+FFFD) is refused before it is parsed, 422 with
        ``forms.NotUtf8``'s line, nothing done; so is one holding a byte over 0x7F that is not percent-encoded
        (the parser would read it as latin-1), one that sends a field twice (the parser keeps the last value,
        which a filter in front reading the first would not see), and a multipart form or a JSON body (415: the
        pages send neither;
        a JSON body answered "action: Field required", the action it held unread). The REST API's
        routes keep their own error body (``bot.inbound.api.ApiRoute``)."""

        def get_route_handler(self):  # noqa: ANN202
            handler = super().get_route_handler()

            async def route(request: Request) -> Response:
                content_type = request.headers.get("content-type")
                sent = (content_type or "").lower()
                if request.method == "POST" and (sent.startswith("multipart/") or forms.is_json(sent)):
                    return message_page(request, 415, "Bad request", "the pages' forms are sent URL-encoded "
                                        "(application/x-www-form-urlencoded), as a browser sends them; not "
                                        + ("multipart" if sent.startswith("multipart/") else  # (read as latin-1)
                                           "JSON, which the REST API under /api takes"), link=back_link(request))
                if request.method == "POST" and forms.is_form(content_type):
                    body = await request.body()  # (kept: the form is parsed from it after)
                    bad = forms.not_utf8(body)
                    if bad is not None:
                        return message_page(request, 422, "Bad request", str(bad), link=back_link(request))
                    raw = forms.unescaped_at(body)
                    if raw is not None:  # (the parser would read it as latin-1: "café" stored as "cafÃ©")
                        return message_page(request, 422, "Bad request", f"the form holds a character that is "
                                            f"not percent-encoded (byte {raw}): send it URL-encoded, as a "
                                            "browser does", link=back_link(request))
                    twice = forms.repeated_field(body)
                    if twice is not None:  # (the parser keeps the last: action=reject&…&action=approve approved)
                        return message_page(request, 422, "Bad request", f"the form sends {twice!r} more than "
                                            "once; the pages' forms send each field once",
                                            link=back_link(request))
                try:
                    return await handler(request)
                except RequestValidationError as exc:
                    return message_page(request, 422, "Bad request", validation_message(exc))
                except StarletteHTTPException as exc:  # the form parser's (FastAPI raises it as a 400)
                    if exc.status_code != 400:
                        raise
                    if "exceeded maximum size" in str(exc.detail):
                        return message_page(request, 413, "Too long",
                                            f"a field of this form is over {part_bytes:,} bytes; a text may be "
                                            f"at most {state_bytes:,} bytes (HAZEL_MAX_STATE_BYTES)"
                                            ": go back and shorten it", link=back_link(request))
                    return message_page(request, 400, "Bad request", f"the form could not be read: {exc.detail}",
                                        link=back_link(request))

            return route

    def back_link(request: Request) -> tuple[str, str] | None:
        """Where a refused form goes back to: its run's page."""
        run_id = request.path_params.get("run_id")
        return (f"/runs/{quote(run_id, safe='')}", "Back to the run") if run_id else None

    router = APIRouter(include_in_schema=False, route_class=WebRoute, form_limits={"max_part_size": part_bytes})

    @router.get("/static/hazel.css")
    def css() -> FileResponse:
        return FileResponse(HERE / "static" / "hazel.css", media_type="text/css",
                            headers={"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"})

    try:
        auth = WebAuth(hazel, Signer(settings), tokens)
    except ValueError:
        def off() -> HTMLResponse:
            return html("message.html", 503, title="Run pages are off",
                        message="The run pages are off: set HAZEL_WEB_SECRET (and HAZEL_BASE_URL for links).")

        for path in ("/runs", "/runs/{rest:path}", "/login", "/logout"):  # only our paths: other routers follow
            router.add_api_route(path, off, methods=["GET", "POST"])
        return router

    def render(request: Request, session: "Session | None", name: str, status: int = 200,
             **context: Any) -> HTMLResponse:
        flash = session.flash if session is not None else None
        response = html(name, status, session=session, flash=flash, path=request.url.path, **context)
        if flash is not None and session is not None:
            auth.save(response, auth.flashed(session, None))
        return response

    def refused(request: Request, exc: Refused) -> Response:
        if exc.status == 401 and request.method == "GET" and "t" not in request.query_params:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/login?next={quote(target)}", status_code=303, headers=HEADERS)
        session = auth.session(request)  # a signed-in person is still shown as signed in (a stale form's 403)
        run_id = request.path_params.get("run_id")
        may_act = session is not None and (session.acts_on(run_id) if run_id else session.identity is not None)
        return html("message.html", exc.status, title="Not allowed" if exc.status == 403 else "Sign in",
                    message=str(exc), session=session, sign_in=exc.status == 401 or not may_act,
                    path=request.url.path if request.method == "GET" else f"/runs/{run_id}" if run_id else "",
                    link=back_link(request) if exc.status == 403 and may_act else None)

    def guarded(handler):  # noqa: ANN001, ANN202
        """Answers ``Refused`` with the sign-in page (401) or a refusal (403), and an unknown run with 404."""
        import functools

        @functools.wraps(handler)
        def wrapper(request: Request, *args: Any, **kwargs: Any) -> Response:
            with log_context(run_id=request.path_params.get("run_id")):
                try:
                    return handler(request, *args, **kwargs)
                except Refused as exc:
                    return refused(request, exc)
                except RunNotFoundError as exc:  # the message without its console hint (`hazel runs`)
                    return message_page(request, 404, "No such run", exc.message, link=("/runs", "See all runs"))
        return wrapper

    # -- sign-in ---------------------------------------------------------------------------------------

    def safe_next(target: str | None) -> str:
        return target if target and target.startswith("/") and not target.startswith("//") else "/runs"

    @router.get("/login")
    def login_form(request: Request, next: str | None = None) -> HTMLResponse:
        from bot.inbound.web.links import Session

        session = auth.session(request)
        fresh = session is None
        session = session or Session()
        response = html("login.html", session=session, next=safe_next(next), enabled=auth.sign_in_enabled,
                        error=None, flash=None, path="/login")
        if fresh:
            auth.save(response, session)
        return response

    @router.post("/login")
    def login(request: Request, token: Annotated[str, Form()] = "", csrf: Annotated[str, Form()] = "",
              next: Annotated[str, Form()] = "/runs") -> Response:
        session = auth.session(request)
        try:
            auth.check_csrf(session, csrf)
            signed_in = auth.sign_in(request, token)
        except Refused as exc:
            return html("login.html", exc.status, session=session, next=safe_next(next),
                        enabled=auth.sign_in_enabled, error=str(exc), flash=None, path="/login")
        log.info("web: %s signed in", signed_in.identity)
        response = RedirectResponse(safe_next(next), status_code=303, headers=HEADERS)
        auth.save(response, signed_in)
        return response

    @router.post("/logout")
    @guarded
    def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        auth.check_csrf(auth.session(request), csrf)
        response = RedirectResponse("/login", status_code=303, headers=HEADERS)
        auth.forget(response)
        return response

    # -- reading ---------------------------------------------------------------------------------------

    @router.get("/runs")
    @guarded
    def runs(request: Request, status: Annotated[list[RunStatus] | None, Query()] = None,
             workflow: str | None = None, mine: bool = False, page: Page = 0) -> Response:
        session = auth.viewer(request)
        valid = list(dict.fromkeys(s.value for s in status or []))  # an unknown status answered 422 (WebRoute)
        actor = auth.actor(session, "") if session.identity else None
        found = pages.runs_page(hazel, statuses=valid, workflow=workflow, page=page, mine=mine, actor=actor)
        query = [("status", s) for s in valid] + ([("workflow", workflow)] if workflow else []) + \
            ([("mine", "1")] if mine else [])
        registered = hazel.workflow_names() if workflow and not found.runs else []
        unknown = bool(registered) and workflow not in registered  # (s23 F11: the filter went unnamed)
        return render(request, session, "runs.html", found=found, chosen=valid, workflow=workflow or "",
                     mine=mine, query=query, unknown=unknown, registered=registered)


    @router.get("/runs/{run_id}")
    @guarded
    def run(request: Request, run_id: str, t: str | None = None, page: Page = 0) -> Response:
        if t is not None:  # opening a link: remember it in the session, then drop the token from the address
            session = auth.open_link(request, run_id, t)
            response = RedirectResponse(f"/runs/{run_id}", status_code=303, headers=HEADERS)
            auth.save(response, session)
            return response
        session = auth.viewer(request, run_id)
        return to_full_id(request, session, run_id) or run_view(request, session, run_id, page=page)

    def to_full_id(request: Request, session: "Session", run_id: str) -> Response | None:
        """For a signed-in session, the redirect (303) from a page of a run named by a unique prefix of its id
        (4 or more characters, as the CLI and the REST API take) to the same page of its full id, the query
        kept; None when ``run_id`` is a full id (or the session sees linked runs only: they are named whole).
        Raises ``RunNotFoundError`` (the 404 page) or ``AmbiguousRunIdError`` (naming them)."""
        if not session.all_runs:
            return None
        full = hazel.resolve(ref=run_id)
        if full == run_id:
            return None
        page = request.url.path.split(f"/runs/{run_id}", 1)[-1]  # ("" for the run page, "/audit", …)
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"/runs/{quote(full)}{quote(page)}{query}", status_code=303, headers=HEADERS)

    def run_view(request: Request, session: "Session", run_id: str, *, error: str | None = None,
                 status: int = 200, page: int = 0) -> Response:
        actor = auth.actor(session, run_id)
        data = pages.run_page(hazel, run_id, actor, page=page)
        grant = None if session.all_runs else session.link_for(run_id)
        shown_only = grant is not None and (grant.outdated or grant.lapsed)  # (an old or an expired person link)
        outdated = auth.view_only(session, run_id) if shown_only else None
        return render(request, session, "run.html", status, p=data, actor=actor, error=error,
                     web_actions=WEB_ACTIONS, nonce=secrets.token_urlsafe(12), outdated=outdated)

    @router.get("/runs/{run_id}/checkpoints/{seq}")
    @guarded
    def state(request: Request, run_id: str, seq: Annotated[int, InPath(ge=0, le=INT_MAX), DIGITS]) -> Response:
        session = auth.viewer(request, run_id)
        moved = to_full_id(request, session, run_id)
        if moved is not None:
            return moved
        run_ = hazel.get(run_id=run_id)
        checkpoints = hazel.checkpoints(run_id=run_id)
        cp = next((c for c in checkpoints if c.seq == seq), None)
        if cp is None:
            return render(request, session, "message.html", 404, title="No such checkpoint",
                          message=hazel.missing_checkpoint(run_id=run_id, seq=seq).message)
        tree = hazel.state_tree_at(run_id=run_id, seq=seq)
        ordered = sorted(checkpoints, key=lambda c: c.seq)
        return render(request, session, "state.html", run=run_, cp=cp, tree=tree,
                      strip=history.strip(ordered, seq), tree_page=history.page_of(ordered, seq))

    @router.get("/runs/{run_id}/diff")
    @guarded
    def diff(request: Request, run_id: str, a: Seq = None, b: Seq = None) -> Response:
        session = auth.viewer(request, run_id)
        moved = to_full_id(request, session, run_id)
        if moved is not None:
            return moved
        run_ = hazel.get(run_id=run_id)
        checkpoints = hazel.checkpoints(run_id=run_id)
        b = run_.head_seq if b is None else b
        if a is None:  # b's parent, else the nearest earlier checkpoint kept (hazel prune drops parents)
            try:
                a = hazel.previous_checkpoint(run_id=run_id, seq=b)
            except HazelError as exc:
                known = any(c.seq == b for c in checkpoints)  # then nothing earlier is: no error of the request
                return render(request, session, "message.html", 200 if known else 404,
                              title="Nothing earlier to compare with" if known else "No such checkpoint",
                              message=exc.message)
        try:
            found = pages.diff_page(hazel, run_, checkpoints, a, b)
        except HazelError as exc:
            return render(request, session, "message.html", 404, title="No such checkpoint", message=str(exc))
        return render(request, session, "diff.html", run=run_, d=found)

    @router.get("/runs/{run_id}/audit")
    @guarded
    def audit(request: Request, run_id: str) -> Response:
        session = auth.viewer(request, run_id)
        moved = to_full_id(request, session, run_id)
        if moved is not None:
            return moved
        return render(request, session, "audit.html", run=hazel.get(run_id=run_id),
                     events=hazel.audit(run_id=run_id))

    # -- acting ----------------------------------------------------------------------------------------

    def acting(request: Request, run_id: str, csrf: str):  # noqa: ANN202
        session = auth.viewer(request, run_id)
        auth.check_csrf(session, csrf)
        actor = auth.actor(session, run_id)
        if actor is None:
            raise Refused(403, auth.view_only(session, run_id))
        return session, actor

    def done(request: Request, session: "Session", run_id: str, outcome: Any, what: str) -> Response:
        if outcome.run_status is RunStatus.READY:
            continue_soon(hazel, run_id, origin="web")
        if outcome.still_pending:  # the engine names what the run still waits on
            what += f" The run is {still_waiting_text(outcome.still_pending)}."
        response = RedirectResponse(f"/runs/{run_id}", status_code=303, headers=HEADERS)
        auth.save(response, auth.flashed(session, what))
        return response

    def failed(request: Request, session: "Session", run_id: str, exc: HazelError) -> Response:
        status = hazel_error_response(exc).status_code
        if not isinstance(exc, (NotAllowedError, AlreadyDecidedError)):
            log.info("web: refused on run %s: %s", run_id, exc)
        return run_view(request, session, run_id, error=str(exc), status=status)

    @router.post("/runs/{run_id}/decide")
    @guarded
    def decide(request: Request, run_id: str, action: Annotated[str, Form()] = "", csrf: Annotated[str, Form()] = "",
               request_id: FormId = None, text: Annotated[str, Form()] = "",
               nonce: Annotated[str, Form(max_length=64)] = "") -> Response:
        session, actor = acting(request, run_id, csrf)
        if action not in WEB_ACTIONS:  # (malformed, not a refusal: 422; none or an empty one: FastAPI's "Field
            return failed(request, session, run_id, InvalidDecisionError(  # required" did not say what to send)
                f"{action!r} is not a decision the page takes ({', '.join(WEB_ACTIONS)})" if action else
                f"the form sends no action: choose one of {', '.join(WEB_ACTIONS)}"))
        text = typed(text)
        payload = {"reject": {"reason": text}, "feedback": {"text": text}}.get(action, {})
        try:
            outcome = hazel.decide(run_id=run_id, action=action, actor=actor, payload=payload,
                                   request_id=request_id, delivery_id=form_delivery(actor.id, nonce, request_id, action))
        except HazelError as exc:
            return failed(request, session, run_id, exc)
        log.info("web: %s decided %s on run %s", actor.label, action, run_id)
        return done(request, session, run_id, outcome, f"{past_tense(action).capitalize()} as {actor.label}.")

    @router.post("/runs/{run_id}/rewind")
    @guarded
    def rewind(request: Request, run_id: str, head: FormHead, to: FormSeq = None, here: FormSeq = None,
               csrf: Annotated[str, Form()] = "", request_id: FormId = None, feedback: Annotated[str, Form()] = "",
               nonce: Annotated[str, Form(max_length=64)] = "", decided: FormSeq = None) -> Response:
        """A rewind from the page's one rewind form: to checkpoint ``here`` when a row's "rewind here" button
        sent it (a button of that form: only the one clicked is sent), else ``to`` (the form's checkpoint
        field); neither answers 422 ``to: Field required``. ``head``: the head checkpoint the page
        showed, required (the engine refuses the rewind when the run has moved on since: ``Hazel.rewind``'s
        ``expect_head``; a form without it skipped that check); ``decided``: the newest decision it showed
        (``expect_decision``: a vote or a decision on one of parallel requests writes no checkpoint)."""
        to = here if here is not None else to
        if to is None:
            raise RequestValidationError([{"type": "missing", "loc": ("body", "to"), "msg": "Field required"}])
        session, actor = acting(request, run_id, csrf)
        try:
            outcome = hazel.rewind(run_id=run_id, actor=actor, to=to,  # an empty field: no feedback; one of
                                   feedback=typed(feedback) if feedback else None,  # blanks: refused as blank
                                   request_id=request_id, expect_head=head, expect_decision=decided,
                                   delivery_id=form_delivery(actor.id, nonce, request_id, f"rewind:{to}"))
        except HazelError as exc:
            return failed(request, session, run_id, exc)
        log.info("web: %s rewound run %s to #%s", actor.label, run_id, to)
        return done(request, session, run_id, outcome, f"Rewound to checkpoint #{to} as {actor.label}.")

    def form_address(run_id: str) -> Response:
        """A form's address opened as a page (the address bar after a refused decision, a bookmark, a reload
        after the browser dropped the form): the run's page, not "no run 'RUN/decide'" (s23 F9)."""
        return RedirectResponse(f"/runs/{quote(run_id, safe='')}", status_code=303, headers=HEADERS)

    for form_path in ("/runs/{run_id}/decide", "/runs/{run_id}/rewind"):
        router.add_api_route(form_path, form_address, methods=["GET"])

    # last: a path under /runs/ that no page above took is a run id no run has ("no run 'abc/def'", 404), an
    # HTML page for the browser that asked, not the REST API's JSON "no such endpoint"
    router.add_api_route("/runs/{run_id:unrouted}", run, methods=["GET"])
    return router
