"""A step whose exception quotes a secret setting (a token read from the environment, the database password)
never has it stored, shown or sent: the run's error and traceback, the audit log's events and the outbox's
progress message hold ``**********`` where the secret was (as the logs do)."""

from __future__ import annotations

import json

from pydantic import BaseModel
from sqlalchemy import select

from bot.engine import Hazel, Registry
from bot.engine.workflow import StepContext, Workflow
from bot.settings import Settings
from store.models import RunStatus
from store.schema import events, outbox, runs
from tests.support.engine import person

TOKEN = "ApiTok3nSECRETaaaa"
HOOK_SECRET = "hook-s3cret-value"


class S(BaseModel):
    n: int = 0


def leaky() -> Workflow:
    wf = Workflow("leaky", version=1, state=S)

    @wf.step(max_attempts=2, backoff_sec=0)
    def call(state: S, ctx: StepContext) -> S:
        raise RuntimeError(f"upstream refused token={TOKEN} (hook {HOOK_SECRET!r})")

    return wf


def test_a_steps_error_is_stored_without_the_secrets_it_quotes(db_url: str) -> None:
    registry = Registry()
    registry.add(leaky())
    settings = Settings(HAZEL_DATABASE_URL=db_url, HAZEL_API_TOKEN=TOKEN, HAZEL_HOOK_SECRET=HOOK_SECRET)
    hazel = Hazel(settings, registry=registry, load_workflows=False)
    try:
        hazel.prepare()
        run = hazel.start(workflow="leaky", input={}, actor=person("olga"))
        hazel.drive(run_id=run.id)
        for _ in range(3):  # the retry, then the failure
            if hazel.get(run_id=run.id).status is RunStatus.FAILED:
                break
            hazel.drive(run_id=run.id)
        failed = hazel.get(run_id=run.id)
        assert failed.status is RunStatus.FAILED
        assert "token=********** (hook '**********')" in failed.error, failed.error
        with hazel.store.read() as tx:
            stored = [*tx.conn.execute(select(runs.c.error, runs.c.error_traceback).where(runs.c.id == run.id)).one(),
                      *(json.dumps(d) for d in tx.conn.execute(select(events.c.detail).where(
                          events.c.run_id == run.id)).scalars()),
                      *(json.dumps(p) for p in tx.conn.execute(select(outbox.c.payload).where(
                          outbox.c.run_id == run.id)).scalars())]
        text = "\n".join(str(v) for v in stored)
        assert TOKEN not in text and HOOK_SECRET not in text, text
        assert text.count("**********") >= 4, text  # error, traceback, the events', the progress message
    finally:
        hazel.close()


def test_jiras_basic_credentials_as_the_header_carries_them_are_redacted() -> None:
    """A step's error may quote the request it failed on: ``Authorization: Basic base64(user:token)``."""
    import base64

    from bot.settings import Redactor, secret_values

    settings = Settings(JIRA_URL="https://x.atlassian.net", JIRA_USER="bot@example.com", JIRA_API_TOKEN=TOKEN)
    header = base64.b64encode(f"bot@example.com:{TOKEN}".encode()).decode()
    redact = Redactor(secret_values(settings))
    assert redact(f"401 for headers {{'Authorization': 'Basic {header}'}}") == (
        "401 for headers {'Authorization': 'Basic **********'}")


def test_a_database_password_in_the_urls_query_is_not_echoed(monkeypatch) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from bot.cli import app

    url = "postgresql+psycopg://postgres@127.0.0.1:1/db?password=Sup3rS3cret&connect_timeout=2"
    monkeypatch.setenv("HAZEL_DATABASE_URL", url)
    result = CliRunner().invoke(app, ["runs"])
    assert result.exit_code == 1
    assert "Sup3rS3cret" not in result.output and "password=**********" in result.output, result.output


