"""Two workflow files of the same name in different folders (``HAZEL_WORKFLOWS=a/flows.py,b/flows.py``) are two
modules: both files' workflows are registered, in either order (named by the file's stem alone, the second
file was taken for the first, and its workflows were never registered: ``unknown workflow 'flow-b'``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.errors import WorkflowDefinitionError
from bot.engine.registry import Registry

FLOWS = '''
from pydantic import BaseModel
from bot.engine.workflow import StepContext, Workflow


class S(BaseModel):
    n: int = 0


wf = Workflow("{name}", version=1, state=S)


@wf.step
def s(state: S, ctx: StepContext) -> S:
    return state
'''


def _files(tmp_path: Path) -> tuple[Path, Path]:
    paths = []
    for folder, name in (("a", "flow-a"), ("b", "flow-b")):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "flows.py"
        path.write_text(FLOWS.format(name=name), encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_both_files_of_the_same_name_are_loaded(tmp_path: Path, order: tuple[int, int]) -> None:
    files = _files(tmp_path)
    registry = Registry()
    loaded = registry.load([str(files[i]) for i in order])
    assert sorted(wf.name for wf in loaded) == ["flow-a", "flow-b"]
    assert registry.get("flow-a").name == "flow-a" and registry.get("flow-b").name == "flow-b"


def test_a_file_that_failed_to_import_is_imported_again_next_time(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('not yet')\n", encoding="utf-8")
    with pytest.raises(WorkflowDefinitionError, match="not yet"):
        Registry().load([str(path)])
    path.write_text(FLOWS.format(name="fixed"), encoding="utf-8")
    assert [wf.name for wf in Registry().load([str(path)])] == ["fixed"]
