"""Importers: results of other tools as mastif's runs and tasks tables.

Each importer turns another tool's log into rows of :data:`mastif.core.trace.RUN_SCHEMA` (one per
run, ``origin`` naming the source) and a task table of :data:`mastif.tasks.TASK_SCHEMA`, so
the judge, values, metrics and statistics stages run on results mastif did not produce.
Pure functions: no Snakemake, no model, no network. See ``docs/import.md``.

Owns the original MASTIF's logs read as runs and tasks and written as mastif's tables
(``mastif_log.py``), in steps: the log read and its records checked (``mastif_records.py``),
a record as a run trace (``mastif_runs.py``), MASTIF's names and error texts as mastif's ids
and error classes (``mastif_names.py``), answers unwrapped from a protocol envelope
(``envelopes.py``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols, mastif.frameworks, mastif.evaluation, mastif.execution, mastif.analysis,
mastif.reporting.
"""

from mastif.importers.envelopes import unwrap_envelope
from mastif.importers.mastif_log import (
    ImportedLog,
    read_mastif_log,
    stacks_in_log,
    write_imported,
)
from mastif.importers.mastif_records import MastifLogError

__all__ = [
    "ImportedLog",
    "MastifLogError",
    "read_mastif_log",
    "stacks_in_log",
    "unwrap_envelope",
    "write_imported",
]
