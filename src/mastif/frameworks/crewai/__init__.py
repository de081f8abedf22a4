"""CrewAI: the workflow is a CrewAI ``Flow``; each node visit is the node's agent on a crew.

Mapping. The linear workflow runs as a ``crewai.flow.flow.Flow`` (:func:`workflow_flow`,
one class per node layout, one instance per run, started with ``kickoff_async`` in the
job's event loop). Each workflow node is a Flow method: the nodes before the loop are
chained with ``@start`` / ``@listen``; a ``@router`` (``loop_router``) listens to the last
of them and to every loop node and sends the flow on to the next loop node, round after
round, until a node's ``stop_when`` matched or ``max_steps`` rounds are done; the nodes
after the loop ``@listen`` to its exit label. The flow's state holds the round, the node
that just finished and the stop flag. A visit (``navigate``; ``observe`` and ``interact``
once per round; ``report``) renders the node prompt with
:func:`mastif.frameworks.plan.render_prompt` and runs the node's ``Agent`` on a ``Task`` whose
description is that prompt, in a one-task ``Crew(process=Process.sequential)``; the crew's
raw output is the node output. The agents (one per node: role, goal and backstory name
the node), their model clients and the tools are built once per run; the ``Task`` and its
``Crew`` are the visit itself (a task's description is fixed when it is built, and each
prompt carries the history as of that visit, so CrewAI's own task-context passing is not
used).

Inside a node everything is CrewAI's runtime and nothing of it is suppressed: its
role-playing system prompt (``You are {role}. {backstory}\\nYour personal goal is:
{goal}``), its user turn (``Current Task: <prompt>`` plus the task's expected-output
criteria, and ``Provide your complete response:`` when the agent has no tools), its
``AgentExecutor`` flow with native function calling when the agent has tools and the ReAct
text parser when it has none (a reply is the answer, from ``Final Answer:`` on if it has
one, unless it spells out an ``Action:``, which makes CrewAI try that tool and ask again),
its client-side cut at the stop word ``\nObservation:``, its forced-final-answer turn when
``max_iter`` runs out, its rule that an empty reply is an error, its context-window
preflight, its tool-failure records, its task-output store (SQLite under the user data
directory, for ``crewai replay``). Measured with SmolLM2: the wrapping costs 78 prompt
tokens on a node's first request (35 of them the system message); on a tool node the
system message also makes llama.cpp's chatml-function-calling template list the functions
and their parameter schemas (about 700 tokens), which it renders only into a system
message.

Model. ``OpenAICompletion`` -- the class ``crewai.LLM("openai/<model>", base_url=...)``
builds for a custom endpoint -- pointed at ``ctx.llm_base_url(node)``, so every request
goes through our gateway and is attributed to its node; temperature, max_tokens, seed and
timeout from ``ctx.generation``; no streaming; no retries in the OpenAI client
(``max_retries=0``) nor around the task (``max_retry_limit=0``): the gateway retries, and a
second layer would hide calls.

Tools. Nodes with ``use_tools`` get the protocol's tools as CrewAI ``BaseTool`` s with the
same name, description and parameters (a pydantic model built from the JSON schema by
CrewAI's ``create_model_from_schema``). CrewAI offers them as *strict* OpenAI functions:
every property required, optional ones nullable (``anyOf: [T, null]``), ``default`` dropped.
Each execution goes through ``ctx.call_tool`` on the run's event loop with the arguments as
the model produced them: the tool's ``run`` skips CrewAI's pydantic re-validation, which
would coerce types, add the defaults of absent parameters and drop unknown keys (the tool
checks its JSON schema itself, for every framework alike). A failed tool result is
returned as a CrewAI ``ToolFailure`` with the tool's error text (as CrewAI's MCP tools
return an ``isError`` result).

Refused calls. A tool name that is not offered (CrewAI answers ``Tool not found``) or
arguments that are not valid JSON (``Failed to parse tool arguments as JSON``) never reach
a tool; they are recorded as failed calls (the model's name and arguments, CrewAI's text in
the error) where CrewAI decides so, ``AgentExecutor._execute_single_native_tool_call``,
through a thin executor subclass (``Agent.executor_class``). CrewAI's own execution order is
kept: the calls of one reply run in its thread pool (more than one call, none
``result_as_answer`` or usage-limited), and their results go back to the model in the
model's order. The trace keeps the model's order too: each call takes its place in turn
(:class:`.bridge.Turns`: a call to our tool is issued by ``ctx.call_tool`` once the calls before it
took theirs, then runs concurrently with them). Under ``mcp`` the server records each call
when it ends. CrewAI's tool-result cache is opt-in and stays off: every call runs the tool.

Tool rounds. ``max_tool_rounds`` caps the replies with tool calls per node execution, as in
the reference adapter: once that many were answered, the node's next request goes out
without tools and its reply ends the node (tool calls in a reply to a request without
tools are not run). The agent's ``max_iter`` is ``max_tool_rounds + 1`` (the tool rounds
plus the answer), so CrewAI's own forced-final-answer turn is a backstop a tool node does
not reach; in a node without tools it bounds the ReAct turns.

Threads. CrewAI's crew API is synchronous (its executor is a ``Flow`` that runs its own
``asyncio.run`` in the calling thread), so each crew kickoff runs in a worker thread of the
run's own and tool calls are bridged back to the run's event loop with
``asyncio.run_coroutine_threadsafe``. The workflow Flow's methods are coroutines (CrewAI
awaits them in the job's loop; a plain method would go to the loop's default executor,
where the in-process protocol runs tools, and a crew thread waiting for its tool must not
hold the worker the tool needs). When the runner cancels the run on timeout, the
cancellation reaches the Flow's ``kickoff_async`` at the awaited visit; the adapter then
marks the run cancelled and closes the run's HTTP clients: the request in flight fails
and the abandoned crew stops at once instead of running on in the background.

Run objects. The worker thread, the agents with their model clients and the tools are built
on a run's first use -- by ``run`` or, for orchestrators (``a2a``, the hierarchical shape),
by the first ``run_node`` -- kept in ``ctx.built`` and reused by every visit of the run
(:meth:`CrewAIAdapter.objects`); their closing (the clients, the worker thread) is in
``ctx.resources``, which the runner closes when the run ends, on timeout too.

Telemetry, trace upload and interactive prompts are off (environment switches set before
CrewAI is imported, ``Crew(tracing=False)``, ``Flow(tracing=False)``); no memory,
knowledge, planning, reasoning or delegation. The workflow Flow creates no ``Memory`` (a
LanceDB store, ~8 s to set up the first time; ``_skip_auto_memory`` as CrewAI's own
internal flows) and emits no flow events (``suppress_flow_events``: CrewAI would print a
panel per flow method whatever the verbosity). A visit's crew keeps no replay log
(:mod:`.crew`). CrewAI then opens no connection other than to the gateway.

Modules. This package holds the adapter (the run's objects, the agents) and the workflow
Flow; what runs inside a node visit is in its modules: :mod:`.bridge` (the worker thread's
bridge to the run's event loop, the order of a reply's tool calls), :mod:`.llm` (the model
client), :mod:`.tools` (the tools, MCP and the executor) and :mod:`.crew` (a visit's crew).
It is a package so that CrewAI's environment is set (below) before any of them imports CrewAI.

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols (and mastif.frameworks, its own).
"""

