"""The test modules a framework's environment runs, and the run of them all (``make test``).

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
    "tests/security/test_no_telemetry.py",
)


def adapter_module(framework: str) -> str:
    """The module of ``framework``'s own adapter tests (all of them run in its environment)."""
    return f"tests/frameworks/test_{framework}_adapter.py"


def env_modules(framework: str) -> list[str]:
    return [m for m in (*CONTRACT_MODULES, adapter_module(framework)) if (REPO / m).is_file()]


#: framework environments tested at once: their tests wait on servers and time-outs a good
#: part of the time (the ten on 2 cores: four at once 1 min 15 s, two 2 min 5 s; the nineteen:
#: eight at once 4 min 10 s, four ~4 min 40 s)
PARALLEL = 8


def run_all(pytest_args: list[str], frameworks: list[str] | None = None) -> int:
    """Run each framework environment's tests (``pytest_args`` added), :data:`PARALLEL` at a
    time; print each one's report as it ends; 1 if any failed."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from mastif.execution.frameworkenv import declared_envs, framework_env

    names = frameworks or list(declared_envs())

    def run(name: str) -> tuple[str, int, str]:
        python = str(framework_env(name).python)
        command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                   *pytest_args, *env_modules(name)]  # fmt: skip
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        return name, done.returncode, done.stdout + done.stderr

    failed = []
    with ThreadPoolExecutor(PARALLEL) as pool:
        for name, code, output in pool.map(run, names):
            lines = output.rstrip().splitlines()
            if code != 0:
                failed.append(name)
                print(f"== {name}: tests failed in its environment\n{output}", flush=True)
            else:
                print(f"== {name}: {lines[-1] if lines else 'no output'}", flush=True)
    if failed:
        print(f"tests failed in the environments of: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    # python -m tests.support.env_tests [PYTEST ARGS]: run every framework environment's tests
    sys.exit(run_all(sys.argv[1:]))
