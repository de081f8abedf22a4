"""What the benches read from a finished Snakemake run: its log's jobs and capacities, and the
timestamps a job's script wrote (mastif.core.logsetup's format). Shared by bench/default_run_time.py
and bench/grid.py (bench/grid_measure.py).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from mastif.execution.projection import CORES

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]{8} \d{4})\]$")
_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_RES = re.compile(r"^\s+resources: (.+)$")
_THREADS = re.compile(r"^\s+threads: (\d+)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
_LOG = re.compile(r"^\s+log: (.+)$")
_PROVIDED = re.compile(r"^Provided (cores|resources): (.+)$")
_SCRIPT_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
#: resources Snakemake sets on every job that are no capacity of the profile
_STANDARD = ("mem_mb", "mem_mib", "disk_mb", "disk_mib", "_cores", "_nodes")


def parse_log(log: Path) -> dict[str, Any]:
    """One Snakemake log: ``jobs`` (every finished job: rule, start, finish as datetimes,
    threads, resources, its log files) and ``capacities`` (``Provided cores`` as
    :data:`CORES`, ``Provided resources``)."""
    jobs: dict[str, dict[str, Any]] = {}
    capacities: dict[str, int] = {}
    stamp: datetime | None = None
    current: dict[str, Any] | None = None
    for line in log.read_text().splitlines():
        if m := _STAMP.match(line):
            current = None
            stamp = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif m := _PROVIDED.match(line):
            if m.group(1) == "cores":
                capacities[CORES] = int(m.group(2))
            else:  # slots=Resource("slots", 2) (Snakemake 9) or slots=2
                for k, v in re.findall(r"(\w+)=(?:Resource\(\"\w+\", )?(\d+)", m.group(2)):
                    capacities[k] = int(v)
        elif m := _RULE.match(line):
            current = {"rule": m.group(1), "start": stamp, "threads": 1, "resources": {},
                       "logs": []}  # fmt: skip
        elif current is not None and (m := _LOG.match(line)):
            current["logs"] = [p.strip() for p in m.group(1).split(",")]
        elif current is not None and (m := _JOBID.match(line)):
            jobs[m.group(1)] = current
        elif current is not None and (m := _THREADS.match(line)):
            current["threads"] = int(m.group(1))
        elif current is not None and (m := _RES.match(line)):
            for part in m.group(1).split(", "):
                k, _, v = part.partition("=")
                if v.isdigit() and k not in _STANDARD:
                    current["resources"][k] = int(v)
        elif (m := _FINISHED.match(line)) and m.group(1) in jobs:
            jobs[m.group(1)]["finish"] = stamp
    done = [j for j in jobs.values() if j.get("finish") and j.get("start")]
    return {"jobs": done, "capacities": capacities}


def log_stamps(path: Path, needle: str = "") -> list[datetime]:
    """Timestamps of a job log's lines (mastif.core.logsetup's format) that contain ``needle``."""
    out = []
    try:
        with path.open(errors="replace") as fh:
            for line in fh:
                if (m := _SCRIPT_LINE.match(line)) and needle in line:
                    out.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f"))
    except OSError:
        pass
    return out
