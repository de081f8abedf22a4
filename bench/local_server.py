"""The local model server, prebuilt against compiled: llama.cpp's server from the xllamacpp
wheel (``options.server: xllamacpp``, the default: nothing to compile) against the same
llama.cpp release compiled for this CPU (``llama-server``, ``make llama-native``; or
``--native PATH`` for another binary), both with the default experiment's SmolLM2 options
(the Q8_0 model, tool calls by a forced first choice, ``--parallel`` slots, the RAM prompt
cache), as the default experiment's agent runs them.

1. **Runs**: for each server, the default workflow (LangGraph, standard protocol, the
   sandbox web tools) on ``--tasks`` sandbox tasks with ``--max-steps``, through a loopback
   proxy that records every request and reply: seconds per run, ok runs, the node sequences,
   and the share of interact replies (requests that offer tools) holding a valid tool call
   (an offered name, arguments that parse as a JSON object).
2. **Replay**: the requests recorded on the compiled server, sent again in the same order to
   each server (so both see the same prompts), ``--replays`` rounds alternating between the
   servers: the median of the rounds' wall time, prompt tokens/s, generation tokens/s and
   share of prompt tokens served from the cache, from the ``timings`` llama.cpp's server
   puts on every reply.
3. **Judge**: the default judge (Gemma-3-270M, the default judge settings, one attempt) on
   each server over the compiled server's runs: seconds per judgement and how many parsed.

    .venv/bin/python bench/local_server.py [--tasks 3] [--max-steps 2] [--parallel 2]
        [--threads N] [--native PATH] [--replays 3] [--no-judge] [--save out.json]

One run per server on a noisy machine: read the ratios (prebuilt/compiled), not the
absolute figures. The default is the prebuilt server unless the compiled one is more than
25% faster (prebuilt/compiled above 1.25 in seconds per run, or below 0.8 in tokens/s).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from _paths import REPO  # puts the checkout on sys.path: tests.support

sys.path.insert(0, str(REPO / "src"))

from tests.support.fakes import RecordingProxy  # noqa: E402

from mastif.execution.experiment import parse_config  # noqa: E402
from mastif.execution.runner import execute_stack  # noqa: E402
from mastif.providers.forced_choice import ForcedChoice  # noqa: E402
from mastif.providers.gateway import normalise_request  # noqa: E402
from mastif.providers.local import LocalServer, llama_server_binary  # noqa: E402
from mastif.tasks import load_tasks  # noqa: E402

#: the two builds, in the order they run; "compiled" first: its recorded requests are replayed
SERVERS = {"compiled": "llama-server", "prebuilt": "xllamacpp"}


def server_options(server: str, parallel: int) -> dict[str, Any]:
    """The default config's SmolLM2 options, on ``server``."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    options = dict(cfg["models"]["smollm2"]["options"])
    options.update(server=server, parallel=parallel)
    return options


def valid_tool_call(request: dict[str, Any], reply: dict[str, Any]) -> bool:
    offered = {t["function"]["name"] for t in request.get("tools") or []}
    try:
        calls = reply["choices"][0]["message"].get("tool_calls") or []
    except (KeyError, IndexError, TypeError):
        return False
    for call in calls:
        try:
            args = json.loads(call["function"]["arguments"])
        except (KeyError, TypeError, ValueError):
            continue
        if call["function"]["name"] in offered and isinstance(args, dict):
            return True
    return False