from __future__ import annotations

import os

# Before crewai is imported: no telemetry, no trace upload, no first-run/trace prompts.
for _var, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_TESTING": "true",  # only silences the interactive tracing prompts
}.items():
    os.environ[_var] = _value

import asyncio  # noqa: E402
import contextvars  # noqa: E402
import functools  # noqa: E402
import keyword  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from crewai import Agent  # noqa: E402
from crewai.agents.agent_executor import AgentExecutor  # noqa: E402
from crewai.flow.flow import Flow, FlowState, listen, or_, router, start  # noqa: E402
from crewai.llms.providers.openai.completion import OpenAICompletion  # noqa: E402
from crewai.mcp.tool_resolver import MCPToolResolver  # noqa: E402
from crewai.mcp.transports.http import HTTPTransport  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

from mastif.core.provenance import PrivateMember, private_members_of  # noqa: E402
from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.crewai.bridge import Bridge, Visit  # noqa: E402
from mastif.frameworks.crewai.crew import kickoff  # noqa: E402
from mastif.frameworks.crewai.llm import gateway_llm  # noqa: E402
from mastif.frameworks.crewai.tools import (  # noqa: E402
    MastifAgentExecutor,
    crewai_tools,
    mcp_tools,
)
from mastif.frameworks.orchestration import visit_node  # noqa: E402
from mastif.frameworks.plan import PlannedNode, WorkflowPlan  # noqa: E402

