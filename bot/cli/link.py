"""``hazel link RUN [--for PERSON]``: a signed "View run" link to a run's page (``bot.inbound.web.links``).

A ``--for`` link is the operator's proxy for PERSON, as ``--as PERSON`` is: it carries the operator who made it
(``Hazel.operator().id``), its minting is recorded on the run first (``Hazel.record_link``: ``link.minted`` in
``hazel audit``), and what its holder decides is recorded as "operator M for PERSON" (``bot.engine.links``)."""

from typing import Annotated

import typer

from bot.cli import common
from bot.cli.common import CliError, JsonOpt, emit_json, engine, handle_errors, usage_error

app = typer.Typer()


@app.command("link")
@handle_errors
def link_cmd(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run id (or a unique prefix).")],
    for_: Annotated[str | None, typer.Option("--for", metavar="PERSON", help="Let the link's holder act on the "
                                             "run for PERSON (a person's name, or a REST token's name) as your "
                                             "proxy, as --as PERSON does: recorded as 'operator YOU for PERSON', "
                                             "and its making in hazel audit; without it the link shows the run "
                                             "only.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Print a signed link to the run's page, valid for HAZEL_LINK_TTL_SEC (needs HAZEL_BASE_URL and
    HAZEL_WEB_SECRET)."""
    from bot.cli.render import span  # (imported here: every command's --help imports this module)
    from bot.inbound.api import api_tokens
    from bot.inbound.web import Signer

    person = for_.strip() if for_ is not None else None
    if for_ is not None and not person:
        raise usage_error("--for", "needs a name")
    from bot.settings import name_problem

    problem = name_problem(person) if person is not None else None
    if problem:
        raise usage_error("--for", problem)
    hazel = engine(json_out)
    settings = hazel.settings
    missing = [name for name, value in (("HAZEL_BASE_URL", settings.base_url), ("HAZEL_WEB_SECRET",
                                        settings.web_secret)) if not value]
    if missing:
        raise CliError(f"set {' and '.join(missing)} to make run links (see the README, \"Run pages\")")
    run_id = hazel.resolve(ref=run_ref)
    if person is not None:  # a listed identity (a Slack id, a token name) is its person, as --as takes it: the
        person = hazel.people.person_named(person)  # link, its page and the audit log name the person (s23 F6)
    note = None
    if person is not None and not hazel.knows_name(run_id=run_id, name=person,
                                                   token_names=[name for name, _ in api_tokens(settings)]):
        note = (f"{person!r} is no name Hazel knows (not a person of the people file, a REST token name, an "
                f"approver of this run's workflow, or who started the run): the link acts as {person!r}, a "
                "person of their own who may decide only where anyone may (people need not be listed: see "
                "\"Who is who\" in the README); check the spelling")
    me = hazel.operator()
    if person is not None:  # recorded before the link exists: no link acts that the audit log does not show
        hazel.record_link(run_id=run_id, person=person, actor=me, ttl_sec=settings.link_ttl_sec)
    url = Signer(settings).link(run_id, person, minted_by=me.id if person is not None else None)
    if json_out:
        emit_json({"run_id": run_id, "url": url, "for": person, "minted_by": me.id if person else None,
                   "ttl_sec": settings.link_ttl_sec, "note": note})
        return
    from rich.markup import escape

    common.out.print(url, soft_wrap=True, markup=False, highlight=False)
    who = (f"acts as operator {escape(me.id)} for {escape(person)} (recorded in hazel audit)" if person
           else "shows the run only")
    common.err.print(f"[dim]valid for {span(settings.link_ttl_sec)}; {who}. Anyone holding it can use it.[/dim]")
    if note is not None:
        common.err.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