def spec_for(options: dict[str, Any]):  # noqa: ANN201
    """The default config's SmolLM2 with these server options; ``model`` (a bench-only key)
    names the model file, else the default's."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    options = dict(options)
    cfg["models"]["smollm2"]["model"] = options.pop("model", cfg["models"]["smollm2"]["model"])
    cfg["models"]["smollm2"]["options"] = options
    return parse_config(cfg).models["smollm2"]


def run_default(options: dict[str, Any], tasks: int, max_steps: int, work: Path) -> dict:
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    with LocalServer(spec_for(options), work / "server.log") as server:
        with RecordingProxy(server.base_url, options.get("tool_call_template")) as proxy:
            run_cfg = copy.deepcopy(cfg)
            run_cfg["models"]["bench"] = {
                "provider": "openai_compatible",
                "model": server.alias,
                "base_url": proxy.base_url,
                "options": {"max_connections": options.get("parallel", 1)},
            }
            run_cfg["agent_models"] = ["bench"]
            run_cfg["frameworks"], run_cfg["protocols"] = ["langgraph"], ["standard"]
            run_cfg["generation"]["max_steps"] = max_steps
            run_cfg["execution"]["concurrency"] = options.get("parallel", 1)
            parsed = parse_config(run_cfg)
            chosen = load_tasks("sandbox")[:tasks]
            started = time.perf_counter()
            traces = execute_stack(
                parsed, parsed.stacks()[0], chosen, work / "ckpt.jsonl", work / "x.log", REPO
            )
            wall = time.perf_counter() - started
    interact = [(q, a) for q, a in proxy.exchanges if q.get("tools")]
    return {
        "runs": len(traces),
        "ok_runs": sum(t.status == "ok" for t in traces),
        "seconds_per_run": wall / len(traces),
        "mean_run_wall_s": sum(t.wall_seconds for t in traces) / len(traces),
        "node_sequences": [[n.node for n in t.node_outputs] for t in traces],
        "interact_replies": len(interact),
        "valid_tool_call_share": (
            sum(valid_tool_call(q, a) for q, a in interact) / len(interact) if interact else None
        ),
        "requests": [q for q, _ in proxy.exchanges],
        "traces": traces,
    }


def replay(options: dict[str, Any], requests: list[dict[str, Any]], work: Path) -> dict:
    """Send ``requests`` in order; sum prompt/generation tokens and times and cached tokens."""
    sums = {"prompt_n": 0, "prompt_ms": 0.0, "gen_n": 0, "gen_ms": 0.0, "cached_n": 0}
    template = options.get("tool_call_template")
    forced = ForcedChoice(REPO / template) if template else None
    started = time.perf_counter()
    with LocalServer(spec_for(options), work / "replay-server.log") as server:
        with httpx.Client(timeout=600) as client:
            for request in requests:
                body = normalise_request(copy.deepcopy(request), "local")
                body["model"] = server.alias
                if forced is not None and forced.applies(body):
                    reply = forced.complete_blocking(server.base_url, body).json()
                else:
                    reply = client.post(f"{server.base_url}/chat/completions", json=body).json()
                timings = reply["timings"]  # llama.cpp's server times every reply
                sums["prompt_n"] += timings["prompt_n"]
                sums["prompt_ms"] += timings["prompt_ms"]
                sums["gen_n"] += timings["predicted_n"]
                sums["gen_ms"] += timings["predicted_ms"]
                sums["cached_n"] += timings.get("cache_n", 0)
    wall = time.perf_counter() - started
    total_prompt = sums["prompt_n"] + sums["cached_n"]
    return {
        "requests": len(requests),
        "wall_s": wall,
        "prompt_tokens_per_s": sums["prompt_n"] / (sums["prompt_ms"] / 1000) or None,
        "generation_tokens_per_s": sums["gen_n"] / (sums["gen_ms"] / 1000) or None,
        "cache_hit_share": sums["cached_n"] / total_prompt if total_prompt else None,
        **sums,
    }


def judge_with(server: str, traces: list, work: Path) -> dict[str, Any]:
    """The default judge (Gemma-3-270M, the default judge settings, one attempt per run)
    on ``server`` over the bench's runs: seconds per judgement and how many
    parsed."""
    import polars as pl

    from mastif.core.trace import runs_to_table
    from mastif.evaluation.judge import JudgeSettings
    from mastif.execution.judging import judge_runs
    from mastif.providers import Gateway, open_endpoint
    from mastif.tasks import tasks_to_frame

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["models"]["gemma3"]["options"]["server"] = server
    parsed = parse_config(cfg)
    j = parsed.judge
    runs = pl.from_arrow(runs_to_table(traces))
    ids = {t.task_id for t in traces}
    tasks = tasks_to_frame([t for t in load_tasks("sandbox") if t.task_id in ids])
    settings = JudgeSettings(j.model, j.temperature, j.max_tokens, 1, j.seed)
    started = time.perf_counter()
    with open_endpoint(j.model, parsed.models[j.model], work / "judge-server.log") as ep:
        with Gateway(ep) as gw:
            judged = judge_runs(runs, tasks, REPO / j.rubric, gw, settings)
    wall = time.perf_counter() - started
    return {
        "judgements": judged.height,
        "ok": int((judged["judge_status"] == "ok").sum()),
        "seconds_per_judgement": wall / judged.height,
        "completion_tokens": int(judged["judge_completion_tokens"].sum()),
    }


def _median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each measure's median over the replay rounds, and every round's wall time."""
    import statistics

    keys = [k for k, v in rounds[0].items() if isinstance(v, int | float)]
    median = {
        k: statistics.median(r[k] for r in rounds) if all(r[k] is not None for r in rounds)
        else None
        for k in keys
    }  # fmt: skip
    return {**median, "round_wall_s": [round(r["wall_s"], 1) for r in rounds]}


