"""Google ADK: the workflow as ADK workflow agents; every node an ``LlmAgent``.

Orchestration. The linear workflow is a tree of ADK's workflow agents (:func:`build_workflow`,
once per run): a ``SequentialAgent`` (``mastif_workflow``) whose sub-agents are the nodes before
the loop, a ``LoopAgent`` (``mastif_loop``, ``max_iterations = max_steps``) holding the loop
nodes, and the nodes after the loop. ADK's ``Runner`` (with an ``InMemorySessionService``, one
session per run) runs the tree; mastif's ``drive_workflow`` is not used. A loop node whose
output matches its ``stop_when`` ends its visit with an event whose actions ``escalate``: the
``LoopAgent`` stops at that event (ADK's exit-loop signal, as its ``exit_loop`` tool sets it),
without a model call of its own, and the ``SequentialAgent`` goes on after the loop.

Each workflow node is a :class:`NodeAgent`, an ``LlmAgent`` (ADK's model-and-tools agent) whose
visit first hands the rendered node prompt to the session as a user turn (ADK's agents read
their conversation from the session's events; with ``include_contents='none'`` an agent's
request starts at the latest user turn, so each visit's request holds that prompt and the
visit's own tool turns) and then runs ADK's own LLM flow; its output is recorded and decides
the loop. Under ``a2a`` (:meth:`GoogleADKAdapter.orchestrate`) the same tree is built from
:class:`DispatchAgent` nodes, ADK ``BaseAgent`` subclasses whose visit is ``visit_node`` with
the A2A dispatch; a node agent serves its visits with :meth:`GoogleADKAdapter.run_node`: the
node's ``LlmAgent`` as the root of a ``Runner`` of its own, the prompt as the new message.

Model: ADK's native OpenAI Chat Completions model, ``google.adk.integrations.openai.OpenAILlm``
(ADK 2.x ships it; no LiteLLM), on our ``AsyncOpenAI`` client at ``ctx.llm_base_url(node)``
(the gateway token as ``api_key``, the client timeout, ``max_retries=0``, the job's shared
async httpx client), one per workflow node; ``temperature`` in the agent's
``GenerateContentConfig``, ``max_tokens`` on the model. ``OpenAILlm`` sends no ``seed`` (it reads
none from the config): the client adds the run's seed to each request (:func:`seeded_client`).

What ADK does by itself and keeps: its system prompt ('You are an agent. Your internal name is
"<node>".'), its tool declarations (``FunctionDeclaration`` with the protocol's JSON schema as
``parameters_json_schema``, sent as is), its argument parsing (``json.loads``; arguments that
are not JSON are logged and the tool is called with ``{}``), concurrent execution of a reply's
calls (``asyncio.gather``), tool results as ``tool`` messages holding the JSON of ADK's
function response (``{"result": ...}`` for a text result), its answer to an invented tool name
("Invoking `x()` failed as no tool with that name is available. ..."), and, under ``mcp``, a
``tools/list`` per model request (``McpToolset.get_tools``).

What the contract makes us change, with ADK's model and tool callbacks on each ``LlmAgent``
(:class:`TurnPolicy`): the node's ``tool_choice`` on the visit's first request and ``auto``
after (``before_model_callback`` sets the request's ``tool_config``); no tools once
``max_tool_rounds`` replies with tool calls were answered; tool calls in a reply to a request
without tools are dropped from the reply (``after_model_callback``); calls ADK refuses before a
tool runs (an unknown name) are recorded as failed (``on_tool_error_callback``) with ADK's own
error text, at their place in the model's order (``RunRecorder.issue``).

Tools: in-process, each a :class:`GatewayTool` (an ADK ``BaseTool``) whose ``run_async`` calls
``ctx.call_tool``. Under ``mcp``: ADK's own ``McpToolset`` with ``StreamableHTTPConnectionParams``
at ``ctx.mcp_url`` (its ``httpx_client_factory`` is the run's ``ctx.mcp_http``: timed, with the
MCP server's key); it declares ``clientInfo`` ``google-adk``; closed with the run.

Threads and async: ADK is asyncio-native; nothing runs in a thread. A cancelled run (timeout)
cancels the runner's invocation and its HTTP request; the runner is closed with the run.

No telemetry: ADK traces with OpenTelemetry's API; nothing here installs a tracer, meter or log
provider (ADK does only in its CLI / web server, ``maybe_set_otel_providers``), and the OTel SDK
is switched off for the process (``OTEL_SDK_DISABLED``) so that no exporter can start whatever
the environment asks. No Google Cloud client is built (no Gemini model, no Vertex services).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

# before ADK (and OpenTelemetry's SDK) is imported: no SDK provider, so no exporter, whatever
# OTEL_* variables the environment sets
os.environ["OTEL_SDK_DISABLED"] = "true"

from google.adk.agents import BaseAgent, LlmAgent  # noqa: E402
from google.adk.agents.callback_context import CallbackContext  # noqa: E402
from google.adk.agents.invocation_context import InvocationContext  # noqa: E402
from google.adk.events import Event, EventActions  # noqa: E402
from google.adk.integrations.openai import OpenAILlm  # noqa: E402
from google.adk.models import LlmRequest, LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.adk.tools import BaseTool, ToolContext  # noqa: E402
from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams  # noqa: E402
from google.genai import types  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.orchestration import tool_names_for, visit_node  # noqa: E402
from mastif.frameworks.plan import PlannedNode, render_prompt  # noqa: E402
from mastif.tools import ToolResult  # noqa: E402

with warnings.catch_warnings():
    # ADK 2.x marks its workflow agents deprecated in favour of its graph Workflow, which
    # "cannot yet be used as an LlmAgent sub-agent"; they are what its docs teach for a fixed
    # sequence with a bounded loop, and they run as before
    warnings.simplefilter("ignore", DeprecationWarning)
    from google.adk.agents import LoopAgent, SequentialAgent

#: the ADK app and user every run's session belongs to (in memory, one session per run)
APP = "mastif"
USER = "mastif"
#: the names of the workflow agents around the nodes
WORKFLOW = "mastif_workflow"
LOOP = "mastif_loop"

_TOOL_CHOICE = {
    "required": types.FunctionCallingConfigMode.ANY,
    "auto": types.FunctionCallingConfigMode.AUTO,
}

# --------------------------------------------------------------------------- a node visit


@dataclass
class Visit:
    """The node visit in progress (a run's visits are sequential)."""

    node: PlannedNode
    step: int
    #: replies with tool calls so far (each one a tool round answered)
    rounds: int = 0
    #: whether the latest request offered tools
    offered: bool = False
    #: the latest reply's in-process calls' places in the run's record (call id -> issue)
    places: dict[str, int] = field(default_factory=dict)


@dataclass
class TurnPolicy:
    """mastif's turn policy for one node's ``LlmAgent``, as ADK model and tool callbacks."""

    objects: RunObjects
    node: PlannedNode
    max_rounds: int

    def before_model(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        visit = self.objects.current
        config = llm_request.config
        offers = bool(config.tools) and visit is not None and visit.rounds < self.max_rounds
        if not offers:
            # the cap reached (or a node without tools): this request ends the visit in text
            config.tools = None
            config.tool_config = None
        else:
            assert visit is not None
            choice = self.node.spec.tool_choice if visit.rounds == 0 else "auto"
            config.tool_config = types.ToolConfig(
                function_calling_config=types.FunctionCallingConfig(mode=_TOOL_CHOICE[choice])
            )
        if visit is not None:
            visit.offered = offers
        return None  # the model is called

    def after_model(
        self, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        visit = self.objects.current
        parts = llm_response.content.parts if llm_response.content else None
        calls = [p.function_call for p in parts or () if p.function_call]
        if not calls or visit is None:
            return None
        if not visit.offered:
            # tool calls in a reply to a request without tools are not run
            kept = [p for p in parts or () if not p.function_call]
            content = types.Content(role="model", parts=kept or [types.Part(text="")])
            return llm_response.model_copy(update={"content": content})
        visit.rounds += 1
        if self.objects.mcp is None:
            # each call's place in the record, in the model's order (ADK runs them concurrently;
            # under mcp the server records them)
            recorder = self.objects.ctx.recorder
            visit.places = {c.id or "": recorder.issue() for c in calls}
        return None

    def on_tool_error(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        """ADK refused the call before any tool ran (a name it does not know): record it as
        failed with ADK's text; ADK then answers the model with its own error response."""
        ctx = self.objects.ctx
        offered = sorted(ctx.tool_names())
        if tool.name in offered:
            return None  # a tool's own failure: ADK's handling (re-raised), not a refusal
        visit = self.objects.current
        place = visit.places.pop(tool_context.function_call_id or "", None) if visit else None
        said = str(error).split("\n", 1)[0]
        message = f"unknown tool {tool.name!r}; offered: {offered} (ADK: {said})"
        node, step = (visit.node.name, visit.step) if visit else (ctx.node, ctx.step)
        result = ToolResult(False, "", message)
        ctx.recorder.tool_call(node, step, tool.name, args, result, place)
        return None  # ADK answers with its own tool-not-found response


class GatewayTool(BaseTool):
    """A protocol tool as an ADK tool: its JSON schema as the declaration, ``ctx.call_tool``."""

    def __init__(self, objects: RunObjects, spec: Any) -> None:
        super().__init__(name=spec.name, description=spec.description)
        self.objects = objects
        self.parameters = spec.parameters

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, description=self.description,
            parameters_json_schema=self.parameters,
        )  # fmt: skip

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        ctx, visit = self.objects.ctx, self.objects.current
        place = visit.places.pop(tool_context.function_call_id or "", None) if visit else None
        result = await ctx.call_tool(ctx.node, ctx.step, self.name, args, issued=place)
        # ADK's shapes for a tool's answer: a result, or an error the model reads
        return {"result": result.output} if result.ok else {"error": result.error}


def model_text(event: Event, author: str) -> str | None:
    """The text of a model reply ``author`` made (None: the event is no model reply)."""
    if event.author != author or event.partial or not event.content:
        return None
    if event.get_function_responses():
        return None
    parts = event.content.parts or []
    return "".join(p.text for p in parts if p.text and not p.thought)


class NodeAgent(LlmAgent):
    """A workflow node: ADK's ``LlmAgent``, whose visit in the workflow starts with the rendered
    node prompt handed to the session as a user turn, and ends with its output recorded (and,
    for a loop node whose ``stop_when`` matched, the loop's exit)."""

    _objects: Any = PrivateAttr(default=None)
    _node: Any = PrivateAttr(default=None)
    #: in the workflow (True) or the root of a node's own runner (run_node: the runner's new
    #: message is the prompt, the orchestrator records the output)
    _in_workflow: bool = PrivateAttr(default=True)

    async def _run_async_impl(self, ictx: InvocationContext):  # type: ignore[override]
        objects: RunObjects = self._objects
        node: PlannedNode = self._node
        ctx = objects.ctx
        if not self._in_workflow:
            async for event in super()._run_async_impl(ictx):
                yield event
            return
        step = objects.next_step(node)
        ctx.at(node.name, step)
        prompt = render_prompt(
            node,
            ctx.task,
            ctx.recorder.node_outputs,
            step,
            ctx.plan.max_steps,
            tool_names_for(ctx, node),
            prompt_format=ctx.plan.prompt_format,
            max_subtasks=ctx.plan.max_subtasks,
            tool_calls=ctx.recorder.tool_calls,
            page=await ctx.page_for(node),
        )  # fmt: skip (the same prompt as visit_node renders)
        yield Event(
            invocation_id=ictx.invocation_id, author="user", branch=ictx.branch,
            content=types.Content(role="user", parts=[types.Part(text=prompt)]),
        )  # fmt: skip
        objects.current = Visit(node, step)
        text = ""
        try:
            async for event in super()._run_async_impl(ictx):
                said = model_text(event, self.name)
                text = text if said is None else said
                yield event
        finally:
            objects.current = None
        ctx.recorder.node_output(node.name, step, node.spec.output_key, text)
        if node in ctx.plan.loop and node.stops_loop(text):
            yield exit_loop(ictx, self.name)


def exit_loop(ictx: InvocationContext, author: str) -> Event:
    """ADK's signal that ends a ``LoopAgent`` (what its ``exit_loop`` tool sets)."""
    return Event(
        invocation_id=ictx.invocation_id, author=author, branch=ictx.branch,
        actions=EventActions(escalate=True),
    )  # fmt: skip


class DispatchAgent(BaseAgent):
    """A workflow node under ``a2a``: its visit is ``visit_node`` with the A2A dispatch."""

    _objects: Any = PrivateAttr(default=None)
    _node: Any = PrivateAttr(default=None)
    _dispatch: Any = PrivateAttr(default=None)

    async def _run_async_impl(self, ictx: InvocationContext):  # type: ignore[override]
        objects: WorkflowSteps = self._objects
        node: PlannedNode = self._node
        text = await visit_node(objects.ctx, self._dispatch, node, objects.next_step(node))
        yield Event(
            invocation_id=ictx.invocation_id, author=self.name, branch=ictx.branch,
            content=types.Content(role="model", parts=[types.Part(text=text)]),
        )  # fmt: skip
        if node in objects.ctx.plan.loop and node.stops_loop(text):
            yield exit_loop(ictx, self.name)


# --------------------------------------------------------------------------- what a run builds


def seeded_client(ctx: RunContext, node: str, stack: contextlib.AsyncExitStack) -> AsyncOpenAI:
    """Our OpenAI client at the node's gateway URL; every chat request carries the run's seed
    (ADK's ``OpenAILlm`` forwards none) and no parameter set to None."""
    s = ctx.client_settings(node)
    client = AsyncOpenAI(
        base_url=s.base_url, api_key=s.api_key, http_client=s.http_async, **s.client_options()
    )
    if s.http_async is None:  # its own httpx client: closed with the run
        stack.push_async_callback(client.close)
    completions = client.chat.completions
    create = completions.create

    async def gateway_request(**kwargs: Any) -> Any:
        # OpenAILlm passes the parameters it does not set as None ("tools", "tool_choice",
        # "response_format"), which the OpenAI client would send as JSON null: left out, as the
        # client leaves out what it is not given (null is not a value llama.cpp accepts for all)
        given = {k: v for k, v in kwargs.items() if v is not None}
        return await create(seed=s.seed, **given)

    completions.create = gateway_request  # type: ignore[method-assign]
    return client


@dataclass
class WorkflowSteps:
    """The run and the visits each node has had (its next visit's step)."""

    ctx: RunContext
    visits: dict[str, int] = field(default_factory=dict)

    def next_step(self, node: PlannedNode) -> int:
        self.visits[node.name] = self.visits.get(node.name, 0) + 1
        return self.visits[node.name] if node in self.ctx.plan.loop else 1


@dataclass
class RunObjects(WorkflowSteps):
    """What a run builds once: the tools (or ADK's MCP toolset) and one ``LlmAgent`` per node."""

    agents: dict[str, NodeAgent] = field(default_factory=dict)
    mcp: McpToolset | None = None
    #: the visit in progress
    current: Visit | None = None
    #: run_node's runners, one per node (built on the node's first visit)
    runners: dict[str, tuple[Runner, str]] = field(default_factory=dict)

    @classmethod
    def open(
        cls, ctx: RunContext, stack: contextlib.AsyncExitStack, in_workflow: bool = True
    ) -> RunObjects:
        objects = cls(ctx)
        nodes = ctx.plan.nodes
        specs = ctx.tools.tool_specs()
        tools: list[Any] = []
        if specs and any(n.spec.use_tools for n in nodes):
            if ctx.mcp_url is not None:
                params = StreamableHTTPConnectionParams(url=ctx.mcp_url)
                if ctx.mcp_http is not None:
                    params.httpx_client_factory = ctx.mcp_http
                objects.mcp = McpToolset(connection_params=params)
                stack.push_async_callback(objects.mcp.close)
                tools = [objects.mcp]
            else:
                tools = [GatewayTool(objects, s) for s in specs]
        g = ctx.generation
        for node in nodes:
            use_tools = node.spec.use_tools and bool(tools)
            s = ctx.client_settings(node.name)
            policy = TurnPolicy(objects, node, g.max_tool_rounds if use_tools else 0)
            agent = NodeAgent(
                name=node.name,
                model=OpenAILlm(
                    model=s.model,
                    max_tokens=s.max_tokens,
                    client=seeded_client(ctx, node.name, stack),
                ),  # fmt: skip
                tools=list(tools) if use_tools else [],
                generate_content_config=types.GenerateContentConfig(temperature=s.temperature),
                # each visit's request: the node prompt and the visit's own tool turns (the
                # history is in the prompt, as for every framework)
                include_contents="none",
                # a node hands nothing on by itself: the workflow agents route
                disallow_transfer_to_parent=True,
                disallow_transfer_to_peers=True,
                before_model_callback=policy.before_model,
                after_model_callback=policy.after_model,
                on_tool_error_callback=policy.on_tool_error,
            )
            agent._objects, agent._node, agent._in_workflow = objects, node, in_workflow
            objects.agents[node.name] = agent
        return objects

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with an orchestrator's prompt: its ``LlmAgent`` as the root of a
        runner of its own (one session per node and run), the prompt as the new message."""
        if node.name not in self.runners:
            with self.ctx.setting_up():
                service = InMemorySessionService()
                runner = Runner(app_name=APP, agent=self.agents[node.name],
                                session_service=service)  # fmt: skip
                self.ctx.resources.push_async_callback(runner.close)
                session = await service.create_session(app_name=APP, user_id=USER)
            self.runners[node.name] = (runner, session.id)
        runner, session_id = self.runners[node.name]
        self.ctx.at(node.name, step)
        self.current = Visit(node, step)
        text = ""
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        try:
            events = runner.run_async(user_id=USER, session_id=session_id, new_message=message)
            async with contextlib.aclosing(events):
                async for event in events:
                    said = model_text(event, node.name)
                    text = text if said is None else said
        finally:
            self.current = None
        return text


# --------------------------------------------------------------------------- the workflow


def build_workflow(ctx: RunContext, agents: dict[str, BaseAgent]) -> SequentialAgent:
    """The linear workflow as ADK workflow agents: a ``SequentialAgent`` of the nodes before the
    loop, a ``LoopAgent`` of the loop nodes (``max_iterations = max_steps``; a loop node's
    escalation ends it), and the nodes after the loop."""
    plan = ctx.plan
    steps: list[BaseAgent] = [agents[n.name] for n in plan.before]
    if plan.loop:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # see the import
            steps.append(LoopAgent(name=LOOP, max_iterations=plan.max_steps,
                                   sub_agents=[agents[n.name] for n in plan.loop]))  # fmt: skip
    steps += [agents[n.name] for n in plan.after]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return SequentialAgent(name=WORKFLOW, sub_agents=steps)


async def run_workflow(ctx: RunContext, root: BaseAgent) -> str:
    """Run the workflow tree with ADK's ``Runner`` in a new in-memory session; the task is the
    session's first user message (no node reads it: each visit starts at its own prompt)."""
    with ctx.setting_up():
        service = InMemorySessionService()
        runner = Runner(app_name=APP, agent=root, session_service=service)
        session = await service.create_session(app_name=APP, user_id=USER)
    message = types.Content(role="user", parts=[types.Part(text=ctx.task.confirmed_task)])
    try:
        events = runner.run_async(user_id=USER, session_id=session.id, new_message=message)
        async with contextlib.aclosing(events):
            async for _ in events:
                pass
    finally:
        await runner.close()
    outputs = ctx.recorder.node_outputs
    return outputs[-1].text if outputs else ""


# --------------------------------------------------------------------------- the adapter


class GoogleADKAdapter:
    name = "google_adk"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("google-adk", "google-genai", "openai")
    mcp_packages = ("mcp",)
    #: none: the protected names implemented here are ADK's documented extension points, a
    #: custom agent's ``_run_async_impl`` (its custom-agent guide; NodeAgent extends
    #: LlmAgent's) and a tool's ``_get_declaration`` (as ADK's own tools declare themselves);
    #: were either renamed, every visit would fail at once, not silently change
    private_members = ()

    async def run(self, ctx: RunContext) -> str:
        """The workflow agents, each node visit a run of the node's ``LlmAgent``."""
        async with contextlib.AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = RunObjects.open(ctx, stack)
                root = build_workflow(ctx, dict(objects.agents))
            return await run_workflow(ctx, root)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The same workflow agents, each node visit handed to ``dispatch`` (under ``a2a`` an
        A2A request to the node's agent)."""
        with ctx.setting_up():
            steps = WorkflowSteps(ctx)
            agents: dict[str, BaseAgent] = {}
            for node in ctx.plan.nodes:
                agent = DispatchAgent(name=node.name)
                agent._objects, agent._node, agent._dispatch = steps, node, dispatch
                agents[node.name] = agent
            root = build_workflow(ctx, agents)
        return await run_workflow(ctx, root)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        agents: built on the run's first visit, kept in ``ctx.built``, what they hold open
        closed with ``ctx.resources``."""
        objects = ctx.built.get(self.name)
        if objects is None:
            with ctx.setting_up():
                objects = RunObjects.open(ctx, ctx.resources, in_workflow=False)
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.visit(node, step, prompt)
