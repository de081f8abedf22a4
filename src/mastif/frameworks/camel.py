"""CAMEL: every workflow node is a ``ChatAgent``; the adapter chains them in plain code.

Orchestration. CAMEL's multi-agent constructs are ``Workforce`` and ``RolePlaying``. A
``Workforce`` has a coordinator agent that assigns every task to a worker with a model call
(``_find_assignee``, also in its PIPELINE mode, whose task graph is fixed when it is built and
has no conditional edge, so no loop that ends on ``stop_when``), and its workers wrap each task
in prompts of their own; ``RolePlaying`` alternates two agents (an AI user and an AI
assistant with CAMEL's role-playing system prompts) until a turn limit or a termination
word. Neither expresses a fixed node sequence with a bounded loop without extra model calls
and prompts of their own, so the adapter chains the nodes in plain code
(:meth:`CamelAdapter.orchestrate`: :func:`mastif.frameworks.orchestration.run_linear`), as
smolagents' does, and each node visit is one ``ChatAgent.astep`` -- CAMEL's own step loop
(``_astep_non_streaming_task``: model request, the reply's tool calls, the next request, until
a reply without tool calls). One agent per workflow node, built once per run with its model
at the node's gateway URL; a visit is ``agent.reset()`` then ``agent.astep(prompt)`` (each
visit a fresh conversation: the prompt carries the history). Orchestrators (A2A, the
hierarchical shape) call :meth:`CamelAdapter.run_node` once per visit on the run's agents
(``ctx.built``, closed with ``ctx.resources``).

Model: CAMEL's ``OpenAICompatibleModel`` (what ``ModelFactory.create`` builds for
``ModelPlatformType.OPENAI_COMPATIBLE_MODEL``, made directly: the factory would swap in its
``StubModel`` for a model named "stub"), ``url=ctx.llm_base_url(node)``, ``api_key=ctx.gateway_token``,
temperature, max_tokens and seed as its ``model_config_dict``, on our own OpenAI clients
(``client``/``async_client``, CAMEL's way to supply them: the client timeout, ``max_retries=0``,
the job's shared httpx clients); the agents' rate-limit retry is off (``retry_attempts=1``).
The token counter is :class:`EstimatingTokenCounter` (see there): CAMEL's default one loads
tiktoken's encoding, which tiktoken downloads from the internet on first use.

What CAMEL does by itself and keeps: no system prompt (none is configured, and ChatAgent has
no default one); the node prompt is the user turn; the tool schemas as given (in-process the
protocol's JSON schemas as they are; under ``mcp`` what CAMEL's MCP toolkit makes of the
server's: ``{"type": "object", "properties", "required", "additionalProperties": false}``
made strict by ``MCPToolkit._ensure_strict_tool_schema``); the calls of one reply run one
after another, in the model's order (``_aexecute_tool``), their results written back as
``tool`` messages; its refusal and error texts as tool results ("Tool execution failed: Tool
'x' not found in registered tools", "Tool execution failed: Error executing async tool 'x':
..."); and its argument parsing: ``json.loads`` on each call's arguments
(``_handle_batch_response``), so arguments that are not JSON make the step raise and the run
fail (recorded as a failed call first). ChatAgent's automatic context summarisation stays at
its default (50% of the model's token limit; CAMEL gives a model it does not know a limit of
999,999,999 tokens, so it does not trigger on our runs).

What the contract makes us change (:class:`NodeAgent`): the node's ``tool_choice`` on the
visit's first request and ``auto`` after (CAMEL sends whatever ``tool_choice`` its model
config holds: set per request); no tools once ``max_tool_rounds`` replies with tool calls
were answered, so that request ends the visit in text (``max_iteration`` is
``max_tool_rounds + 1`` as a backstop); tool calls in a reply to a request without tools are
not run; calls CAMEL answers itself before any tool runs (an unknown tool, arguments its MCP
tool refuses as missing, arguments that are not JSON) are recorded as failed calls with
CAMEL's text.

Tools: in-process, CAMEL ``FunctionTool`` s with the protocol's schema as their
``openai_tool_schema``, whose async function calls ``ctx.call_tool`` (a failed tool raises,
CAMEL's way to report a tool's error to the model). Under ``mcp``: CAMEL's ``MCPToolkit``
with one ``MCPClient`` (``type="streamable_http"``) at ``ctx.mcp_url``, connected once per
run; its HTTP client comes from the run's ``ctx.mcp_http`` factory (:class:`GatewayMCPClient`,
through :mod:`mastif.frameworks.mcp_transport`). Its ``initialize`` declares the MCP SDK's
default ``clientInfo`` (``mcp``; CAMEL gives none). The MCP server records the calls.

Async: CAMEL's ``astep`` is asyncio-native; nothing runs in a thread. A cancelled run
(timeout) cancels the visit's ``astep`` and its HTTP request; the MCP session is closed with
the run.

No telemetry: CAMEL sends none by itself. Its tracing integrations are opt-in: AgentOps
(``AGENTOPS_API_KEY`` and the ``agentops`` package), Langfuse (``LANGFUSE_ENABLED`` and
``langfuse``), TraceRoot (``TRACEROOT_ENABLED`` and ``traceroot``); none of the packages is in
the environment, and the switches CAMEL reads are set off before CAMEL is imported. CAMEL's
request logs to files (``CAMEL_MODEL_LOG_ENABLED``) stay off, and CAMEL does not configure
the process's logging (``CAMEL_LOGGING_DISABLED``: it would add a stdout handler).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
from dataclasses import dataclass, field
from typing import Any

# read by CAMEL when its modules are imported: set before the first import below
_SWITCHES = {
    "LANGFUSE_ENABLED": "false",
    "TRACEROOT_ENABLED": "false",
    "CAMEL_MODEL_LOG_ENABLED": "false",
    # CAMEL would call logging.basicConfig(stream=sys.stdout) on a process without handlers
    "CAMEL_LOGGING_DISABLED": "true",
}
for _var, _value in _SWITCHES.items():
    os.environ[_var] = _value

from camel.agents import ChatAgent  # noqa: E402
from camel.models import OpenAICompatibleModel  # noqa: E402
from camel.toolkits import FunctionTool, MCPToolkit  # noqa: E402
from camel.types import UnifiedModelType  # noqa: E402
from camel.utils import BaseTokenCounter  # noqa: E402
from camel.utils.mcp_client import MCPClient, TransportType  # noqa: E402
from openai import AsyncOpenAI, OpenAI  # noqa: E402

from mastif.core.provenance import PrivateMember, private_members_of  # noqa: E402
from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.mcp_transport import streamable_http  # noqa: E402
from mastif.frameworks.orchestration import run_linear  # noqa: E402
from mastif.frameworks.plan import PlannedNode  # noqa: E402

# --------------------------------------------------------------------------- model


class EstimatingTokenCounter(BaseTokenCounter):
    """A CAMEL token counter that needs no tokenizer download.

    ChatAgent counts the context's tokens only to decide on its automatic summarisation
    (against the model's token limit) and to truncate huge tool results; nothing it counts
    goes on the wire. CAMEL's default counter (tiktoken's ``o200k_base``) would download the
    encoding from the internet on first use. This one counts as CAMEL's own context creator
    estimates new messages (``ScoreBasedContextCreator._estimate_message_tokens``: ~2
    characters a token, 4 per message), and ``encode`` refuses, so CAMEL's own fallback of
    ~3 characters a token applies where it would encode a tool result.
    """

    def count_tokens_from_messages(self, messages: list[Any]) -> int:
        total = 0
        for message in messages:
            total += 4 + len(str(message.get("content") or "")) // 2
            if message.get("tool_calls"):
                total += len(str(message["tool_calls"])) // 2
        return total

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError("no tokenizer: CAMEL falls back to its character estimate")

    def decode(self, token_ids: list[int]) -> str:
        raise NotImplementedError("no tokenizer")


def gateway_model(ctx: RunContext, node: str, stack: contextlib.AsyncExitStack) -> Any:
    """CAMEL's OpenAI-compatible model at the node's gateway URL."""
    s = ctx.client_settings(node)
    options = {"base_url": s.base_url, "api_key": s.api_key, **s.client_options()}
    # CAMEL builds a sync client too (unused by astep): on the job's clients where there are
    sync = OpenAI(http_client=s.http_sync, **options)
    client = AsyncOpenAI(http_client=s.http_async, **options)
    if s.http_async is None:  # their own httpx clients: closed with the run
        stack.push_async_callback(client.close)
        stack.callback(sync.close)
    # the class ModelFactory picks for OPENAI_COMPATIBLE_MODEL, made directly: the factory
    # swaps in its StubModel for a model named "stub" (ModelType.STUB), whatever the platform
    return OpenAICompatibleModel(
        model_type=UnifiedModelType(s.model),
        model_config_dict=s.sampling(),
        token_counter=EstimatingTokenCounter(),
        api_key=s.api_key,
        url=s.base_url,
        timeout=s.timeout_s,
        max_retries=s.max_retries,
        client=sync,
        async_client=client,
    )


# --------------------------------------------------------------------------- a node visit


class NodeAgent(ChatAgent):
    """CAMEL's ChatAgent for one workflow node, with the contract's turn policy and the
    record of the calls CAMEL answers itself."""

    def __init__(self, objects: RunObjects, node: PlannedNode, model: Any, tools: list[Any]):
        self.objects, self.node = objects, node
        self.max_rounds = objects.ctx.generation.max_tool_rounds if tools else 0
        self.gateway_model = model
        #: whether the request in flight offers tools
        self.offered = False
        super().__init__(
            model=model,
            tools=tools or None,
            max_iteration=self.max_rounds + 1,  # a backstop: the cap below ends the visit
            retry_attempts=1,  # its rate-limit retry: the gateway retries
        )

    async def _aget_model_response(
        self,
        openai_messages: list[Any],
        current_iteration: int = 0,
        response_format: Any = None,
        tool_schemas: list[dict[str, Any]] | None = None,
        prev_num_openai_messages: int = 0,
    ) -> Any:
        # a reply without tool calls ends CAMEL's step: every request before this one was
        # answered with tool calls, so current_iteration is the visit's tool rounds so far
        rounds = current_iteration
        offered = list(tool_schemas or []) if rounds < self.max_rounds else []
        config = self.gateway_model.model_config_dict
        if offered:
            config["tool_choice"] = self.node.spec.tool_choice if rounds == 0 else "auto"
        else:
            config.pop("tool_choice", None)  # no tool_choice without tools
        self.offered = bool(offered)
        return await super()._aget_model_response(
            openai_messages, current_iteration, response_format, offered,
            prev_num_openai_messages,
        )  # fmt: skip

    def _handle_batch_response(self, response: Any) -> Any:
        message = response.choices[0].message if response.choices else None
        if message is not None and message.tool_calls and not self.offered:
            message.tool_calls = None  # calls in a reply to a request without tools: not run
        try:
            return super()._handle_batch_response(response)
        except json.JSONDecodeError as exc:
            # CAMEL parses every call's arguments with json.loads and its step fails on the
            # first that is not JSON: that call is recorded as refused, and the step fails
            assert message is not None and message.tool_calls
            for call in message.tool_calls:
                try:
                    json.loads(call.function.arguments)
                except json.JSONDecodeError:
                    ctx = self.objects.ctx
                    ctx.record_failed_tool_call(
                        ctx.node, ctx.step, call.function.name, call.function.arguments,
                        f"arguments are not valid JSON; CAMEL's step failed: {exc}",
                    )  # fmt: skip
                    break
            raise

    async def _aexecute_tool(self, tool_call_request: Any) -> Any:
        objects = self.objects
        objects.reached = False
        record = await super()._aexecute_tool(tool_call_request)
        if not objects.reached:  # CAMEL answered the call itself: no tool ran
            ctx = objects.ctx
            name = tool_call_request.tool_name
            offered = sorted(self.tool_dict)
            said = str(record.result)
            error = (
                f"unknown tool {name!r}; offered: {offered} (CAMEL: {said})"
                if name not in self.tool_dict
                else f"arguments refused by CAMEL: {said}"
            )
            ctx.record_failed_tool_call(ctx.node, ctx.step, name, tool_call_request.args, error)
        return record


class ToolFailed(Exception):
    """A tool's error, raised so that CAMEL reports it to the model its own way."""


