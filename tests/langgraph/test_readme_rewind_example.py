"""README (LangGraph > Rewind)'s ``--set`` example, run as written: each command of its ``sh`` block, in order,
through the CLI on the example graph (``RUN`` replaced by the run the block's ``hazel run`` started). The value
it sets is what the review then shows, and what the run publishes. The example used to set ``draft`` at the
checkpoint before ``draft`` ran, where the draft node replaced it at once (``# Tide pools``, the offline draft).
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.support.cli import in_process_cli

README = Path(__file__).resolve().parents[2] / "README.md"


def rewind_example() -> list[list[str]]:
    """The commands of the ``sh`` block in README's LangGraph > Rewind that sets a value (``--set``), comments
    dropped, each split as a shell would."""
    text = README.read_text(encoding="utf-8")
    langgraph = text[text.index("\n## LangGraph\n"):]
    rewind = langgraph[langgraph.index("\n### Rewind\n"):]
    rewind = rewind[:rewind.index("\n### ", 1)]
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", rewind, re.S) if "--set" in b]
    assert len(blocks) == 1, f"README's LangGraph > Rewind has {len(blocks)} sh blocks with --set, not 1"
    return [shlex.split(line, comments=True) for line in blocks[0].splitlines() if line.strip()]


def test_the_readme_rewind_example_keeps_the_value_it_sets(db_url: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HAZEL_LLM_BASE_URL", "HAZEL_LLM_API_KEY", "HAZEL_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)  # the offline drafter, as the README's output shows
    commands = rewind_example()
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows="")
    run_id, shown, setting = None, [], None
    for command in commands:
        if command[0] == "export":
            name, _, value = command[1].partition("=")
            monkeypatch.setenv(name, value)
            continue
        assert command[0] == "hazel", command
        args = [run_id if a == "RUN" else a for a in command[1:]]
        assert None not in args, f"{command}: RUN before the run was started"
        if "--set" in args:
            setting = args[args.index("--set") + 1].partition("=")
        result = hazel(*args)
        if args[0] == "run":
            run_id = re.search(r"started run ([0-9a-f]+)", result.stdout).group(1)
        if args[0] == "show":
            shown.append(result.stdout)
    assert setting is not None and setting[0] == "draft", setting
    assert shown and shown[-1].strip() == setting[2], shown  # what the review shows: the value set
    final = json.loads(hazel("show", run_id, "--json").stdout)
    assert final["run"]["status"] == "completed", final["run"]
    assert final["state"]["draft"] == setting[2] and final["state"]["published"] is True, final["state"]
