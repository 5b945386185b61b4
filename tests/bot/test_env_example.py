"""`.env.example` names every setting of ``bot.settings.Settings``, each with its default, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices

from bot.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"
LINE = re.compile(r"^#? ?([A-Z][A-Z0-9_]*)=(.*)$")


def _env_names(field) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(c) for c in alias.choices]
    return [str(alias)] if alias else []


def _entries() -> dict[str, str]:
    """``NAME -> value`` for every ``NAME=value`` line, commented out (``# NAME=``) or not."""
    found: dict[str, str] = {}
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():  # "#   text" lines are comments
        m = LINE.match(line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_every_setting_is_listed_once_under_its_environment_name() -> None:
    entries = _entries()
    missing = {name: _env_names(f) for name, f in Settings.model_fields.items()
               if not any(n in entries for n in _env_names(f))}
    assert not missing, f".env.example lacks these settings: {missing}"


def test_nothing_listed_is_unknown() -> None:
    known = {n for f in Settings.model_fields.values() for n in _env_names(f)}
    known |= {"HAZEL_EXAMPLE_PLAN_CHANNEL", "HAZEL_EXAMPLE_REVIEW_CHANNEL", "HAZEL_EXAMPLE_SIGNOFF_CHANNEL",
              "HAZEL_EXAMPLE_LG_CHANNEL"}
    unknown = set(_entries()) - known
    assert not unknown, f".env.example names settings Hazel does not read: {sorted(unknown)}"


def test_listed_defaults_are_the_model_defaults() -> None:
    entries = _entries()
    wrong = {}
    for name, f in Settings.model_fields.items():
        env = next((n for n in _env_names(f) if n in entries), None)
        if env is None or f.default_factory is not None or f.default is None:
            continue
        listed = entries[env]
        default = f.default
        if isinstance(default, bool):
            ok = listed.lower() == str(default).lower()
        elif isinstance(default, (int, float)):
            try:
                ok = float(listed) == float(default)
            except ValueError:
                ok = False
        else:
            ok = listed == str(default)
        if not ok:
            wrong[env] = (listed, default)
    assert not wrong, f".env.example defaults differ from the settings model: {wrong}"
