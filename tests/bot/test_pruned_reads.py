"""Every read of a checkpoint ``hazel prune`` dropped says it was pruned, in the words rewind uses
(``bot.engine.errors.no_checkpoint``): ``hazel show --seq``, ``hazel rewind --set``, the REST API's checkpoint
state, the run pages' checkpoint and diff; a diff that names no earlier checkpoint compares with the nearest one
kept, or says there is nothing earlier to compare with."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.engine import CheckpointNotFoundError, utcnow
from bot.inbound.api import api_router
from bot.inbound.web import Signer, web_router
from bot.ops.retention import prune
from bot.server.http import create_app
from store.models import RunStatus
from tests.bot.web.conftest import Browserless
from tests.bot.web.scenario import ALICE, web_settings
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer
from tests.workflows import sample

SAMPLE = Path(sample.__file__)


def pruned_run(hazel: Any) -> str:
    """A doc-review run, completed (#0 start, #1 draft, #2 approve, #3 publish: the head), then pruned."""
    run = hazel.start(workflow="doc-review", input={"topic": "caching"}, actor=person("author"))
    hazel.drive(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=person("sme"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    assert prune(hazel.store, older_than_days=0, now=utcnow() + timedelta(seconds=1)).runs == [run.id]
    assert [c.seq for c in hazel.checkpoints(run_id=run.id)] == [3]
    return run.id


def test_every_read_of_a_pruned_checkpoint_says_it_was_pruned(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    hazel = make_hazel(db_url, sample.docs)
    run_id = pruned_run(hazel)
    pruned = f"checkpoint #1 of run {run_id} was pruned (kept: #3)"
    never = f"run {run_id} has no checkpoint #9 (it had #0..#3; kept: #3)"

    with pytest.raises(CheckpointNotFoundError) as rewound:  # what rewind said already: the wording of all
        hazel.rewind(run_id=run_id, actor=person("olga"), to=1)
    assert str(rewound.value) == pruned
    with pytest.raises(CheckpointNotFoundError) as read:
        hazel.state_at(run_id=run_id, seq=1)
    assert str(read.value) == pruned

    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(SAMPLE))
    monkeypatch.setenv("HAZEL_OPERATOR", "olga")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for argv, message in ((["show", run_id, "--seq", "1"], pruned), (["show", run_id, "--seq", "9"], never),
                          (["rewind", run_id, "--to", "1", "--set", "draft=x"], pruned),
                          (["rewind", run_id, "--to", "1"], pruned)):
        result = runner.invoke(app, argv)
        assert result.exit_code == 1 and result.stderr == f"error: {message}\n", (argv, result.output)
        as_json = runner.invoke(app, [*argv, "--json"])
        assert json.loads(as_json.stdout)["error"] == {"type": "CheckpointNotFoundError", "message": message}

    settings = web_settings()  # tokens of alice and bob
    served = create_app(hazel, routers=[api_router(hazel, settings), web_router(hazel, settings)])
    with LiveServer(served) as server:
        rest = httpx.Client(base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {ALICE}"})
        for seq, message in ((1, pruned), (9, never)):
            answer = rest.get(f"/api/runs/{run_id}/checkpoints/{seq}/state")
            assert answer.status_code == 404 and answer.json()["error"]["message"] == message, answer.text
        assert rest.get(f"/api/runs/{run_id}/checkpoints/3/state").json()["state"]["published"] is True

        page = Browserless(server.url)
        assert page.get(f"/runs/{run_id}?t={Signer(settings).token(run_id)}").status_code in (302, 303)
        for path, message in ((f"/runs/{run_id}/checkpoints/1", pruned), (f"/runs/{run_id}/checkpoints/9", never),
                              (f"/runs/{run_id}/diff?a=1&b=3", pruned), (f"/runs/{run_id}/diff?a=3&b=9", never)):
            answer = page.get(path)
            assert answer.status_code == 404 and message in answer.text, (path, answer.text[-800:])
        # the default diff (the head against its parent, here pruned) has nothing earlier: it says so, instead
        # of comparing the head with itself
        default = page.get(f"/runs/{run_id}/diff")
        assert default.status_code == 200, default.text[-800:]
        assert "Nothing earlier to compare with" in default.text
        assert (f"checkpoint #3 of run {run_id} is the earliest kept (#0..#2 were pruned): there is nothing "
                "earlier to compare it with") in default.text
        assert 'class="diff"' not in default.text


def test_a_default_diff_compares_with_the_parent_else_the_nearest_earlier_checkpoint_kept(db_url: str) -> None:
    hazel = make_hazel(db_url, sample.docs)
    run = hazel.start(workflow="doc-review", input={"topic": "caching"}, actor=person("author"))
    hazel.drive(run_id=run.id)
    hazel.rewind(run_id=run.id, actor=person("olga"), to=0)  # #2 forks from #0: its parent is #0, not #1
    hazel.drive(run_id=run.id)
    assert hazel.previous_checkpoint(run_id=run.id, seq=2) == 0
    assert hazel.previous_checkpoint(run_id=run.id, seq=1) == 0
    with pytest.raises(CheckpointNotFoundError, match=rf"^checkpoint #0 of run {run.id} is its first: there is "
                                                      "nothing earlier to compare it with$"):
        hazel.previous_checkpoint(run_id=run.id, seq=0)
    with pytest.raises(CheckpointNotFoundError, match=rf"^run {run.id} has no checkpoint #99 \(it has #0\.\.#3\)$"):
        hazel.previous_checkpoint(run_id=run.id, seq=99)
