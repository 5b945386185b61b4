"""Settings, from the environment (and a ``.env`` file in the working directory, if present).

Secrets are ``SecretStr``: they print as ``**********`` and never reach logs, messages or the database.
"""

from __future__ import annotations

import getpass

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_operator() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in a bare container
        return "operator"


class Settings(BaseSettings):
    """Every setting Hazel reads. The environment variable names are given with each field."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    database_url: str = Field("sqlite:///hazel.db", validation_alias="HAZEL_DATABASE_URL")
    """SQLAlchemy URL: ``sqlite:///hazel.db`` (default, WAL) or ``postgresql+psycopg://user@host:5432/db``."""
    workflows: str = Field("examples.migration_plan", validation_alias="HAZEL_WORKFLOWS")
    """Comma-separated modules (or ``.py`` paths) whose top-level ``Workflow`` objects are registered."""
    sqlite_synchronous: str = Field("FULL", validation_alias="HAZEL_SQLITE_SYNCHRONOUS")
    operator: str = Field(default_factory=_default_operator, validation_alias="HAZEL_OPERATOR")
    """Who the CLI acts as (``--as NAME`` overrides per command)."""
    lease_sec: float = Field(60.0, validation_alias="HAZEL_LEASE_SEC")
    workers: int = Field(4, validation_alias="HAZEL_WORKERS")
    """Worker threads executing runs in ``hazel serve`` / ``hazel worker``."""
    host: str = Field("127.0.0.1", validation_alias="HAZEL_HOST")
    port: int = Field(8000, validation_alias="HAZEL_PORT")
    output_dir: str = Field("out", validation_alias="HAZEL_OUTPUT_DIR")
    """Where the example workflow's deploy step writes its artefacts."""

    slack_bot_token: SecretStr | None = Field(None, validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(None, validation_alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field("https://slack.com/api/", validation_alias="HAZEL_SLACK_API_URL")

    jira_url: str | None = Field(None, validation_alias="JIRA_URL")
    jira_user: str | None = Field(None, validation_alias="JIRA_USER")
    jira_api_token: SecretStr | None = Field(None, validation_alias=AliasChoices("JIRA_API_TOKEN", "JIRA_TOKEN"))
    jira_pat: SecretStr | None = Field(None, validation_alias="JIRA_PAT")
    jira_webhook_secret: SecretStr | None = Field(None, validation_alias="JIRA_WEBHOOK_SECRET")

    llm_base_url: str | None = Field(None, validation_alias="HAZEL_LLM_BASE_URL")
    llm_api_key: SecretStr | None = Field(None, validation_alias="HAZEL_LLM_API_KEY")
    llm_model: str | None = Field(None, validation_alias="HAZEL_LLM_MODEL")

    api_token: SecretStr | None = Field(None, validation_alias="HAZEL_API_TOKEN")

    @property
    def workflow_modules(self) -> list[str]:
        return [m.strip() for m in self.workflows.split(",") if m.strip()]

    @property
    def slack_configured(self) -> bool:
        return self.slack_bot_token is not None

    @property
    def jira_configured(self) -> bool:
        return bool(self.jira_url) and (self.jira_api_token is not None or self.jira_pat is not None)