# -- the workflow as a CrewAI Flow -------------------------------------------------------------

#: the router's label for leaving the loop (method names are identifiers: no clash)
LOOP_EXIT = "loop:exit"


def go_to(method: str) -> str:
    """The router's label that triggers loop node ``method``."""
    return f"go:{method}"


class WorkflowState(FlowState):
    """What the router decides on: the round in progress, the node that just finished, and
    whether its output matched ``stop_when``."""

    step: int = 1
    last: str = ""
    stopped: bool = False


@dataclass
class _FlowRun:
    """What a workflow Flow needs of its run: the nodes and one visit of a node."""

    nodes: dict[str, PlannedNode]
    max_steps: int
    visit: Callable[[PlannedNode, int], Awaitable[str]]


def _method_names(names: tuple[str, ...]) -> dict[str, str]:
    """A Flow method name per workflow node: the node's name where it can be one."""
    methods = {}
    for i, name in enumerate(names):
        usable = name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
        member = hasattr(Flow, name) or name in Flow.model_fields
        methods[name] = name if usable and not member else f"node_{i}"
    return methods


@functools.lru_cache(maxsize=16)
def workflow_flow(
    before: tuple[str, ...], loop: tuple[str, ...], after: tuple[str, ...]
) -> type[Flow[WorkflowState]]:
    """The Flow class of a linear workflow with these node names (built once per layout).

    One Flow method per workflow node: the nodes before the loop chained with ``@start`` /
    ``@listen``; every loop node ``@listen`` s to its own router label; one ``@router``
    (``loop_router``) listens to the last node before the loop and to every loop node and
    sends the flow to the next loop node, round after round, until ``stop_when`` matched or
    ``max_steps`` rounds are done (``loop:exit``); the nodes after the loop listen to that.
    """
    names = before + loop + after
    if not names:
        raise ValueError("workflow has no nodes")
    methods = _method_names(names)
    router_name = "loop_router"
    while router_name in methods.values():
        router_name += "_"
    ns: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": "MastifWorkflow",
        "__doc__": "mastif's linear workflow (navigate -> observe <-> interact -> report).",
        # as CrewAI's own internal flows: no Memory (a LanceDB store) for this flow
        "_skip_auto_memory": True,
        "_run": PrivateAttr(default=None),
    }

    def node_method(name: str, trigger: Any) -> Any:
        async def visit(self: Flow[WorkflowState]) -> str:
            run: _FlowRun = self._run  # type: ignore[attr-defined]
            node = run.nodes[name]
            text = await run.visit(node, self.state.step if node.spec.loop else 1)
            self.state.last = name
            if node.spec.loop:
                self.state.stopped = node.stops_loop(text)
            return text

        visit.__name__ = methods[name]
        visit.__qualname__ = f"MastifWorkflow.{methods[name]}"
        return start()(visit) if trigger is None else listen(trigger)(visit)

    def prev(seq: tuple[str, ...], i: int, first: Any) -> Any:
        return methods[seq[i - 1]] if i else first

    for i, name in enumerate(before):
        ns[methods[name]] = node_method(name, prev(before, i, None))
    for name in loop:
        ns[methods[name]] = node_method(name, go_to(methods[name]))
    for i, name in enumerate(after):
        ns[methods[name]] = node_method(name, prev(after, i, LOOP_EXIT))

    if loop:

        async def loop_router(self: Flow[WorkflowState]) -> str:
            """The observe <-> interact loop: next loop node, next round, or exit."""
            run: _FlowRun = self._run  # type: ignore[attr-defined]
            state = self.state
            if state.stopped or run.max_steps < 1:
                return LOOP_EXIT
            if state.last not in loop:  # entering the loop
                return go_to(methods[loop[0]])
            i = loop.index(state.last)
            if i + 1 < len(loop):
                return go_to(methods[loop[i + 1]])
            if state.step < run.max_steps:
                state.step += 1
                return go_to(methods[loop[0]])
            return LOOP_EXIT

        loop_router.__name__ = router_name
        loop_router.__qualname__ = f"MastifWorkflow.{router_name}"
        labels = [go_to(methods[n]) for n in loop] + [LOOP_EXIT]
        triggers = [methods[n] for n in (before[-1:] + loop)]
        wrapped = router(or_(*triggers), emit=labels)(loop_router)
        ns[router_name] = wrapped if before else start()(wrapped)

    return type("MastifWorkflow", (Flow[WorkflowState],), ns)


