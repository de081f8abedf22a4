"""No framework environment can install a withdrawn litellm, and every lock pins with hashes.

litellm 1.82.7 and 1.82.8 carried a credential stealer (March 2026) and 1.107.0 was reported
compromised (October 2026): ``envs/litellm.in`` is the one constraint, and a lock that holds
litellm must come from an environment that includes it, at a release outside those lines,
with its hashes (uv installs from a lock with hashes in ``--require-hashes`` mode: a file the
registry serves under the same name and version but other content is refused).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import REPO

ENVS = REPO / "envs"
#: releases the registry withdrew or that were reported compromised
WITHDRAWN = re.compile(r"^(1\.82\.[78]|1\.107(\.\d+)*)$")
FLOOR = (1, 83, 0)

_PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)")


def pins(lock_text: str) -> dict[str, tuple[str, int]]:
    """Each pinned package of a uv lock: name -> (version, number of its hashes)."""
    found: dict[str, tuple[str, int]] = {}
    current: str | None = None
    for line in lock_text.splitlines():
        match = _PIN.match(line)
        if match:
            current = match.group(1).split("[")[0].lower().replace("_", "-")
            found[current] = (match.group(2), line.count("--hash="))
        elif current and line.lstrip().startswith("--hash="):
            version, hashes = found[current]
            found[current] = (version, hashes + line.count("--hash="))
        elif line and not line.startswith(" "):
            current = None
    return found


def lock_problems(name: str, requirements: str, lock_text: str) -> list[str]:
    """What is wrong with environment ``name``'s lock (empty: nothing)."""
    problems = []
    locked = pins(lock_text)
    for package, (version, hashes) in sorted(locked.items()):
        if hashes == 0:
            problems.append(f"{name}: {package}=={version} is pinned without a hash")
    if "litellm" in locked:
        version = locked["litellm"][0]
        release = tuple(int(p) for p in re.findall(r"\d+", version)[:3])
        if WITHDRAWN.match(version):
            problems.append(f"{name}: litellm=={version} is a withdrawn/compromised release")
        if release < FLOOR:
            problems.append(f"{name}: litellm=={version} is below the safe floor 1.83.0")
        if "-r ../litellm.in" not in requirements:
            problems.append(f"{name}: pulls litellm but its requirements.in lacks -r ../litellm.in")
    return problems


def _envs() -> list[Path]:
    return sorted(p for p in ENVS.iterdir() if (p / "requirements.lock").is_file())


@pytest.mark.parametrize("env", _envs(), ids=lambda p: p.name)
def test_every_lock_is_hashed_and_litellm_safe(env):
    problems = lock_problems(
        env.name,
        (env / "requirements.in").read_text(),
        (env / "requirements.lock").read_text(),
    )
    assert problems == []


def test_the_constraint_excludes_the_compromised_releases():
    from packaging.specifiers import SpecifierSet

    lines = [
        line for line in (ENVS / "litellm.in").read_text().splitlines()
        if line and not line.startswith("#")
    ]  # fmt: skip
    assert len(lines) == 1 and lines[0].startswith("litellm")
    spec = SpecifierSet(lines[0].removeprefix("litellm"))
    for bad in ("1.82.7", "1.82.8", "1.82.6", "1.107.0", "1.107.3"):
        assert bad not in spec
    assert "1.83.0" in spec and "1.110.2" in spec


def test_the_checker_finds_planted_problems():
    good = "litellm==1.110.2 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n    # via x\n"
    assert lock_problems("x", "-r ../litellm.in\n", good) == []
    assert pins(good) == {"litellm": ("1.110.2", 2)}
    bad = good.replace("1.110.2", "1.82.8")
    assert any("compromised" in p for p in lock_problems("x", "-r ../litellm.in", bad))
    assert any("1.83.0" in p for p in lock_problems("x", "-r ../litellm.in", bad))
    assert any(
        "1.107" in p
        for p in lock_problems("x", "-r ../litellm.in", good.replace("1.110.2", "1.107.0"))
    )
    assert any("lacks" in p for p in lock_problems("x", "", good))
    unhashed = "openai==2.1.0\n    # via x\n"
    assert lock_problems("x", "", unhashed) == ["x: openai==2.1.0 is pinned without a hash"]
