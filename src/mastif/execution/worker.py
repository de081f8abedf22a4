"""``python -m mastif.execution.worker ORDER RESULT``: a stack job's worker process, started by
:func:`mastif.execution.stack_worker.run_work` with the framework environment's python."""

from __future__ import annotations

import sys

from mastif.execution.runner import exit_cleanly_on_sigterm, run_pending
from mastif.execution.stack_worker import worker_main

if __name__ == "__main__":
    exit_cleanly_on_sigterm()  # a stopped harness stops its worker: servers closed
    sys.exit(worker_main(sys.argv[1:], run_pending))
