"""Settings, from the environment (and a ``.env`` file in the working directory, if present).

Secrets are ``SecretStr``: they print as ``**********`` and never reach logs, messages or the database.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.sources import ENV_FILE_SENTINEL

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic_settings import PydanticBaseSettingsSource


_MORE_THAN_ZERO = frozenset({"workers"})
"""Numeric settings (besides ``*_sec`` and ports) for which 0 makes no sense."""
MIN_DURATION_SEC = 0.001
"""The shortest duration a ``*_sec`` setting takes (1 ms): below it a sweep, a lease or a tick spins."""
MIN_SCHEDULER_TICK_SEC = 0.1
"""The shortest ``HAZEL_SCHEDULER_TICK_SEC``: a tick is a few database round trips, the safety net for deadlines
this process did not hear of; one every millisecond started before the last had ended, about 500 times a second
(APScheduler's "skipped: maximum number of running instances reached"), and fired nothing sooner."""
MAX_WORKERS = 1000
"""Most worker threads of one process (``HAZEL_WORKERS``, ``--workers``)."""
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_NUMBER_MAX = 2**31 - 1
"""The largest number a setting takes (seconds: 68 years; bytes: 2 GiB), unless its field says its own
(``HAZEL_HEAD_CACHE_BYTES``: 16 GiB)."""


def _own_max(settings: type, name: str, default: int) -> int | float:
    """The ``le`` bound the field ``name`` of ``settings`` declares (``Field(le=…)``), else ``default``."""
    field = settings.model_fields.get(name)  # type: ignore[attr-defined]
    for constraint in field.metadata if field is not None else ():
        if getattr(constraint, "le", None) is not None:
            return constraint.le
    return default
WEB_SECRET_MIN_CHARS = 32
"""The fewest characters ``HAZEL_WEB_SECRET`` takes (spaces around it not counted: the signer leaves them out):
it alone signs the "View run" links every Slack card and Jira issue carries, ``hazel link --for`` proxy links
and the session cookies, and a short one can be found offline from any posted link by trying them all."""


_SQLITE_DRIVER_ARGS = frozenset({"timeout", "isolation_level", "detect_types", "check_same_thread",
                                 "cached_statements", "factory", "uri"})
"""The query arguments SQLAlchemy's pysqlite dialect passes to ``sqlite3.connect``
(https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#uri-connections); with ``uri=true`` any other is
SQLite's own URI parameter (``mode=ro``, ``cache=shared``: https://www.sqlite.org/uri.html)."""


def _sqlite_query(url: str) -> None:
    """Refuse a SQLite URL whose ``?`` was meant as part of the file's name: SQLAlchemy reads everything after the
    first ``?`` as the URL's query, so ``sqlite:///runs?old.db`` opened (and created) the file ``runs`` without
    a word, and ``sqlite:///a?b=1.db`` only warned. A query is accepted when each argument has a value and is one
    the driver takes, or any with ``uri=true``.

    Raises:
        ValueError: naming the file SQLite would open and how to write a ``?`` in a name (``%3F``).
    """
    from urllib.parse import parse_qsl

    scheme, _, rest = url.partition(":")
    if not scheme.lower().startswith("sqlite") or "?" not in rest:
        return
    path, _, query = rest.partition("?")
    args = parse_qsl(query, keep_blank_values=True)
    uri = any(k == "uri" and v.lower() in ("true", "1") for k, v in args)
    if args and all("=" in part for part in query.split("&") if part) and (
            uri or all(k in _SQLITE_DRIVER_ARGS for k, _ in args)):
        return
    opened = path.removeprefix("///") if path.startswith("///") else path
    raise ValueError(f"the '?' in a SQLite URL starts its query, so the database would be the file {opened!r}; "
                     "write a '?' that is part of the file's name as %3F")


def _http_url(url: str) -> bool:
    """Whether ``url`` is an http(s) URL with a host (and, if it has one, a valid port), holding no character a
    URL cannot hold as it is (RFC 3986: a space, a control character, ``<>"\\{}|^```): ``https://exa mple.com``
    and ``https://example.com\\evil`` (which browsers open as ``/evil``) made links that could not work (s32 F9)."""
    from urllib.parse import urlsplit

    if re.search(r'[\x00-\x20\x7f<>"\\{}|^`]', url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number from 0 to 65535)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _url_shown(url: str) -> str:
    """``url`` as given, for a message; its user name, password, query and fragment (which may hold a secret)
    left out when it has any (``?…``, ``#…`` in their place), and a path segment that looks like a token
    (``path_shown``) as ``…``."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return path_shown(url.partition("?")[0].partition("#")[0])
    if "@" not in parts.netloc and not parts.query and not parts.fragment and path_shown(parts.path) == parts.path:
        return url
    return (f"{parts.scheme}://" if parts.scheme else "") + parts.netloc.rpartition("@")[2] + path_shown(parts.path) \
        + ("?…" if parts.query else "") + ("#…" if parts.fragment else "")


TOKEN_SEGMENT_CHARS = 16
"""A URL's path segment this long or longer, holding a digit or an upper-case letter, is shown as ``…``."""


def path_shown(path: str) -> str:
    """A URL's path for a message, each segment that looks like a token (``TOKEN_SEGMENT_CHARS`` or more, with
    a digit or an upper-case letter) as ``…``: Slack's incoming webhooks (``/services/T…/B…/<secret>``),
    Discord's (``/api/webhooks/<id>/<token>``) and Teams' carry their secret there. Words such as
    ``/deployment-notifications`` are kept."""
    return "/".join("…" if _token_like(part) else part for part in path.split("/"))


def _token_like(segment: str) -> bool:
    return len(segment) >= TOKEN_SEGMENT_CHARS and (not segment.islower() or any(c.isdigit() for c in segment))


def printable_name(name: str) -> bool:
    """Whether a person's name (``HAZEL_OPERATOR``, ``--as``) is one line of printable text: no C0 or C1
    control character (a line break would start a forged row in ``hazel audit``), DEL or bidi override: nothing
    ``integrations.terminal.for_terminal`` would show as an escape on one line."""
    from integrations.terminal import unsafe

    return not unsafe(name, one_line=True)


MAX_NAME_CHARS = 200
"""The longest name of a person or an identity (the database keeps actor names in 200 characters)."""

INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200e\u200f"
                        "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
                        "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
"""Unicode's default-ignorable code points (DerivedCoreProperties.txt, ``Default_Ignorable_Code_Point``): what
prints as nothing (a soft hyphen, a zero-width space, direction marks, a word joiner, variation selectors, tag
characters, Hangul fillers, U+FEFF), so that ``b\u200bob`` or ``time\u200eout`` reads as another name. Not the
zero-width (non-)joiners, U+200C and U+200D, which names in Persian and Indic scripts need."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a person or one of their identities (``HAZEL_OPERATOR``, ``--as``, ``hazel link
    --for``, ``HAZEL_API_TOKENS``' names, the people file), as the end of a sentence; None: it can. Not one
    line of printable text (``printable_name``), longer than ``MAX_NAME_CHARS``, or the name of Hazel's own
    actor (``hazel``, ``timeout``: a person's decision would read as a timeout's in ``hazel history``)."""
    from store.models import SYSTEM, TIMEOUT

    if not printable_name(name):
        return ("must be one line of printable text (no line break or control character: the audit log and the "
                "CLI's tables show it)")
    if name.strip() and name != name.strip():  # (a blank name: its callers say "blank")
        return f"starts or ends with a space: it would read as another name ({name.strip()!r})"
    hidden = INVISIBLE.search(name)
    if hidden is not None:
        return (f"holds an invisible character (U+{ord(hidden.group()):04X}): it would read as another name "
                f"({INVISIBLE.sub('', name)!r})")
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long: at most {MAX_NAME_CHARS}"
    if name.strip().lower() in (SYSTEM.who.lower(), TIMEOUT.who.lower(), SYSTEM.id, TIMEOUT.id):
        return f"is the name of Hazel's own actor ({name.strip()!r}); choose another name"
    return None


IDENTITY_OF_API_TOKEN = "api"
"""The caller of ``HAZEL_API_TOKEN``."""

API_TOKEN_MIN_CHARS = 16
"""The fewest characters a REST API token takes (``HAZEL_API_TOKEN``, each ``HAZEL_API_TOKENS`` entry's; spaces
around it not counted): a bearer token is all that stands between the network and every run's decisions, and a
short one is found by trying them all. ``openssl rand -hex 24`` makes one of 48."""
_SHORT_TOKEN = (f"is shorter than {API_TOKEN_MIN_CHARS} characters: a short token can be guessed; make one with: "
                "openssl rand -hex 24")
_UNSENDABLE_TOKEN = ("holds a character an HTTP header cannot carry (printable ASCII only, no spaces): no client "
                     "could present it; make one with: openssl rand -hex 24")


def _token_problem(token: str) -> str | None:
    """Why ``token`` cannot be a REST API token (too short; a character outside printable ASCII, or a space,
    which an ``Authorization`` header cannot carry: s26 F1, such a token was taken and every call with it was
    401), else None."""
    if len(token) < API_TOKEN_MIN_CHARS:
        return _SHORT_TOKEN
    if not (token.isascii() and token.isprintable()) or any(c.isspace() for c in token):
        return _UNSENDABLE_TOKEN
    return None


def api_token_pairs(api_token: SecretStr | None, api_tokens: SecretStr | None) -> list[tuple[str, SecretStr]]:
    """``(name, token)`` of ``HAZEL_API_TOKEN`` (named ``api``) and of each ``HAZEL_API_TOKENS`` entry.

    A name may have several tokens (``ci=old,ci=new``: a token rotated without downtime, both taken until the
    old one is removed); a token is one name's.

    Raises:
        ValueError: an entry is not ``name=token``, a token is shorter than ``API_TOKEN_MIN_CHARS`` or holds a
            character other than printable ASCII (a space too: ``_token_problem``), or a token appears twice (the
            message says which entry, never a token nor its length).
    """
    pairs: list[tuple[str, SecretStr]] = []
    if api_token is not None and api_token.get_secret_value().strip():
        problem = _token_problem(api_token.get_secret_value().strip())
        if problem:
            raise ValueError(f"HAZEL_API_TOKEN {problem}")
        pairs.append((IDENTITY_OF_API_TOKEN, SecretStr(api_token.get_secret_value().strip())))
    if api_tokens is not None:
        for i, entry in enumerate(api_tokens.get_secret_value().split(","), start=1):
            if not entry.strip():
                continue
            name, sep, token = (part.strip() for part in entry.partition("="))
            if not sep or not name or not token:
                raise ValueError(f"entry {i} is not name=token")
            problem = name_problem(name)
            if problem:
                raise ValueError(f"entry {i}: its name {problem}")
            problem = _token_problem(token)
            if problem:
                raise ValueError(f"entry {i} ({name}): its token {problem}")
            pairs.append((name, SecretStr(token)))
    tokens = [t.get_secret_value() for _, t in pairs]
    if len(set(tokens)) != len(tokens):
        raise ValueError("each token must appear once (a name may have several: name=old,name=new)" + (
            f" (HAZEL_API_TOKEN's included, as {IDENTITY_OF_API_TOKEN!r})" if api_token is not None else ""))
    return pairs


def _default_operator() -> str:
    import getpass  # (and termios): only when HAZEL_OPERATOR is unset

    try:
        return getpass.getuser()
    except Exception:  # no user name in a bare container
        return "operator"


class EnvFileError(ValueError):
    """A ``.env`` file with a line python-dotenv cannot parse (``check_env_file``). Its message names the file
    and the line numbers, never a line's text: it may hold a secret."""


def _env_bindings(path: str) -> list[Any] | None:
    """python-dotenv's bindings (``dotenv.parser.Binding``: ``key``, ``value``, ``original``, ``error``) of the
    file ``path`` as pydantic-settings reads it (UTF-8); None when it is not a regular file (absent, a
    directory; a FIFO is not read twice).

    Raises:
        OSError: the file cannot be read. UnicodeDecodeError: it is not UTF-8 text.
    """
    import io

    if not os.path.isfile(path):
        return None
    from dotenv.parser import parse_stream

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return list(parse_stream(io.StringIO(text)))


def _bad_line(binding: Any) -> tuple[int, bool]:
    """The line number of a binding python-dotenv could not parse (its text starts with the blank lines before
    it), and whether it looks like an unclosed quote (a value starting with a quote it does not close)."""
    import re

    text = binding.original.string
    stripped = text.lstrip()
    line = binding.original.line + len(re.findall(r"\r\n|\n|\r", text[:len(text) - len(stripped)]))
    value = stripped.partition("=")[2].lstrip(" \t")
    unclosed = bool(value) and value[0] in "\"'" and value[0] not in value[1:]
    return line, unclosed


def check_env_file(path: str = ".env") -> None:
    """Refuse the ``.env`` file ``path`` (when it exists) if python-dotenv cannot parse one of its lines
    (pydantic-settings would skip the line, logging python-dotenv's warning, and a setting it meant to set would
    silently keep its default: ``HAZEL_DATABASE_URL="postgresql+psycopg://…`` without its closing quote, a new
    SQLite database). Comments, blank lines, ``export NAME=value`` and python-dotenv's quoting are fine.

    Raises:
        EnvFileError: ``cannot read .env: line 1 is not NAME=VALUE (an unclosed quote?): fix or remove it``
            (the lines' numbers only, never their text). OSError, UnicodeDecodeError: as ``_env_bindings``.
    """
    bindings = _env_bindings(path)
    bad = [_bad_line(b) for b in bindings or () if b.error]
    if not bad:
        return
    lines = [str(n) for n, _ in bad]
    which = f"line {lines[0]} is" if len(lines) == 1 else f"lines {', '.join(lines[:-1])} and {lines[-1]} are"
    hint = " (an unclosed quote?)" if any(unclosed for _, unclosed in bad) else ""
    raise EnvFileError(f"cannot read {path}: {which} not NAME=VALUE{hint}: fix or remove "
                       f"{'it' if len(lines) == 1 else 'them'}")


def read_env_file(path: str = ".env", *, lenient: bool = False) -> dict[str, str | None]:
    """Name -> value of each line of the ``.env`` file ``path`` as pydantic-settings reads it (python-dotenv's
    ``dotenv_values``: ``${VAR}`` interpolated; ``NAME`` alone is None); ``{}`` when there is no such file.
    ``lenient``: the lines python-dotenv cannot parse are left out, without its warning.

    Raises:
        EnvFileError: (unless ``lenient``) a line python-dotenv cannot parse (``check_env_file``). OSError,
            UnicodeDecodeError: as ``_env_bindings``.
    """
    import io

    bindings = _env_bindings(path)
    if not bindings:
        return {}
    if not lenient:
        check_env_file(path)
    from dotenv import dotenv_values

    good = "".join(b.original.string for b in bindings if not b.error)  # (no line python-dotenv warns about)
    return dotenv_values(stream=io.StringIO(good))


def env_file_values(path: str | None) -> dict[str, str | None]:
    """``read_env_file(path, lenient=True)``, with a file that cannot be read (or is not UTF-8) counting as
    empty, and None as no file: for readers that must not fail on ``.env`` (``Settings`` refuses such a file on
    its own, saying why)."""
    if path is None:
        return {}
    try:
        return read_env_file(path, lenient=True)
    except (OSError, UnicodeDecodeError):
        return {}


class Settings(BaseSettings):
    """Every setting Hazel reads. The environment variable names are given with each field.

    Raises (when built):
        pydantic.ValidationError: a malformed setting (its message never shows a value).
        EnvFileError: a ``.env`` line python-dotenv cannot parse (``check_env_file``), before anything is read.
        UnicodeDecodeError: ``.env`` is not UTF-8 text.
    """

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True,
                                      dotenv_filtering="only_existing",  # (no other .env line reaches the model)
                                      hide_input_in_errors=True)  # (an error never shows a value: it may be a secret)
    # (``populate_by_name``: code and tests build ``Settings(port=8001)``; see ``settings_customise_sources``.)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """pydantic-settings' sources in their usual order, the environment, ``.env`` and secret files read by
        each field's aliases only (``HAZEL_PORT``, never ``PORT``).

        With ``populate_by_name`` the env sources also read a variable named like the field (``PORT``,
        ``DATABASE_URL``, ``WORKERS``: names a PaaS or a shell sets for its own use); each source is given the
        settings' config without name validation, so it looks up the aliases alone while keyword arguments
        (``init_settings``) still take field names. (``dotenv_filtering="only_existing"`` keeps ``.env`` lines that
        name no alias, ``PORT=…`` among them, from reaching the model as extra input, which it would take by
        name.)"""
        for source in (env_settings, dotenv_settings, file_secret_settings):
            source.config = {**source.config, "validate_by_name": False}
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    def __init__(self, **values: Any) -> None:
        """As ``BaseSettings``; the ``.env`` file (``_env_file``, else ``model_config``'s) is checked first
        (``check_env_file``): one python-dotenv cannot parse stops here, not with a setting silently left at its
        default."""
        env_file = values.get("_env_file", self.model_config.get("env_file"))
        if env_file is ENV_FILE_SENTINEL:
            env_file = self.model_config.get("env_file")
        for path in ([env_file] if isinstance(env_file, (str, os.PathLike)) else env_file or ()):
            check_env_file(os.fspath(path))
        super().__init__(**values)

    database_url: str = Field("sqlite:///hazel.db", validation_alias="HAZEL_DATABASE_URL")
    """SQLAlchemy URL: ``sqlite:///hazel.db`` (default, WAL) or ``postgresql+psycopg://user@host:5432/db``."""
    workflows: str = Field("examples.migration_plan", validation_alias="HAZEL_WORKFLOWS")
    """Comma-separated modules (or ``.py`` paths) whose top-level ``Workflow`` objects are registered."""
    sqlite_synchronous: str = Field("FULL", validation_alias="HAZEL_SQLITE_SYNCHRONOUS")
    sqlite_wal_preallocate_pages: int = Field(1000, ge=0, le=10_000,
                                              validation_alias="HAZEL_SQLITE_WAL_PREALLOCATE_PAGES")
    """Frames SQLite's log is grown to before a process's first write, so that commits write over blocks that
    exist instead of extending the file (``store.wal``; 0: not grown; at most 10,000, 40 MB of 4 KB pages: SQLite
    starts its log again after 1,000). Ignored on PostgreSQL."""
    db_pool_size: int = Field(10, ge=1, le=1000, validation_alias="HAZEL_DB_POOL_SIZE")
    """Database connections each process keeps open (PostgreSQL also opens up to 20 more under load, and each
    worker process one ``LISTEN`` connection)."""
    operator: str = Field(default_factory=_default_operator, validation_alias="HAZEL_OPERATOR")
    """Who the CLI acts as: the console operator (``--as NAME`` acts for NAME, recorded as "operator X for
    NAME")."""

    @field_validator("operator", mode="before")
    @classmethod
    def _operator_name(cls, value: object) -> str:
        """Blank: the login name. ``name_problem``'s names are refused (Hazel's own actors' names: the audit log
        would show the operator as Hazel itself)."""
        name = str(value).strip() if value is not None else ""
        if not name:
            return _default_operator()
        problem = name_problem(name)
        if problem:
            raise ValueError(problem)
        return name

    people_file: str | None = Field(None, validation_alias="HAZEL_PEOPLE_FILE")
    """A TOML file of people and their identities per channel (``bot.engine.people``)."""
    lease_sec: float = Field(60.0, validation_alias="HAZEL_LEASE_SEC")
    workers: int = Field(4, validation_alias="HAZEL_WORKERS")
    """Worker threads executing runs in ``hazel serve`` / ``hazel worker``."""
    sweep_sec: float = Field(1.0, validation_alias="HAZEL_SWEEP_SEC")
    """How often idle workers look for ready runs without being woken (in-process wake-ups and PostgreSQL
    LISTEN/NOTIFY wake them at once; the sweep is the safety net)."""
    host: str = Field("127.0.0.1", validation_alias="HAZEL_HOST")
    port: int = Field(8000, validation_alias="HAZEL_PORT")
    output_dir: str = Field("out", validation_alias="HAZEL_OUTPUT_DIR")
    """Where the example workflow's deploy step writes its artefacts."""
    scheduler_tick_sec: float = Field(5.0, validation_alias="HAZEL_SCHEDULER_TICK_SEC")
    """Seconds between the scheduler's periodic looks at what is due (reminders, escalations, timeouts,
    retries): the safety net. Deadlines this process commits (and, on PostgreSQL, those other processes commit)
    fire on time. At least ``MIN_SCHEDULER_TICK_SEC``."""
    retention_days: float | None = Field(None, ge=0, lt=1_000_000, allow_inf_nan=False,
                                         validation_alias="HAZEL_RETENTION_DAYS")
    """When set, ``hazel serve`` / ``hazel worker`` prune daily the checkpoints of runs that ended more than
    this many days ago (as ``hazel prune --older-than DAYS``: 0 or more, below 1,000,000)."""

    slack_bot_token: SecretStr | None = Field(None, validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(None, validation_alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field("https://slack.com/api/", validation_alias="HAZEL_SLACK_API_URL")

    jira_url: str | None = Field(None, validation_alias="JIRA_URL")
    jira_user: str | None = Field(None, validation_alias="JIRA_USER")
    jira_api_token: SecretStr | None = Field(None, validation_alias=AliasChoices("JIRA_API_TOKEN", "JIRA_TOKEN"))
    jira_pat: SecretStr | None = Field(None, validation_alias="JIRA_PAT")
    jira_webhook_secret: SecretStr | None = Field(None, validation_alias="JIRA_WEBHOOK_SECRET")
    """The secret of the Jira webhook: requests must carry ``X-Hub-Signature: sha256=<HMAC of the body>``."""
    jira_webhook_allow_unsigned: bool = Field(False, validation_alias="JIRA_WEBHOOK_ALLOW_UNSIGNED")
    """Accept unsigned webhooks when no secret is set (old Jira Server without webhook secrets; private
    networks only). Without a secret and without this, every webhook is refused."""
    jira_deployment: Literal["cloud", "server"] | None = Field(None, validation_alias="JIRA_DEPLOYMENT")
    """``cloud`` or ``server`` (Server and Data Center); default: ``cloud`` for ``*.atlassian.net``."""
    jira_issue_type: str = Field("Task", validation_alias="JIRA_ISSUE_TYPE")
    jira_approve_status: str | None = Field("Approved", validation_alias="JIRA_APPROVE_STATUS")
    """Moving an issue to this status approves its request (per point: ``jira_approve_status``)."""
    jira_reject_status: str | None = Field("Rejected", validation_alias="JIRA_REJECT_STATUS")
    """Moving an issue to this status rejects its request (per point: ``jira_reject_status``)."""
    jira_done_status: str | None = Field("Done", validation_alias="JIRA_DONE_STATUS")
    """Hazel moves an issue here once its request is approved, and when the run completes."""
    jira_rejected_status: str | None = Field(None, validation_alias="JIRA_REJECTED_STATUS")
    """Hazel moves an issue here when its request is rejected (unset: it stays where it is)."""
    jira_timeout_sec: float = Field(10.0, validation_alias="JIRA_TIMEOUT_SEC")
    """Connect and read timeout of each Jira REST call."""
    jira_group_cache_sec: float = Field(300.0, validation_alias="JIRA_GROUP_CACHE_SEC")
    """How long a person's Jira groups are cached for permission checks."""

    llm_base_url: str | None = Field(None, validation_alias="HAZEL_LLM_BASE_URL")
    llm_api_key: SecretStr | None = Field(None, validation_alias="HAZEL_LLM_API_KEY")
    llm_model: str | None = Field(None, validation_alias="HAZEL_LLM_MODEL")

    api_token: SecretStr | None = Field(None, validation_alias="HAZEL_API_TOKEN")
    """The REST API's bearer token; its caller acts as ``api`` (list ``api`` in ``Approvers.users``). At least
    ``API_TOKEN_MIN_CHARS`` characters."""
    api_tokens: SecretStr | None = Field(None, validation_alias="HAZEL_API_TOKENS")
    """Several REST API callers: ``name=token`` pairs, comma-separated; each token acts as its name. Each token
    at least ``API_TOKEN_MIN_CHARS`` characters."""

    base_url: str | None = Field(None, validation_alias="HAZEL_BASE_URL")
    """Where people reach ``hazel serve``, e.g. ``https://hazel.example.com`` (the run pages' links; without it
    Slack cards, Jira issues and ``hazel link`` carry no "View run" link)."""
    web_secret: SecretStr | None = Field(None, validation_alias="HAZEL_WEB_SECRET")
    """Signs "View run" links and the run pages' session cookies (a random string of at least 32 characters, the
    same on every ``hazel serve``; without it the run pages are off and no link is rendered). A shorter one is
    refused at start. Make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"""
    link_ttl_sec: float = Field(7 * 24 * 3600.0, validation_alias="HAZEL_LINK_TTL_SEC")
    """How long a "View run" link works after it was made (default 7 days)."""
    web_session_sec: float = Field(12 * 3600.0, validation_alias="HAZEL_WEB_SESSION_SEC")
    """How long a run pages' session (a sign-in at ``/login`` or an opened link) lasts (default 12 hours)."""

    hook_urls: str = Field("", validation_alias="HAZEL_HOOK_URLS")
    """Comma-separated URLs that receive run events (``bot.ops.hooks``); each event is POSTed to each URL."""
    hook_secret: SecretStr | None = Field(None, validation_alias="HAZEL_HOOK_SECRET")
    """Signs every hook delivery: ``X-Hazel-Signature: sha256=<hex HMAC-SHA256 of the body>``. Required with
    ``HAZEL_HOOK_URLS``."""
    hook_timeout_sec: float = Field(10.0, validation_alias="HAZEL_HOOK_TIMEOUT_SEC")
    """Connect and read timeout of one hook delivery."""

    log_format: Literal["text", "json"] = Field("text", validation_alias="HAZEL_LOG_FORMAT")
    """``text`` (one readable line per record) or ``json`` (one JSON object per line), in serve / worker."""
    log_level: str = Field("INFO", validation_alias="HAZEL_LOG_LEVEL")
    """``DEBUG``, ``INFO``, ``WARNING``, ``ERROR`` or ``CRITICAL`` (any case)."""
    metrics_port: int | None = Field(None, validation_alias="HAZEL_METRICS_PORT")
    """``hazel worker`` serves Prometheus ``/metrics`` on this port when set (``hazel serve`` always does)."""

    max_body_bytes: int = Field(2 * 1024 * 1024, ge=1024, validation_alias="HAZEL_MAX_BODY_BYTES")
    """Largest HTTP request body, in bytes, on every endpoint (REST API, ``/slack/events``, ``/jira/webhook``);
    default 2 MiB. A larger body (by ``Content-Length``, or counted as a chunked body arrives) is answered 413
    before any of it is parsed: nothing is written. Twice the state limit, so that every state the engine
    accepts can be sent whole, JSON-escaped, in a REST body."""
    head_cache_bytes: int = Field(4 * 1024 * 1024, ge=0, le=1 << 34, validation_alias="HAZEL_HEAD_CACHE_BYTES")
    """Stored (compressed) bytes of the paused checkpoints a process keeps in memory for the decisions it takes
    itself (``store.heads``: at most 4,096 runs, a checkpoint stored in more than 64 KiB never); default 4 MiB,
    0 keeps none (every decision reads its checkpoint from the database); at most 16 GiB."""
    max_state_bytes: int = Field(1024 * 1024, ge=1024, validation_alias="HAZEL_MAX_STATE_BYTES")
    """Largest run state, in bytes of its compact UTF-8 JSON, that a person may send: a run's input, the state
    an edit (or a rewind's edits) produces, and every input file the CLI reads (``--input @FILE``,
    ``--file``, ``--set KEY=@FILE``); default 1 MiB. Over it the start or decision is refused, naming the
    limit, on every channel, and nothing is written. (States written by a workflow's own steps are not
    limited.)"""

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object, info: ValidationInfo) -> object:
        """A blank value of a setting that may be None (``JIRA_URL=``, ``SLACK_BOT_TOKEN=``,
        ``JIRA_APPROVE_STATUS=``) means None: unset, or off; a blank number or flag (``HAZEL_PORT=``) is refused,
        naming its default (rather than pydantic's "unable to parse string as an integer"). A value from the
        environment holding a byte that is not UTF-8 (a lone surrogate once decoded) is refused: it could be
        neither logged nor stored. (One validator for all three: each one on every field costs the class ~1.5 ms
        to build, and every command builds it.)"""
        if not isinstance(value, str):
            return value
        field = cls.model_fields.get(info.field_name or "")
        if not value.strip() and field is not None:
            if type(None) in get_args(field.annotation):
                return None
            default = field.default
            if field.annotation is bool:
                raise ValueError("must be true or false, not blank"
                                 + (f" (default {str(default).lower()})" if isinstance(default, bool) else ""))
            if field.annotation in (int, float):
                shown = int(default) if isinstance(default, float) and default.is_integer() else default
                raise ValueError("must be a number, not blank"
                                 + (f" (default {shown})" if isinstance(default, (int, float)) else ""))
        from store.codec import is_text

        if not is_text(value):
            raise ValueError("not UTF-8 text")
        if field is not None and (field.annotation is int or int in get_args(field.annotation)):
            import re  # (a whole number as written: not "80.0", "8_000" or "nan", which pydantic's int takes or
            if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):  # names with its own words)
                raise ValueError(f"must be a whole number, not {value.strip()[:40]!r}")
        return value

    @field_validator("*")
    @classmethod
    def _in_range(cls, value: object, info: ValidationInfo) -> object:
        """Every setting in its range, whatever its field says: numbers finite, not negative and at most
        2**31 - 1, ports ``1``-``65535``, durations (``*_sec``) at least 1 ms (``HAZEL_SCHEDULER_TICK_SEC`` at least
        ``MIN_SCHEDULER_TICK_SEC``) and ``HAZEL_WORKERS`` above 0; text that has a
        non-blank default never blank. A new field gets these checks without asking (``tests/bot/test_cli_malformed.py``
        feeds every field malformed values)."""
        name = info.field_name or ""
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)):
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError("must be a finite number")
            most = _own_max(cls, name, _NUMBER_MAX)
            if value > most:
                raise ValueError(f"must be at most {most:,}")
            if name == "port" or name.endswith("_port"):
                if not 1 <= value <= 65535:
                    raise ValueError("must be a port number from 1 to 65535")
            elif name.endswith("_sec") or name in _MORE_THAN_ZERO:
                if value <= 0:
                    raise ValueError("must be more than 0")
                if name.endswith("_sec") and value < MIN_DURATION_SEC:  # (1e-300: a loop that never sleeps)
                    raise ValueError(f"must be at least {MIN_DURATION_SEC} s")
                if name == "scheduler_tick_sec" and value < MIN_SCHEDULER_TICK_SEC:
                    raise ValueError(f"must be at least {MIN_SCHEDULER_TICK_SEC} s (the scheduler's safety net: "
                                     "deadlines fire on time whatever the tick)")
                if name == "workers" and value > MAX_WORKERS:  # (as `--workers`)
                    raise ValueError(f"must be at most {MAX_WORKERS:,}")
            elif value < 0:
                raise ValueError("must be 0 or more")
        elif isinstance(value, str) and not value.strip():
            default = cls.model_fields[name].default if name in cls.model_fields else None
            if isinstance(default, str) and default.strip():
                raise ValueError(f"must not be blank (default {default!r})")
        return value

    @field_validator("api_tokens")
    @classmethod
    def _api_tokens(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """``HAZEL_API_TOKENS`` as ``name=token`` pairs, no name or token twice (``HAZEL_API_TOKEN``'s, named
        ``api``, included), checked for every command (``hazel runs`` as ``hazel serve``)."""
        api_token_pairs(info.data.get("api_token"), value)
        return value

    @field_validator("api_token")
    @classmethod
    def _api_token(cls, value: SecretStr | None) -> SecretStr | None:
        """At least ``API_TOKEN_MIN_CHARS`` characters (blank: no token); the message never shows the value
        (nor its length)."""
        token = value.get_secret_value().strip() if value is not None else ""
        if 0 < len(token) < API_TOKEN_MIN_CHARS:
            raise ValueError(f"must be at least {API_TOKEN_MIN_CHARS} characters: a short token can be guessed; "
                             "make one with: openssl rand -hex 24")
        if token and _token_problem(token):
            raise ValueError(_UNSENDABLE_TOKEN)
        return value

    @field_validator("web_secret")
    @classmethod
    def _web_secret(cls, value: SecretStr | None) -> SecretStr | None:
        """At least ``WEB_SECRET_MIN_CHARS`` characters; the message says how to make one and never shows the
        value (nor its length)."""
        if value is not None and len(value.get_secret_value().strip()) < WEB_SECRET_MIN_CHARS:
            raise ValueError(f"must be at least {WEB_SECRET_MIN_CHARS} characters: it alone signs the run pages' "
                             "links and session cookies, and a short one can be guessed from any link; make one "
                             "with: python -c 'import secrets; print(secrets.token_urlsafe(32))'")
        return value

    @field_validator("sqlite_synchronous")
    @classmethod
    def _synchronous(cls, value: str) -> str:
        """SQLite's ``PRAGMA synchronous`` levels Hazel accepts (``store.db.SQLITE_SYNCHRONOUS``)."""
        from store.db import SQLITE_SYNCHRONOUS

        if value.strip().upper() not in SQLITE_SYNCHRONOUS:
            raise ValueError(f"must be one of {', '.join(SQLITE_SYNCHRONOUS)}")
        return value.strip().upper()

    @field_validator("base_url", "jira_url", "llm_base_url")
    @classmethod
    def _base_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        """An http(s) URL with a host (the run pages' links, Jira's REST API, the LLM's API start with it),
        checked when a command starts rather than at the first delivery or call; Jira's and Hazel's own
        without a query or fragment (the ``jira`` library, and the run pages' links, append paths to them); Hazel's
        own without a path, too: the run pages link and redirect to root paths (``/runs/…``, ``/login``); nor a
        user or password: the links are posted to whole Slack channels and Jira issues."""
        from urllib.parse import urlsplit

        if value is None:
            return None
        example = {"jira_url": "https://yourcompany.atlassian.net", "llm_base_url": "https://api.openai.com/v1"}
        if not _http_url(value.strip()):
            raise ValueError(f"must be an http(s) URL such as {example.get(info.field_name or '', 'https://hazel.example.com')}"
                             f", not {_url_shown(value)!r}")
        if info.field_name in ("jira_url", "base_url") and ("?" in value or "#" in value):
            raise ValueError(f"must be the site's URL without a query or fragment, not {_url_shown(value)!r}")
        if info.field_name == "base_url" and urlsplit(value.strip()).path.strip("/"):  # pages link to /runs/…
            raise ValueError("must be the site's root URL, without a path (the run pages link to /runs/…: serve "
                             f"Hazel at the root of a host name or port), not {_url_shown(value)!r}")
        if info.field_name == "base_url" and "@" in urlsplit(value.strip()).netloc:  # posted to whole channels
            raise ValueError("must be the site's root URL without a user or password (every Slack card and Jira "
                             f"issue links to it), not {_url_shown(value)!r}")
        return value.strip()

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        """A port in the URL is a number (SQLAlchemy's parser raises a bare ``ValueError`` at connect time for
        ``host:notaport``). The URL itself is never echoed: it may hold a password."""
        from urllib.parse import urlsplit

        try:
            urlsplit(value.strip()).port  # noqa: B018 (raises ValueError for a port that is not a number)
        except ValueError:
            raise ValueError("the port in the URL must be a number from 0 to 65535") from None
        _sqlite_query(value.strip())
        return value

    @field_validator("hook_urls")
    @classmethod
    def _hook_urls(cls, value: str) -> str:
        """Comma-separated http(s) URLs with a host; a URL that is not one is named as given (without its
        credentials or query)."""
        seen: set[str] = set()
        for url in (u.strip() for u in value.split(",")):
            if url and not _http_url(url):
                raise ValueError(f"{_url_shown(url)!r} is not an http(s) URL")
            if url and url in seen:  # (s32 F8: every event went to it twice, under two delivery ids)
                raise ValueError(f"{_url_shown(url)!r} is listed twice: each URL must appear once")
            seen.add(url)
        return value

    @field_validator("log_format", mode="before")
    @classmethod
    def _log_format(cls, value: object) -> object:
        """``text`` or ``json``, any case (as ``HAZEL_LOG_LEVEL``)."""
        if isinstance(value, str):
            if value.strip().lower() not in ("text", "json"):
                raise ValueError("must be text or json (any case)")
            return value.strip().lower()
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        """One of Python's logging levels, any case."""
        if value.strip().upper() not in _LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(_LOG_LEVELS)} (any case)")
        return value.strip().upper()

    @field_validator("workflows")
    @classmethod
    def _workflows(cls, value: str) -> str:
        """At least one module or ``.py`` file (``,`` or blank alone would load no workflow, silently)."""
        if not any(m.strip() for m in value.split(",")):
            raise ValueError(f"must name at least one module or .py file (comma-separated), not {value!r}")
        return value

    @property
    def workflow_modules(self) -> list[str]:
        return [m.strip() for m in self.workflows.split(",") if m.strip()]

    @property
    def hook_url_list(self) -> list[str]:
        return [u.strip() for u in self.hook_urls.split(",") if u.strip()]

    @property
    def slack_configured(self) -> bool:
        return self.slack_bot_token is not None

    @property
    def jira_configured(self) -> bool:
        return bool(self.jira_url) and (self.jira_api_token is not None or self.jira_pat is not None)

    @property
    def jira_cloud(self) -> bool:
        """Jira Cloud (account ids, ``accountId`` parameters) rather than Server / Data Center (user names)."""
        if self.jira_deployment is not None:
            return self.jira_deployment == "cloud"
        from urllib.parse import urlparse

        host = urlparse(self.jira_url or "").hostname or ""
        return host.endswith((".atlassian.net", ".jira.com"))


