"""Every CLI command and every setting, fed malformed values: one line on stderr that names what is wrong, an
exit status other than 0, no traceback, and the stored runs unchanged.

The commands are read from the Typer app and the settings from the ``Settings`` model, so a new command, option
or setting is covered without editing this file (a new setting whose malformed values cannot be derived from its
type must be given some in ``SETTING_EXTRAS`` or be listed in ``ANY_TEXT``: the test says so). Most cases run
in-process (``CliRunner``, the environment patched); the few that need the real ``hazel`` entry point (start-up,
``serve``'s port, a 200,000-deep file) run as subprocesses, started together.
"""

from __future__ import annotations

import json
import os
import subprocess
import types
import typing
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from pydantic import ValidationError
import typer
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from bot.cli import app
from bot.settings import Settings
from tests.bot.conftest import ROOT, SAMPLE

HAZEL = ROOT / ".venv" / "bin" / "hazel"
LIMIT = 4096
"""``HAZEL_MAX_STATE_BYTES`` in these tests: the largest input file the CLI reads."""

NUMBER_ZERO_OK = {"retention_days", "head_cache_bytes", "sqlite_wal_preallocate_pages"}
"""Numeric settings for which 0 is meaningful (``HAZEL_RETENTION_DAYS=0``: prune every ended run;
``HAZEL_HEAD_CACHE_BYTES=0``: keep no checkpoint in memory; ``HAZEL_SQLITE_WAL_PREALLOCATE_PAGES=0``: grow no
SQLite log)."""
ANY_TEXT = {"host", "output_dir", "slack_api_url", "slack_bot_token", "slack_signing_secret", "slack_app_token",
            "jira_url", "jira_user", "jira_api_token", "jira_pat", "jira_webhook_secret", "jira_issue_type",
            "jira_approve_status", "jira_reject_status", "jira_done_status", "jira_rejected_status",
            "llm_base_url", "llm_api_key", "llm_model", "api_token", "api_tokens", "hook_secret"}
"""Text settings that take any non-blank text as far as a command that does not use them can tell (secrets,
names of Jira statuses, URLs of services only ``serve`` talks to)."""


def setting_extras(tmp: Path) -> dict[str, list[str]]:
    """Malformed values of text settings, which their type cannot suggest."""
    notpy = tmp / "workflows.txt"
    notpy.write_text("x = 1\n")
    people = tmp / "people.toml"
    people.write_text("[people.ann\nslack = 1\n")
    binary = tmp / "people.bin"
    binary.write_bytes(b"\xff\xfe[people]\n")
    return {
        "database_url": ["not-a-url", "mysql://someone@localhost/db"],
        "workflows": [str(tmp / "nowhere.py"), str(notpy), "no.such.module", str(tmp), ",", " , "],
        "sqlite_synchronous": ["sometimes"],
        "operator": ["hazel"],
        "people_file": [str(tmp / "nowhere.toml"), str(people), str(binary)],
        "log_level": ["loud"],
        "hook_urls": ["not-a-url", "hello"],
        "base_url": ["notaurl", "ftp://hazel.example.com", "https://", "https://hazel.example.com/?x=1#frag"],
        "retention_days": ["1e9", "inf"],  # as hazel prune --older-than: below 1,000,000 days
        "web_secret": ["x", "s" * 31, " " * 8 + "s" * 31 + " " * 8],  # at least 32 characters, spaces not counted
    }


def env_name(field: Any) -> str:
    alias = field.validation_alias
    return alias if isinstance(alias, str) else alias.choices[0]


