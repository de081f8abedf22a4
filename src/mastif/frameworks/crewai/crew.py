"""One node visit: the node's agent on a one-task crew, in the run's worker thread.

The crew is CrewAI's own (``Crew(process=Process.sequential)``) without its replay log
(:class:`_NoReplayLog`); its raw output is the node output.
"""

from __future__ import annotations

from typing import Any

import openai
from crewai import Agent, Crew, Process, Task
from crewai.utilities.task_output_storage_handler import TaskOutputStorageHandler
from pydantic import PrivateAttr

from mastif.frameworks.crewai.bridge import Bridge, Visit


class _NoReplayLog(TaskOutputStorageHandler):
    """CrewAI's replay log, not kept. A crew stores its last kickoff's task outputs for
    ``crewai replay`` in one SQLite file in the user's data directory, each write behind a
    machine-wide file lock in /tmp: every visit of every run reset and rewrote it (~9% of a
    CrewAI/A2A job's CPU), concurrent runs reset each other's entries, and every CrewAI job
    on the machine queued on that one lock. A run's outputs are in its trace; nothing here
    replays a crew."""

    def __init__(self) -> None:  # no storage: the SQLite file is never opened
        pass

    def update(self, task_index: int, log: dict[str, Any]) -> None:
        pass

    def add(self, *args: Any, **kwargs: Any) -> None:
        pass

    def reset(self) -> None:
        pass

    def load(self) -> list[dict[str, Any]] | None:
        return None


class _VisitCrew(Crew):
    """A node visit's one-task crew: CrewAI's own Crew without its replay log."""

    _task_output_handler: TaskOutputStorageHandler = PrivateAttr(default_factory=_NoReplayLog)


def kickoff(agent: Agent, visit: Visit, bridge: Bridge, prompt: str) -> str:
    """One node visit: the node's agent on a one-task crew (in the run's worker thread); the
    crew's raw output is the node output."""
    try:
        bridge.check()
        bridge.visit = visit
        what = visit.node.spec.output_key.replace("_", " ")
        task = Task(description=prompt, expected_output=f"The {what}.", agent=agent)
        crew = _VisitCrew(
            agents=[agent],
            tasks=[task],
            process=Process.sequential,
            verbose=False,
            memory=False,
            cache=False,
            tracing=False,
        )
        return crew.kickoff().raw  # no inputs: the prompt is not a template for CrewAI
    except ConnectionError as exc:
        # CrewAI turns the OpenAI client's connection errors (timeouts included) into a
        # builtin ConnectionError; hand on the original so the run's error is classified
        if isinstance(exc.__cause__, openai.APIConnectionError):
            raise exc.__cause__ from exc
        raise
    finally:
        bridge.visit = None