REDACTED = "**********"
MIN_SECRET_LEN = 4
"""Shorter values are not redacted (replacing every ``a`` in a text would hide more than it protects)."""


SECRET_NAME_WORDS = frozenset({"TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD",
                               "APIKEY", "CREDENTIAL", "CREDENTIALS"})
"""Words of an environment variable's name (split at ``_``) that make its value a secret to redact, whoever
reads it (a workflow's own ``MY_SERVICE_API_KEY``, ``env("OPENAI_API_KEY")``); ``…_KEY`` after ``API``,
``PRIVATE``, ``ACCESS``, ``SECRET`` or ``SIGNING`` too. Not ``PWD`` (the shell's working directory)."""
MIN_ENV_SECRET_LEN = 8
"""A value of such a variable shorter than this is not looked for (``true``, a port, ``1234``)."""


def secret_name(name: str) -> bool:
    """Whether the environment variable ``name`` (any case) holds a secret by its name (``SECRET_NAME_WORDS``):
    ``OPENAI_API_KEY``, ``DB_PASSWORD``, ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``; not ``JIRA_PROJECT_KEY``."""
    words = name.upper().split("_")
    if SECRET_NAME_WORDS.intersection(words):
        return True
    return any(w == "KEY" and i > 0 and words[i - 1] in ("API", "PRIVATE", "ACCESS", "SECRET", "SIGNING")
               for i, w in enumerate(words))