def base_type(annotation: Any) -> Any:
    """``int`` of ``int | None``, the Literal of ``Literal[...] | None``, … ."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return base_type(args[0]) if len(args) == 1 else annotation
    return annotation


def malformed_settings(tmp: Path) -> list[tuple[str, str, str]]:
    """``(field, environment variable, value)`` for every field of ``Settings``."""
    extras = setting_extras(tmp)
    cases: list[tuple[str, str, str]] = []
    missing = []
    for name, field in Settings.model_fields.items():
        kind = base_type(field.annotation)
        values: list[str] = list(extras.get(name, []))
        if kind in (int, float):
            values += ["not-a-number", "nan", "-5", "1e999", "99999999999999999999"]
            values += [] if name in NUMBER_ZERO_OK else ["0"]
            values += ["99999", "65536"] if name == "port" or name.endswith("_port") else []
            values += ["1e-300", "0.0009"] if name.endswith("_sec") else []  # a loop that never sleeps
        elif kind is bool:
            values += ["not-a-bool"]
        elif typing.get_origin(kind) is typing.Literal:
            values += ["bogus"]
        elif kind is str and isinstance(field.default, str) and field.default.strip() \
                and type(None) not in typing.get_args(field.annotation):  # blank: None (unset, or off)
            values += ["", "   "]
        if not values and name not in ANY_TEXT:
            missing.append(name)
        cases += [(name, env_name(field), v) for v in values]
    assert not missing, f"give malformed values for {missing} in setting_extras, or list them in ANY_TEXT"
    return cases


def leaves(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """``(command path, click command)`` of every command that runs (a group run without a subcommand
    included)."""
    sub = getattr(cmd, "commands", None)
    if sub:
        if path and getattr(cmd, "invoke_without_command", False):
            yield path, cmd
        for name, child in sub.items():
            yield from leaves(child, (*path, name))
    else:
        yield path, cmd


def py_type(param: Any) -> Any:
    """The Python type of a parameter (modules with postponed annotations give its name)."""
    kind = param.bare_type()
    return {"int": int, "float": float, "str": str, "bool": bool}.get(kind, kind) if isinstance(kind, str) else kind


def is_run(param: Any) -> bool:
    return param.metavar == "RUN" or param.name == "run"


def base_value(param: Any, run_id: str) -> str:
    """A well-formed value for a required parameter (the case then breaks one other parameter)."""
    if is_run(param):
        return run_id
    if param.name == "workflow":
        return "doc-review"
    return "1" if py_type(param) in (int, float) else "ok"


ONE_OF = {("edit",): ({"file", "set_"}, {"set_": "draft=ok"})}
"""Commands that need one of some optional parameters: the ones, and a well-formed choice."""


def build(path: tuple[str, ...], cmd: Any, run_id: str, override: dict[str, str], extra: list[str]) -> list[str]:
    args = list(path)
    names, choice = ONE_OF.get(path, (set(), {}))
    if not names & set(override):
        override = {**choice, **override}
    for p in cmd.params:
        value = override.get(p.name)
        if value is None and not p.required:
            continue
        value = value if value is not None else base_value(p, run_id)
        args += [value] if p.param_type_name == "argument" else [p.opts[0], value]
    return args + extra


def malformed_commands(run_id: str, files: dict[str, Path]) -> list[tuple[list[str], list[str]]]:
    """``(argv, words one of which the error line must contain)`` for every command of the app."""
    root = typer.main.get_command(app)
    cases: list[tuple[list[str], list[str]]] = [(["--no-such-option"], ["--no-such-option"]),
                                                (["no-such-command"], ["no-such-command"])]
    for path, cmd in leaves(root):
        cases.append((build(path, cmd, run_id, {}, ["--no-such-option"]), ["--no-such-option"]))
        cases.append((build(path, cmd, run_id, {}, ["extra", "args", "here"]),  # or taken by an optional argument
                      ["extra", "args", *(p.name for p in cmd.params if p.param_type_name == "argument")]))
        for p in cmd.params:
            if p.param_type_name == "option" and p.is_flag:
                cases.append((build(path, cmd, run_id, {}, [f"{p.opts[0]}=maybe"]), [p.opts[0]]))
                continue
            kind = py_type(p)
            if is_run(p):
                cases.append((build(path, cmd, run_id, {p.name: "nosuchrun"}, []), ["nosuchrun"]))
                if any(q.name == "json_out" for q in cmd.params):
                    cases.append((build(path, cmd, run_id, {p.name: "nosuchrun"}, ["--json"]), ["nosuchrun"]))
            elif kind in (int, float):
                for bad in ("not-a-number", "1e999x", "99999999999999999999"):
                    cases.append((build(path, cmd, run_id, {p.name: bad}, []), [bad, p.opts[0], p.name]))
            elif p.name == "file":
                for f in files.values():
                    cases.append((build(path, cmd, run_id, {p.name: str(f)}, []), [str(f)]))
            elif "@file" in (getattr(p, "help", None) or "").lower():
                keyed = "FIELD=" in (p.help or "")
                for f in files.values():
                    cases.append((build(path, cmd, run_id, {p.name: ("draft=" if keyed else "") + f"@{f}"}, []),
                                  [str(f)]))
    return cases


HAND_WRITTEN = [  # what the parameters' types cannot suggest
    (["run", "no-such-workflow"], ["no-such-workflow"]),
    (["run", "doc-review", "--input", "{not json"], ["--input"]),
    (["run", "doc-review", "--input", "[1, 2]"], ["--input"]),
    (["run", "doc-review", "--input", '{"topic": ""}'], ["topic"]),
    (["run", "doc-review", "--input", "[" * 200_000 + "]" * 200_000], ["--input"]),
    (["run", "doc-review", "--input", '{"topic": ' * 200_000 + '"x"' + "}" * 200_000], ["--input"]),
    (["run", "doc-review", "--version", "99"], ["99"]),
    (["run", "doc-review", "--input", '{"topic": "t"}', "--as", " "], ["--as"]),
    (["runs", "--status", "sleeping"], ["sleeping"]),
    (["runs", "--limit", "0"], ["--limit"]),
    (["outbox", "--status", "lost"], ["lost"]),
    (["outbox", "--limit", "-5"], ["--limit"]),
    (["outbox", "retry", "999"], ["999"]),
    (["serve", "--port", "99999"], ["--port"]),
    (["serve", "--workers", "0"], ["--workers"]),
    (["worker", "--workers", "-5"], ["--workers"]),
    (["prune", "--older-than", "-1"], ["--older-than"]),
    (["prune", "--older-than", "nan"], ["--older-than", "nan"]),
    (["prune", "--older-than", "inf"], ["--older-than", "inf"]),
]


def hand_written_with_run(run_id: str) -> list[tuple[list[str], list[str]]]:
    return [
        (["show", run_id, "--seq", "999"], ["999"]),
        (["show", run_id, "--seq", "-1"], ["--seq"]),
        (["approve", run_id, "--at", "nowhere"], ["nowhere"]),
        (["edit", run_id], ["--file"]),
        (["edit", run_id, "--set", "nofield=1"], ["nofield"]),
        (["edit", run_id, "--set", "novalue"], ["novalue"]),
        (["edit", run_id, "--set", "draft.=x"], ["with a FIELD and a KEY, got 'draft.=x'"]),  # an empty KEY
        (["rewind", run_id, "--to", "0", "--set", ".a=x"], ["with a FIELD and a KEY, got '.a=x'"]),
        (["edit", run_id, "--set", "draft="], ["--allow-empty"]),
        (["rewind", run_id, "--to", "nosuchstep"], ["nosuchstep"]),
        (["rewind", run_id, "--to", "999"], ["999"]),
        (["rewind", run_id, "--to", "#99999999999999999999"], ["99999999999999999999"]),
        (["reject", run_id, "--reason", " "], ["reason"]),
        (["feedback", run_id, " "], ["feedback"]),
    ]


def snapshot(db_url: str) -> list[Any]:
    """Every row of the tables that hold runs: what must not change."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [conn.execute(text(f"SELECT * FROM {t} ORDER BY 1")).all()
                    for t in ("hazel_runs", "hazel_checkpoints", "hazel_steering_requests", "hazel_decisions")]
    finally:
        engine.dispose()


