"""``hazel runs`` says "--limit N for more" only when there are more runs than it listed: it said so when exactly
``--limit`` runs existed (the twin of REST's ``next_offset`` on an exactly full last page, s26 F2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from hazel import Workflow
from tests.support.cli import in_process_cli


class S(BaseModel):
    text: str = ""


quiet = Workflow("quiet", version=1, state=S)
quiet.steer("look", title="Look", actions=["approve"])


def test_the_more_hint_only_when_there_are_more(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=__file__)
    for _ in range(2):
        hazel("run", "quiet", "--input", "{}")
    assert "for more" not in hazel("runs", "--limit", "2").stdout
    assert "for more" not in hazel("runs", "--limit", "3").stdout
    listed = hazel("runs", "--limit", "1").stdout
    assert "(the 1 newest; --limit N for more)" in listed, listed
