"""The results layout: the one definition of where an experiment's files live, relative to
the workflow directory. The rule files (through ``workflow/rules/common.smk``) and the
package (the status report, the budget ledger, the importer, the CLI) both build their
paths here::

    results/
      tasks.parquet                         the sampled (or imported) tasks
      tasks_allocation.{parquet,csv}        the sample's allocation per stratum
      shards/{stack}/{k}-of-{n}.parquet     one shard job's runs
      runs/{stack}.parquet                  one stack's runs (its shards gathered)
      judged/{stack}.parquet                the judge panel's judgements of them
      values/{stack}.parquet                their social values
      checkpoints/{stack}/{k}-of-{n}.jsonl  a shard job's finished runs while it runs
      checkpoints/judged/{stack}.jsonl      a judging job's judgements while it runs
      checkpoints/budget.jsonl              the budget ledger (execution.budget)
      metrics/{name}.{ext}                  runs.parquet, stacks.parquet, identical_answers.csv
      stats/{name}.parquet                  tests, effects, models, judge validity, ...
      plots/{name}.{png,svg}                the figures
      tables/{name}.{md,csv}                the tables
      viewer/                               the trace viewer (a static site)
      report/front_page.rst                 the report's front page (joint tests, gate)

``{stack}`` is a stack's path, ``{model}/{protocol}/{framework}``
(:attr:`mastif.core.config.Stack.path`). Every function returns a ``str`` with ``/``
separators: with its default arguments a Snakemake wildcard pattern, with values a path.
``root`` moves the whole layout (``mastif import-mastif --out``).
"""

from __future__ import annotations

from pathlib import PurePath

#: the results directory, relative to the workflow directory
ROOT = "results"
#: a stack's path as Snakemake wildcards
STACK = "{model}/{protocol}/{framework}"
#: a shard of a stack's runs as Snakemake's scattergather wildcard (``{k}-of-{n}``)
SHARD = "{scatteritem}"
#: the budget ledger, shared by every job of the experiment (mastif.execution.budget)
LEDGER = f"{ROOT}/checkpoints/budget.jsonl"
#: the trace viewer's site
VIEWER = f"{ROOT}/viewer"
#: the report's front page (reStructuredText included by workflow/report/workflow.rst)
FRONT_PAGE = f"{ROOT}/report/front_page.rst"


def _under(root: str | PurePath, *parts: str) -> str:
    return "/".join([str(root), *parts])


def tasks(root: str | PurePath = ROOT) -> str:
    """The tasks table (sample_tasks, or import_mastif_log)."""
    return _under(root, "tasks.parquet")


def tasks_allocation(ext: str = "parquet", root: str | PurePath = ROOT) -> str:
    """The sample's allocation per stratum (``parquet`` or ``csv``)."""
    return _under(root, f"tasks_allocation.{ext}")


def shard_dir(stack: str = STACK, root: str | PurePath = ROOT) -> str:
    """The directory of a stack's shard Parquets."""
    return _under(root, "shards", stack)


def shard(stack: str = STACK, item: str = SHARD, root: str | PurePath = ROOT) -> str:
    """The runs of one shard job of a stack."""
    return f"{shard_dir(stack, root)}/{item}.parquet"


def checkpoint_dir(stack: str = STACK, root: str | PurePath = ROOT) -> str:
    """The directory of a stack's run checkpoints (one per running shard job)."""
    return _under(root, "checkpoints", stack)


def checkpoint(stack: str = STACK, item: str = SHARD, root: str | PurePath = ROOT) -> str:
    """A shard job's checkpoint: its finished runs, kept outside the declared outputs."""
    return f"{checkpoint_dir(stack, root)}/{item}.jsonl"


def judge_checkpoint(stack: str = STACK, root: str | PurePath = ROOT) -> str:
    """A judging job's checkpoint: its finished judgements."""
    return _under(root, "checkpoints", "judged", f"{stack}.jsonl")


def framework_env(framework: str = "{framework}", root: str | PurePath = ROOT) -> str:
    """What a framework's environment held when the workflow built or checked it (one
    ``name==version`` a line): rule ``framework_env``, before the framework's stack jobs."""
    return _under(root, "envs", f"{framework}.txt")


def runs(stack: str = STACK, root: str | PurePath = ROOT) -> str:
    """A stack's runs."""
    return _under(root, "runs", f"{stack}.parquet")


def judged(stack: str = STACK, root: str | PurePath = ROOT) -> str:
    """The judgements of a stack's runs."""
    return _under(root, "judged", f"{stack}.parquet")


def values(stack: str = STACK, root: str | PurePath = ROOT) -> str:
    """The social values of a stack's runs."""
    return _under(root, "values", f"{stack}.parquet")


def metrics(name: str, ext: str = "parquet", root: str | PurePath = ROOT) -> str:
    """A metrics table: ``runs``, ``stacks`` (Parquet), ``identical_answers`` (csv)."""
    return _under(root, "metrics", f"{name}.{ext}")


def stats(name: str, root: str | PurePath = ROOT) -> str:
    """A statistics table, e.g. ``tests``, ``effects``, ``judge_validity``."""
    return _under(root, "stats", f"{name}.parquet")


def plot(name: str, ext: str, root: str | PurePath = ROOT) -> str:
    """A figure (``png`` or ``svg``)."""
    return _under(root, "plots", f"{name}.{ext}")


def table(name: str, ext: str, root: str | PurePath = ROOT) -> str:
    """A table (``md`` or ``csv``)."""
    return _under(root, "tables", f"{name}.{ext}")