def one_line_error(result: Any, words: list[str], argv: list[str]) -> None:
    where = f"hazel {' '.join(a[:60] for a in argv)[:300]}"
    assert result.exit_code not in (0, None), (where, result.stdout[-500:], result.stderr[-500:])
    assert result.exception is None or isinstance(result.exception, SystemExit), (where, repr(result.exception))
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, (where, result.stderr[-2000:])
    assert "Traceback" not in result.stderr + result.stdout, where
    assert lines[0].startswith("error: "), (where, lines[0])
    assert any(w in lines[0] for w in words), (where, words, lines[0])
    if "--json" in argv:
        assert json.loads(result.stdout)["error"]["message"] in lines[0], (where, result.stdout)


@pytest.fixture
def hostile(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``hostile(*args)`` runs ``hazel ARGS`` in-process on ``db_url`` (sample workflows; ``serve`` and
    ``worker`` never start: reaching them fails the case)."""
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(SAMPLE))
    monkeypatch.setenv("HAZEL_OPERATOR", "olga")
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("HAZEL_MAX_STATE_BYTES", str(LIMIT))
    monkeypatch.setenv("HAZEL_BASE_URL", "http://127.0.0.1:9")  # `hazel link` checks its arguments
    monkeypatch.setenv("HAZEL_WEB_SECRET", "s" * 32)
    monkeypatch.chdir(tmp_path)
    from bot.cli import common
    from bot.server import processes

    def never(*_: Any, **__: Any) -> None:
        raise AssertionError("a malformed command started serving")

    monkeypatch.setattr(processes, "serve", never)
    monkeypatch.setattr(processes, "work", never)
    monkeypatch.setattr(common.err, "width", 400)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def hostile_files(tmp: Path) -> dict[str, Path]:
    (tmp / "latin1.txt").write_bytes('{"topic": "caf\xe9"}'.encode("latin-1"))
    (tmp / "huge.txt").write_text("x" * (LIMIT + 1))
    (tmp / "nul.txt").write_bytes(b'{"topic": "a\x00b"}')
    (tmp / "adir").mkdir()
    return {"missing": tmp / "nowhere.txt", "latin1": tmp / "latin1.txt", "huge": tmp / "huge.txt",
            "nul": tmp / "nul.txt", "dir": tmp / "adir"}


def test_every_command_fed_malformed_arguments_answers_one_line(hostile, db_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    started = hostile("run", "doc-review", "--input", '{"topic": "t"}', "--json")
    assert started.exit_code == 0, started.output
    run_id = json.loads(started.stdout)["run"]["id"]
    before = snapshot(db_url)
    cases = malformed_commands(run_id, hostile_files(tmp_path)) + HAND_WRITTEN + hand_written_with_run(run_id)
    covered = {tuple(argv[:2]) for argv, _ in cases}
    for path, _ in leaves(typer.main.get_command(app)):
        assert any(c[: len(path)] == path for c in covered), f"no malformed case for `hazel {' '.join(path)}`"
    for argv, words in cases:
        one_line_error(hostile(*argv), words, argv)
    assert snapshot(db_url) == before


def test_every_setting_fed_malformed_values_answers_one_line(hostile, db_url: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = json.loads(hostile("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    before = snapshot(db_url)
    cases = malformed_settings(tmp_path)
    assert {name for name, _, _ in cases} | ANY_TEXT >= set(Settings.model_fields)
    for name, env, value in cases:
        with monkeypatch.context() as m:
            m.setenv(env, value)
            result = hostile("runs")
        one_line_error(result, [env, value] if value.strip() else [env], [f"{env}={value!r}", "runs"])
    assert hostile("show", run_id).exit_code == 0
    assert snapshot(db_url) == before


@pytest.mark.parametrize(("name", "value", "says"), [
    ("JIRA_URL", "notaurl", "JIRA_URL: must be an http(s) URL such as https://yourcompany.atlassian.net, not 'notaurl'"),
    ("JIRA_URL", "https://x.atlassian.net/?token=QQsecret", "JIRA_URL: must be the site's URL without a query"),
    ("HAZEL_LLM_BASE_URL", "notaurl", "HAZEL_LLM_BASE_URL: must be an http(s) URL such as https://api.openai.com/v1"),
    ("HAZEL_WORKERS", "5000", "HAZEL_WORKERS: must be at most 1,000"),
])
def test_urls_and_workers_are_checked_at_start(name: str, value: str, says: str, db_url: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``JIRA_URL`` and ``HAZEL_LLM_BASE_URL`` are checked when a command starts (they were first found wrong at
    the first delivery or call, retried over and over; a query was glued into every Jira path), and
    ``HAZEL_WORKERS`` has ``--workers``'s bound; the query is never echoed."""
    from typer.testing import CliRunner

    from bot.cli import app

    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["runs"])
    assert result.exit_code == 1 and says in result.output, result.output
    assert "QQsecret" not in result.output


