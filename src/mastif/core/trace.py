"""One trace schema for every framework and protocol: one row per run (task x stack).

Every cell of the grid fills the same :class:`RunTrace`, so a metric means the same thing
everywhere. Tokens come from API usage recorded by the gateway, times from clocks, tool
outcomes from what the tool returned.

Runs imported from another tool's log (``origin`` other than ``"run"``, see
:mod:`mastif.importers`) fill what that log recorded; a field it did not record is ``None``
(a null cell), never a made-up 0, and its token counts are estimates in their own columns.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, Protocol

import pyarrow as pa

from mastif.core.config import Stack
from mastif.core.textclip import clip_optional, clip_text

RunStatus = Literal["ok", "error", "timeout"]
#: the status of a run whose workflow returned its answer, without a timeout or an error;
#: only these runs enter CT, V and SVS (mastif.evaluation.metrics, mastif.evaluation.values)
COMPLETED: RunStatus = "ok"


@dataclass
class NodeOutput:
    node: str
    step: int
    output_key: str
    text: str


@dataclass
class ToolCall:
    node: str
    step: int
    name: str
    arguments: str  # JSON text of the arguments exactly as the model produced them
    ok: bool | None  # None: the outcome of this call was not recorded (imported logs only)
    output: str
    error: str | None
    duration_s: float | None  # None: not recorded (imported logs only)
    # seconds since the run started when the tool began (its end minus duration_s); None:
    # not recorded (imported logs, rows written before mastif recorded it)
    started_s: float | None = None

    def __post_init__(self) -> None:
        # what a page or an imported log put here is stored cut (issue 49)
        self.output = clip_text(self.output)
        self.error = clip_optional(self.error)


@dataclass
class LLMCall:
    node: str
    started_s: float  # seconds since the run started
    latency_s: float
    prompt_tokens: int | None  # None when the API reported no usage
    completion_tokens: int | None
    http_status: int
    error: str | None
    attempts: int
    # answered from the response cache: no model call was made, latency is the lookup's
    cached: bool = False
    # latency_s split by the gateway (None: not recorded, rows of earlier versions):
    # upstream_s in HTTP requests to the endpoint (every attempt, failed ones too; 0 when
    # cached), queue_s waiting for a slot of the adaptive connection limit, backoff_s
    # sleeping between retries; the rest of latency_s is the gateway's own handling
    upstream_s: float | None = None
    queue_s: float | None = None
    backoff_s: float | None = None

    def __post_init__(self) -> None:
        self.error = clip_optional(self.error)


class RunSubject(Protocol):
    """What a run's identity columns take from its task (a :class:`mastif.tasks.Task`)."""

    @property
    def task_id(self) -> str: ...
    @property
    def confirmed_task(self) -> str: ...
    @property
    def website(self) -> str: ...
    @property
    def domain(self) -> str | None: ...
    @property
    def level(self) -> str | None: ...


