"""Serve a built viewer on loopback only (``mastif view``).

The site works from disk too (file://); serving it gives a plain http:// address to share
with a browser on the same machine. The server binds 127.0.0.1 and nothing else: the traces
hold tasks, model outputs and sandbox state that are not for the network.
"""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LOOPBACK = "127.0.0.1"


class QuietHandler(SimpleHTTPRequestHandler):
    """Static files without a log line per request (a run page loads several files)."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        pass


def viewer_server(site_dir: Path | str, port: int = 0) -> ThreadingHTTPServer:
    """A server of ``site_dir`` on 127.0.0.1:``port`` (0: a free port), not yet serving."""
    site = Path(site_dir)
    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"{site} has no index.html: build the viewer first")
    handler = functools.partial(QuietHandler, directory=str(site))
    return ThreadingHTTPServer((LOOPBACK, port), handler)
