"""The ``mastif`` command: check a config, list the grid, inspect a runs table.

The pipeline itself runs with Snakemake (``snakemake --cores 2``); this command is for the
small things around it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mastif.config import ConfigError, load_config


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config, base_dir=Path.cwd(), base=args.base)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    stacks = cfg.stacks()
    runs = len(stacks) * cfg.tasks.sample_size * cfg.repeats
    print(
        f"{args.config}: valid; {len(stacks)} stack(s) x {cfg.tasks.sample_size} task(s) "
        f"x {cfg.repeats} repeat(s) = {runs:,} runs"
    )
    for s in stacks:
        print(f"  {s.path}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    import polars as pl

    df = pl.read_parquet(args.parquet)
    summary = df.group_by("model", "protocol", "framework", "status").agg(
        pl.len().alias("runs"),
        pl.col("prompt_tokens").sum(),
        pl.col("completion_tokens").sum(),
        pl.col("wall_seconds").mean().round(2).alias("mean_wall_s"),
        pl.col("tool_calls").list.len().sum().alias("tool_calls"),
        pl.col("protocol_messages").sum(),
        pl.col("protocol_calls").sum(),
    )
    with pl.Config(tbl_rows=100, tbl_cols=20):
        print(summary.sort("model", "protocol", "framework", "status"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mastif", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="validate an experiment config and list its stacks")
    p.add_argument("config", nargs="?", default="config/config.yaml")
    p.add_argument(
        "--base",
        default="config/config.yaml",
        help="config the file overrides, as with snakemake --configfile (default: %(default)s)",
    )
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("runs", help="summarise a runs Parquet file")
    p.add_argument("parquet")
    p.set_defaults(func=cmd_runs)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
