"""The test modules a framework's environment runs (``make test``), printed one per line.

The harness (``.venv``) has no framework: a framework's adapter tests and its share of the
contract tests run in its own environment (``.envs/<framework>``), in process. Which items of
these modules each side runs is decided in tests/conftest.py.
"""

from __future__ import annotations

import sys

from tests.support.paths import REPO

#: modules whose tests are parametrised over the frameworks and run each framework in process
#: (they patch its construct, read its log records, time its servers): in each framework's
#: environment, its own parameters; in the harness, none of those
CONTRACT_MODULES: tuple[str, ...] = (
    "tests/frameworks/test_workflow.py",
    "tests/frameworks/test_native_orchestration.py",
    "tests/protocols/test_protocols_contract.py",
    "tests/frameworks/test_framework_env.py",
    "tests/security/test_gateway.py",
)


def adapter_module(framework: str) -> str:
    """The module of ``framework``'s own adapter tests (all of them run in its environment)."""
    return f"tests/frameworks/test_{framework}_adapter.py"


def env_modules(framework: str) -> list[str]:
    return [m for m in (*CONTRACT_MODULES, adapter_module(framework)) if (REPO / m).is_file()]


if __name__ == "__main__":
    from mastif.execution.frameworkenv import running_env

    name = running_env()
    if name is None:
        sys.exit("tests.support.env_tests: run it with a framework environment's python")
    print("\n".join(env_modules(name)))