def test_a_workflow_module_that_fails_to_import_quoting_secrets_is_reported_without_them(
        tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A fresh-user finding: ``cannot load workflows from …: RuntimeError: boom postgresql+psycopg://postgres:
    PASSWORD@… alice=TOKEN`` printed the secrets on stderr and in ``--json`` (``hazel serve`` and ``hazel worker``
    too). Every CLI error line is redacted as the logs are."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    module = tmp_path / "bad_import.py"
    module.write_text('import os\nraise RuntimeError("boom " + os.environ["HAZEL_DATABASE_URL"] + " "'
                      ' + os.environ["HAZEL_API_TOKENS"] + " " + os.environ["SLACK_BOT_TOKEN"])\n')
    password, token, bot = "PgPassw0rdXYZ", "tokALICEsecret123456", "xoxb-not-a-real-bot-token"
    env = {**os.environ, "HAZEL_DATABASE_URL": f"sqlite:///file:{tmp_path}/x.db?password={password}&uri=true",
           "HAZEL_API_TOKENS": f"alice={token}", "SLACK_BOT_TOKEN": bot, "HAZEL_WORKFLOWS": str(module)}
    root = Path(__file__).resolve().parents[2]
    for args in (["runs"], ["runs", "--json"], ["worker", "--until-idle"]):
        done = subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=root, capture_output=True,
                              text=True, timeout=60)
        said = done.stdout + done.stderr
        assert done.returncode == 1 and "cannot load workflows" in said and "boom" in said, said
        assert password not in said and token not in said and bot not in said, said
        assert said.count("**********") >= 3, said


def test_a_workflows_own_secrets_from_the_environment_and_env_are_redacted_too(db_url: str, tmp_path,
                                                                               monkeypatch) -> None:  # noqa: ANN001
    """A fresh-user finding: only Hazel's own settings were masked; a step quoting the key it read from
    ``MY_SERVICE_API_KEY`` (or ``env("OPENAI_API_KEY")`` from ``.env``) had it stored and shown in clear.
    Variables whose names say they are secrets are masked too (values of 8 characters or more)."""
    from bot.settings import secret_name

    service_key, openai_key = "svc-KEY-0123456789", "sk-proj-abcdefghij"
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={openai_key}\nJIRA_PROJECT_KEY=MIGRATIONS\n", encoding="utf-8")
    monkeypatch.setenv("MY_SERVICE_API_KEY", service_key)
    monkeypatch.setenv("MY_SERVICE_PASSWORD", "short")  # under 8 characters: not looked for
    wf = Workflow("leaky2", version=1, state=S)

    @wf.step(max_attempts=1)
    def call(state: S, ctx: StepContext) -> S:
        raise RuntimeError(f"refused {service_key} and {openai_key} for MIGRATIONS (short)")

    registry = Registry()
    registry.add(wf)
    hazel = Hazel(Settings(HAZEL_DATABASE_URL=db_url), registry=registry, load_workflows=False)
    try:
        hazel.prepare()
        run = hazel.start(workflow="leaky2", input={}, actor=person("olga"))
        hazel.drive(run_id=run.id)
        failed = hazel.get(run_id=run.id)
        assert failed.status is RunStatus.FAILED
        assert "refused ********** and ********** for MIGRATIONS (short)" in failed.error, failed.error
        with hazel.store.read() as tx:
            stored = "\n".join(str(v) for v in tx.conn.execute(
                select(runs.c.error, runs.c.error_traceback).where(runs.c.id == run.id)).one())
        assert service_key not in stored and openai_key not in stored, stored
    finally:
        hazel.close()
    for name in ("OPENAI_API_KEY", "db_password", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "SSH_PRIVATE_KEY",
                 "HAZEL_API_TOKENS", "GOOGLE_APPLICATION_CREDENTIALS", "SLACK_SIGNING_SECRET"):
        assert secret_name(name), name
    for name in ("JIRA_PROJECT_KEY", "PWD", "HAZEL_PORT", "KEY", "TOKENIZER_PATH", "HOME"):
        assert not secret_name(name), name