def _cell(value: Any) -> str:
    return f"{value:10.3f}" if isinstance(value, float) else f"{value!s:>10}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument(
        "--threads",
        type=int,
        help="threads of each server (default: half the CPUs, as in the pipeline)",
    )
    ap.add_argument(
        "--native",
        type=Path,
        help="the compiled llama-server to compare (default: the one make llama-native built)",
    )
    ap.add_argument(
        "--replays", type=int, default=3, help="replay rounds, alternating servers (median)"
    )
    ap.add_argument("--save", type=Path)
    ap.add_argument("--no-judge", action="store_true", help="skip the judge comparison")
    args = ap.parse_args()
    if args.native:
        os.environ["MASTIF_LLAMA_SERVER"] = str(args.native.resolve())
    try:
        print(f"compiled: {llama_server_binary()}", file=sys.stderr)
    except FileNotFoundError as exc:
        raise SystemExit(f"{exc}") from None
    servers = {name: server_options(server, args.parallel) for name, server in SERVERS.items()}
    if args.threads:
        for options in servers.values():
            options["n_threads"] = args.threads
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, options in servers.items():
            work = Path(tmp) / name
            work.mkdir()
            print(f"[{name}] runs ...", file=sys.stderr, flush=True)
            out[name] = {"run": run_default(options, args.tasks, args.max_steps, work)}
        recorded = out["compiled"]["run"]["requests"]
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        for k in range(args.replays):  # alternating, so drift of the machine hits both
            for name, options in servers.items():
                print(f"[{name}] replay {k + 1} of {len(recorded)} requests ...",
                      file=sys.stderr, flush=True)  # fmt: skip
                rounds[name].append(replay(options, recorded, Path(tmp) / name))
        for name in servers:
            out[name]["replay"] = _median_round(rounds[name])
        traces = out["compiled"]["run"]["traces"]
        for name in () if args.no_judge else servers:
            print(f"[{name}] judge, {len(traces)} runs ...", file=sys.stderr, flush=True)
            out[name]["judge"] = judge_with(SERVERS[name], traces, Path(tmp) / name)
    for name in servers:
        out[name]["run"].pop("requests")
        out[name]["run"].pop("traces")
    rows = [
        ("seconds per run", "run", "seconds_per_run"),
        ("ok runs", "run", "ok_runs"),
        ("valid tool-call share (interact)", "run", "valid_tool_call_share"),
        ("replay wall s", "replay", "wall_s"),
        ("prompt tokens/s", "replay", "prompt_tokens_per_s"),
        ("generation tokens/s", "replay", "generation_tokens_per_s"),
        ("cache-hit share of prompt tokens", "replay", "cache_hit_share"),
        ("judge (Gemma): seconds per judgement", "judge", "seconds_per_judgement"),
        ("judge (Gemma): parsed judgements", "judge", "ok"),
    ]
    print(f"{'measure':36} {'compiled':>10} {'prebuilt':>10} {'pre/comp':>8}")
    for label, part, key in rows:
        if part not in out["compiled"]:
            continue
        a, b = out["compiled"][part][key], out["prebuilt"][part][key]
        ratio = f"{b / a:8.2f}" if isinstance(a, int | float) and a and b is not None else ""
        print(f"{label:36} {_cell(a)} {_cell(b)} {ratio}")
    for name in servers:
        print(f"{name} replay rounds, wall s: {out[name]['replay']['round_wall_s']}")
        print(f"{name} node sequences: {out[name]['run']['node_sequences']}")
    if args.save:
        args.save.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
