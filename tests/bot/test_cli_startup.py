"""What the ``hazel`` console script builds and imports to run one command: only that command's Click command
(``bot.cli.for_command``), and none of the modules it does not use. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from bot.cli import app, for_command
from tests.bot.conftest import ROOT, SAMPLE

HAZEL = ROOT / ".venv" / "bin" / "hazel"


def _name(info) -> str:  # noqa: ANN001
    return info.name or typer.main.get_command_name(info.callback.__name__)


def test_each_command_is_built_alone_and_the_app_is_left_whole() -> None:
    names = [_name(c) for c in app.registered_commands]
    whole = typer.main.get_command(app)
    for name in names:
        one = typer.main.get_command(for_command(name))
        assert set(one.commands) == {name, "db", "outbox"}, name
        built, full = one.commands[name], whole.commands[name]
        assert [p.opts for p in built.params] == [p.opts for p in full.params], name
        assert built.help == full.help and one.help == whole.help, name
    assert [_name(c) for c in app.registered_commands] == names  # (a copy was pruned, never app)


def test_anything_but_a_command_name_gets_the_whole_app() -> None:
    for first in (None, "--help", "db", "outbox", "runz", "RUNS", ""):
        assert for_command(first) is app, first


def test_a_pruned_app_answers_as_the_whole_one() -> None:
    runner = CliRunner()
    for argv in (["runs", "--bogus"], ["show"], ["runs", "--help"], ["approve", "--help"], ["runs", "extra"]):
        whole, one = runner.invoke(app, argv), runner.invoke(for_command(argv[0]), argv)
        assert (one.exit_code, one.output) == (whole.exit_code, whole.output), argv


NOT_IMPORTED = ("bot.engine.steering", "bot.engine.views", "bot.engine.timeouts")
"""What ``hazel runs`` and ``hazel show`` never use: the engine's steering, views and timeouts (``Hazel`` builds
them on first use)."""


def test_runs_and_show_import_nothing_they_do_not_use(db_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(SAMPLE), "HAZEL_OPERATOR": "olga",
           "HAZEL_OUTPUT_DIR": str(tmp_path / "out")}
    env.pop("HAZEL_DEBUG", None)
    started = subprocess.run([str(HAZEL), "run", "doc-review", "--input", '{"topic": "t"}', "--json"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    run_id = json.loads(started.stdout)["run"]["id"]
    code = ("import sys\nfrom bot.cli import for_command\n"
            f"for argv in (['runs'], ['show', {run_id!r}]):\n"
            "    for_command(argv[0])(argv, standalone_mode=False)\n"
            f"print(sorted(m for m in sys.modules if m.startswith({NOT_IMPORTED!r})), file=sys.stderr)\n")
    shown = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60, check=True)
    assert shown.stdout.count(run_id) >= 2  # the listing and the panel's title
    assert shown.stderr.strip().splitlines()[-1] == "[]", shown.stderr[-2000:]


HELP_NEVER_IMPORTS = ("sqlalchemy", "store", "bot.cli.render", "bot.engine")
"""What ``hazel --help`` (and a command's ``--help``) never needs: the store, the engine, the renderer (a module
of the CLI that imported the renderer at its top made every ``--help`` 0.06 → 0.35 s)."""


def test_help_imports_neither_the_store_nor_the_engine() -> None:
    code = ("import sys\nfrom bot.cli import main\nsys.argv = ['hazel', '--help']\ntry:\n    main()\n"
            "except SystemExit:\n    pass\n"
            f"print('LOADED', *[m for m in {HELP_NEVER_IMPORTS!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if not k.startswith("HAZEL_")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED", done.stdout.splitlines()[-1]
