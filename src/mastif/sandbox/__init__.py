"""The offline web sandbox: self-hosted sites, per-run sessions and success checks.

:func:`build_app` makes the Starlette app (ShopSphere, StayFinder, CityPulse and the
LoopSearch engine), :class:`SandboxServer` serves it on loopback for the length of a
benchmark, and :func:`evaluate_check` turns a task's ``check`` plus a run's final answer
and session state into an objective success value.
"""

from mastif.sandbox.app import SESSION_COOKIE, build_app
from mastif.sandbox.checks import CheckResult, evaluate_check, validate_check
from mastif.sandbox.server import SandboxServer

__all__ = [
    "SESSION_COOKIE",
    "CheckResult",
    "SandboxServer",
    "build_app",
    "evaluate_check",
    "validate_check",
]