def build_flow(plan: WorkflowPlan, visit: Callable[[PlannedNode, int], Awaitable[str]]) -> Any:
    """A run's Flow instance (its state is the run's)."""
    flow_class = workflow_flow(
        tuple(n.name for n in plan.before),
        tuple(n.name for n in plan.loop),
        tuple(n.name for n in plan.after),
    )
    calls = 1 + len(plan.loop) * max(plan.max_steps, 1)  # the router's, at most
    flow = flow_class(
        tracing=False,
        # CrewAI prints a panel per flow event whatever the verbosity; it suppresses them
        # for its own internal flows too
        suppress_flow_events=True,
        max_method_calls=max(100, calls),
    )
    flow._run = _FlowRun({n.name: n for n in plan.nodes}, plan.max_steps, visit)
    return flow


_crewai = private_members_of("crewai")


#: what this adapter overrides or calls of CrewAI that CrewAI does not promise: checked once
#: per stack job, before any run (mastif.core.provenance.check_framework)
PRIVATE_MEMBERS: tuple[PrivateMember, ...] = (
    _crewai(OpenAICompletion, "_build_sync_client",
            "overrides it to give each LLM a plain-HTTP client of its own"),
    _crewai(OpenAICompletion, "_build_async_client",
            "overrides it to give each LLM a plain-HTTP client of its own"),
    _crewai(OpenAICompletion, "_get_client_params",
            "calls it to build the clients pointed at the gateway"),
    _crewai(OpenAICompletion, "_client",
            "closes it to stop a timed-out run's request in flight", "attribute"),
    _crewai(OpenAICompletion, "_handle_completion",
            "overrides it so tool calls in a reply to a request without tools are not run"),
    _crewai(OpenAICompletion, "_prepare_completion_params",
            "overrides it to send the node's tool_choice on its first turn"),
    _crewai(AgentExecutor, "_execute_single_native_tool_call",
            "wraps it to record the tool calls CrewAI refuses, in the model's order"),
    _crewai(AgentExecutor, "_should_parallelize_native_tool_calls",
            "wraps it (CrewAI's decision unchanged) to note the order of a reply's calls"),
    _crewai(MCPToolResolver, "_json_schema_to_pydantic",
            "calls it to build the MCP tools' argument models"),
    _crewai(HTTPTransport, "_connected",
            "reads it in its MCP transport's connect", "instance"),
    _crewai(HTTPTransport, "_transport_context",
            "sets it in its MCP transport's connect", "instance"),
    _crewai(HTTPTransport, "_close_transport_context",
            "calls it when its MCP transport fails to connect"),
    _crewai(HTTPTransport, "_set_streams",
            "calls it in its MCP transport's connect"),
    _crewai(BaseTool, "_claim_usage",
            "calls it to keep CrewAI's tool usage limit in its tools' run"),
    _crewai(AgentExecutor, "_skip_auto_memory",
            "sets it on its workflow Flow (as CrewAI's own flows do): no Memory store",
            "attribute"),
)  # fmt: skip


# -- the run's agents ---------------------------------------------------------------------


def build_agent(ctx: RunContext, node: PlannedNode, bridge: Bridge, tools: list[BaseTool]) -> Agent:
    """The node's agent, built once per run and given a new task on every visit."""
    use_tools = node.spec.use_tools and bool(ctx.tools.tool_specs())
    what = node.spec.output_key.replace("_", " ")
    agent = Agent(
        role="web agent",
        goal=f"Write the {what} for the current task.",
        backstory=f"You carry out the {node.name} step of a web task.",
        llm=gateway_llm(ctx, node, bridge),
        tools=tools if use_tools and ctx.mcp_url is None else [],
        max_iter=ctx.generation.max_tool_rounds + 1,
        max_retry_limit=0,
        allow_delegation=False,
        verbose=False,
        executor_class=MastifAgentExecutor,
    )
    if use_tools and ctx.mcp_url is not None:
        agent.tools = tools
    return agent


