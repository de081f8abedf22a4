"""What software produces a run: mastif's version and commit, Python, and the installed
versions of the packages the stack runs on; and whether the installed libraries still have
the private members mastif's adapters rely on.

Versions are collected once per stack job (:func:`collect_provenance`) and copied into every
run row of that job (the ``*_version`` columns of :data:`mastif.core.trace.RUN_SCHEMA`). They come
from ``importlib.metadata``, i.e. the installed distributions, never from a guess: a version
that cannot be known is ``None`` (null), e.g. the model server behind a remote
OpenAI-compatible endpoint. A package the stack does not use is ``None`` too.

Which packages a stack uses: its framework adapter says so (``packages``, plus
``mcp_packages`` under protocol ``mcp``: the framework's own MCP client), the protocol adds its
SDK (:data:`PROTOCOL_PACKAGES`), and a ``local`` model is served by llama.cpp's server from
the xllamacpp wheel (or, ``options.server: llama-server``, from the same release compiled
here: its version is what ``make llama-native`` wrote beside the binary).

Adapters that override or call private members of a library (CrewAI, Semantic Kernel) list
them as :class:`PrivateMember` s; :func:`check_private_members` runs once per stack job,
before any run, and stops the job with :class:`IncompatibleLibraryError` naming the class,
the member and the installed version when one is gone. Without it a renamed private method
would silently stop being called (an override is then dead code) and runs would go on,
subtly different.
"""

from __future__ import annotations

import inspect
import os
import platform
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

#: the packages whose versions a run row can hold (distribution names), in column order
PACKAGES: tuple[str, ...] = (
    "langgraph",
    "langchain",
    "langchain-core",
    "langchain-openai",
    "langchain-mcp-adapters",
    "crewai",
    "semantic-kernel",
    "llama-index-core",
    "llama-index-llms-openai-like",
    "llama-index-tools-mcp",
    "smolagents",
    "agent-framework-core",
    "agent-framework-openai",
    "pydantic-ai-slim",
    "pydantic-graph",
    "openai-agents",
    "haystack-ai",
    "mcp-haystack",
    "mcp",
    "a2a-sdk",
    "openai",
)
#: the SDK each protocol runs on (its servers, and the A2A client)
PROTOCOL_PACKAGES: dict[str, tuple[str, ...]] = {
    "standard": (),
    "mcp": ("mcp",),
    "a2a": ("a2a-sdk",),
}
#: the server (distribution) mastif starts for a model of this provider: llama.cpp's from the
#: prebuilt xllamacpp wheel (``options.server: llama-server``: the same release compiled
#: here, see :func:`collect_provenance`), or mastif's own scripted one
#: (mastif.providers.scripted); other providers: unknown
MODEL_SERVERS: dict[str, str] = {"local": "xllamacpp", "scripted": "mastif"}


def version_column(package: str) -> str:
    """The run column holding ``package``'s version: ``langchain-core`` -> ``langchain_core_version``."""
    return package.replace("-", "_") + "_version"


#: every provenance column of a run row, in :data:`mastif.core.trace.RUN_SCHEMA` order
PROVENANCE_COLUMNS: tuple[str, ...] = (
    "mastif_version",
    "mastif_commit",
    "mastif_dirty",
    "python_version",
    "model_server",
    "model_server_version",
    *(version_column(p) for p in PACKAGES),
    "other_packages",
)


def package_version(package: str) -> str | None:
    """The installed version of distribution ``package``; ``None`` when it is not installed."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def mastif_checkout() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout mastif runs from; ``(None, None)`` when it does not
    run from a checkout (an installed wheel) or git cannot tell.

    The checkout is the repository whose ``src/mastif`` is this package, so a mastif
    installed into some other repository's virtualenv is not taken for it. Dirty: tracked
    files differ from the commit (untracked files do not count, as in ``git describe
    --dirty``). Git is asked not to take optional locks, so it does not write the index.
    """
    package = Path(__file__).resolve().parents[1]  # src/mastif (this file is in core/)
    root = package.parent.parent
    if package.parent.name != "src" or not (root / "pyproject.toml").is_file():
        return None, None
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args],
                capture_output=True, text=True, timeout=10, env=env, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    found = git("rev-parse", "--show-toplevel", "HEAD")
    if found is None:
        return None, None
    lines = found.split()
    if len(lines) != 2 or Path(lines[0]).resolve() != root:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return lines[1], (None if status is None else bool(status.strip()))


def stack_packages(framework: Any, protocol: str) -> tuple[str, ...]:
    """The distributions a stack of ``framework`` (an adapter) under ``protocol`` runs on."""
    used = list(getattr(framework, "packages", ()))
    if protocol == "mcp":
        used += getattr(framework, "mcp_packages", ())
    used += PROTOCOL_PACKAGES.get(protocol, ())
    return tuple(dict.fromkeys(used))