def environment_secrets(environ: "Mapping[str, str] | None" = None, env_file: str | None = ".env") -> list[str]:
    """The values (at least ``MIN_ENV_SECRET_LEN`` characters) of the environment variables, and of the lines
    of ``env_file``, whose names say they are secrets (``secret_name``): what a workflow reads for itself and a
    step's exception may quote. The file's lines python-dotenv cannot parse are left out (``Settings`` refuses
    such a file before this matters); an unreadable file counts as empty."""
    environ = os.environ if environ is None else environ
    pairs = [*environ.items(), *env_file_values(env_file or None).items()]
    return [v for k, v in pairs if v and len(v) >= MIN_ENV_SECRET_LEN and secret_name(k)]


def secret_values(settings: Settings, *, environ: "Mapping[str, str] | None" = None,
                  env_file: str | None = ".env") -> list[str]:
    """The plain values of every ``SecretStr`` setting, each token of ``HAZEL_API_TOKENS``, the database
    URL's password (``user:password@`` or ``?password=``), Jira's Basic credentials as their header carries
    them (base64 of ``JIRA_USER:JIRA_API_TOKEN``, RFC 7617), and the values of the environment's (and
    ``env_file``'s) variables whose names say they are secrets (``environment_secrets``: a workflow's own)."""
    values = environment_secrets(environ, env_file)
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            values.append(value.get_secret_value())
    if settings.api_tokens is not None:
        for pair in settings.api_tokens.get_secret_value().split(","):
            values.append(pair.partition("=")[2].strip())
    if settings.jira_user and settings.jira_api_token is not None:  # the Basic auth header the jira library sends
        import base64

        basic = f"{settings.jira_user}:{settings.jira_api_token.get_secret_value()}".encode()
        values.append(base64.b64encode(basic).decode())
    from sqlalchemy.engine import make_url

    try:
        url = make_url(settings.database_url)
    except Exception:  # an unparsable URL fails elsewhere, with its own message
        url = None
    if url is not None:
        in_query = url.query.get("password") or ()  # (libpq takes ?password=… too; a tuple when given twice)
        values += [str(p) for p in (url.password, *((in_query,) if isinstance(in_query, str) else in_query)) if p]
    for hook in settings.hook_url_list:  # (httpx logs each request's URL at DEBUG: s33 F3)
        values += _hook_url_secrets(hook)
    return [v for v in values if v]