@dataclass
class RunTrace:
    run_id: str
    experiment: str
    model: str
    protocol: str
    framework: str
    task_id: str
    task_text: str
    website: str
    domain: str | None  # None: the task source gives no domain
    level: str | None  # None: difficulty unknown (imported tasks)
    status: RunStatus
    error_class: str | None
    error_message: str | None
    final_answer: str
    node_outputs: list[NodeOutput] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    llm_calls: list[LLMCall] = field(default_factory=list)
    # API usage summed over llm_calls; None: no API usage recorded (imported runs)
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    n_llm_calls: int | None = 0  # None: the run's LLM calls were not recorded (imported)
    wall_seconds: float = 0.0
    # wall_seconds decomposed (mastif.core.timing.decompose): the six parts sum to wall_seconds;
    # where parts overlap in time (concurrent calls, tools beside a model call) each second
    # is counted once, in the order model > queue > tools > protocol > setup > harness. None: not
    # decomposed (imported runs, rows of earlier versions)
    wall_model_s: float | None = None  # upstream model requests of non-cached calls
    wall_queue_s: float | None = None  # waiting for a connection slot or a retry's back-off
    wall_tools_s: float | None = None  # tool calls' own duration
    wall_protocol_s: float | None = None  # protocol_seconds, as far as the rest of wall holds it
    wall_setup_s: float | None = None  # building the run's framework objects (tools, agents, ...)
    wall_harness_s: float | None = None  # the rest: framework, orchestration, gateway, mastif
    n_cached_calls: int | None = None  # LLM calls answered from the response cache
    started_at: datetime | None = None
    provider: str = ""
    served_model: str = ""
    # generation settings; None: not recorded (imported runs)
    temperature: float | None = 0.0
    max_tokens: int | None = 0
    max_steps: int | None = 0
    max_tool_rounds: int | None = 0
    # one model request's limit as the framework makes it (generation.request_timeout_s);
    # None: not recorded (imported runs, rows of earlier versions)
    request_timeout_s: float | None = None
    timeout_s: float | None = None  # the run's budget (generation.timeout_s); None: as above
    generation_seed: int | None = 0  # the seed this run's requests carried (config seed + repeat)
    sampling_seed: int | None = 0
    repeat: int = 0  # 0 .. repeats-1: the how-manieth run of this task in this stack
    prompt_hashes: str | None = "{}"  # JSON: node name -> sha256 of its prompt file
    workflow_shape: str | None = "linear"
    prompt_format: bool = False  # node prompts wrapped in the protocol's message format
    # what the protocol cost this run, measured on both ends of its wire (all zero for "standard");
    # None: not measured (imported runs: the source's own overhead figures are in import_meta)
    protocol_requests: int | None = 0  # HTTP requests to the protocol's servers
    protocol_messages: int | None = 0  # protocol (JSON-RPC) messages, both directions
    protocol_calls: int | None = 0  # MCP tools/call served, or A2A messages handled by agents
    protocol_bytes_sent: int | None = 0  # request bodies, client -> server
    protocol_bytes_received: int | None = 0  # response bodies, server -> client
    # protocol time, one definition for every protocol (mastif.protocols.wire): the time the
    # protocol clients waited on the run's exchanges, summed ...
    protocol_exchange_seconds: float | None = 0.0
    # ... of which the peer did the work itself (tool run, agent node), timed by the server
    protocol_peer_seconds: float | None = 0.0
    # their difference; None when negative (exchanges the clients did not time, e.g. one
    # abandoned at a timeout while the peer worked on): a measurement failure, never clamped
    protocol_seconds: float | None = 0.0
    # the task's programmatic check (objective ground truth beside the judge): None when the
    # task has no check, or its check needs the sandbox and the run was on the live web
    success: bool | None = None
    check_detail: str | None = None
    web: str = "sandbox"  # sandbox | live
    web_state: str | None = None  # JSON: the run's sandbox session state at its end
    # where the row comes from: "run" (executed by this pipeline) or "mastif_log" (imported
    # from a log of the original MASTIF by mastif.importers.mastif_log)
    origin: str = "run"
    # True: the run has no API usage (prompt_tokens/completion_tokens are None); the token
    # counts it has are the source's re-tokenised estimates in est_* (None when not logged)
    tokens_estimated: bool = False
    est_reasoning_tokens: int | None = None
    est_output_tokens: int | None = None
    # the answer verbatim when final_answer was unwrapped from a protocol envelope, else None
    raw_final_answer: str | None = None
    # tool calls and successful calls as counted by the source's tool log (imported runs
    # whose log has such counts; None for our runs: tool_calls is their per-call record)
    tool_log_calls: int | None = None
    tool_log_ok: int | None = None
    import_meta: str | None = None  # JSON: what the source recorded that has no column here
    # what software produced the run (mastif.core.provenance, collected once per stack job); None:
    # unknown (imported runs, a remote model's server, mastif outside a git checkout) or, for
    # a package's version, a package the stack does not use
    mastif_version: str | None = None
    mastif_commit: str | None = None  # git commit of mastif's checkout
    mastif_dirty: bool | None = None  # the checkout's tracked files differed from the commit
    python_version: str | None = None
    model_server: str | None = None  # "xllamacpp" or "llama-server" for provider local
    model_server_version: str | None = None
    langgraph_version: str | None = None
    langchain_version: str | None = None
    langchain_core_version: str | None = None
    langchain_openai_version: str | None = None
    langchain_mcp_adapters_version: str | None = None
    crewai_version: str | None = None
    semantic_kernel_version: str | None = None
    llama_index_core_version: str | None = None
    llama_index_llms_openai_like_version: str | None = None
    llama_index_tools_mcp_version: str | None = None
    smolagents_version: str | None = None
    agent_framework_core_version: str | None = None
    agent_framework_openai_version: str | None = None
    pydantic_ai_slim_version: str | None = None
    pydantic_graph_version: str | None = None
    openai_agents_version: str | None = None
    haystack_ai_version: str | None = None
    mcp_haystack_version: str | None = None
    mcp_version: str | None = None
    a2a_sdk_version: str | None = None
    openai_version: str | None = None
    #: packages of the stack with no column above (a plugin framework's): "name==version, ..."
    other_packages: str | None = None

    def __post_init__(self) -> None:
        # an exception's text can carry what a page or a model sent (issue 49)
        self.error_message = clip_optional(self.error_message)

    @classmethod
    def of_task(
        cls, run_id: str, experiment: str, stack: Stack, task: RunSubject, **columns: Any
    ) -> RunTrace:
        """The run ``run_id`` of ``task`` in ``stack``: the identity columns filled alike for
        every origin (executed or imported), ``columns`` the rest (outcome, measurements)."""
        return cls(
            run_id=run_id,
            experiment=experiment,
            model=stack.model,
            protocol=stack.protocol,
            framework=stack.framework,
            task_id=task.task_id,
            task_text=task.confirmed_task,
            website=task.website,
            domain=task.domain,
            level=task.level,
            **columns,
        )

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        row = self.to_row()
        row["started_at"] = self.started_at.isoformat() if self.started_at else None
        return json.dumps(row)

    @classmethod
    def from_json(cls, text: str) -> RunTrace:
        return cls.from_record(json.loads(text))

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> RunTrace:
        """The trace of one checkpoint line, already parsed (``mastif.core.atomic.read_json_lines``)."""
        row = dict(record)
        row["started_at"] = datetime.fromisoformat(row["started_at"]) if row["started_at"] else None
        row["node_outputs"] = [NodeOutput(**n) for n in row["node_outputs"]]
        row["tool_calls"] = [ToolCall(**t) for t in row["tool_calls"]]
        row["llm_calls"] = [LLMCall(**c) for c in row["llm_calls"]]
        return cls(**row)


