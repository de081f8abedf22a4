"""Bridge: build a framework's environment from its lock where it is not current, and list
what it holds (see mastif.execution.frameworkenv)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging
from pathlib import Path

from mastif.core.atomic import write_atomically
from mastif.execution.frameworkenv import build_env, framework_env, installed_packages

env = framework_env(snakemake.wildcards.framework)
built = build_env(env, log_file=Path(snakemake.log[0]))
logging.info("%s: %s (%s)", env.name, "built" if built else "up to date", env.prefix)
listing = installed_packages(env)
write_atomically(Path(snakemake.output.packages), lambda tmp: tmp.write_text(listing))