def gateway_tool(objects: RunObjects, spec: Any) -> FunctionTool:
    """A protocol tool as a CAMEL FunctionTool (its JSON schema as is) calling ``ctx.call_tool``."""
    ctx = objects.ctx

    async def call(**arguments: Any) -> str:
        objects.reached = True
        result = await ctx.call_tool(ctx.node, ctx.step, spec.name, arguments)
        if not result.ok:
            raise ToolFailed(result.error or f"{spec.name} failed")
        return result.output

    call.__name__ = spec.name
    schema = {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }
    return FunctionTool(call, openai_tool_schema=schema)


class GatewayMCPClient(MCPClient):
    """CAMEL's MCP client, its streamable-HTTP transport on the run's HTTP client factory
    (``ctx.mcp_http``: it times the exchanges and sends the MCP server's key). CAMEL opens
    the transport with the MCP SDK's deprecated ``streamablehttp_client`` and the SDK's
    default factory; this is the same client through :func:`mastif.frameworks.mcp_transport.
    streamable_http`. Session, ``initialize`` and tool conversion are CAMEL's."""

    def __init__(self, url: str, http_factory: Any) -> None:
        super().__init__({"url": url, "type": "streamable_http"})
        self.http_factory = http_factory

    @contextlib.asynccontextmanager
    async def _create_transport(self, override_transport: Any = None) -> Any:
        transport = override_transport or self.config.transport_type
        if transport != TransportType.STREAMABLE_HTTP or self.http_factory is None:
            async with super()._create_transport(override_transport) as streams:
                yield streams
            return
        assert self.config.url is not None
        async with streamable_http(
            self.config.url,
            headers=self.config.headers,
            terminate_on_close=self.config.terminate_on_close,
            httpx_client_factory=self.http_factory,
        ) as streams:
            yield streams


