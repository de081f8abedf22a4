#!/usr/bin/env bash
# `make setup` and `make run` as on a fresh machine: a clean clone of REF, with a HOME of its
# own (so ~/.cache/mastif, ~/.cache/uv, pip's and npm's caches all start empty) and the
# compilers on PATH wrapped so that each invocation is logged: the log shows whether set-up
# compiled anything.
#
#     bash bench/fresh_machine.sh [REF] [setup|run]     (default: HEAD run)
#
# Prints the wall time of `make setup` and, for `run`, of the whole `make run` after it, and
# every compiler invocation (none: "compilers invoked: 0"). Machine-wide installs (Debian's
# Chromium, Node) are left as they are. One run on a noisy machine: a rough figure.
set -euo pipefail
ref=${1:-HEAD}
what=${2:-run}
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
echo "fresh machine: $(git rev-parse --short HEAD) in $work"
start=$(date +%s)
make setup >"$work/setup.log" 2>&1 || { tail -30 "$work/setup.log"; exit 1; }
setup_s=$(( $(date +%s) - start ))
echo "make setup: $((setup_s / 60)) min $((setup_s % 60)) s (log $work/setup.log)"
if [ "$what" = run ]; then
    make run >"$work/run.log" 2>&1 || { tail -30 "$work/run.log"; exit 1; }
    total_s=$(( $(date +%s) - start ))
    run_s=$((total_s - setup_s))
    echo "make run after set-up: $((run_s / 60)) min $((run_s % 60)) s (log $work/run.log)"
    echo "make run total (set-up included): $((total_s / 60)) min $((total_s % 60)) s"
fi
echo "compilers invoked: $(wc -l <"$log") (log $log)"
sort "$log" | cut -c1-160 | uniq -c | sort -rn | head -5
