"""Entry point of the prebuilt local model server: llama.cpp's own server from the xllamacpp wheel.

``python -m mastif.providers.xllamacpp_server --model F --port N [llama-server options]``

xllamacpp (a registry wheel, no compiler needed) links llama.cpp's C++ server — the code
``llama-server`` is built from: parallel slots, per-slot prompt-prefix reuse, continuous
batching, grammars and JSON schemas, the OpenAI-compatible ``/v1`` endpoints and
``/health`` — and starts its HTTP listener from Python. This module takes the subset of
``llama-server``'s command line that :class:`mastif.providers.local.LocalServer` passes, so
the two servers get the same settings from one command builder, sets the same fields of
llama.cpp's ``common_params`` that ``llama-server`` would, and serves until SIGTERM or SIGINT.

Its log (llama.cpp's own lines) goes to stderr, which the pipeline writes to the model
server's log file.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The ``llama-server`` options this server takes (their names and meanings as there)."""
    parser = argparse.ArgumentParser(
        prog="python -m mastif.providers.xllamacpp_server",
        description="llama.cpp's server from the prebuilt xllamacpp wheel",
    )
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--alias", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--ctx-size", type=int, default=0)
    parser.add_argument("--no-kv-unified", action="store_true")
    parser.add_argument("--jinja", action="store_true")
    parser.add_argument("--no-webui", action="store_true")
    parser.add_argument("--offline", action="store_true")
    parser.add_argument("--cache-ram", type=int, default=None, help="MiB; 0: off")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--threads-batch", type=int, default=None)
    parser.add_argument("--repeat-penalty", type=float, default=None)
    parser.add_argument("--chat-template-file", type=Path, default=None)
    return parser.parse_args(argv)


def common_params(args: argparse.Namespace) -> Any:
    """llama.cpp's ``common_params`` as ``llama-server`` sets them from the same options."""
    import xllamacpp

    if not args.model.is_file():
        raise SystemExit(f"model file not found: {args.model}")
    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    if args.alias:
        params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size
    if args.no_kv_unified:
        params.kv_unified = False
    if args.jinja:
        params.use_jinja = True
    if args.no_webui:
        params.ui = False
    if args.offline:
        params.offline = True
    if args.cache_ram is not None:
        params.cache_ram_mib = args.cache_ram
    if args.threads is not None:
        params.cpuparams.n_threads = args.threads
    if args.threads_batch is not None:
        params.cpuparams_batch.n_threads = args.threads_batch
    if args.repeat_penalty is not None:
        params.sampling.penalty_repeat = args.repeat_penalty
    if args.chat_template_file is not None:
        # llama-server's --chat-template-file reads the file into the same field
        params.chat_template = args.chat_template_file.read_text(encoding="utf-8")
    return params


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import xllamacpp

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # loads the model, then listens; returns once the HTTP server is up
    server = xllamacpp.Server(common_params(args))
    print(f"xllamacpp {xllamacpp.__version__}: listening on {server.listening_address}",
          file=sys.stderr, flush=True)  # fmt: skip
    stop.wait()
    del server  # stops the HTTP listener and the slots' loop (~0.1 s)
    sys.stderr.flush()
    # nothing else is left to clean up; skip the interpreter's slow teardown of the binding
    os._exit(0)


if __name__ == "__main__":
    main()
