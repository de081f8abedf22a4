"""A paper-shaped grid through Snakemake against a loopback multi-model endpoint: wall time,
runs per minute, requests in flight, CPU, memory, no lost or duplicated rows, and the
projected wall time of the paper's 10,800 runs on a bigger node (mastif.execution.projection).

The endpoint (a process of its own, one uvicorn server) speaks OpenAI's chat completions
for every model name; the name picks the behaviour:

* three agent models that differ deterministically (so the model factor is not degenerate):
  answer length, how often they call a tool and how often they say TASK COMPLETE, each
  decided by a hash of seed + model + the request's messages (the same request, the same
  reply);
* real tool calls some of the time: ``tool_calls`` naming a tool the request offers, with
  JSON arguments that satisfy its parameter schema (required properties filled by type);
* the judge answers a valid judgement: JSON of the request's ``response_format`` schema
  (mastif.evaluation.judge.judgement_schema), scores from the enum, rationales within their lengths;
* latency lognormal with mean ``--latency`` s (sigma ``--sigma``), drawn from the request's
  hash (seeded);
* bursts of 429 with ``Retry-After: 1``: after every ``--burst-every`` requests (counted
  from the grid's start, so a faster grid meets as many), every request for
  ``--burst-len`` s; and 5xx (500/502/503) on a ``--error-rate`` share of requests
  (drawn per request and attempt, so a retry may pass).

The experiment config (written to a temporary directory): 3 agent models + 1 judge as
``provider: openai_compatible`` at the endpoint, protocols standard/mcp/a2a x frameworks
langgraph/langchain/crewai/semantic_kernel = 36 stacks, ``--tasks`` sandbox tasks, max_steps
2, concurrency 8, HTTP-only tools (no browser). Snakemake runs the checkout's Snakefile
(``--repo``, default this one) with that checkout's own profile (profiles/default) and
``--cores 2`` in a temporary working directory; the bench's Python runs that checkout's
mastif (PYTHONPATH), the endpoint runs this one's.

Printed: wall (Snakemake's start to end), runs/min, requests in flight at the endpoint
(time-weighted mean and peak), CPU (the Snakemake process tree's user+sys over wall x cores,
from getrusage of the waited-for children; per rule from sampling the tree every 0.5 s),
peak RSS of the tree (sampled), 429/5xx injected, the rows of results/runs and
results/judged checked (every run and judgement exactly once), the per-job quantities and
the projection for the paper (36 stacks x 300 tasks) on 16 cores at 5 s per call.

    .venv/bin/python bench/grid.py [--repo PATH] [--tasks 10] [--stacks 3x3x4] [--latency 1.0]
        [--json out.json] [--keep DIR]
    .venv/bin/python bench/grid.py --reanalyse DIR   # a kept run (--keep DIR), analysed again
    # a smoke run: 4 stacks x 2 tasks
    .venv/bin/python bench/grid.py --stacks 2x1x2 --tasks 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _paths import REPO

sys.path.insert(0, str(REPO / "src"))

from grid_endpoint import AGENTS, JUDGE, Endpoint  # noqa: E402
from grid_measure import (  # noqa: E402
    TreeSampler,
    check_rows,
    demands_of,
    measure_costs,
    snakemake_log,
    tag_probe,
)

from mastif.execution.projection import (  # noqa: E402
    CORES,
    JobCosts,
    Node,
    format_duration,
    format_projection,
    project,
)

PROTOCOLS = ["standard", "mcp", "a2a"]
FRAMEWORKS = ["langgraph", "langchain", "crewai", "semantic_kernel"]
#: the paper: 3 models x 3 protocols x 4 frameworks on 300 Mind2Web tasks
PAPER_STACKS, PAPER_TASKS = 36, 300


# ------------------------------------------------------------------------------ the grid


def stack_shape(text: str) -> tuple[int, int, int]:
    """``MxPxF``: the first M agent models, P protocols and F frameworks."""
    m, p, f = (int(x) for x in text.lower().split("x"))
    if not (1 <= m <= len(AGENTS) and 1 <= p <= len(PROTOCOLS) and 1 <= f <= len(FRAMEWORKS)):
        raise SystemExit(
            f"--stacks {text}: at most {len(AGENTS)}x{len(PROTOCOLS)}x{len(FRAMEWORKS)}"
        )
    return m, p, f


def grid_config(args: argparse.Namespace, url: str) -> dict[str, Any]:
    models: dict[str, Any] = {}
    for name in [*AGENTS, JUDGE]:
        models[name] = {
            "provider": "openai_compatible", "model": name, "base_url": f"{url}/v1",
            "price": {"input_per_mtok": 0.2, "output_per_mtok": 0.6},
            "options": {"max_connections": args.concurrency, "request_timeout_s": 60},
        }  # fmt: skip
    n_models, n_protocols, n_frameworks = stack_shape(args.stacks)
    protocols = args.protocols or PROTOCOLS[:n_protocols]
    frameworks = args.frameworks or FRAMEWORKS[:n_frameworks]
    return {
        "experiment": "grid_bench",
        "models": models,
        "agent_models": list(AGENTS)[:n_models],
        "judge": {"model": JUDGE},
        "protocols": protocols,
        "frameworks": frameworks,
        "tasks": {
            "source": "sandbox",
            "sample_size": args.tasks,
            "strata": ["domain", "level"],
            "seed": args.seed,
        },  # fmt: skip
        "generation": {
            "max_steps": 2,
            "max_tool_rounds": 1,
            "max_tokens": 256,
            "timeout_s": 300,
            "request_timeout_s": 60,
        },  # fmt: skip
        # HTTP-only tools: no browser is started (.test/config.yaml)
        "tools": ["web_search", "wikipedia"],
        "web": "sandbox",
        "execution": {"concurrency": args.concurrency, "provider_retries": 3, "progress": False},
    }


def projections(costs: JobCosts, log: dict[str, Any], n_stacks: int, tasks: int,
                latency: float, concurrency: int, judge_concurrency: int, overlap: bool,
                args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    """The measured grid re-projected (a check of the model) and the paper on a bigger node.

    The paper's node (``--paper-cores``, default 16; ``--paper-latency`` s per call;
    ``--paper-calls`` per run): the resources each kind of job held in this run (Snakemake's
    log), threads capped at 1 (a job of a remote model computes only its own Python);
    the model jobs at once (``llm_calls`` before issue 23, ``remote_model_slots`` after it)
    as many as cores, the issue's "llm_calls=16" and profiles/api's 16; no ``timing_lock`` (it keeps a local model's CT apart from other jobs'
    load; a remote model's latency does not depend on the node's load); every other
    resource as measured; ``--paper-resources NAME=N`` sets any of them. Runs in flight per
    job as in this run, and 16 and 32 (config/experiments/paper.yaml: 32), judgements in
    flight per judge job the same (every model of paper.yaml has one ``max_connections``;
    1 for a checkout that judges one run at a time).
    """
    demands = demands_of(log)
    here = Node(capacities=log["capacities"], call_latency_s=latency, concurrency=concurrency,
                judge_concurrency=judge_concurrency, demands=demands, overlap=overlap)  # fmt: skip
    out = {"self": (project(n_stacks, tasks, costs, here), costs, here)}
    cores = args.paper_cores
    caps = {CORES: cores}
    for k, v in log["capacities"].items():
        if k in ("llm_calls", "remote_model_slots"):
            caps[k] = cores
        elif k != CORES and k != "timing_lock":
            caps[k] = v
    for item in args.paper_resources or []:
        k, _, v = item.partition("=")
        caps[k] = int(v)
    paper_demands = {kind: {k: (min(v, 1) if k == CORES else v) for k, v in d.items()}
                     for kind, d in demands.items()}  # fmt: skip
    paper_costs = JobCosts(**{**costs.__dict__, "calls_per_run": args.paper_calls})
    for conc in sorted({concurrency, 16, 32}):
        judges_at_once = conc if judge_concurrency > 1 else 1
        node = Node(capacities=caps, call_latency_s=args.paper_latency, concurrency=conc,
                    judge_concurrency=judges_at_once, demands=paper_demands, overlap=overlap)  # fmt: skip
        out[f"paper_c{conc}"] = (project(PAPER_STACKS, PAPER_TASKS, paper_costs, node),
                                 paper_costs, node)  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose Snakefile runs")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--stacks", default="3x3x4",
                    help="models x protocols x frameworks, the first of each (default: "
                    "%(default)s = 36 stacks)")  # fmt: skip
    ap.add_argument("--protocols", nargs="+", choices=PROTOCOLS,
                    help="these protocols instead of --stacks' first P")  # fmt: skip
    ap.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS,
                    help="these frameworks instead of --stacks' first F")  # fmt: skip
    ap.add_argument("--latency", type=float, default=1.0, help="mean seconds per call")
    ap.add_argument("--sigma", type=float, default=0.3, help="lognormal sigma of the latency")
    ap.add_argument("--seed", type=int, default=20260504)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--burst-every", type=int, default=100,
                    help="a 429 burst after every this many requests (default: %(default)s)")  # fmt: skip
    ap.add_argument("--burst-len", type=float, default=2.0)
    ap.add_argument("--error-rate", type=float, default=0.01)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--resources", nargs="*", default=None,
                    help="passed to snakemake --resources (default: the profile's)")  # fmt: skip
    ap.add_argument("--judge-concurrency", type=int, default=None,
                    help="for the projection: judgements in flight per judge job (default: "
                    "--concurrency, 1 for a checkout without concurrent judging)")  # fmt: skip
    ap.add_argument("--no-overlap", action="store_true",
                    help="project with judging after all execution")  # fmt: skip
    ap.add_argument("--paper-cores", type=int, default=16)
    ap.add_argument("--paper-latency", type=float, default=5.0)
    ap.add_argument("--paper-calls", type=float, default=10.0)
    ap.add_argument("--paper-resources", nargs="*", metavar="NAME=N",
                    help="the paper node's capacity of a resource (default: see projections)")  # fmt: skip
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="run in this directory and keep it")
    ap.add_argument("--reanalyse", type=Path, help="analyse a kept run's directory again")
    args = ap.parse_args()
    if args.reanalyse:
        path = args.reanalyse / "bench_raw.json"
        raw = json.loads(path.read_text())
        if "tag_probe" not in raw:
            raw["tag_probe"] = tag_probe(Path(raw["repo"]), args.reanalyse)
            path.write_text(json.dumps(raw, indent=2))
        analyse(args.reanalyse, raw, args)
        return
    repo = args.repo.resolve()
    bin_dir = Path(sys.executable).parent
    tmp = Path(tempfile.mkdtemp(prefix="mastif-grid-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    for link in ("config", "resources"):
        if not (tmp / link).exists():
            (tmp / link).symlink_to(repo / link)
    with Endpoint(args) as ep:
        import yaml

        cfg = grid_config(args, ep.url)
        (tmp / "grid.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        stacks = [f"{m}/{p}/{f}" for m in cfg["agent_models"] for p in cfg["protocols"]
                  for f in cfg["frameworks"]]  # fmt: skip
        cmd = [str(bin_dir / "snakemake"), "--snakefile", str(repo / "Snakefile"),
               "--directory", str(tmp), "--configfile", str(tmp / "grid.yaml"),
               "--cores", str(args.cores)]  # fmt: skip
        if args.resources:
            cmd += ["--resources", *args.resources]
        env = {**os.environ, "PYTHONPATH": f"{repo / 'src'}:{repo}"}
        print(f"{len(stacks)} stacks x {args.tasks} tasks = {len(stacks) * args.tasks} runs, "
              f"latency {args.latency} s (lognormal sigma {args.sigma}), repo {repo} "
              f"({_head(repo)}), workdir {tmp}", flush=True)  # fmt: skip
        ep.call("/reset", "POST")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        out_log = (tmp / "snakemake.out").open("w")
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out_log, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        rc = proc.wait()
        wall = time.monotonic() - t0
        sampler.stop.set()
        sampler.join()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        endpoint = ep.call("/stats")
    if rc != 0:
        print((tmp / "snakemake.out").read_text()[-4000:])
        raise SystemExit(f"snakemake failed ({rc}); see {tmp}")
    raw = {
        "repo": str(repo), "commit": _head(repo), "stacks": stacks, "tasks": args.tasks,
        "latency_s": args.latency, "concurrency": args.concurrency, "cores": args.cores,
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "peak_rss_mib": sampler.peak_rss / 2**20, "cpu_s_by_rule": sampler.cpu_by_rule(),
        "cpu_series": {str(pid): {"rule": sampler.cpu[pid][0], "samples": sampler.series[pid]}
                       for pid in sampler.cpu},
        "endpoint": endpoint,
    }  # fmt: skip
    raw["tag_probe"] = tag_probe(repo, tmp)
    # the measurements: --reanalyse DIR analyses them again (with --keep DIR)
    (tmp / "bench_raw.json").write_text(json.dumps(raw, indent=2))
    analyse(tmp, raw, args)
    if args.keep is None:
        shutil.rmtree(tmp, ignore_errors=True)


def analyse(tmp: Path, raw: dict[str, Any], args: argparse.Namespace) -> None:
    repo, stacks, wall = Path(raw["repo"]), raw["stacks"], raw["wall_s"]
    log = snakemake_log(tmp)
    rows = check_rows(tmp, stacks, raw["tasks"])
    costs, detail = measure_costs(tmp, log, raw, rows)
    judge_conc = args.judge_concurrency or (raw["concurrency"] if _parallel_judging(repo) else 1)
    proj = projections(costs, log, len(stacks), raw["tasks"], detail["effective_latency_s"],
                       raw["concurrency"], judge_conc, detail["overlap"] and not args.no_overlap,
                       args)  # fmt: skip
    result = {
        "repo": str(repo), "commit": raw["commit"], "stacks": len(stacks), "tasks": raw["tasks"],
        "latency_s": raw["latency_s"], "concurrency": raw["concurrency"], "wall_s": wall, "runs_per_min": rows["runs"] / wall * 60,
        "cpu_s": raw["cpu_s"], "cpu_share": raw["cpu_s"] / wall / raw["cores"],
        "peak_rss_mib": raw["peak_rss_mib"],
        "endpoint": raw["endpoint"], "rows": rows, "capacities": log["capacities"],
        "costs": costs.__dict__, "detail": detail,
        "projections": {k: {"wall_s": p.wall_s, "makespan_s": p.makespan_s, "cpu_s": p.cpu_s,
                            "cpu_bound": p.cpu_bound, "node": {**n.__dict__}}
                        for k, (p, c, n) in proj.items()},
    }  # fmt: skip
    print(report(result, proj))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


def _head(repo: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    except OSError:
        return "?"


def _parallel_judging(repo: Path) -> bool:
    """Whether the checkout judges a stack's runs concurrently (issue 23)."""
    text = (
        (repo / "src/mastif/execution/judging.py").read_text()
        if (repo / "src/mastif/execution/judging.py").exists()
        else ""
    )
    return "max_connections" in text


