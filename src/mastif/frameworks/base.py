"""The one signature every framework adapter has.

An adapter receives a :class:`RunContext` and runs the workflow on one task with its own
orchestration, calling the model only through ``ctx.llm_base_url(node)`` (our gateway) and
tools only through ``ctx.tools`` (the protocol's transport). It reports what each node said
and each tool call through ``ctx.recorder`` and returns the final answer. Tokens and
latency are not its business: the gateway records them.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from mastif.core.config import GenerationSpec
from mastif.core.trace import NodeOutput, ToolCall
from mastif.frameworks.plan import PlannedNode, WorkflowPlan
from mastif.protocols import ToolTransport
from mastif.tasks import Task
from mastif.tools import ToolResult


@dataclass
class RunRecorder:
    """Collects node outputs and tool calls of one run, in order.

    Tool calls are kept in the order they were made, not the order they finished in:
    frameworks run a turn's calls concurrently (LangGraph's ``ToolNode`` gathers them), so
    which finishes first varies with the machine's load, and the order reaches later
    prompts (``workflow.format_history``), so a rerun's prompt would differ from the
    first's and miss the response cache. A call takes its place when it starts
    (:meth:`issue`) and is recorded there when it ends.
    """

    node_outputs: list[NodeOutput] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: ``time.perf_counter()`` when the run started: tool calls' ``started_s`` count from it
    origin: float = field(default_factory=time.perf_counter)
    #: (start, end) on the run's timeline (seconds since ``origin``) of the spans in which a
    #: framework built its objects for the run (:meth:`RunContext.setting_up`): set-up time,
    #: reported apart from the agents' work (``wall_setup_s``, :mod:`mastif.core.timing`)
    setup_spans: list[tuple[float, float]] = field(default_factory=list)
    #: the issue number of each entry of ``tool_calls`` (ascending)
    _issued: list[int] = field(default_factory=list, repr=False)
    _next: int = field(default=0, repr=False)

    def node_output(self, node: str, step: int, output_key: str, text: str) -> NodeOutput:
        out = NodeOutput(node, step, output_key, text)
        self.node_outputs.append(out)
        return out

    @contextlib.contextmanager
    def setting_up(self) -> Iterator[None]:
        """Time what runs inside as set-up (a span of :attr:`setup_spans`)."""
        start = time.perf_counter() - self.origin
        try:
            yield
        finally:
            self.setup_spans.append((start, time.perf_counter() - self.origin))

    def issue(self) -> int:
        """A place for a tool call that starts now, for :meth:`tool_call` when it ends."""
        self._next += 1
        return self._next

    def tool_call(
        self,
        node: str,
        step: int,
        name: str,
        arguments: Any,
        result: ToolResult,
        issued: int | None = None,
    ) -> ToolCall:
        call = ToolCall(
            node=node,
            step=step,
            name=name,
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            ok=result.ok,
            output=result.output,
            error=result.error,
            duration_s=result.duration_s,
            # recorded as it ends: it began its own duration ago
            started_s=time.perf_counter() - result.duration_s - self.origin,
        )
        number = self.issue() if issued is None else issued
        at = bisect.bisect(self._issued, number)
        self._issued.insert(at, number)
        self.tool_calls.insert(at, call)
        return call


@dataclass
class GatewayClients:
    """HTTP clients to the gateway, shared by every run of a stack job.

    A framework's model client builds its own httpx clients by default, and each builds an
    SSL context (loading the CA bundle: ~18 ms) even for our plain-HTTP loopback gateway;
    per node visit that was most of the job's CPU at high concurrency (bench/concurrency.py).
    The async client belongs to the job's event loop. LangGraph/LangChain and Semantic
    Kernel use them (SK without closing them); CrewAI keeps clients of its own, because its
    adapter closes them to stop a timed-out crew.
    """

    sync: httpx.Client
    async_: httpx.AsyncClient

    @classmethod
    def open(cls, connections: int) -> GatewayClients:
        # keep-alive for every connection: httpcore 1.0 closes idle connections as soon as
        # the pool holds more connections than max_keepalive (all of them, idle or not)
        size = max(16, 2 * connections)
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        # no certificate store to load: the gateway is plain HTTP on loopback
        return cls(httpx.Client(limits=limits, verify=False),
                   httpx.AsyncClient(limits=limits, verify=False))  # fmt: skip

    async def aclose(self) -> None:
        self.sync.close()
        await self.async_.aclose()


@dataclass(frozen=True)
class ModelClientSettings:
    """What every framework's model client is built with for one node of a run (one
    definition; each adapter spells it in its framework's keywords).

    The client talks to our gateway, never to the endpoint: the gateway holds the real key,
    bounds and retries each call and records it, so the client retries nothing (a second
    layer would hide calls) and waits a margin longer than the gateway's bound.
    """

    model: str
    #: ``ctx.llm_base_url(node)``: the gateway attributes every request to its run and node
    base_url: str
    #: the gateway's token (the gateway holds the real key, if any); kept out of the repr
    api_key: str = field(repr=False)
    temperature: float
    max_tokens: int
    seed: int
    #: the gateway bounds the call (``request_timeout_s``) and answers first
    timeout_s: float
    #: the job's shared HTTP clients (None: the model client builds its own)
    http_sync: httpx.Client | None = None
    http_async: httpx.AsyncClient | None = None
    #: the gateway retries; a second layer would hide calls
    max_retries: int = 0

    def sampling(self) -> dict[str, Any]:
        """``temperature``, ``max_tokens`` and ``seed``, under those names."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}

    def client_options(self) -> dict[str, Any]:
        """The OpenAI client's own ``timeout`` and ``max_retries``, under those names."""
        return {"timeout": self.timeout_s, "max_retries": self.max_retries}


