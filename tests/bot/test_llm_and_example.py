"""hazel.llm.complete (offline drafter vs an OpenAI-compatible endpoint) and the example's walkthrough."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from hazel.llm import OFFLINE_NOTICE, complete
from bot.settings import Settings
from examples.migration_plan import build, offline_plan


class FakeChat(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeChat.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body,
                              "idempotency": self.headers.get("Idempotency-Key")})
        reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "model says: " + body["messages"][-1]["content"]}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


def test_offline_drafter_when_no_endpoint_is_set() -> None:
    settings = Settings(HAZEL_LLM_BASE_URL=None, HAZEL_LLM_API_KEY=None, HAZEL_LLM_MODEL=None)
    assert complete("hello", offline=lambda p: f"offline:{p}", settings=settings) == "offline:hello"
    assert OFFLINE_NOTICE in offline_plan("move data", None, 0)


def test_openai_compatible_endpoint_when_configured() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings = Settings(HAZEL_LLM_BASE_URL=f"http://127.0.0.1:{server.server_port}/v1",
                            HAZEL_LLM_API_KEY="sk-test", HAZEL_LLM_MODEL="tiny")
        answer = complete("draft it", offline=lambda p: "unused", system="be brief", settings=settings,
                          idempotency_key="r:1:draft")
    finally:
        server.shutdown()
    assert answer == "model says: draft it"
    call = FakeChat.seen[-1]
    assert call["path"] == "/v1/chat/completions" and call["auth"] == "Bearer sk-test"
    assert call["body"]["model"] == "tiny" and call["body"]["messages"][0] == {"role": "system", "content": "be brief"}
    assert call["idempotency"] == "r:1:draft"


def test_example_walkthrough_completes_and_deploys(db_url: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", "examples.migration_plan")
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))
    for var in ("HAZEL_LLM_BASE_URL", "HAZEL_LLM_API_KEY", "HAZEL_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(app, ["demo", "--walkthrough", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run"]["status"] == "completed"
    actions = [d["action"] for d in data["decisions"]]
    assert actions == ["approve", "feedback", "edit", "rewind", "approve", "approve", "approve"]
    assert any(c["step"] == "__rewind__" and c["branch"] == 1 for c in data["checkpoints"])
    folder = Path(data["state"]["deployed_to"])
    assert (folder / "plan.md").read_text().startswith("# Migration plan")
    assert "batches of 5,000" in (folder / "plan.md").read_text()
    assert sorted(p.name for p in folder.glob("*.sql")) == sorted(data["state"]["scripts"])
    assert (folder / "DEPLOYED").read_text().strip().endswith(":deploy")

    plain = CliRunner().invoke(app, ["demo"])
    assert plain.exit_code == 0 and "Approve the migration plan" in plain.stdout and "approve " in plain.stdout
    hint = plain.stdout.split("Answer it whenever", 1)[1]  # the example pins the request, as those above
    assert re.search(r"approve \w+ --at review_plan --request \d+\n", " ".join(hint.split("\n  "))), hint


def test_example_builds_with_channels() -> None:
    wf = build(plan_channel="slack:#migrations", review_channel="jira:MIG", signoff_channel="console")
    wf.validate()
    assert wf.point("review_plan").channel == "slack:#migrations" and wf.point("review_artefacts").channel == "jira:MIG"


@pytest.mark.parametrize("name", ["plan.md", "DEPLOYED.sql/..", "../escape.sql", "sub/x.sql", ".hidden.sql"])
def test_an_edit_cannot_name_a_script_outside_the_folder_or_over_the_plan(db_url: str, tmp_path: Path, name: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", "examples.migration_plan")
    monkeypatch.setenv("HAZEL_OPERATOR", "priya")
    for var in ("HAZEL_LLM_BASE_URL", "HAZEL_LLM_API_KEY", "HAZEL_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    cli = CliRunner()
    started = cli.invoke(app, ["run", "migration-plan", "--input", '{"request": "add a column"}', "--json"])
    run_id = json.loads(started.stdout)["run"]["id"]
    assert cli.invoke(app, ["approve", run_id, "--at", "review_plan", "--as", "priya"]).exit_code == 0
    before = json.loads(cli.invoke(app, ["show", run_id, "--json"]).stdout)["state"]["scripts"]
    refused = cli.invoke(app, ["edit", run_id, "--at", "review_artefacts", "--as", "priya", "--set",
                               f"scripts.{name}=DROP TABLE x;"])
    assert refused.exit_code == 1 and "script file names must be plain .sql file names" in refused.output, \
        refused.output
    after = json.loads(cli.invoke(app, ["show", run_id, "--json"]).stdout)
    assert after["state"]["scripts"] == before and after["pending_request"]["point"] == "review_artefacts"


def test_a_models_file_names_are_numbered_when_not_plain() -> None:
    from examples.migration_plan import _parse_files

    text = "-- file: ../../etc/x.sql\nSELECT 1;\n-- file: 002_ok.up.sql\nSELECT 2;\n"
    assert _parse_files(text) == {"001_migration.sql": "SELECT 1;\n", "002_ok.up.sql": "SELECT 2;\n"}


def test_sign_off_allows_no_edit_and_a_redeploy_after_a_rewind_matches_the_state(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", "examples.migration_plan")
    monkeypatch.setenv("HAZEL_OPERATOR", "priya")
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))
    for var in ("HAZEL_LLM_BASE_URL", "HAZEL_LLM_API_KEY", "HAZEL_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    cli = CliRunner()
    run_id = json.loads(cli.invoke(app, ["run", "migration-plan", "--input", '{"request": "add a column"}',
                                         "--json"]).stdout)["run"]["id"]
    for point in ("review_plan", "review_artefacts"):
        assert cli.invoke(app, ["approve", run_id, "--at", point, "--as", "priya"]).exit_code == 0
    for field in ("plan", "test_strategy"):  # sign-off shows the test strategy but allows no edit at all
        refused = cli.invoke(app, ["edit", run_id, "--as", "priya", "--set", f"{field}=x"])
        assert refused.exit_code == 1 and "'edit' is not allowed at 'Sign off the deployment' (allowed: " \
            in refused.output and "lets you edit" not in refused.output, refused.output
    assert cli.invoke(app, ["approve", run_id, "--at", "sign_off", "--as", "priya"]).exit_code == 0
    folder = Path(json.loads(cli.invoke(app, ["show", run_id, "--json"]).stdout)["state"]["deployed_to"])
    first = sorted(p.name for p in folder.glob("*.sql"))
    rewound = cli.invoke(app, ["rewind", run_id, "--to", "review_artefacts", "--as", "priya", "--set",
                               'scripts={"002_x.up.sql": "SELECT 1;\\n"}'])
    assert rewound.exit_code == 0, rewound.output
    for point in ("review_artefacts", "sign_off"):
        assert cli.invoke(app, ["approve", run_id, "--at", point, "--as", "priya"]).exit_code == 0
    assert len(first) == 2 and sorted(p.name for p in folder.glob("*.sql")) == ["002_x.up.sql"]


def test_the_examples_channels_are_read_from_dotenv_as_hazels_settings_are(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``.env.example`` offers ``HAZEL_EXAMPLE_PLAN_CHANNEL`` among Hazel's settings: a ``.env`` holding it was
    ignored (the example read ``os.environ`` only)."""
    for name in ("HAZEL_EXAMPLE_PLAN_CHANNEL", "HAZEL_EXAMPLE_REVIEW_CHANNEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("hazel_example_plan_channel=jira:MIG\nHAZEL_EXAMPLE_REVIEW_CHANNEL=slack:#rev\n")
    monkeypatch.setenv("HAZEL_EXAMPLE_REVIEW_CHANNEL", "slack:#env-wins")
    wf = build()
    assert wf.point("review_plan").channel == "jira:MIG"
    assert wf.point("review_artefacts").channel == "slack:#env-wins"
    assert wf.point("sign_off").channel == "console"


def test_env_reads_the_environment_in_any_case_before_dotenv(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``env("My_Setting")`` missed ``MY_SETTING`` in the environment (and took ``.env``'s value instead)."""
    from hazel import env

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("lower_only=dot\n")
    monkeypatch.setenv("MY_SETTING", "up")
    monkeypatch.setenv("LOWER_ONLY", "envup")
    assert (env("My_Setting"), env("lower_only"), env("ABSENT", "d")) == ("up", "envup", "d")
