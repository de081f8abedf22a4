"""Running untrusted work in a limited child process: ``python_repl``, ``sympy``, ``pdf_reader``.

:func:`run_isolated` forks a child that, before it runs the work, empties its environment
(no API key, token or proxy variable of the harness is readable there), leaves the network
(a network namespace of its own where the kernel grants one, so not even a raw socket
reaches loopback; Python's socket functions refused on top), moves into an empty working
directory, and takes OS limits on CPU seconds and memory (:class:`ChildLimits`). The
parent kills it at a wall clock and reads at most a capped reply, sent as JSON (never a
pickle). Threads cannot be interrupted in CPython, so a process is the only robust way to
stop ``while True: pass``.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from mastif.core.textclip import MAX_TEXT_CHARS, clip_text
from mastif.tools.base import ToolError

#: ``env_start``'s field number in ``/proc/<pid>/stat`` (proc(5)); ``env_end`` follows it
_ENV_START_FIELD = 50
#: ``unshare(2)`` flags (linux/sched.h); the ``os`` module has them from Python 3.12 only
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000


def _mp_context() -> multiprocessing.context.BaseContext:
    """'fork' where available: the child inherits already-imported modules (sympy), so a
    call costs milliseconds; 'spawn' elsewhere, which works because targets are top-level."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


@dataclass(frozen=True)
class ChildLimits:
    """What the child process may use, enforced by the OS on top of the code's own sandbox.

    ``cpu_s``: CPU seconds (RLIMIT_CPU; the kernel kills a spinning child even if the
    parent's wall clock is held up); ``memory_mb``: address space the child may add to what
    it inherited at fork (RLIMIT_AS; a larger allocation fails with ``MemoryError``). Free
    space the parent's allocators still hold in mapped memory comes on top, so this is a
    floor, not an exact budget; a single allocation larger than that slack fails at once;
    ``workdir``: run in a fresh empty directory that is removed afterwards; ``network``:
    when False, the child moves into a network namespace of its own (only a loopback that
    is down: every connection fails in the kernel, raw sockets included) where the kernel
    allows one, and Python's socket functions raise ``PermissionError`` in any case.

    Whatever the limits, the child's environment is emptied before the work starts: the
    harness's API keys, tokens and proxy variables are never readable there.
    """

    cpu_s: int | None = None
    memory_mb: int | None = None
    workdir: bool = True
    network: bool = False


def _current_address_space() -> int:
    """Bytes of virtual memory this process maps now (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as fh:  # noqa: PTH123 - tiny read of a proc file
        return int(fh.read().split()[0]) * resource.getpagesize()


def _release_free_heap() -> None:
    """Unmap the free memory glibc's allocator keeps (``malloc_trim``); nothing elsewhere."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing kept to hand back
        pass


def _deny_network(*args: Any, **kwargs: Any) -> Any:
    raise PermissionError("network access is disabled in this tool")


def leave_network() -> str:
    """Move this process into a network namespace of its own; say which isolation it got.

    ``"namespace"``: a new, empty network namespace (``CLONE_NEWNET``, as root, or inside
    a new user namespace where unprivileged ones are allowed); nothing outside it is
    reachable, not even the host's loopback, whatever Python code runs. ``"none"``: the
    kernel refused both (a container without the capability, another OS); only the
    in-process socket block of :func:`_apply_limits` stands. Must run single-threaded (a
    fresh fork child), as ``CLONE_NEWUSER`` requires.
    """
    if not sys.platform.startswith("linux"):
        return "none"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return "none"
    for flags in (_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET):
        if libc.unshare(flags) == 0:
            return "namespace"
    return "none"


def empty_environment() -> None:
    """Remove every environment variable of this process (``os.environ`` and the C
    ``environ`` alike: ``os.environ``'s deletions call ``unsetenv``), and zero the block the
    process was started with, which ``/proc/self/environ`` shows whatever ``environ`` holds
    now (issue 49: a forked child's still showed the harness's keys there)."""
    os.environ.clear()
    _zero_initial_environment()


def _zero_initial_environment() -> None:
    """Overwrite this process's initial environment strings (``env_start`` to ``env_end``
    of ``/proc/self/stat``: the copy a fork child owns) with NULs; nothing off Linux. After
    :meth:`os.environ.clear` nothing points into them any more."""
    if not sys.platform.startswith("linux"):
        return
    with open("/proc/self/stat", "rb") as fh:  # noqa: PTH123 - tiny read of a proc file
        stat = fh.read()
    # the fields after "(comm)", which may hold spaces: field 3 (state) onwards
    fields = stat[stat.rindex(b")") + 2 :].split()
    start, end = int(fields[_ENV_START_FIELD - 3]), int(fields[_ENV_START_FIELD - 2])
    if 0 < start < end:
        ctypes.memset(start, 0, end - start)


def _apply_limits(limits: ChildLimits, workdir: str | None = None) -> None:
    """In the child, before the untrusted work: no network, an empty cwd, OS limits."""
    if not limits.network:
        leave_network()
        socket.socket.connect = _deny_network  # type: ignore[method-assign]
        socket.socket.connect_ex = _deny_network  # type: ignore[method-assign]
        socket.socket.sendto = _deny_network  # type: ignore[method-assign]
        socket.create_connection = _deny_network  # type: ignore[assignment]
        socket.getaddrinfo = _deny_network  # type: ignore[assignment]
    if workdir is not None:
        os.chdir(workdir)
    if limits.cpu_s is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    if limits.memory_mb is not None and sys.platform.startswith("linux"):
        # a fork child inherits the parent's mappings (frameworks, models' clients): the
        # budget is on top of those, not an absolute size that would already be exceeded;
        # the parent's freed but still mapped heap is handed back first, or the child
        # could use it on top of its budget
        _release_free_heap()
        cap = _current_address_space() + limits.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