def report(r: dict[str, Any], proj: dict[str, Any]) -> str:
    e, rows = r["endpoint"], r["rows"]
    s429 = e.get("status.429", 0)
    s5xx = sum(v for k, v in e.items() if k.startswith("status.5"))
    lines = [
        f"repo {r['repo']} @ {r['commit']}: {r['stacks']} stacks x {r['tasks']} tasks, "
        f"capacities {r['capacities']}",
        f"wall                 {r['wall_s']:8.1f} s ({format_duration(r['wall_s'])})",
        f"runs/min             {r['runs_per_min']:8.1f}",
        f"in flight (endpoint) mean {e['in_flight_mean']:.2f}, peak {e['in_flight_peak']} "
        f"({e.get('requests', 0)} requests; answered by model: "
        + ", ".join(f"{k[6:]} {v}" for k, v in sorted(e.items()) if k.startswith("model."))
        + ")",
        f"CPU                  {r['cpu_s']:8.0f} s user+sys = {r['cpu_share']:.0%} of "
        f"{r['capacities'].get(CORES, '?')} cores x wall; by rule (sampled): "
        + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(r['detail']['cpu_s_by_rule'].items())),
        f"peak memory (RSS)    {r['peak_rss_mib']:8.0f} MiB (process tree)",
        f"injected             {s429} x 429 (Retry-After 1) in {e.get('bursts', 0)} bursts, "
        f"{s5xx} x 5xx",
        f"rows                 runs {rows['runs']}/{rows['expected_runs']} "
        f"{rows['runs_by_status']}, judged {rows['judged']} {rows.get('judged_by_status', {})}",
        f"lost/duplicated      lost runs {rows['lost_runs']}, duplicated runs "
        f"{rows['duplicated_runs']}, runs not judged {rows['runs_not_judged']}, duplicated "
        f"judgements {rows['duplicated_judgements']}, missing files "
        f"{len(rows['missing_run_files']) + len(rows['missing_judged_files'])} -> "
        + ("OK" if rows["ok"] else "FAILED"),
        f"calls per run        {rows['calls_per_run']:.2f} (by model: "
        + ", ".join(f"{k} {v:.2f}" for k, v in sorted(rows["calls_by_model"].items()))
        + f"); tool calls per run {rows['tool_calls_per_run']:.2f}",
        "judging overlapped   "
        + ("yes" if r["detail"]["overlap"] else "no")
        + " (a judge job started before the last execute job ended)",
        "jobs                 " + ", ".join(f"{k} {v} ({r['detail']['job_s'][k]:.0f} s)"
                                            for k, v in sorted(r["detail"]["jobs"].items())),
        "",
    ]  # fmt: skip
    p, c, n = proj["self"]
    lines.append(format_projection(p, c, n, "this grid, re-projected (check of the model; "
                                   "latency: a call's share of the runs' measured wall)"))  # fmt: skip
    lines.append(f"  measured {r['wall_s']:.0f} s: projection {p.wall_s / r['wall_s'] - 1:+.0%}")
    papers = [v for k, v in proj.items() if k.startswith("paper")]
    first = next(v for v in papers if v[2].concurrency == r["concurrency"])
    lines += ["", format_projection(*first, f"the paper on {first[2].capacities[CORES]} cores")]
    for p, _c, n in papers:
        if n is not first[2]:
            lines.append(f"  ... with {n.concurrency} runs in flight per stack job: "
                         f"{format_duration(p.wall_s)}" + (" (CPU-bound)" if p.cpu_bound else ""))  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