def test_a_blank_optional_setting_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """``JIRA_URL=`` (or any setting that may be None) is the setting unset, not an empty value: a blank
    ``SLACK_BOT_TOKEN`` used to count as Slack configured."""
    optional = {n: f for n, f in Settings.model_fields.items() if type(None) in typing.get_args(f.annotation)}
    for field in optional.values():
        monkeypatch.setenv(env_name(field), " ")
    settings = Settings()
    assert {n: getattr(settings, n) for n in optional} == dict.fromkeys(optional)
    assert not settings.slack_configured


def test_a_setting_with_its_own_maximum_takes_up_to_it() -> None:
    """``HAZEL_HEAD_CACHE_BYTES`` is documented up to 16 GiB, but every setting was cut at 2,147,483,647 first:
    4 GiB was refused with ``must be at most 2,147,483,647`` (a fresh-user finding, s27 F5). A field's own
    bound governs it; the others keep 2**31 - 1."""
    assert Settings(HAZEL_HEAD_CACHE_BYTES=4 << 30).head_cache_bytes == 4 << 30
    assert Settings(HAZEL_HEAD_CACHE_BYTES=16 << 30).head_cache_bytes == 16 << 30
    with pytest.raises(ValidationError, match="less than or equal to 17179869184"):
        Settings(HAZEL_HEAD_CACHE_BYTES=(16 << 30) + 1)
    with pytest.raises(ValidationError, match="must be at most 2,147,483,647"):
        Settings(HAZEL_MAX_BODY_BYTES=2**31)