@dataclass(frozen=True)
class Provenance:
    """What produced a stack job's runs; :meth:`columns` is what each run row gets."""

    mastif_version: str | None
    mastif_commit: str | None
    mastif_dirty: bool | None
    python_version: str
    model_server: str | None
    model_server_version: str | None
    #: distribution -> installed version, for the packages the stack uses
    packages: dict[str, str | None] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """The provenance columns of a run row (every one of :data:`PROVENANCE_COLUMNS`)."""
        row: dict[str, Any] = {
            "mastif_version": self.mastif_version,
            "mastif_commit": self.mastif_commit,
            "mastif_dirty": self.mastif_dirty,
            "python_version": self.python_version,
            "model_server": self.model_server,
            "model_server_version": self.model_server_version,
        }
        for package in PACKAGES:
            row[version_column(package)] = self.packages.get(package)
        # a plugin framework's packages have no column of their own: "name==version, ..."
        others = sorted(p for p in self.packages if p not in PACKAGES)
        row["other_packages"] = (
            ", ".join(f"{p}=={self.packages[p] or 'unknown'}" for p in others) or None
        )
        return row


def model_server_name(provider: str, local_server: str | None = None) -> str | None:
    """The model server a provider's requests reach (None: a remote endpoint's, unknown
    here). ``local_server``: a local model's ``options.server``; ``llama-server`` is compiled
    by `make llama-native` from the llama.cpp tree vendored in the sdist of the xllamacpp
    release the lock pins."""
    if provider == "local" and local_server == "llama-server":
        return "llama-server"
    return MODEL_SERVERS.get(provider)


def collect_provenance(
    framework: Any,
    protocol: str,
    provider: str,
    local_server: str | None = None,
    native_server_version: str | None = None,
) -> Provenance:
    """The versions behind a stack job's runs: call once per job, before its runs.
    ``local_server``: a local model's ``options.server``; ``native_server_version``: for
    ``llama-server``, what its build wrote beside it
    (:func:`mastif.providers.local.native_server_source`; None: unknown)."""
    commit, dirty = mastif_checkout()
    server = model_server_name(provider, local_server)
    if server == "llama-server":
        # a build, not a package: what its build wrote beside it
        server_version = native_server_version
    else:
        server_version = package_version(server) if server else None
    used = stack_packages(framework, protocol)
    return Provenance(
        mastif_version=package_version("mastif"),
        mastif_commit=commit,
        mastif_dirty=dirty,
        python_version=platform.python_version(),
        model_server=server,
        model_server_version=server_version,
        packages={p: package_version(p) for p in used},
    )


# --------------------------------------------------------------------------- private members


class IncompatibleLibraryError(RuntimeError):
    """An installed library lacks a private member an adapter relies on."""


@dataclass(frozen=True)
class PrivateMember:
    """A member of a library class that an adapter overrides or uses although the library
    does not promise it (a private name, or a hook that is not public API).

    ``use`` completes the sentence "mastif ..." (what it does with the member). ``kind``:
    ``"method"`` (on the class, callable: an override or a call), ``"attribute"`` (on the
    class, or a pydantic private attribute), ``"instance"`` (an attribute the class's
    ``__init__``, or one of its bases', assigns: it exists only on instances).
    """

    owner: type
    name: str
    package: str
    use: str
    kind: Literal["method", "attribute", "instance"] = "method"

    @property
    def where(self) -> str:
        return f"{self.owner.__module__}.{self.owner.__qualname__}.{self.name}"

    def problem(self) -> str | None:
        """What is wrong with this member in the installed library, or ``None``."""
        if self.kind == "instance":
            return None if _assigned_in_init(self.owner, self.name) else "is gone"
        try:
            value = inspect.getattr_static(self.owner, self.name)
        except AttributeError:
            # pydantic keeps private attributes out of the class namespace
            private = getattr(self.owner, "__private_attributes__", None) or {}
            if self.kind == "attribute" and self.name in private:
                return None
            return "is gone"
        if self.kind == "method":
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if not callable(value):
                return "is no longer callable"
        return None


def private_members_of(package: str) -> Callable[..., PrivateMember]:
    """A constructor of one library's :class:`PrivateMember` s, called as
    ``(owner, name, use, kind="method")``."""

    def member(owner: type, name: str, use: str, kind: str = "method") -> PrivateMember:
        return PrivateMember(owner, name, package, use, kind)  # type: ignore[arg-type]

    return member


def _assigned_in_init(owner: type, name: str) -> bool:
    """Whether an ``__init__`` in ``owner``'s MRO names attribute ``name`` (``self.name = ...``)."""
    for cls in owner.__mro__:
        code = getattr(cls.__dict__.get("__init__"), "__code__", None)
        if code is not None and name in code.co_names:
            return True
    return False


def check_private_members(members: Iterable[PrivateMember]) -> None:
    """Stop with :class:`IncompatibleLibraryError` if any of ``members`` is gone (or is no
    longer callable) in the installed library; one line per such member."""
    problems = []
    for member in members:
        problem = member.problem()
        if problem is not None:
            version = package_version(member.package) or "(version unknown)"
            problems.append(
                f"{member.package} {version}: {member.where} {problem}; mastif {member.use} "
                f"— pin {member.package} to a tested version (requirements.lock)"
            )
    if problems:
        raise IncompatibleLibraryError("\n".join(problems))


def check_framework(framework: Any) -> None:
    """The start-up check of a framework adapter's :class:`PrivateMember` s (``private_members``)."""
    members: Sequence[PrivateMember] = getattr(framework, "private_members", ())
    check_private_members(members)


__all__ = [
    "PACKAGES",
    "PROVENANCE_COLUMNS",
    "IncompatibleLibraryError",
    "PrivateMember",
    "Provenance",
    "check_framework",
    "check_private_members",
    "collect_provenance",
    "model_server_name",
    "mastif_checkout",
    "package_version",
    "stack_packages",
    "version_column",
]
