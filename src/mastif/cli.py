"""The ``mastif`` command: check a config, list the grid, inspect a runs table, import a log
of the original MASTIF.

The pipeline itself runs with Snakemake (``snakemake --cores 2``); this command is for the
small things around it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mastif.core import results
from mastif.core.config import ConfigError, ExperimentConfig
from mastif.core.paths import default_config_path
from mastif.execution.experiment import load_config, plaintext_key_warnings

DEFAULT_CONFIG = "config/config.yaml"


def config_file(path: str) -> str:
    """``path`` as given; the default experiment's name falls back to mastif's own copy
    when the working directory has none (an installed mastif run outside a checkout)."""
    if path == DEFAULT_CONFIG and not Path(path).is_file():
        return str(default_config_path())
    return path


def load_experiment(args: argparse.Namespace) -> ExperimentConfig:
    """The config of ``args.config`` over ``args.base``, paths relative to the working
    directory (ConfigError when it is not valid)."""
    return load_config(config_file(args.config), base_dir=Path.cwd(), base=config_file(args.base))


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        cfg = load_experiment(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    for warning in plaintext_key_warnings(cfg.model_dump()):
        print(f"warning: {warning}", file=sys.stderr)
    if cfg.importing:
        from mastif.importers import MastifLogError, stacks_in_log

        try:
            stacks = stacks_in_log(cfg.import_.mastif_log)  # type: ignore[arg-type]
        except MastifLogError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"{args.config}: valid; import mode: {len(stacks)} stack(s) from the log")
        for s in stacks:
            print(f"  {s.path}")
        return 0
    stacks = cfg.stacks()
    runs = len(stacks) * cfg.tasks.sample_size * cfg.repeats
    print(
        f"{args.config}: valid; {len(stacks)} stack(s) x {cfg.tasks.sample_size} task(s) "
        f"x {cfg.repeats} repeat(s) = {runs:,} runs"
    )
    for s in stacks:
        print(f"  {s.path}")
    return 0


def cmd_envs_build(args: argparse.Namespace) -> int:
    """Build the named frameworks' environments, or those of ``--configfile``'s grid."""
    from mastif.execution.frameworkenv import FrameworkEnvError, ensure_envs

    names = list(args.frameworks)
    if args.configfile:
        try:
            cfg = load_config(args.configfile, base_dir=Path.cwd(), base=config_file(args.base))
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        names += list(cfg.frameworks)
    if not names:
        print("mastif envs build: name frameworks or --configfile FILE", file=sys.stderr)
        return 2
    try:
        built = ensure_envs(names)
    except FrameworkEnvError as exc:
        print(exc, file=sys.stderr)
        return 2
    for name in dict.fromkeys(names):
        print(f"{name}: {'built' if name in built else 'up to date'} (.envs/{name})")
    return 0


def cmd_import_mastif(args: argparse.Namespace) -> int:
    from mastif.importers import MastifLogError, read_mastif_log, write_imported

    try:
        imported = read_mastif_log(args.log)  # checks the whole log before writing anything
        written = write_imported(imported, Path(args.out))  # builds every table, then writes
    except MastifLogError as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cannot write under {args.out}: {exc}", file=sys.stderr)
        return 2
    print(imported.summary())
    print(f"wrote {written[0]} and {len(written) - 1} runs file(s) under {Path(args.out) / 'runs'}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    import polars as pl

    df = pl.read_parquet(args.parquet)

    def total(col: str) -> pl.Expr:  # null, not 0, when no run recorded it (imported runs)
        return pl.when(pl.col(col).count() > 0).then(pl.col(col).sum()).alias(col)

    summary = df.group_by("model", "protocol", "framework", "status").agg(
        pl.len().alias("runs"),
        total("prompt_tokens"),
        total("completion_tokens"),
        pl.col("wall_seconds").mean().round(2).alias("mean_wall_s"),
        pl.col("tool_calls").list.len().sum().alias("tool_calls"),
        total("protocol_messages"),
        total("protocol_calls"),
    )
    with pl.Config(tbl_rows=100, tbl_cols=20):
        print(summary.sort("model", "protocol", "framework", "status"))
    from mastif.reporting.report import versions_table

    with pl.Config(tbl_rows=100, fmt_str_lengths=60, tbl_hide_dataframe_shape=True):
        print(versions_table(df).select("package", "version", "runs"))
    return 0


def cmd_estimate(args: argparse.Namespace) -> int:
    from mastif.execution.estimate import estimate_experiment, load_estimate_tasks
    from mastif.reporting.estimate_report import format_estimate, format_wall_projection

    try:
        cfg = load_experiment(args)
        tasks, note = load_estimate_tasks(cfg, Path.cwd(), args.tasks)
        est = estimate_experiment(cfg, Path.cwd(), args.chars_per_token, tasks, note)
    except (ConfigError, ValueError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    print(format_estimate(est, args.config))
    if args.node_cores is not None:
        print()
        print(format_wall_projection(cfg, est, args))
    return 0


def cmd_power(args: argparse.Namespace) -> int:
    from mastif.analysis.power import format_power, min_detectable_difference

    try:
        cfg = load_experiment(args)
        n_tasks = args.tasks if args.tasks is not None else cfg.tasks.sample_size
        result = min_detectable_difference(
            n_tasks, baseline=args.baseline, rho=args.rho, alpha=cfg.stats.alpha,
            power=args.power, n_sim=args.simulations,
        )  # fmt: skip
    except (ConfigError, ValueError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    print(format_power(result))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from mastif.execution.status import experiment_status, format_status

    try:
        cfg = load_experiment(args)
        if cfg.importing:
            raise ValueError("import mode (import.mastif_log) runs no stack: no status to show")
        status = experiment_status(cfg, Path.cwd())
    except (ConfigError, ValueError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    print(format_status(status, args.config))
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from mastif.reporting.viewer.serve import viewer_server

    try:
        server = viewer_server(args.dir, args.port)
    except (FileNotFoundError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    host, port = server.server_address[:2]
    print(f"serving {args.dir} at http://{host}:{port}/ (loopback only; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _config_arguments(
    p: argparse.ArgumentParser,
    base_help: str = "config the file overrides (default: %(default)s)",
) -> None:
    """The experiment config and the config it overrides, as every config command takes them."""
    p.add_argument("config", nargs="?", default=DEFAULT_CONFIG)
    p.add_argument("--base", default=DEFAULT_CONFIG, help=base_help)


def _add_validate(sub: Any) -> None:
    p = sub.add_parser("validate", help="validate an experiment config and list its stacks")
    _config_arguments(
        p, "config the file overrides, as with snakemake --configfile (default: %(default)s)"
    )
    p.set_defaults(func=cmd_validate)


def _add_envs(sub: Any) -> None:
    p = sub.add_parser("envs", help="each framework's own environment (envs/, .envs/)")
    envs = p.add_subparsers(dest="envs_command", required=True)
    b = envs.add_parser(
        "build",
        help="build the environments of the named frameworks (or of an experiment's grid) "
        "from their locks, where they are not current",
    )
    b.add_argument("frameworks", nargs="*")
    b.add_argument("--configfile", default=None,
                   help="also every framework of this experiment config")  # fmt: skip
    b.add_argument("--base", default=DEFAULT_CONFIG, help="config the file overrides")
    b.set_defaults(func=cmd_envs_build)


def _add_runs(sub: Any) -> None:
    p = sub.add_parser("runs", help="summarise a runs Parquet file")
    p.add_argument("parquet")
    p.set_defaults(func=cmd_runs)


def _add_import_mastif(sub: Any) -> None:
    p = sub.add_parser(
        "import-mastif",
        help="convert a results log of the original MASTIF into runs and tasks Parquet",
    )
    p.add_argument("log", help="the MASTIF log (JSON: partial log or final export)")
    p.add_argument(
        "--out",
        required=True,
        help="directory for tasks.parquet and runs/{model}/{protocol}/{framework}.parquet",
    )
    p.set_defaults(func=cmd_import_mastif)


def _add_estimate(sub: Any) -> None:
    p = sub.add_parser(
        "estimate", help="estimate an experiment's LLM calls, tokens and dollars before running it"
    )
    _config_arguments(p)
    p.add_argument("--chars-per-token", type=float, default=4.0,
                   help="characters per token of the estimate (default: %(default)s)")  # fmt: skip
    p.add_argument("--tasks", default=None,
                   help=f"tasks Parquet to pick the typical task from, e.g. {results.tasks()}")  # fmt: skip
    g = p.add_argument_group(
        "projected wall time (mastif.execution.projection; printed with --node-cores)",
        "defaults of the per-job costs: measured by bench/grid.py (36 stacks x 10 tasks, 2 cores; docs/scale.md)",
    )
    g.add_argument("--node-cores", type=int, default=None,
                   help="cores of the node: also print the projected wall time")  # fmt: skip
    g.add_argument("--call-latency", type=float, default=5.0,
                   help="seconds per model call at the endpoint (default: %(default)s)")  # fmt: skip
    g.add_argument("--calls-per-run", type=float, default=None,
                   help="agent calls per run (default: the estimate's low and high)")  # fmt: skip
    g.add_argument("--concurrency", type=int, default=None,
                   help="runs in flight per stack job (default: the config's)")  # fmt: skip
    g.add_argument("--judge-concurrency", type=int, default=None,
                   help="judgements in flight per judge job (default: the judge's max_connections)")  # fmt: skip
    g.add_argument("--model-jobs", type=int, default=None,
                   help="execute and judge jobs at once (default: --node-cores)")  # fmt: skip
    g.add_argument("--harness-cpu-per-call", type=float, default=0.05,
                   help="harness CPU seconds per model call (default: %(default)s)")  # fmt: skip
    g.add_argument("--job-startup", type=float, default=9.5,
                   help="seconds a stack or judge job takes to start (default: %(default)s)")  # fmt: skip
    g.add_argument("--tag-startup", type=float, default=3.2,
                   help="seconds a tagging job takes to start and load its model (default: %(default)s)")  # fmt: skip
    g.add_argument("--tag-per-run", type=float, default=0.61,
                   help="seconds of tagging per run (default: %(default)s)")  # fmt: skip
    g.add_argument("--tail", type=float, default=40.0,
                   help="seconds after the last stack: metrics, statistics, plots (default: %(default)s)")  # fmt: skip
    p.set_defaults(func=cmd_estimate)


def _add_power(sub: Any) -> None:
    p = sub.add_parser(
        "power",
        help="the smallest difference in success rate between two stacks this sample can "
        "detect (paired, exact McNemar, by simulation)",
    )
    _config_arguments(p)
    p.add_argument("--tasks", type=int, default=None,
                   help="tasks per stack (default: the config's tasks.sample_size)")  # fmt: skip
    p.add_argument("--baseline", type=float, default=0.5,
                   help="success rate of the weaker stack (default: %(default)s)")  # fmt: skip
    p.add_argument("--rho", type=float, default=0.3,
                   help="correlation of two stacks' outcomes on a task (default: %(default)s)")  # fmt: skip
    p.add_argument("--power", type=float, default=0.8, help="default: %(default)s")
    p.add_argument("--simulations", type=int, default=4000, help="default: %(default)s")
    p.set_defaults(func=cmd_power)


def _add_status(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="runs done, failed and remaining per stack, tokens and dollars so far, ETA "
        "(from the workflow directory; also while snakemake runs)",
    )
    _config_arguments(p)
    p.set_defaults(func=cmd_status)


def _add_view(sub: Any) -> None:
    p = sub.add_parser("view", help=f"serve the trace viewer ({results.VIEWER}) on 127.0.0.1")
    p.add_argument("dir", nargs="?", default=results.VIEWER,
                   help="the built viewer (default: %(default)s); it also opens from disk")  # fmt: skip
    p.add_argument("--port", type=int, default=8765, help="default: %(default)s; 0: any free")
    p.set_defaults(func=cmd_view)


def build_parser() -> argparse.ArgumentParser:
    """The ``mastif`` command line: one subcommand per ``cmd_*`` function."""
    parser = argparse.ArgumentParser(prog="mastif", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_validate, _add_envs, _add_runs, _add_import_mastif, _add_estimate, _add_power,
                _add_status, _add_view):  # fmt: skip
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
