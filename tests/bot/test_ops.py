"""Operations over real HTTP and real databases: ``/healthz`` checks the database, ``/metrics`` parses as
Prometheus text and follows activity, logs carry run and request ids and never a secret."""

from __future__ import annotations

import io
import json
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from typer.testing import CliRunner

from bot.inbound.api import api_router
from bot.ops.logs import configure_logging
from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.settings import Settings
from bot.server.http import create_app
from integrations.console import ConsoleChannel
from store.models import Actor
from tests.support.hook_receiver import HookReceiver
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow, flaky_workflow

ALICE = Actor(id="alice", channel="console", name="alice")
API_TOKEN = "tok-ops-7a7a7a7a7a"
HOOK_SECRET = "hook-ops-3b3b3b3b"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def make(db_url: str, *, clock: Clock | None = None, **env: str) -> Hazel:
    registry = Registry()
    registry.add(doc_workflow())
    registry.add(flaky_workflow())
    console = ConsoleChannel(console=Console(file=io.StringIO(), width=120), command="hazel")
    hazel = Hazel(Settings(HAZEL_DATABASE_URL=db_url, **env), registry=registry, load_workflows=False,
                  console=console, **({"clock": clock} if clock else {}))
    return hazel


@pytest.fixture
def root_logging() -> Iterator[None]:
    """A root logger with pytest's handlers only, restored after a test that configures it (a handler another
    test of this worker left, writing to ``sys.stderr`` as it is now, wrote into ``capsys`` too)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    root.handlers[:] = [h for h in handlers if type(h).__module__.startswith("_pytest")]
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


# -- /healthz ---------------------------------------------------------------------------------------------------

def test_healthz_answers_from_the_database(db_url: str, tmp_path: Path) -> None:
    hazel = make(db_url)
    hazel.prepare()
    with LiveServer(create_app(hazel)) as server:
        response = httpx.get(server.url + "/healthz", timeout=30)
        probed = httpx.head(server.url + "/healthz")  # (a load balancer's HEAD probe: s24 F8, it was 405)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": hazel.store.dialect}
    assert probed.status_code == 200 and probed.content == b""
    hazel.close()

    unreachable = ("postgresql+psycopg://hazel:pw-never-shown@127.0.0.1:1/hazel" if db_url.startswith("postgresql")
                   else f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'hazel.db'}")
    down = make(unreachable)
    with LiveServer(create_app(down)) as server:
        response = httpx.get(server.url + "/healthz", timeout=30)
        assert httpx.head(server.url + "/healthz").status_code == 503
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["error"] == "OperationalError"
    assert "pw-never-shown" not in response.text
    down.close()


def test_healthz_and_metrics_say_when_the_schema_is_not_this_hazels(empty_url: str) -> None:
    """A process running on a database whose schema revision is not the one it needs (``hazel db downgrade 0005``
    under a running ``serve``) cannot record anything, yet ``/healthz`` said ok and ``hazel_database_up`` 1 (a
    fresh-user finding). Now ``/healthz`` answers 503 with the words every command refuses with, and
    ``hazel_schema_ok`` is 0; both recover with ``hazel db upgrade``. A newer revision stays healthy: a rolling
    deploy migrates first, while the old processes keep serving (migrations only add)."""
    from sqlalchemy import text

    from store.migrate import HEAD, downgrade, upgrade
    from store.schema import VERSION_TABLE

    from bot.inbound.api import api_router
    from bot.settings import Settings

    hazel = make(empty_url)
    hazel.prepare()  # creates the schema on the empty database
    api = api_router(hazel, Settings(HAZEL_API_TOKENS="ci=tok-ci-0000000000000"))
    with LiveServer(create_app(hazel, routers=[api])) as server:
        assert httpx.get(server.url + "/healthz", timeout=30).json() == {"status": "ok", "database": hazel.store.dialect}
        assert value(scrape(server.url)["hazel_schema_ok"], "hazel_schema_ok") == 1

        downgrade(hazel.store.engine, "0005")
        response = httpx.get(server.url + "/healthz", timeout=30)
        assert response.status_code == 503
        said = f"the database is at schema revision 0005, this Hazel needs {HEAD}: run `hazel db upgrade`"
        assert response.json() == {
            "status": "unavailable", "database": hazel.store.dialect, "error": "SchemaNotReadyError",
            "message": said}
        assert value(scrape(server.url)["hazel_schema_ok"], "hazel_schema_ok") == 0
        # the REST API says the same (s24 F6: every call was a bare 500 and a traceback in the log)
        refused = httpx.get(server.url + "/api/runs?limit=1", headers={"Authorization": "Bearer tok-ci-0000000000000"},
                            timeout=30)  # (httpx's 5 s ran out once in a full run on a slow host)
        assert refused.status_code == 503 and refused.headers["Retry-After"], refused.text
        assert refused.json() == {"error": {"type": "SchemaNotReadyError", "message": said}}

        upgrade(hazel.store.engine)
        assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200
        assert value(scrape(server.url)["hazel_schema_ok"], "hazel_schema_ok") == 1

        with hazel.store.engine.begin() as conn:  # as a newer Hazel's migration leaves it (a rolling deploy
            conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))  # migrates first): still fine
        assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200
        assert value(scrape(server.url)["hazel_schema_ok"], "hazel_schema_ok") == 1

        with hazel.store.engine.begin() as conn:  # no version table at all
            conn.execute(text(f"DROP TABLE {VERSION_TABLE}"))
        response = httpx.get(server.url + "/healthz", timeout=30)
        assert response.status_code == 503 and response.json()["message"] == (
            "the database has no Hazel schema revision (no version table): run `hazel db upgrade`")
        with hazel.store.engine.begin() as conn:  # a database emptied under the process: its tables gone too
            conn.execute(text("DROP TABLE hazel_run_counts"))
        samples = scrape(server.url)  # the database answers: one cause, one alert (s24 F6: both were 0)
        assert value(samples["hazel_schema_ok"], "hazel_schema_ok") == 0
        assert value(samples["hazel_database_up"], "hazel_database_up") == 1
    hazel.close()


# -- /metrics ---------------------------------------------------------------------------------------------------

def scrape(url: str) -> dict[str, list]:
    response = httpx.get(url + "/metrics", timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(response.text)}


def value(samples: list, name: str, **labels: str) -> float | None:
    for s in samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def test_metrics_parse_and_follow_activity(db_url: str) -> None:
    clock = Clock()
    with HookReceiver() as closed:
        dead_url = closed.url("/hook")  # nothing listens there after this block: deliveries fail
    hazel = make(db_url, clock=clock, HAZEL_HOOK_URLS=dead_url, HAZEL_HOOK_SECRET=HOOK_SECRET)
    hazel.prepare()
    with LiveServer(create_app(hazel)) as server:
        before = scrape(server.url)
        assert value(before["hazel_database_up"], "hazel_database_up") == 1
        assert before["hazel_runs"] == []
        assert value(before["hazel_waiting_requests_age_seconds"], "hazel_waiting_requests_age_seconds_bucket",
                     le="+Inf") == 0
        assert "hazel_step_duration_seconds" in before and "process_cpu_seconds" in before

        waiting = [hazel.start(workflow="doc", input={"topic": f"topic {i}"}, actor=ALICE) for i in range(2)]
        for run in waiting:
            hazel.drive(run_id=run.id)
        clock.now += timedelta(hours=2)
        failed = hazel.start(workflow="flaky", input={"topic": "vacuum"}, actor=ALICE)
        hazel.drive(run_id=failed.id)
        after = scrape(server.url)

    runs = after["hazel_runs"]
    assert value(runs, "hazel_runs", workflow="doc", status="waiting") == 2
    assert value(runs, "hazel_runs", workflow="doc", status="completed") == 0
    assert value(runs, "hazel_runs", workflow="flaky", status="failed") == 1
    age = after["hazel_waiting_requests_age_seconds"]
    bucket = lambda le: value(age, "hazel_waiting_requests_age_seconds_bucket", le=le)  # noqa: E731
    assert (bucket("3600.0"), bucket("14400.0"), bucket("+Inf")) == (0, 2, 2)
    assert value(after["hazel_waiting_requests_age_seconds_gsum"],
                 "hazel_waiting_requests_age_seconds_gsum") == pytest.approx(2 * 7200, abs=1)
    assert value(after["hazel_waiting_request_oldest_age_seconds"],
                 "hazel_waiting_request_oldest_age_seconds") == pytest.approx(7200, abs=1)
    steps = after["hazel_step_duration_seconds"]
    assert value(steps, "hazel_step_duration_seconds_count", workflow="doc", step="draft", outcome="ok") == 2
    assert value(steps, "hazel_step_duration_seconds_count", workflow="flaky", step="work", outcome="error") == 1
    backlog = after["hazel_outbox_messages"]
    assert value(backlog, "hazel_outbox_messages", status="pending", kind="hook.event") == 3  # 2 waiting, 1 failed
    assert value(after["hazel_outbox_oldest_pending_age_seconds"],
                 "hazel_outbox_oldest_pending_age_seconds") == pytest.approx(7200, abs=1)
    hazel.close()


def test_metrics_answer_when_the_database_does_not(tmp_path: Path) -> None:
    down = make(f"sqlite:///{tmp_path / 'missing' / 'hazel.db'}")
    with LiveServer(create_app(down)) as server:
        samples = scrape(server.url)
    assert value(samples["hazel_database_up"], "hazel_database_up") == 0
    assert "hazel_runs" not in samples
    assert "hazel_schema_ok" not in samples  # unknown: the database did not answer
    down.close()


# -- logs -------------------------------------------------------------------------------------------------------

def test_json_logs_carry_run_and_request_ids_and_no_secret(db_url: str, root_logging: None) -> None:
    with HookReceiver() as closed:
        dead_url = closed.url("/hook")
    env = {"HAZEL_API_TOKEN": API_TOKEN, "HAZEL_HOOK_URLS": dead_url, "HAZEL_HOOK_SECRET": HOOK_SECRET,
           "HAZEL_LOG_FORMAT": "json", "HAZEL_LOG_LEVEL": "debug"}
    hazel = make(db_url, **env)
    hazel.prepare()
    stream = io.StringIO()
    configure_logging(hazel.settings, stream=stream)
    app = create_app(hazel, routers=[api_router(hazel, hazel.settings)])
    api_log = logging.getLogger("hazel.api")  # (its INFO lines: a level another test of this worker left on it or
    api_level = api_log.level  # on "hazel" kept them out of a full-suite run)
    api_log.setLevel(logging.DEBUG)
    with LiveServer(app) as server:
        http = httpx.Client(base_url=server.url, timeout=30)
        assert http.get("/api/runs", headers={"Authorization": f"Bearer {API_TOKEN}-wrong"}).status_code == 401
        assert http.get("/api/runs", headers={"Authorization": f"Bearer {API_TOKEN}"}).status_code == 200
        auth = {"Authorization": f"Bearer {API_TOKEN}"}  # a start and a cancel over REST carry the run's id
        started = http.post("/api/runs", headers=auth, json={"workflow": "doc", "input": {"topic": "logged"}})
        assert started.status_code == 201, started.text
        by_api = started.json()["id"]
        assert http.post(f"/api/runs/{by_api}/cancel", headers=auth, json={}).status_code == 200
    api_log.setLevel(api_level)
    run_id = hazel.start(workflow="flaky", input={"topic": "vacuum"}, actor=ALICE).id
    waiting = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE).id
    for rid in (run_id, waiting):
        hazel.drive(run_id=rid)  # each delivers its hook events: both fail (nothing listens)
    request_id = hazel.pending_request(run_id=waiting).id
    logging.getLogger("hazel.test").error("a careless message with %s and %s", API_TOKEN, HOOK_SECRET)
    hazel.close()

    text = stream.getvalue()
    records = [json.loads(line) for line in text.splitlines()]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert API_TOKEN not in text and HOOK_SECRET not in text
    assert any("unknown token" in r["message"] and r["level"] == "WARNING" for r in records)
    step_failed = [r for r in records if r["logger"] == "hazel.runner" and "attempt 1/1 failed" in r["message"]]
    assert step_failed and all(r["run_id"] == run_id for r in step_failed)
    hook_failed = [r for r in records if r["logger"] == "hazel.outbox" and r.get("request_id") == request_id]
    assert hook_failed and all(r["run_id"] == waiting for r in hook_failed)
    assert records[-1]["message"] == "a careless message with ********** and **********"
    api_lines = {r["message"]: r.get("run_id") for r in records if r["logger"] == "hazel.api"}  # (s24 F9)
    assert api_lines.get(f"api: api started run {by_api} of doc") == by_api, api_lines
    assert api_lines.get(f"api: api cancelled run {by_api}") == by_api, api_lines


def test_text_logs_and_the_worker_command(db_url: str, monkeypatch: pytest.MonkeyPatch, root_logging: None) -> None:
    from bot.cli import app

    workflows = Path(__file__).resolve().parents[1] / "workflows" / "doc.py"
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(workflows))
    monkeypatch.setenv("HAZEL_LOG_FORMAT", "json")
    cli = CliRunner()
    started = cli.invoke(app, ["run", "flaky", "--input", '{"topic": "vacuum"}', "--detach", "--json"])
    assert started.exit_code == 0, started.output
    run_id = json.loads(started.stdout)["run"]["id"]
    worked = cli.invoke(app, ["worker", "--until-idle"])
    assert worked.exit_code == 0, worked.output
    lines = [json.loads(line) for line in worked.stderr.splitlines() if line.startswith("{")]
    assert any(r.get("run_id") == run_id and "failed" in r["message"] for r in lines), worked.stderr

    monkeypatch.setenv("HAZEL_LOG_FORMAT", "text")
    monkeypatch.setenv("HAZEL_LOG_LEVEL", "loud")
    refused = cli.invoke(app, ["worker", "--until-idle"])
    assert refused.exit_code == 1 and "HAZEL_LOG_LEVEL" in refused.stderr

    stream = io.StringIO()
    configure_logging(Settings(HAZEL_LOG_FORMAT="text", HAZEL_LOG_LEVEL="info"), stream=stream)
    from bot.engine.logcontext import log_context

    with log_context(run_id="ab12cd34ef56", request_id=7):
        logging.getLogger("hazel.test").warning("waiting on the SME")
    logging.getLogger("hazel.test").warning("outside")
    first, second = stream.getvalue().splitlines()
    assert first.endswith("WARNING hazel.test [run=ab12cd34ef56 request=7] waiting on the SME")
    assert second.endswith("WARNING hazel.test outside")
    forged = "line1\n2026-12-02 00:00:00,000 CRITICAL hazel.fake forged entry"  # a step's error, say
    try:
        raise ValueError(forged)
    except ValueError:
        logging.getLogger("hazel.test").exception("step failed: %s", forged)
    lines = stream.getvalue().splitlines()[2:]
    assert lines[0].endswith("ERROR hazel.test step failed: line1"), lines
    assert len(lines) > 3 and all(line.startswith("    ") for line in lines[1:]), lines  # traceback included
    assert "    2026-12-02 00:00:00,000 CRITICAL hazel.fake forged entry" in lines, lines


def test_a_cli_commands_warning_keeps_its_further_lines_indented(capsys: pytest.CaptureFixture[str],
                                                                root_logging: None) -> None:
    """A CLI command other than serve/worker prints warnings one message a line (``command_handler``): a line
    break a message carries (stored text in a step's error) is followed by four spaces, as in ``serve``'s text
    log, so the text cannot pass for a message of its own; control characters stay escaped."""
    from bot.ops.logs import command_handler

    handler = command_handler(Settings(_env_file=None))
    try:
        logging.getLogger("hazel.test").warning("user said: %s", "\x1b[2Jhi\n2026-12-05 14:00:00,000 ERROR forged")
    finally:
        logging.getLogger().removeHandler(handler)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["user said: \\x1b[2Jhi", "    2026-12-05 14:00:00,000 ERROR forged"], lines


@pytest.mark.parametrize("given, kept", [("JSON", "json"), (" Text ", "text")])
def test_the_log_format_is_read_in_any_case(given: str, kept: str) -> None:
    assert Settings(_env_file=None, HAZEL_LOG_FORMAT=given).log_format == kept


def test_an_unknown_log_format_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match="(?s)HAZEL_LOG_FORMAT.*must be text or json"):
        Settings(_env_file=None, HAZEL_LOG_FORMAT="xml")


def test_slacks_send_failure_is_a_warning_in_the_log_and_left_out_of_a_commands_stderr(
        root_logging: None) -> None:
    """slack_sdk logs ``Failed to send a request to Slack API server`` at ERROR before each retry the outbox
    makes anyway (147 lines in an outage against Hazel's 23): a WARNING in the log of ``serve`` / ``worker``,
    and not printed by a command (the notification's own line says it waits)."""
    from bot.ops.logs import command_handler

    stream = io.StringIO()
    configure_logging(Settings(HAZEL_LOG_FORMAT="text", HAZEL_LOG_LEVEL="info"), stream=stream)
    slack = logging.getLogger("slack_sdk.web.base_client")
    slack.error("Failed to send a request to Slack API server: <urlopen error [Errno 111] Connection refused>")
    slack.info("A retry handler found: ConnectionErrorRetryHandler")
    # (an outage's 503 page: a fresh-user finding, s28 F8, printed raw on a command's stderr)
    slack.error("Failed to decode Slack API response: Received a response in a non-JSON format: down")
    assert [line.split(" ", 3)[2:] for line in stream.getvalue().splitlines()] == [
        ["WARNING", "slack_sdk.web.base_client Failed to send a request to Slack API server: <urlopen error "
                    "[Errno 111] Connection refused>"],
        ["WARNING", "slack_sdk.web.base_client Failed to decode Slack API response: Received a response in a "
                    "non-JSON format: down"]]
    handler = command_handler(Settings())
    try:
        records = [logging.LogRecord("slack_sdk.web.base_client", logging.WARNING, "", 0, "Failed to send", (), None),
                   logging.LogRecord("slack_sdk.web.base_client", logging.ERROR, "", 0, "other", (), None),
                   logging.LogRecord("hazel.outbox", logging.WARNING, "", 0, "not delivered", (), None)]
        assert [handler.filter(r) for r in records] == [False, True, True]
        decode = logging.LogRecord("slack_sdk.web.base_client", logging.ERROR, "", 0,
                                   "Failed to decode Slack API response: down", (), None)
        slack.handle(decode)  # (through the logger's filter, which makes it a WARNING, then the command's)
        assert decode.levelno == logging.WARNING and not handler.filter(decode)
    finally:
        logging.getLogger().removeHandler(handler)
