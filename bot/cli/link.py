"""``hazel link RUN [--for PERSON]``: a signed "View run" link to a run's page (``bot.inbound.web.links``)."""

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
                                             "run as PERSON (a person's name, or a REST token's name); without "
                                             "it the link shows the run only.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Print a signed link to the run's page, valid for HAZEL_LINK_TTL_SEC (needs HAZEL_BASE_URL and
    HAZEL_WEB_SECRET)."""
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
    note = None
    if person is not None and not hazel.knows_name(run_id=run_id, name=person,
                                                   token_names=[name for name, _ in api_tokens(settings)]):
        note = (f"{person!r} is no name Hazel knows (not a person of the people file, a REST token name, an "
                f"approver of this run's workflow, or who started the run): the link acts as {person!r}, a "
                "person of their own who may decide only where anyone may (people need not be listed: see "
                "\"Who is who\" in the README); check the spelling")
    url = Signer(settings).link(run_id, person)
    if json_out:
        emit_json({"run_id": run_id, "url": url, "for": person, "ttl_sec": settings.link_ttl_sec, "note": note})
        return
    common.out.print(url, soft_wrap=True, markup=False, highlight=False)
    who = f"acts as {person}" if person else "shows the run only"
    common.err.print(f"[dim]valid for {_span(settings.link_ttl_sec)}; {who}. Anyone holding it can use it.[/dim]")
    if note is not None:
        from rich.markup import escape

        common.err.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)


def _span(seconds: float) -> str:
    """A link's lifetime as a person reads it: ``168 h``, ``2 min``, ``1 s`` (hours from one hour up; it said
    ``0.000277778 h`` for a second)."""
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