class ChildLimitExceeded(ToolError):
    """The child process hit one of its limits, so its work was stopped.

    ``kind`` is ``"cpu"`` (:attr:`ChildLimits.cpu_s`), ``"memory"`` (``MemoryError`` under
    :attr:`ChildLimits.memory_mb`) or ``"time"`` (the parent's wall clock); ``limit`` is the
    figure that was hit (seconds or MB), ``None`` for memory when no limit was set. Tools
    catch it to say, in their own words, what was too big."""

    def __init__(self, message: str, kind: str, limit: float | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.limit = limit


#: Longest reply text (characters) a child may send back: room for an error message and
#: the output printed before it, each capped at :data:`MAX_TEXT_CHARS`.
_REPLY_CAP_CHARS = 2 * MAX_TEXT_CHARS + 1024
#: Longest reply the parent reads from the pipe: the JSON of ``_REPLY_CAP_CHARS``
#: characters (at most 6 bytes each, for ``\\uXXXX`` escapes) plus the envelope.
_REPLY_CAP_BYTES = 6 * _REPLY_CAP_CHARS + 64


def _child_main(
    target: Callable[..., str],
    args: tuple[Any, ...],
    conn: Connection,
    limits: ChildLimits | None = None,
    workdir: str | None = None,
) -> None:
    """Child-process entry: run ``target`` and send back ``[ok, text, kind]`` as JSON, never
    an exception object (those may not pickle, and unpickling a child's bytes would trust
    it). ``kind`` is ``"memory"`` when ``target`` ran out of memory (a ``MemoryError`` it
    let through), else null. The text is cut to :data:`_REPLY_CAP_CHARS` here, before it
    crosses into the parent."""
    memory = False
    try:
        empty_environment()
        if limits is not None:
            _apply_limits(limits, workdir)
        ok, text = True, str(target(*args))
    except MemoryError:
        ok, text, memory = False, "", True
    except ToolError as exc:
        ok, text = False, str(exc)
    except BaseException as exc:  # noqa: BLE001 - report everything, the parent decides
        ok, text = False, f"{type(exc).__name__}: {clip_text(str(exc))}"
    try:
        reply = [ok, clip_text(text, _REPLY_CAP_CHARS), "memory" if memory else None]
        conn.send_bytes(json.dumps(reply).encode())
    finally:
        conn.close()


def run_isolated(
    target: Callable[..., str],
    args: tuple[Any, ...],
    timeout_s: float,
    limits: ChildLimits | None = None,
) -> str:
    """Run ``target(*args)`` in a child process; kill it after ``timeout_s`` seconds.

    Threads cannot be interrupted in CPython, so a process is the only robust way to stop
    ``while True: pass``. ``limits`` adds OS limits in the child. The working directory is
    made and removed here, in the parent, so it goes on every exit path (a timeout or a
    kill never runs the child's cleanup). At most :data:`_REPLY_CAP_BYTES` are read from
    the child. Failures come back as :class:`ToolError`; a limit hit (wall clock, CPU,
    memory) as its subclass :class:`ChildLimitExceeded`.

    ``args`` reach the child without a copy through a pipe where processes fork (Linux,
    the platform the limits are enforced on): a downloaded PDF's bytes are inherited.
    """
    ctx = _mp_context()
    workdir = tempfile.mkdtemp(prefix="mastif-tool-") if limits and limits.workdir else None
    try:
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_child_main, args=(target, args, sender, limits, workdir), daemon=True
        )
        proc.start()
        sender.close()  # only the child writes; closing our copy lets a crash surface as EOF
        try:
            if not receiver.poll(timeout_s):
                raise ChildLimitExceeded(f"timed out after {timeout_s:g}s", "time", timeout_s)
            try:
                raw = receiver.recv_bytes(_REPLY_CAP_BYTES)
            except EOFError:
                proc.join(1)
                if limits is not None and proc.exitcode == -signal.SIGXCPU:
                    raise ChildLimitExceeded(
                        f"CPU time limit of {limits.cpu_s}s exceeded", "cpu", limits.cpu_s
                    ) from None
                raise ToolError(f"worker process died (exit code {proc.exitcode})") from None
            except OSError:  # multiprocessing: the announced length exceeds the cap
                raise ToolError(
                    f"worker reply exceeds {_REPLY_CAP_BYTES} bytes; not read"
                ) from None
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(1)
            receiver.close()
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    try:
        ok, text, kind = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise ToolError(f"worker sent a malformed reply: {exc}") from None
    if kind == "memory":
        memory_mb = limits.memory_mb if limits is not None else None
        budget = f"its memory limit of {memory_mb} MB" if memory_mb is not None else "memory"
        raise ChildLimitExceeded(f"MemoryError: the work ran out of {budget}", "memory", memory_mb)
    if not ok:
        raise ToolError(str(text))
    return str(text)
