"""What a piece of work cost this process, for the tests that show a hostile page or input
costs the harness nothing (``tests/security``): peak resident memory (this process's and
Playwright's driver's), CPU seconds, and the child processes left behind.

Linux only: the peak is ``VmHWM`` of ``/proc/<pid>/status``, reset to the current resident
set by writing ``5`` to ``/proc/<pid>/clear_refs`` (Linux >= 4.0).
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def peak_kb(pid: int | str = "self") -> int:
    """The process's peak resident set (VmHWM) in kB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def reset_peak(pid: int | str = "self") -> bool:
    """Reset the peak to the current resident set; False if refused."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def child_pids() -> set[int]:
    """Live (not zombie) processes whose parent is this one, from ``/proc``."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            pids.add(int(stat.parent.name))
    return pids


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds of this process (``RUSAGE_SELF``) or of its waited-for
    children (``RUSAGE_CHILDREN``)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def driver_pid() -> int | None:
    """Playwright's node driver: a child of this process."""
    psutil = pytest.importorskip("psutil")
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if "playwright" in " ".join(child.cmdline()):
                return child.pid
    return None


@dataclass(frozen=True)
class Growth:
    """What one piece of work cost: seconds, and the peak resident growth (MB) of this
    process and of the driver (nan when the driver's cannot be measured)."""

    seconds: float
    harness_mb: float
    driver_mb: float


def measured(work: Callable[[], T]) -> tuple[T, Growth]:
    """``work()``'s result and what it cost; skips the test where the peak cannot be reset."""
    gc.collect()
    driver = driver_pid()
    if not reset_peak():
        pytest.skip("/proc/self/clear_refs cannot reset the peak resident set here")
    base = peak_kb()
    driver_base = peak_kb(driver) if driver is not None and reset_peak(driver) else None
    started = time.monotonic()
    result = work()
    seconds = time.monotonic() - started
    harness = (peak_kb() - base) / 1024
    driver_mb = (peak_kb(driver) - driver_base) / 1024 if driver_base is not None else float("nan")
    return result, Growth(seconds, harness, driver_mb)