@dataclass
class RunContext:
    run_id: str
    task: Task
    plan: WorkflowPlan
    generation: GenerationSpec
    tools: ToolTransport
    recorder: RunRecorder
    gateway_url: str  # http://127.0.0.1:PORT/r/{run_id}
    model_name: str
    #: the gateway's token (``Gateway.token``): every model client's ``api_key``, without
    #: which the gateway serves nothing; kept out of the repr, so out of logs
    gateway_token: str = field(repr=False)
    #: under ``mcp``: the MCP server's URL for this run; frameworks connect their MCP clients
    mcp_url: str | None = None
    #: under ``mcp``: the httpx client factory every MCP client of the run must be built with
    #: (the MCP SDK's ``httpx_client_factory``): it times the exchanges (protocol seconds)
    #: and sends the MCP server's key, without which the server answers 401
    #: under ``mcp``: the factory of the MCP clients' HTTP clients (an AsyncClient of the MCP
    #: SDK's HTTP library: httpx, httpx2 under SDK 2; the SDK's ``httpx_client_factory``)
    mcp_http: Callable[..., Any] | None = None
    started: float = field(default_factory=time.perf_counter)
    #: the node visit in progress (sequential within a run); tool calls served elsewhere
    #: (the MCP server) are attributed to it
    node: str = ""
    step: int = 0
    #: the run's current browser page as a listing (the web environment's view), for
    #: prompts with a ``{page}`` placeholder
    page_view: Callable[[], Awaitable[str]] | None = None
    #: the job's shared HTTP clients for model calls (None: each client builds its own)
    http: GatewayClients | None = None
    #: objects a framework builds once per run (its agents, models, tools), reused by every
    #: node visit of the run (``run_node`` under A2A) and dropped with the run's context
    built: dict[str, Any] = field(default_factory=dict, repr=False)
    #: what those objects hold open (clients, MCP sessions): entered by the framework,
    #: closed by the runner when the run ends, whatever way it ends (:meth:`close`)
    resources: contextlib.AsyncExitStack = field(
        default_factory=contextlib.AsyncExitStack, repr=False
    )
    _delegated: set[asyncio.Future[str]] = field(default_factory=set, repr=False)

    async def close(self) -> None:
        """Close what the run's frameworks opened for it (:attr:`resources`) and drop what
        they built. The runner calls this once, after the run's work ended or was cancelled."""
        try:
            await self.resources.aclose()
        finally:
            self.built.clear()

    def setting_up(self) -> contextlib.AbstractContextManager[None]:
        """``with ctx.setting_up(): ...`` around building the run's framework objects (tools,
        agents, models, graphs, kernels, flows): that time is set-up, not the agents' work."""
        return self.recorder.setting_up()

    def llm_base_url(self, node: str) -> str:
        return f"{self.gateway_url}/{node}/v1"

    def client_settings(self, node: str) -> ModelClientSettings:
        """What ``node``'s model client is built with: the gateway's URL for the node, its
        token, the run's generation settings, the client's timeout, no retries."""
        g = self.generation
        return ModelClientSettings(
            model=self.model_name,
            base_url=self.llm_base_url(node),
            api_key=self.gateway_token,
            temperature=g.temperature,
            max_tokens=g.max_tokens,
            seed=g.seed,
            timeout_s=g.client_timeout_s,
            http_sync=self.http.sync if self.http else None,
            http_async=self.http.async_ if self.http else None,
        )

    async def delegated(self, work: Awaitable[str]) -> str:
        """Run work an agent does for this run (A2A), cancellable by :meth:`cancel_delegated`."""
        task = asyncio.ensure_future(work)
        self._delegated.add(task)
        try:
            return await task
        finally:
            self._delegated.discard(task)

    async def cancel_delegated(self) -> None:
        """Stop agents' work still going on for this run (it ended, e.g. on timeout)."""
        pending = [t for t in self._delegated if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def page_for(self, node: PlannedNode) -> str | None:
        """The page listing for ``node``'s prompt, or ``None`` when its template has no
        ``{page}`` (so runs whose prompts never show the page never open one).

        It is the environment's observation, like the page a Mind2Web agent is shown, not
        a tool call of the agent's: it is not recorded as one.
        """
        if self.page_view is None or "{page}" not in node.template:
            return None
        return await self.page_view()

    def at(self, node: str, step: int) -> None:
        """Mark the node visit now in progress (adapters call this as a visit starts)."""
        self.node, self.step = node, step

    def record_served_tool_call(self, name: str, arguments: Any, result: ToolResult) -> None:
        """A call the protocol's tool server ran for this run (server-side record)."""
        self.recorder.tool_call(self.node, self.step, name, arguments, result)

    async def call_tool(
        self, node: str, step: int, name: str, arguments: Any, issued: int | None = None
    ) -> ToolResult:
        """Call a tool through the protocol and record the call, whatever its outcome.

        Adapters route every tool call the model makes through here, with the arguments
        as the model produced them. Arguments that are not a JSON object (text the
        framework could not parse) are a failed call, recorded as such. ``issued``: the
        place the adapter reserved for the call (``recorder.issue()``) when the model's
        reply arrived, where the framework starts a reply's calls in an order of its own.
        """
        if issued is None:
            issued = self.recorder.issue()  # its place: calls of a turn may finish in any order
        if isinstance(arguments, dict):
            result = await self.tools.call(name, arguments, self.run_id)
        else:
            result = ToolResult(False, "", f"arguments are not a JSON object: {arguments!r}"[:500])
        self.recorder.tool_call(node, step, name, arguments, result, issued)
        return result

    def record_failed_tool_call(
        self, node: str, step: int, name: str, arguments: Any, error: str
    ) -> None:
        """Record a call the framework refused before it reached a tool (e.g. unknown name)."""
        self.recorder.tool_call(node, step, name, arguments, ToolResult(False, "", error))

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools.tool_specs()]


#: one node visit handed to an agent: ``dispatch(node, step, prompt) -> text`` (in-process
#: the framework's ``run_node``; under ``a2a`` an A2A request to the node's agent)
Dispatch = Callable[[PlannedNode, int, str], Awaitable[str]]


class FrameworkAdapter(Protocol):
    name: str

    async def run(self, ctx: RunContext) -> str:
        """Run the workflow for ``ctx.task`` with the framework's own orchestration; return
        the final answer."""
        ...

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with a prompt an orchestrator rendered; return its text.

        The orchestrator records the node output; tool calls are recorded as in ``run``.
        """
        ...

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """Run the linear workflow with the framework's own construct (the same one ``run``
        uses), every node visit being ``mastif.frameworks.orchestration.visit_node(ctx, dispatch, node,
        step)``: the framework orchestrates, the agents behind ``dispatch`` do the nodes'
        work (under ``a2a``: A2A requests to the node agents). Return the final answer.

        Optional for a plugin: without it, mastif's own orchestrator
        (``mastif.frameworks.orchestration.run_linear``) chains the visits under ``a2a``.
        """
        ...
