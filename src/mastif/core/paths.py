"""Where mastif's own data lives: the default config, its schema, prompts and rubric
(``config/``) and the built-in tasks, values corpus and sandbox sites (``resources/``).

Both are package data under ``mastif/_data``: in a checkout (and an editable install)
``_data/config`` and ``_data/resources`` are symlinks to the repository's ``config/`` and
``resources/``; a built wheel (``pip install .``) holds real copies. Found through
``importlib.resources``, so the same code serves both.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

#: overrides the ``resources`` directory (tests, relocated data)
RESOURCES_ENV = "MASTIF_RESOURCES"
#: overrides mastif's per-machine cache (``~/.cache/mastif``: the llama.cpp builds, the
#: Mind2Web extracts, the exported embedding model)
CACHE_ENV = "MASTIF_CACHE"


def cache_dir() -> Path:
    """mastif's per-machine cache: ``$MASTIF_CACHE``, else ``~/.cache/mastif``."""
    override = os.environ.get(CACHE_ENV)
    return Path(override).expanduser() if override else Path.home() / ".cache" / "mastif"


def data_root() -> Path:
    """The directory holding mastif's ``config/`` and ``resources/``."""
    root = files("mastif") / "_data"
    # a regular (not zipped) install: the traversable is a real directory
    return Path(str(root)).resolve()


def resources_dir() -> Path:
    """The built-in ``resources`` directory; ``$MASTIF_RESOURCES`` wins."""
    override = os.environ.get(RESOURCES_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return data_root() / "resources"


def schema_path() -> Path:
    return data_root() / "config" / "schema" / "config.schema.yaml"


def default_config_path() -> Path:
    return data_root() / "config" / "config.yaml"
