"""Registered workflows, by name and version, loaded from the modules ``HAZEL_WORKFLOWS`` names."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from bot.engine.errors import UnknownWorkflowError, WorkflowDefinitionError
from bot.engine.workflow import Workflow


class Registry:
    """Workflows by ``(name, version)``. Several versions of one name may be registered at once (runs that
    started on an older version resume on it)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, int], Workflow] = {}
        self._origin: dict[tuple[str, int], tuple[str, str | None]] = {}

    def add(self, wf: Workflow, *, origin: str | None = None, origin_file: str | None = None) -> Workflow:
        """Validate and register ``wf`` (``origin``: the module or file it was loaded from, as given, and
        ``origin_file`` that file's resolved path, for a refusal).

        Raises:
            WorkflowDefinitionError: ``wf`` is invalid, or another definition has the same name and version
                (``workflow w v1 is defined twice: in dupa.py and in dupb.py``, where known).
        """
        wf.validate()
        key = (wf.name, wf.version)
        existing = self._by_key.get(key)
        if existing is not None and existing is not wf:
            first, first_file = self._origin.get(key, (None, None))
            where = ""
            if first is not None and origin is not None:
                same = first_file is not None and first_file == origin_file
                where = f": in {first} and in {origin}" + (" (one file named two ways?)" if same else "")
            raise WorkflowDefinitionError(f"workflow {wf.label} is defined twice{where}")
        self._by_key[key] = wf
        if origin is not None:
            self._origin.setdefault(key, (origin, origin_file))
        return wf

    def get(self, name: str, version: int | None = None) -> Workflow:
        """The workflow ``name`` at ``version`` (None: the highest registered).

        Raises:
            UnknownWorkflowError: not registered; the message lists what is.
        """
        if version is None:
            versions = [v for (n, v) in self._by_key if n == name]
            if versions:
                return self._by_key[(name, max(versions))]
        elif (name, version) in self._by_key:
            return self._by_key[(name, version)]
        known = ", ".join(f"{n} ({', '.join(f'v{v}' for v in self.versions(n))})" for n in self.names()) \
            or "none (set HAZEL_WORKFLOWS)"
        what = f"{name!r}" if version is None else f"{name!r} version {version}"
        raise UnknownWorkflowError(f"unknown workflow {what}; registered: {known}")

    def find(self, name: str, version: int) -> Workflow | None:
        return self._by_key.get((name, version))

    def versions(self, name: str) -> list[int]:
        return sorted(v for (n, v) in self._by_key if n == name)

    def all(self) -> list[Workflow]:
        return [self._by_key[k] for k in sorted(self._by_key)]

    def names(self) -> list[str]:
        """The registered workflows' names, sorted, each once (whatever its versions)."""
        return sorted({n for n, _ in self._by_key})

    def load(self, targets: list[str], *, base_dir: str | os.PathLike | None = None) -> list[Workflow]:
        """Import each target (a module name such as ``examples.migration_plan`` or a ``.py`` path) and register
        every ``Workflow`` defined at its top level. ``base_dir`` (default: the current directory) is put on
        ``sys.path`` first, so that modules of the project Hazel runs in can be named.

        Raises:
            WorkflowDefinitionError: a module cannot be imported, defines no workflow, or one is invalid.
        """
        base = str(Path(base_dir or os.getcwd()).resolve())
        if base not in sys.path:
            sys.path.insert(0, base)
        loaded: list[Workflow] = []
        for target in targets:
            module = _import(target, base)
            found = [v for v in vars(module).values() if isinstance(v, Workflow)]
            found += [v for v in getattr(module, "__hazel_workflows__", ()) if v not in found]  # register()
            if not found:
                raise WorkflowDefinitionError(f"module {target!r} defines no Workflow at its top level")
            file = getattr(module, "__file__", None)
            for wf in found:
                loaded.append(self.add(wf, origin=target, origin_file=str(Path(file).resolve()) if file else None))
        return loaded


def module_name(path: str | os.PathLike) -> str:
    """The name in ``sys.modules`` of the workflow file at ``path`` (``hazel_workflows_<stem>_<12 hex>``): one
    module per file, named by its whole resolved path, so that two files of the same name in different folders
    are two modules (named by the stem alone, the second file was taken for the first and its workflows were
    never registered)."""
    resolved = Path(path).resolve()
    digest = hashlib.sha256(str(resolved).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"hazel_workflows_{resolved.stem}_{digest}"


def _import(target: str, base: str):  # noqa: ANN202
    try:
        if target.endswith(".py") or os.sep in target:
            path = Path(target if os.path.isabs(target) else os.path.join(base, target)).resolve()
            name = module_name(path)
            if name in sys.modules:
                return sys.modules[name]
            if not path.is_file():
                raise WorkflowDefinitionError(f"cannot load workflows from {target!r}: "
                                              + (f"{path} is not a file" if path.exists() else f"no such file {path}"))
            if path.suffix != ".py":
                raise WorkflowDefinitionError(f"cannot load workflows from {target!r}: not a .py file (give module "
                                              "names or paths of .py files)")
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise WorkflowDefinitionError(f"cannot load workflows from {target!r}: not a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:  # not half a module for the next load to take as loaded
                sys.modules.pop(name, None)
                raise
            return module
        return importlib.import_module(target)
    except WorkflowDefinitionError:
        raise
    except Exception as exc:  # an import error of the author's module, shown with its cause
        from pydantic import ValidationError

        from bot.engine.errors import validation_details

        said = f"{exc.title}: {validation_details(exc)}" if isinstance(exc, ValidationError) else str(exc)  # (one
        # line: each field and why, ``Approvers: peple: Extra inputs are not permitted``; s34 F8)
        raise WorkflowDefinitionError(f"cannot load workflows from {target!r}: {type(exc).__name__}: {said}") from exc
