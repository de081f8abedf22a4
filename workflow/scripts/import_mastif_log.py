"""Bridge: a log of the original MASTIF -> tasks and runs Parquets (see mastif.importers)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging
from pathlib import Path

from mastif.core import results
from mastif.importers import read_mastif_log, write_imported

imported = read_mastif_log(snakemake.input.log)
declared = {Path(p) for p in [snakemake.output.tasks, *snakemake.output.runs]}
expected = {Path(snakemake.output.tasks)} | {
    Path(results.runs(s.path, root=Path(snakemake.output.tasks).parent)) for s in imported.stacks()
}
if expected != declared:  # the log changed since the DAG was built
    raise ValueError(
        f"{snakemake.input.log} now has other stacks than planned: "
        f"{sorted(map(str, expected ^ declared))}; rerun snakemake"
    )
written = write_imported(imported, Path(snakemake.output.tasks).parent)
logging.info("%s\nwrote %d file(s)", imported.summary(), len(written))