def _hook_url_secrets(url: str) -> list[str]:
    """What in a hook URL may be a secret: its password, its query's values and a path segment that looks
    like a token (``path_shown``'s rule: Slack's, Discord's and Teams' webhooks carry theirs there)."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    out = [password or ""] + [value for _, value in parse_qsl(parts.query, keep_blank_values=False)]
    out += [segment for segment in parts.path.split("/") if _token_like(segment)]
    return [v for v in out if len(v) >= 4]  # (a one-letter value would star out every such letter of a line)


class Redactor:
    """``redactor(text)``: ``text`` with each of ``secrets`` (of at least ``MIN_SECRET_LEN`` characters, and its
    JSON-escaped form) replaced by ``REDACTED``; for what Hazel stores and shows of an error it did not write
    (a step's exception may quote a token from the environment)."""

    def __init__(self, secrets: list[str]) -> None:
        import json

        forms = set()
        for secret in secrets:
            if len(secret) >= MIN_SECRET_LEN:
                forms.update({secret, json.dumps(secret)[1:-1]})
        self.secrets = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


NOT_SETTINGS_PREFIXES = ("HAZEL_TEST_", "HAZEL_BENCH_", "HAZEL_EXAMPLE_")
"""``HAZEL_*`` names that are no setting by design: the test suite's, the bench's, the examples' own."""
NOT_SETTINGS = frozenset({"HAZEL_DEBUG"})


def setting_names() -> set[str]:
    """Every environment variable ``Settings`` reads (each field's aliases)."""
    names: set[str] = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(c for c in alias.choices if isinstance(c, str))
    return names


def env_value(name: str, default: str | None = None, *, env_file: str = ".env") -> str | None:
    """The value of the environment variable ``name``, else of ``name`` in ``env_file`` (the working directory's
    ``.env``), else ``default``; in both, names in any case, as Hazel reads its own settings (the exact
    spelling first). For a workflow module's own settings (the examples' ``HAZEL_EXAMPLE_*_CHANNEL``), which a
    ``.env`` next to Hazel's settings should set as well. An unreadable ``.env`` (not UTF-8) counts as absent.

    Raises:
        EnvFileError: ``env_file`` has a line python-dotenv cannot parse, as ``Settings`` refuses it
            (``check_env_file``): its value may be the one asked for.
    """
    if name in os.environ:
        return os.environ[name]
    wanted = name.upper()
    for key in sorted(os.environ):  # (names in any case, as Hazel's settings; the same name twice: the first)
        if key.upper() == wanted:
            return os.environ[key]
    try:
        values = read_env_file(env_file)
    except (OSError, UnicodeDecodeError):
        values = {}
    for key, value in values.items():
        if key and key.upper() == wanted and value is not None:
            return value
    return default


def log_format_and_level(environ: "Mapping[str, str] | None" = None, env_file: str | None = ".env",
                         ) -> tuple[str, str] | None:
    """``(format, level)`` of ``HAZEL_LOG_FORMAT`` and ``HAZEL_LOG_LEVEL`` as ``Settings`` reads them (``environ``,
    default ``os.environ``, names in any case; else ``env_file``, its lines python-dotenv cannot parse left out;
    else the defaults), normalized (``"json"``, ``"INFO"``); None when either is malformed. For ``serve`` /
    ``worker`` whose settings cannot be read: the error still goes to the log they would write.

    Raises:
        nothing: an unreadable ``env_file`` counts as absent.
    """
    environ = os.environ if environ is None else environ
    wanted = {"hazel_log_format": "format", "hazel_log_level": "level"}
    found: dict[str, str | None] = {wanted[k.lower()]: v for k, v in env_file_values(env_file).items()
                                    if k and k.lower() in wanted}
    found.update({wanted[k.lower()]: v for k, v in environ.items() if k.lower() in wanted})  # (before .env)
    fmt, level = found.get("format"), found.get("level")  # (None: unset, or a name alone in .env)
    fmt = "text" if fmt is None else fmt.strip().lower()
    level = "INFO" if level is None else level.strip().upper()
    if fmt not in ("text", "json") or level not in _LOG_LEVELS:
        return None
    return fmt, level


def unknown_settings(environ: "Mapping[str, str]", env_file: str | None = ".env") -> list[str]:
    """One warning line per ``HAZEL_*`` name in ``environ`` or in ``env_file`` (when it exists) that no setting
    reads (a typo: ``HAZEL_PROT``), naming the closest setting when there is one; ``[]`` when every name is
    known. Names of ``NOT_SETTINGS_PREFIXES`` and ``NOT_SETTINGS`` are never reported."""
    import difflib

    # names in any case, as Settings reads them (hazel_prot is a typo as HAZEL_PROT is: s24 F3)
    names = {n for n in environ if n.upper().startswith("HAZEL_")}
    names |= {n for n in env_file_values(env_file)  # (a bad .env fails in Settings)
              if n and n.upper().startswith("HAZEL_")}
    known = setting_names()
    lines = []
    for name in sorted(names):
        upper = name.upper()
        if upper in known or upper in NOT_SETTINGS or upper.startswith(NOT_SETTINGS_PREFIXES):
            continue
        bare = upper.removeprefix("HAZEL_")  # (HAZEL_JIRA_URL: Jira's and Slack's settings have no prefix)
        close = [bare] if bare in known else difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.8)
        lines.append(f"{name} is not a Hazel setting: it is ignored"
                     + (f" (did you mean {close[0]}?)" if close else ""))
    return lines


def warn_unknown_settings() -> None:
    """Log ``unknown_settings`` of this process's environment and ``.env`` as warnings (logger
    ``hazel.settings``): a command prints them on stderr, ``serve`` / ``worker`` in their log."""
    import logging

    for line in unknown_settings(os.environ):
        logging.getLogger("hazel.settings").warning(line)
