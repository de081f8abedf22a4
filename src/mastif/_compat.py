"""Import paths of the plugin API from before mastif's subpackages, kept working.

A framework plugin written against ``mastif.workflow``, ``mastif.orchestration``,
``mastif.trace`` or ``mastif.config`` (docs/frameworks.md, "Write your own") imports the
module that now holds them: the old name is an alias of the *same* module object (not a
copy), so a plugin sees exactly what mastif's own adapters see. Nothing else is aliased;
new code uses the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

#: old module name -> where it lives now
MOVED_PLUGIN_API = {
    "mastif.workflow": "mastif.frameworks.plan",
    "mastif.orchestration": "mastif.frameworks.orchestration",
    "mastif.trace": "mastif.core.trace",
    "mastif.config": "mastif.core.config",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.target_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The target module is already executed: nothing to run. The import system has
        just set its ``__spec__`` to the alias's; give it back its own, so the module keeps
        one identity (``__name__`` and ``__spec__.name`` are the new path)."""
        module.__spec__ = self.target_spec


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of :data:`MOVED_PLUGIN_API` and loads the new modules for them."""

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        new = MOVED_PLUGIN_API.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