def build_agents(
    ctx: RunContext, nodes: tuple[PlannedNode, ...], bridge: Bridge
) -> dict[str, Agent]:
    """One agent (and model client) per workflow node; the tools once (in the worker thread:
    MCP discovery blocks)."""
    bridge.check()
    tools: list[BaseTool] = []
    if any(n.spec.use_tools for n in nodes) and ctx.tools.tool_specs():
        tools = (
            mcp_tools(ctx.mcp_url, ctx.mcp_http)
            if ctx.mcp_url is not None
            else list(crewai_tools(ctx, bridge))
        )
    return {n.name: build_agent(ctx, n, bridge, tools) for n in nodes}


# -- the adapter ------------------------------------------------------------------------------


@dataclass
class _RunObjects:
    """A run's CrewAI objects (``ctx.built["crewai"]``): its worker thread, the bridge to it
    and one agent (with its model client) per node; the tools are the agents'."""

    bridge: Bridge
    worker: ThreadPoolExecutor
    agents: dict[str, Agent] = field(default_factory=dict)

    async def in_worker(self, fn: Callable[..., Any], *args: Any) -> Any:
        run_in_context = contextvars.copy_context().run
        return await self.bridge.loop.run_in_executor(self.worker, run_in_context, fn, *args)

    async def crew(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: its agent on a one-task crew, in the run's worker thread."""
        ctx = self.bridge.ctx
        agent = self.agents.get(node.name)
        if agent is None:  # a node outside the plan (not expected): built once, too
            (agent,) = (await self.in_worker(build_agents, ctx, (node,), self.bridge)).values()
            self.agents[node.name] = agent
        ctx.at(node.name, step)
        visit = Visit(node, step, ctx.generation.max_tool_rounds)
        text: str = await self.in_worker(kickoff, agent, visit, self.bridge, prompt)
        return text

    def close(self) -> None:
        self.bridge.cancel()  # a cancelled run must not go on in its worker thread
        self.worker.shutdown(wait=False, cancel_futures=True)


class CrewAIAdapter:
    name = "crewai"
    #: the distributions a run uses (mastif.core.provenance): CrewAI's MCP client under mcp
    packages = ("crewai", "openai")
    mcp_packages = ("mcp",)
    private_members = PRIVATE_MEMBERS

    async def objects(self, ctx: RunContext) -> _RunObjects:
        """The run's worker thread, agents, model clients and tools: built on its first use
        (by ``run`` or the first ``run_node``), kept in ``ctx.built`` and reused by every
        visit of the run; closed through ``ctx.resources`` when the run ends (on timeout too:
        closing the clients stops the abandoned crew's request in flight)."""
        built = ctx.built.get(self.name)
        if built is None:
            loop = asyncio.get_running_loop()
            bridge = Bridge(ctx, loop)
            worker = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"crewai-{ctx.run_id[:8]}"
            )
            built = _RunObjects(bridge, worker)
            ctx.resources.callback(built.close)  # before building: nothing may leak
            with ctx.setting_up():
                built.agents = await built.in_worker(build_agents, ctx, ctx.plan.nodes, bridge)
            ctx.built[self.name] = built
        assert isinstance(built, _RunObjects)
        return built

    async def run(self, ctx: RunContext) -> str:
        """The workflow as a CrewAI Flow (:func:`workflow_flow`), run in the job's event loop
        with ``kickoff_async``; each node visit is the node's agent on a one-task crew."""
        objects = await self.objects(ctx)
        try:
            return await self.orchestrate(ctx, objects.crew)
        except asyncio.CancelledError:
            objects.bridge.cancel()  # at once: the abandoned crew must not go on
            raise

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow's Flow, each node visit handed to ``dispatch`` (in :meth:`run` the
        node's crew; under ``a2a`` an A2A request to the node's agent)."""

        async def visit(node: PlannedNode, step: int) -> str:
            # the prompt from the run's history, the visit, its output recorded
            return await visit_node(ctx, dispatch, node, step)

        with ctx.setting_up():
            flow = build_flow(ctx.plan, visit)
        await flow.kickoff_async()
        outputs = ctx.recorder.node_outputs
        return outputs[-1].text if outputs else ""

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators): one crew, on the
        node's agent of the run (built once per run, :meth:`objects`)."""
        objects = await self.objects(ctx)
        try:
            return await objects.crew(node, step, prompt)
        except asyncio.CancelledError:
            objects.bridge.cancel()  # at once: the abandoned crew must not go on
            raise
