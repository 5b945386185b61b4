"""Writes .env.example from bot.settings, each field's docstring as its comment: `.venv/bin/python docs/make_env_example.py`
from the repository root after adding a setting (tests/bot/test_env_example.py fails until it is run)."""
import ast
import textwrap

from pydantic import AliasChoices

from bot.settings import Settings

src = open("bot/settings.py", encoding="utf-8").read()
tree = ast.parse(src)
docs = {}
cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
body = cls.body
for i, n in enumerate(body):
    if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
        if i + 1 < len(body) and isinstance(body[i+1], ast.Expr) and isinstance(getattr(body[i+1], "value", None), ast.Constant) and isinstance(body[i+1].value.value, str):
            docs[n.target.id] = " ".join(body[i+1].value.value.split())
out = ["# Every setting Hazel reads, with its default (generated from bot/settings.py; tests/bot/test_env_example.py",
       "# keeps it complete). Copy to .env (or /etc/hazel/hazel.env) and uncomment what you change.",
       "# Secrets (tokens, keys, passwords) may be set here or in the environment (the environment wins); they never",
       "# reach logs, messages or the database. Values set here are Hazel's settings only: they are not put in",
       "# os.environ, so a step's own code does not see them.", ""]
for name, f in Settings.model_fields.items():
    alias = f.validation_alias
    envs = [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else [str(alias)]
    doc = docs.get(name, "")
    if len(envs) > 1:
        doc = (doc + f" (also read as {', '.join(envs[1:])})").strip()
    if doc:
        doc = doc.replace("``", "`")
        out += ["#   " + l for l in textwrap.wrap(doc, 108)]
    if f.default_factory is not None:
        value = ""
        out.append(f"# default: computed ({name})")
    elif f.default is None:
        value = ""
    elif isinstance(f.default, bool):
        value = str(f.default).lower()
    else:
        value = str(f.default)
    out.append(f"# {envs[0]}={value}")
    out.append("")
out += ["# The example workflow (examples/migration_plan.py): where it asks (console, slack:#chan, jira:KEY).",
        "# HAZEL_EXAMPLE_PLAN_CHANNEL=console", "# HAZEL_EXAMPLE_REVIEW_CHANNEL=console",
        "# HAZEL_EXAMPLE_SIGNOFF_CHANNEL=console", "",
        "# The LangGraph example (examples/langgraph_review.py): where its review is asked.",
        "# HAZEL_EXAMPLE_LG_CHANNEL=console", ""]
open(".env.example", "w", encoding="utf-8").write("\n".join(out))
