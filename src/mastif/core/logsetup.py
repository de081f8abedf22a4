"""Send a workflow job's logging, warnings and uncaught exceptions to its rule's log file.

Every ``workflow/scripts/*.py`` calls :func:`log_to` with ``snakemake.log[0]`` before
anything else (the package never imports snakemake): log records of every library at
``level`` and up, Python warnings (``logging.captureWarnings``) and an uncaught exception
with its traceback, in the main thread or any other, end up in the log. The exception is
then handled as before (printed to stderr, non-zero exit), so Snakemake still sees the
job fail and shows the log with ``show-failed-logs``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from types import TracebackType

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: libraries that log one INFO line per HTTP request, which would drown a job's log
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore")

_logger = logging.getLogger("mastif.job")


def log_to(path: str | Path, level: int = logging.INFO) -> None:
    """Make ``path`` (created with its parents) the log of this process; see the module doc.

    Calling it again (e.g. a script, then :func:`mastif.execution.runner.setup_model_job`) with the
    same file changes nothing, with another file switches to it; the exception hooks are
    installed once.
    """
    global _log_path, _hooks_installed
    path = Path(path)
    if _log_path == path.resolve():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    _log_path = path.resolve()
    _logger.info("%s (pid %d) logs to %s", Path(sys.argv[0]).name, os.getpid(), path)
    if not _hooks_installed:
        _install_exception_hooks()
        _hooks_installed = True


_log_path: Path | None = None
_hooks_installed = False


def _install_exception_hooks() -> None:
    """Log an uncaught exception with its traceback, then let the previous hook run."""
    previous_hook = sys.excepthook

    def log_uncaught(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        if not issubclass(exc_type, KeyboardInterrupt):
            _logger.critical("uncaught exception", exc_info=(exc_type, exc, tb))
        previous_hook(exc_type, exc, tb)

    previous_thread_hook = threading.excepthook

    def log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit:
            name = args.thread.name if args.thread is not None else "?"
            _logger.error(
                "uncaught exception in thread %s",
                name,
                exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
            )
        previous_thread_hook(args)

    sys.excepthook = log_uncaught
    threading.excepthook = log_uncaught_in_thread