def usage_totals(calls: list[LLMCall]) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens of a run: API usage summed over its LLM calls.

    Unknown stays unknown: when any answered call (HTTP 200) lacks a count, the run's total
    of that kind is None, never a sum that silently treats the gap as 0. A failed call (no
    answer after retries) delivered no message to the agent and adds 0.
    """
    answered = [c for c in calls if c.http_status == 200]
    prompt = [c.prompt_tokens for c in answered]
    completion = [c.completion_tokens for c in answered]
    return (
        None if None in prompt else sum(prompt),  # type: ignore[arg-type]
        None if None in completion else sum(completion),  # type: ignore[arg-type]
    )


NODE_OUTPUT_TYPE = pa.struct(
    [
        ("node", pa.string()),
        ("step", pa.int32()),
        ("output_key", pa.string()),
        ("text", pa.string()),
    ]
)
TOOL_CALL_TYPE = pa.struct(
    [
        ("node", pa.string()),
        ("step", pa.int32()),
        ("name", pa.string()),
        ("arguments", pa.string()),
        ("ok", pa.bool_()),
        ("output", pa.string()),
        ("error", pa.string()),
        ("duration_s", pa.float64()),
        ("started_s", pa.float64()),
    ]
)
LLM_CALL_TYPE = pa.struct(
    [
        ("node", pa.string()),
        ("started_s", pa.float64()),
        ("latency_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("http_status", pa.int32()),
        ("error", pa.string()),
        ("attempts", pa.int32()),
        ("cached", pa.bool_()),
        ("upstream_s", pa.float64()),
        ("queue_s", pa.float64()),
        ("backoff_s", pa.float64()),
    ]
)

RUN_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("experiment", pa.string()),
        ("model", pa.string()),
        ("protocol", pa.string()),
        ("framework", pa.string()),
        ("task_id", pa.string()),
        ("task_text", pa.string()),
        ("website", pa.string()),
        ("domain", pa.string()),
        ("level", pa.string()),
        ("status", pa.string()),
        ("error_class", pa.string()),
        ("error_message", pa.string()),
        ("final_answer", pa.string()),
        ("node_outputs", pa.list_(NODE_OUTPUT_TYPE)),
        ("tool_calls", pa.list_(TOOL_CALL_TYPE)),
        ("llm_calls", pa.list_(LLM_CALL_TYPE)),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("n_llm_calls", pa.int64()),
        ("wall_seconds", pa.float64()),
        ("wall_model_s", pa.float64()),
        ("wall_queue_s", pa.float64()),
        ("wall_tools_s", pa.float64()),
        ("wall_protocol_s", pa.float64()),
        ("wall_setup_s", pa.float64()),
        ("wall_harness_s", pa.float64()),
        ("n_cached_calls", pa.int64()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("provider", pa.string()),
        ("served_model", pa.string()),
        ("temperature", pa.float64()),
        ("max_tokens", pa.int64()),
        ("max_steps", pa.int64()),
        ("max_tool_rounds", pa.int64()),
        ("request_timeout_s", pa.float64()),
        ("timeout_s", pa.float64()),
        ("generation_seed", pa.int64()),
        ("sampling_seed", pa.int64()),
        ("repeat", pa.int64()),
        ("prompt_hashes", pa.string()),
        ("workflow_shape", pa.string()),
        ("prompt_format", pa.bool_()),
        ("protocol_requests", pa.int64()),
        ("protocol_messages", pa.int64()),
        ("protocol_calls", pa.int64()),
        ("protocol_bytes_sent", pa.int64()),
        ("protocol_bytes_received", pa.int64()),
        ("protocol_exchange_seconds", pa.float64()),
        ("protocol_peer_seconds", pa.float64()),
        ("protocol_seconds", pa.float64()),
        ("success", pa.bool_()),
        ("check_detail", pa.string()),
        ("web", pa.string()),
        ("web_state", pa.string()),
        ("origin", pa.string()),
        ("tokens_estimated", pa.bool_()),
        ("est_reasoning_tokens", pa.int64()),
        ("est_output_tokens", pa.int64()),
        ("raw_final_answer", pa.string()),
        ("tool_log_calls", pa.int64()),
        ("tool_log_ok", pa.int64()),
        ("import_meta", pa.string()),
        ("mastif_version", pa.string()),
        ("mastif_commit", pa.string()),
        ("mastif_dirty", pa.bool_()),
        ("python_version", pa.string()),
        ("model_server", pa.string()),
        ("model_server_version", pa.string()),
        ("langgraph_version", pa.string()),
        ("langchain_version", pa.string()),
        ("langchain_core_version", pa.string()),
        ("langchain_openai_version", pa.string()),
        ("langchain_mcp_adapters_version", pa.string()),
        ("crewai_version", pa.string()),
        ("semantic_kernel_version", pa.string()),
        ("llama_index_core_version", pa.string()),
        ("llama_index_llms_openai_like_version", pa.string()),
        ("llama_index_tools_mcp_version", pa.string()),
        ("smolagents_version", pa.string()),
        ("agent_framework_core_version", pa.string()),
        ("agent_framework_openai_version", pa.string()),
        ("pydantic_ai_slim_version", pa.string()),
        ("pydantic_graph_version", pa.string()),
        ("openai_agents_version", pa.string()),
        ("haystack_ai_version", pa.string()),
        ("mcp_haystack_version", pa.string()),
        ("mcp_version", pa.string()),
        ("a2a_sdk_version", pa.string()),
        ("openai_version", pa.string()),
        ("other_packages", pa.string()),
    ]
)


def runs_to_table(runs: list[RunTrace]) -> pa.Table:
    """Runs as an Arrow table with the fixed :data:`RUN_SCHEMA` (also when empty)."""
    rows = [r.to_row() for r in runs]
    return pa.Table.from_pylist(rows, schema=RUN_SCHEMA)


def conform_to_schema(table: pa.Table) -> pa.Table:
    """A runs table in :data:`RUN_SCHEMA`; columns added to the schema after the table was
    written (a shard of an earlier version) get :class:`RunTrace`'s defaults, so an
    interrupted run resumed by a newer mastif still gathers."""
    defaults = {f.name: f.default for f in fields(RunTrace) if f.default is not MISSING}
    for name in RUN_SCHEMA.names:
        if name not in table.column_names:
            if name not in defaults:
                raise ValueError(f"runs table lacks column {name!r}, which has no default")
            column = pa.array([defaults[name]] * table.num_rows, RUN_SCHEMA.field(name).type)
            table = table.append_column(name, column)
    return table.select(RUN_SCHEMA.names).cast(RUN_SCHEMA)


def gather_runs(paths: list[str]) -> pa.Table:
    """The shards of one stack's runs as one table; a run in two shards is an error."""
    import pyarrow.parquet as pq

    table = pa.concat_tables([conform_to_schema(pq.read_table(p)) for p in paths])
    ids = table.column("run_id").to_pylist()
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"run(s) {dupes[:5]} appear in more than one shard of {paths}")
    return table
