"""Value tagging speed per embedding backend (config ``values.backend``): start-up and sentences/s.

For each backend, a fresh Python process (as a ``tag_values`` job starts) loads the embedder
(``mastif.evaluation.values.load_value_embedder``: imports, model, for onnx the cached export) and then
embeds the sentences ``--rounds`` times in batches as :class:`mastif.evaluation.values.ValueTagger` does;
printed: the start-up seconds, the best round's sentences/s and the CPU seconds per sentence.
The sentences are the built-in value corpus's examples plus the default run's agent texts
when a results directory is given (``--results``, e.g. a finished ``make run``), split into
sentences as the tagger splits them. It also checks that both backends give every sentence
the same label. Ratios between backends are what to read (one run, a noisy machine).

    .venv/bin/python bench/tagging.py [--threads 2] [--rounds 3] [--results results]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _paths import REPO


def sentences(results: Path | None) -> list[str]:
    import polars as pl

    from mastif.evaluation.values import load_value_corpus, split_sentences

    corpus = load_value_corpus("builtin")
    texts = [s for examples in corpus.examples.values() for s in examples]
    if results is not None:
        for path in sorted((results / "runs").glob("*/*/*.parquet")):
            for row in pl.read_parquet(path).iter_rows(named=True):
                texts += [n["text"] for n in row["node_outputs"] or []]
                texts.append(row["final_answer"] or "")
    return [s for t in texts for s in split_sentences(t)]


def child(backend: str, threads: int, rounds: int, results: str | None) -> None:
    """One backend in this (fresh) process; prints one JSON line."""
    started = time.perf_counter()
    from mastif.evaluation.values import ValueTagger, load_value_corpus, load_value_embedder

    embed = load_value_embedder(backend, threads)
    embed(["warm up"])
    startup = time.perf_counter() - started
    texts = sentences(Path(results) if results else None)
    best, cpu = 0.0, float("inf")
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        embed(texts)
        wall, used = time.perf_counter() - t0, time.process_time() - c0
        best, cpu = max(best, len(texts) / wall), min(cpu, used / len(texts))
    labels = ValueTagger(load_value_corpus("builtin"), embed).tag_sentences(texts)
    print(json.dumps({"backend": backend, "threads": threads, "sentences": len(texts),
                      "startup_s": startup, "sentences_per_s": best,
                      "cpu_ms_per_sentence": 1000 * cpu, "labels": labels}))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.threads, args.rounds, str(args.results) if args.results else None)
        return
    rows = {}
    for backend in ("torch", "onnx"):
        cmd = [sys.executable, __file__, "--child", backend, "--threads", str(args.threads),
               "--rounds", str(args.rounds)] + (["--results", str(args.results)]
                                                if args.results else [])  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
        rows[backend] = json.loads(out.stdout.strip().splitlines()[-1])
    n = rows["onnx"]["sentences"]
    print(f"{n} sentences, {args.threads} thread(s), best of {args.rounds} rounds")
    print(f"{'backend':8} {'start-up s':>11} {'sentences/s':>12} {'CPU ms/sentence':>16}")
    for b, r in rows.items():
        print(f"{b:8} {r['startup_s']:11.2f} {r['sentences_per_s']:12.0f} "
              f"{r['cpu_ms_per_sentence']:16.2f}")  # fmt: skip
    t, o = rows["torch"], rows["onnx"]
    same = sum(a == b for a, b in zip(t["labels"], o["labels"], strict=True))
    print(f"onnx / torch: start-up {o['startup_s'] / t['startup_s']:.2f}x, "
          f"sentences/s {o['sentences_per_s'] / t['sentences_per_s']:.2f}x; "
          f"same label for {same} of {n} sentences")  # fmt: skip
    if args.json:
        for r in rows.values():
            r.pop("labels")
        args.json.write_text(json.dumps({"rows": rows, "same_labels": same, "n": n}, indent=2))


if __name__ == "__main__":
    main()