def test_the_real_entry_point_answers_one_line(db_url: str, tmp_path: Path) -> None:
    """Start-up as a person meets it: the console script, the port check of ``serve``, a file nested 200,000
    deep, a file that is not UTF-8, a closed pipe on stdout. Started together, so that they cost one start-up's
    time."""
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(SAMPLE), "HAZEL_OPERATOR": "olga",
           "HAZEL_OUTPUT_DIR": str(tmp_path / "out")}
    env.pop("HAZEL_DEBUG", None)
    big = tmp_path / "big.json"  # (its state's JSON is bigger than a pipe holds: for the reader that goes below)
    big.write_text(json.dumps({"topic": "t" * 80_000}))
    started = subprocess.run([str(HAZEL), "run", "doc-review", "--input", f"@{big}", "--json"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    assert started.stderr == "", "--json prints no human panel on stderr"
    run_id = json.loads(started.stdout)["run"]["id"]
    before = snapshot(db_url)
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    cases = [
        ({"HAZEL_PORT": "99999"}, ["serve"], "HAZEL_PORT"),
        ({"HAZEL_WORKERS": "0"}, ["worker", "--until-idle"], "HAZEL_WORKERS"),
        ({}, ["run", "doc-review", "--input", f"@{tmp_path / 'deep.json'}"], "nested too deeply"),
        ({}, ["edit", run_id, "--file", str(tmp_path / "latin1.txt")], "not UTF-8"),
    ]  # (every other file case runs in-process: test_every_command_fed_malformed_arguments_answers_one_line)
    procs = [(argv, word, subprocess.Popen([str(HAZEL), *argv], env={**env, **extra}, cwd=tmp_path,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
             for extra, argv, word in cases]
    # stdout's reader gone before anything is written (``hazel show RUN | head -0``), through rich's console and
    # through --json; and a reader that takes a little, then goes (``| head -c 10``), with PYTHONUNBUFFERED=1
    # (common in containers: stdout's short write dropped the rest, and the command ended 0): each a quiet end,
    # 141 (as on SIGPIPE), not "unexpected BrokenPipeError" and status 1
    piped = [subprocess.Popen([str(HAZEL), *argv], env={**env, **extra}, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
             for argv, extra in ((["show", run_id], {}), (["show", run_id, "--json"], {}),
                                 (["show", run_id, "--json"], {"PYTHONUNBUFFERED": "1"}),
                                 (["show", run_id, "--full"], {"PYTHONUNBUFFERED": "1"}))]  # (rich, a short write)
    for p in piped[:2]:
        p.stdout.close()
    assert piped[2].stdout.read(10) == b'{\n  "run":'
    piped[2].stdout.close()
    assert piped[3].stdout.read(10)
    piped[3].stdout.close()
    for p in piped:
        assert (p.wait(timeout=60), p.stderr.read()) == (141, b""), p.args
        p.stderr.close()
    for argv, word, proc in procs:
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"hazel {' '.join(argv)} did not stop") from None
        lines = err.strip().splitlines()
        assert proc.returncode != 0 and len(lines) == 1 and word in lines[0], (argv, proc.returncode, err[-2000:])
        assert "Traceback" not in out + err
    assert snapshot(db_url) == before


NEWER = "9999_from_a_newer_hazel"


@pytest.fixture
def newer_schema(db_url: str) -> Iterator[str]:
    """``db_url`` stamped with a revision this Hazel has no script for (restored afterwards: on PostgreSQL
    the database is the session's)."""
    engine = create_engine(db_url)
    with engine.begin() as conn:
        real = conn.execute(text("SELECT version_num FROM hazel_alembic_version")).scalar_one()
        conn.execute(text("UPDATE hazel_alembic_version SET version_num = :v"), {"v": NEWER})
    try:
        yield db_url
    finally:
        with engine.begin() as conn:
            conn.execute(text("UPDATE hazel_alembic_version SET version_num = :v"), {"v": real})
        engine.dispose()


def test_a_database_newer_than_this_hazel_is_named_as_such(hostile, newer_schema: str) -> None:  # noqa: ANN001
    from store.migrate import head_revision

    HEAD = head_revision()  # noqa: N806
    for argv in (["runs"], ["db", "upgrade"], ["run", "doc-review", "--input", '{"topic": "t"}']):
        result = hostile(*argv)
        one_line_error(result, [NEWER], argv)
        line = result.stderr.strip()
        assert "newer than this Hazel" in line and HEAD in line and "use a newer Hazel" in line, line
        assert "hazel db upgrade" not in line
    current = hostile("db", "current", "--json")
    assert json.loads(current.stdout) == {"current": NEWER, "head": HEAD, "newer_than_this_hazel": True}
    engine = create_engine(newer_schema)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM hazel_alembic_version")).scalar_one() == NEWER
    engine.dispose()


def test_cancel_says_it_once(cli) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    out = cli("cancel", run_id).stdout
    assert out.count(f"run {run_id} cancelled") == 1, out



def test_serve_on_a_taken_port_is_one_line(hostile, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = hostile("serve", "--port", str(port))
        one_line_error(result, [f"127.0.0.1:{port}"], ["serve", "--port", str(port)])
        assert "in use" in result.stderr
        monkeypatch.setenv("HAZEL_METRICS_PORT", str(port))
        metrics = hostile("worker")
        one_line_error(metrics, ["HAZEL_METRICS_PORT"], ["worker"])
        assert f"127.0.0.1:{port}" in metrics.stderr and "in use" in metrics.stderr