def placed_mcp_tool(objects: RunObjects, tool: FunctionTool) -> FunctionTool:
    """An MCP tool of CAMEL's toolkit that marks when its call goes to the server (CAMEL's
    MCP tool answers a call missing a required argument itself, without sending it)."""
    send = tool.func.async_call  # type: ignore[attr-defined]
    # CAMEL gives the tool's function the server's parameters, the required ones without a
    # default (generate_function_from_mcp_tool)
    required = {
        name
        for name, p in inspect.signature(tool.func).parameters.items()
        if p.default is inspect.Parameter.empty
    }

    async def placed(**kwargs: Any) -> Any:
        if required <= set(kwargs):
            objects.reached = True
        return await send(**kwargs)

    tool.func.async_call = placed  # type: ignore[attr-defined]
    return tool


# --------------------------------------------------------------------------- the run's objects


@dataclass
class RunObjects:
    """What a run builds once: the tools (or the MCP toolkit) and one agent per node."""

    ctx: RunContext
    agents: dict[str, NodeAgent] = field(default_factory=dict)
    mcp: MCPToolkit | None = None
    #: whether the tool call in progress reached a tool (calls run one at a time)
    reached: bool = False

    @classmethod
    async def open(cls, ctx: RunContext, stack: contextlib.AsyncExitStack) -> RunObjects:
        """Build the run's agents; what they hold open is closed with ``stack``."""
        objects = cls(ctx)
        nodes = ctx.plan.nodes
        specs = ctx.tools.tool_specs()
        tools: list[FunctionTool] = []
        if specs and any(n.spec.use_tools for n in nodes):
            tools = await objects.mcp_tools(stack) if ctx.mcp_url else [
                gateway_tool(objects, s) for s in specs
            ]  # fmt: skip
        for node in nodes:
            model = gateway_model(ctx, node.name, stack)
            objects.agents[node.name] = NodeAgent(
                objects, node, model, tools if node.spec.use_tools else []
            )
        return objects

    async def mcp_tools(self, stack: contextlib.AsyncExitStack) -> list[FunctionTool]:
        """The MCP server's tools through CAMEL's MCP toolkit, one session for the run."""
        ctx = self.ctx
        assert ctx.mcp_url is not None
        client = GatewayMCPClient(ctx.mcp_url, ctx.mcp_http)
        # one try: a failed connection fails the run (the toolkit would try again after 3 s)
        toolkit = MCPToolkit(clients=[client], skip_failed=False, max_retries=1)
        await toolkit.connect()
        stack.push_async_callback(toolkit.disconnect)
        self.mcp = toolkit
        return [placed_mcp_tool(self, t) for t in toolkit.get_tools()]

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one ``astep`` of its agent, in a fresh conversation."""
        self.ctx.at(node.name, step)
        agent = self.agents[node.name]
        agent.reset()
        response = await agent.astep(prompt)
        return response.msgs[0].content if response.msgs else ""


_camel = private_members_of("camel-ai")

#: what this adapter overrides or reads of CAMEL that CAMEL does not promise
PRIVATE_MEMBERS: tuple[PrivateMember, ...] = (
    _camel(ChatAgent, "_aget_model_response",
           "overrides it: the request's tools and tool_choice (the turn policy)"),
    _camel(ChatAgent, "_handle_batch_response",
           "overrides it: drops unasked-for calls, records arguments that are not JSON"),
    _camel(ChatAgent, "_aexecute_tool", "overrides it: records the calls CAMEL refuses"),
    _camel(MCPClient, "_create_transport",
           "overrides it: the streamable-HTTP transport on the run's HTTP client factory"),
)  # fmt: skip


# --------------------------------------------------------------------------- the adapter


class CamelAdapter:
    name = "camel"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("camel-ai", "openai")
    mcp_packages = ("mcp",)
    private_members = PRIVATE_MEMBERS

    async def run(self, ctx: RunContext) -> str:
        """The node sequence, each visit one ``astep`` of the node's agent."""
        async with contextlib.AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, stack)
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The node sequence, each visit handed to ``dispatch`` (in :meth:`run` the node's
        agent; under ``a2a`` an A2A request to the node's agent). CAMEL has no construct for
        a fixed sequence with a bounded loop (see the module docstring): mastif's one
        plain-code chain (``run_linear``: the nodes before the loop once, the loop nodes in
        order for up to max_steps rounds, stop_when ending it at once, then the rest)."""
        return await run_linear(ctx, dispatch)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        agents: built on the run's first visit, kept in ``ctx.built``, what they hold open
        closed with ``ctx.resources``."""
        objects = ctx.built.get(self.name)
        if objects is None:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, ctx.resources)
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.visit(node, step, prompt)
