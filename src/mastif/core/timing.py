"""Where a run's wall-clock time went: model, queue, tools, protocol, set-up, harness.

CT (paper Eq. 2) is a run's wall clock. To tell a slow model from a slow framework, a
congested endpoint or a protocol's overhead, :func:`decompose` splits it into six parts
that sum to it exactly:

* **model**: upstream HTTP requests to the model endpoint of the calls that were not
  answered from the response cache (every attempt, failed ones too: the endpoint had them);
* **queue**: waiting for a slot of the gateway's adaptive connection limit, and sleeping
  between retries (back-off, a 429's ``Retry-After``);
* **tools**: the tool calls' own duration (measured around the tool function);
* **protocol**: the run's ``protocol_seconds`` (measured by the protocol's servers and
  clients, see :mod:`mastif.protocols.wire`), as far as the time left after the three
  above holds it;
* **set-up**: building the run's framework objects — tools, agents, model clients, graphs,
  kernels, flows, MCP sessions — timed where the adapters build them
  (``RunContext.setting_up``), as far as the rest after protocol holds it; a framework that
  builds per visit shows it here, not as the agents' work;
* **harness**: the rest — the framework's own work per call, mastif's orchestration, prompt
  rendering, the gateway's handling and cache look-ups, the sandbox check — never negative.

Parts can overlap in time: a run's tool calls may run concurrently (LangGraph's
``ToolNode`` gathers a turn's calls), model calls of concurrent subtasks too, and a tool
may still run while a model call is made. Model, queue and tools are laid on the run's
timeline as intervals and each instant is counted once, for the first of model > queue >
tools that covers it (so two concurrent 3 s tool calls are 3 s of tools, not 6). Protocol
time is only known as a total, so it takes what is left of wall after the intervals, at
most its total; set-up spans are laid on the timeline too, below tools, and take what is
left after protocol, at most their uncovered time (an MCP client's ``tools/list`` made while
setting up is protocol time: protocol keeps one definition for every stack); harness is the
remainder. A call's parts are laid out as queue, then
back-off, then upstream from its start (exact for a call without retries; a retried call's
parts interleave, which only matters where it overlaps another interval).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mastif.core.trace import LLMCall, ToolCall

#: priority of the interval kinds: a lower number wins an instant two kinds cover
MODEL, QUEUE, TOOLS, SETUP = 0, 1, 2, 3


@dataclass(frozen=True)
class InFlight:
    """A model call still in the gateway when its run ended (e.g. the run timed out): its
    parts so far. It has no :class:`LLMCall` row, but its time is the run's."""

    started_s: float
    upstream_s: float
    queue_s: float
    backoff_s: float


@dataclass(frozen=True)
class TimeSplit:
    model_s: float
    queue_s: float
    tools_s: float
    protocol_s: float | None  # None: the run's protocol cost is unknown
    harness_s: float | None  # None with it: the rest cannot be split
    n_cached_calls: int
    setup_s: float | None = None  # None with protocol: the rest cannot be split

    def columns(self) -> dict[str, float | int | None]:
        """The run's columns (:class:`mastif.core.trace.RunTrace`)."""
        return {
            "wall_model_s": self.model_s,
            "wall_queue_s": self.queue_s,
            "wall_tools_s": self.tools_s,
            "wall_protocol_s": self.protocol_s,
            "wall_setup_s": self.setup_s,
            "wall_harness_s": self.harness_s,
            "n_cached_calls": self.n_cached_calls,
        }


def _call_intervals(
    started: float, queue: float, backoff: float, upstream: float
) -> list[tuple[float, float, int]]:
    waited = queue + backoff
    return [
        (started, started + waited, QUEUE),
        (started + waited, started + waited + upstream, MODEL),
    ]


def intervals(
    llm_calls: Iterable[LLMCall], tool_calls: Iterable[ToolCall], in_flight: Iterable[InFlight] = ()
) -> list[tuple[float, float, int]]:
    """(start, end, kind) on the run's timeline (seconds since it started)."""
    out: list[tuple[float, float, int]] = []
    for c in llm_calls:
        if c.cached:
            continue  # no model was called: its lookup is the harness's time
        if c.upstream_s is None:
            # recorded before the gateway split latency: all of it counts as model time
            out.append((c.started_s, c.started_s + c.latency_s, MODEL))
            continue
        out += _call_intervals(c.started_s, c.queue_s or 0.0, c.backoff_s or 0.0, c.upstream_s)
    for f in in_flight:
        out += _call_intervals(f.started_s, f.queue_s, f.backoff_s, f.upstream_s)
    for t in tool_calls:
        if t.duration_s and t.started_s is not None:
            out.append((t.started_s, t.started_s + t.duration_s, TOOLS))
    return out


def covered(spans: Sequence[tuple[float, float, int]], wall_s: float) -> dict[int, float]:
    """Seconds of ``[0, wall_s]`` each kind covers, each instant given to the covering kind
    of the lowest number (a sweep over the spans' boundaries)."""
    spans = [(max(0.0, a), min(wall_s, b), k) for a, b, k in spans]
    spans = [(a, b, k) for a, b, k in spans if b > a]
    cuts = sorted({x for a, b, _ in spans for x in (a, b)})
    seconds = {MODEL: 0.0, QUEUE: 0.0, TOOLS: 0.0, SETUP: 0.0}
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        kinds = [k for a, b, k in spans if a <= lo and b >= hi]
        if kinds:
            seconds[min(kinds)] += hi - lo
    return seconds


def decompose(
    wall_s: float,
    llm_calls: Sequence[LLMCall],
    tool_calls: Sequence[ToolCall],
    protocol_s: float | None,
    in_flight: Sequence[InFlight] = (),
    setup_spans: Sequence[tuple[float, float]] = (),
) -> TimeSplit:
    """``wall_s`` split into model + queue + tools + protocol + set-up + harness (module
    docstring); the parts sum to ``wall_s``. ``protocol_s`` None (the run's protocol cost is
    unknown, :mod:`mastif.protocols.wire`) leaves protocol, set-up and harness null: the
    rest cannot be split between them, and counting the unknown as 0 would pass protocol
    time off as harness or set-up."""
    spans = intervals(llm_calls, tool_calls, in_flight)
    spans += [(a, b, SETUP) for a, b in setup_spans]
    seconds = covered(spans, wall_s)
    rest = max(0.0, wall_s - seconds[MODEL] - seconds[QUEUE] - seconds[TOOLS])
    protocol = None if protocol_s is None else min(max(0.0, protocol_s), rest)
    setup = None if protocol is None else min(seconds[SETUP], rest - protocol)
    return TimeSplit(
        model_s=seconds[MODEL],
        queue_s=seconds[QUEUE],
        tools_s=seconds[TOOLS],
        protocol_s=protocol,
        harness_s=None if protocol is None or setup is None else rest - protocol - setup,
        n_cached_calls=sum(1 for c in llm_calls if c.cached),
        setup_s=setup,
    )
