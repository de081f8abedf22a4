#!/usr/bin/env bash
# `make setup` and `make run` as on a fresh machine: a clean clone of REF, with a HOME of its
# own (so ~/.cache/mastif, ~/.cache/uv, pip's and npm's caches all start empty) and the
# compilers on PATH wrapped so that each invocation is logged: the log shows whether set-up
# compiled anything.
#
#     bash bench/fresh_machine.sh [REF] [setup|run|test] [xllamacpp|llama-server]
#                                                       (default: HEAD run xllamacpp)
#
# Prints the wall time of `make setup` and, for `run` (`test`), of the whole `make run`
# (`make test`) after it, the disk the environments take (.venv, and each framework's
# .envs/<framework>), and
# every compiler invocation (none: "compilers invoked: 0"). With `llama-server` set-up also
# runs `make llama-native` (timed with it) and the default's models use the compiled server:
# what a fresh machine would pay if the compiled build were the default. Machine-wide
# installs (Debian's Chromium, Node) are left as they are. One run on a noisy machine: a
# rough figure.
set -euo pipefail
ref=${1:-HEAD}
what=${2:-run}
server=${3:-xllamacpp}
case "$server" in
    xllamacpp) setup_steps="make setup" ;;
    llama-server) setup_steps="make setup + make llama-native" ;;
    *) echo "server must be xllamacpp or llama-server, not '$server'" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/mastif-fresh-XXXXXX)
git clone -q "$repo" "$work/clone" && git -C "$work/clone" checkout -q "$ref"
mkdir -p "$work/home" "$work/shims"
log="$work/compilers.log" && : >"$log"
for tool in cc gcc c++ g++ clang clang++ cmake ninja rustc cargo nvcc; do
    real=$(command -v "$tool" || true)
    [ -n "$real" ] || continue
    printf '#!/bin/sh\necho "%s $*" >>"%s"\nexec "%s" "$@"\n' "$tool" "$log" "$real" >"$work/shims/$tool"
    chmod +x "$work/shims/$tool"
done
export HOME="$work/home" PATH="$work/shims:$PATH"
unset MASTIF_CACHE UV_CACHE_DIR XDG_CACHE_HOME
cd "$work/clone"
echo "fresh machine: $(git rev-parse --short HEAD) in $work, model server $server"
start=$(date +%s)
make setup >"$work/setup.log" 2>&1 || { tail -30 "$work/setup.log"; exit 1; }
if [ "$server" = llama-server ]; then
    make llama-native >>"$work/setup.log" 2>&1 || { tail -30 "$work/setup.log"; exit 1; }
    sed -i 's/^\(      server:\) xllamacpp$/\1 llama-server/' config/config.yaml
    grep -q '^      server: llama-server$' config/config.yaml ||
        { echo "config/config.yaml names no xllamacpp server to switch" >&2; exit 1; }
fi
setup_s=$(( $(date +%s) - start ))
echo "$setup_steps: $((setup_s / 60)) min $((setup_s % 60)) s (log $work/setup.log)"
echo "disk: .venv $(du -sh .venv | cut -f1)$( [ -d .envs ] && echo ", .envs $(du -sh .envs | cut -f1) ($(ls .envs | tr '\n' ' '))")"
# uv links installed files to its cache: with it, each file once
echo "disk with uv's cache, each file once: $(du -shc .venv .envs "$HOME/.cache/uv" 2>/dev/null | tail -1 | cut -f1)"
if [ "$what" = run ] || [ "$what" = test ]; then
    make "$what" >"$work/$what.log" 2>&1 || { tail -30 "$work/$what.log"; exit 1; }
    total_s=$(( $(date +%s) - start ))
    run_s=$((total_s - setup_s))
    echo "make $what after set-up: $((run_s / 60)) min $((run_s % 60)) s (log $work/$what.log)"
    echo "make $what total (set-up included): $((total_s / 60)) min $((total_s % 60)) s"
fi
echo "compilers invoked: $(wc -l <"$log") (log $log)"
sort "$log" | cut -c1-160 | uniq -c | sort -rn | head -5
