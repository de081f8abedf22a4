"""Agno: the workflow as an Agno ``Workflow`` of ``Step``s, a ``Loop`` and ``Condition``s; every
node visit one run of the node's Agno ``Agent``.

Orchestration. :func:`build_workflow` builds one Agno ``Workflow`` per run (no ``db``: nothing
is persisted beyond the run; ``telemetry=False``). Its steps are:

- one ``Step`` per node before the loop, in a line;
- one ``Loop`` for the loop nodes, ``max_iterations = max_steps``, its ``end_condition`` a
  function over the round's ``StepOutput`` s that is true once a loop node's output matches its
  ``stop_when``. A ``stop_when`` match must end the loop at once, not after the round, so the
  loop's steps are the first loop node's ``Step`` followed by a ``Condition`` ("the node before
  did not stop the loop", read from ``StepInput.previous_step_content``) around the next loop
  node's ``Step`` and, nested in it, the ``Condition`` around the one after, and so on;
- one ``Step`` per node after the loop, in a line.

Agno's workflow runner chains the steps and runs the loop; mastif's ``drive_workflow`` is not
used. Every ``Step`` is a function step (``executor``): it renders the node's prompt from the
run's history and hands it to a dispatch (``mastif.frameworks.orchestration.visit_node``): in
:meth:`AgnoAdapter.run` the node's ``Agent``; under ``a2a`` (:meth:`AgnoAdapter.orchestrate`, the
same workflow) an A2A request to the node's agent, which serves it with
:meth:`AgnoAdapter.run_node` on the run's agents (built once per run, ``ctx.built``). Steps have
``max_retries=0`` (Agno retries a failed step 3 times by default), and steps and
``Condition`` s ``on_error=fail`` (``HumanReview``; by default Agno logs a failed step, records
it as skipped and goes on with the next one): a provider error ends the workflow as it does
for every framework. The workflow's output is the last node's text (Agno's own run output
would be the ``Condition``'s "not met" note when the loop's last node was skipped).

A node visit is ``Agent.arun(prompt)``: Agno's agent run and its model's tool loop
(``Model.aresponse``: model request, the reply's calls run concurrently with ``asyncio.gather``,
``tool`` messages, next request). Each node's Agent has no instructions, no db, no memory, no
history (``add_history_to_context`` off: each visit a fresh conversation), ``retries=0``,
``telemetry=False``; tools only on nodes that use them. The visit's text is Agno's run
content: the text of every reply of the visit, joined (Agno's own; text a model writes beside
its tool calls is part of it).

Model: :class:`GatewayModel`, Agno's ``OpenAILike`` (its OpenAI-compatible chat-completions
class) at ``ctx.llm_base_url(node)``, ``api_key`` the gateway token, the client timeout,
``max_retries=0`` (the OpenAI client's), ``retries=0`` (Agno's own model retries, the default),
the job's shared async httpx client; ``temperature``, ``max_tokens``, ``seed``. The subclass
is the turn policy of the contract, around ``ainvoke`` (one model request): the node's
``tool_choice`` on the visit's first request and ``auto`` after (Agno sends the agent's one
``tool_choice`` on every request); once ``max_tool_rounds`` replies with tool calls were
answered, the request goes out without tools (Agno's tool loop has no round cap: its
``tool_call_limit`` counts calls and keeps offering the tools); tool calls in a reply to a
request without tools are dropped from the reply (Agno would run them). It also keeps the
OpenAI error behind Agno's ``ModelProviderError``: Agno's agent run turns an error into a run
output with status ``error``, which the visit raises again as the OpenAI error, so the runner
classifies it like every framework's.

Tools: in-process, an Agno ``Function`` per protocol tool (its name, description and JSON
schema as the ``parameters``, ``skip_entrypoint_processing``, as Agno's ``MCPTools`` builds its
functions) whose entrypoint calls ``ctx.call_tool``. Under ``mcp``: Agno's ``MCPTools`` on the
run's MCP server, connected once per run (so the agents neither connect nor close it per visit),
on a ``fastmcp.Client`` built as ``MCPTools`` builds its own for ``transport="streamable-http"``
(a ``StreamableHttpTransport``, the client timeout of 10 s, the "legacy" protocol mode), with the
run's httpx client factory (``ctx.mcp_http``: timed exchanges, the server's key) in place of
Agno's, which it gives no way to pass. The client declares fastmcp's ``clientInfo``
(``fastmcp``). Agno pings the session before every tool call (its ``call_tool`` entrypoint).

Recording: Agno answers a call of an unknown name ("Error: The requested tool does not exist
or is not available.") or with arguments it cannot parse ("Error while decoding function
arguments: ...") with its own ``tool`` message, before any tool runs; ``GatewayModel`` records
those as failed calls (``get_function_calls_to_run``, where Agno sorts a reply's calls), and
reserves, in the model's order, the places of the calls that will run, which the in-process
functions take (``ctx.call_tool(issued=...)``) although Agno runs them concurrently.

Telemetry: Agno posts a run event to its API (``os-api.agno.com``) for every Agent, Team and
Workflow run unless ``telemetry`` is off, and the environment variable ``AGNO_TELEMETRY``
overrides the constructor flag at every run; this module sets ``AGNO_TELEMETRY=false`` when it
is imported and again whenever it builds a run's agents or workflow (whatever else set it
since), and builds every Agent and the Workflow with ``telemetry=False``. Agno 3.1 has no
other monitoring; its OpenTelemetry tracing is opt-in (``agno.tracing.setup_tracing``) and not
set up.
"""

from __future__ import annotations

import os


def telemetry_off() -> None:
    """``AGNO_TELEMETRY=false``: the variable wins over ``telemetry=False`` (Agno reads it at
    every Agent, Team and Workflow run), so an environment saying "true" must not turn it on."""
    os.environ["AGNO_TELEMETRY"] = "false"


telemetry_off()  # before anything of Agno runs; again whenever a run's objects are built

from collections.abc import AsyncIterator  # noqa: E402
from contextlib import AsyncExitStack, asynccontextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import openai  # noqa: E402
from agno.agent import Agent  # noqa: E402
from agno.models.message import Message  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402
from agno.run.base import RunStatus  # noqa: E402
from agno.tools.function import Function, FunctionCall  # noqa: E402
from agno.workflow import Condition, Loop, Step, StepInput, StepOutput, Workflow  # noqa: E402
from agno.workflow.types import HumanReview, OnError  # noqa: E402

from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.orchestration import visit_node  # noqa: E402
from mastif.frameworks.plan import PlannedNode, WorkflowPlan  # noqa: E402

#: a failing step ends the workflow (Agno's default, ``on_error=skip``, logs it and goes on)
FAIL = HumanReview(on_error=OnError.fail)

#: Agno's ``MCPTools`` defaults for a streamable-HTTP connection (``timeout_seconds=10``, its
#: ``StreamableHTTPClientParams`` 30 s / 300 s, protocol mode "legacy"), kept for ours
MCP_CLIENT_TIMEOUT_S = 10.0
MCP_TIMEOUT_S = 30.0
MCP_SSE_READ_TIMEOUT_S = 300.0


def openai_cause(exc: BaseException | None) -> openai.OpenAIError | None:
    """The OpenAI client's error behind Agno's ``ModelProviderError``, if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, openai.OpenAIError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


# --------------------------------------------------------------------------- a node visit


def tool_rounds(messages: list[Message]) -> int:
    """Replies with tool calls since the visit's prompt (each one a tool round answered)."""
    rounds = 0
    for m in reversed(messages):
        if m.role == "user":
            break
        if m.role == "assistant" and m.tool_calls:
            rounds += 1
    return rounds


@dataclass
class GatewayModel(OpenAILike):
    """Agno's OpenAI-compatible model at a node's gateway URL, with the contract's turn policy
    around each request (see the module docstring)."""

    #: the run's objects and the node this model serves (set by :meth:`RunObjects.build`)
    objects: Any = None
    node: Any = None
    max_rounds: int = 0
    #: the error of the latest request, if it failed (Agno's agent run swallows it)
    last_error: BaseException | None = None

    async def ainvoke(  # type: ignore[override]
        self,
        messages: list[Message],
        assistant_message: Message,
        response_format: Any = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        run_response: Any = None,
        compress_tool_results: bool = False,
    ) -> Any:
        offered = bool(tools)
        if offered:
            rounds = tool_rounds(messages)
            if rounds >= self.max_rounds:  # the cap: this request ends the visit in text
                tools, tool_choice, offered = None, None, False
            else:  # the node's tool_choice on the visit's first request, auto after
                tool_choice = self.node.spec.tool_choice if rounds == 0 else "auto"
        self.last_error = None
        try:
            response = await super().ainvoke(
                messages, assistant_message, response_format=response_format, tools=tools,
                tool_choice=tool_choice, run_response=run_response,
                compress_tool_results=compress_tool_results,
            )  # fmt: skip
        except Exception as exc:
            self.last_error = exc
            raise
        if not offered and response.tool_calls:
            # tool calls in a reply to a request without tools are not run
            response.tool_calls = []
        return response

    def get_function_calls_to_run(
        self,
        assistant_message: Message,
        messages: list[Message],
        functions: dict[str, Function] | None = None,
    ) -> list[FunctionCall]:
        """Agno's sorting of a reply's calls; the ones it answers itself (unknown name,
        arguments it cannot parse) are recorded as failed, the others get their places in
        the record, all in the model's order."""
        before = len(messages)
        to_run = super().get_function_calls_to_run(assistant_message, messages, functions)
        refused = {m.tool_call_id: str(m.content) for m in messages[before:] if m.role == "tool"}
        running = {fc.call_id for fc in to_run}
        objects: RunObjects = self.objects
        ctx = objects.ctx
        for call in assistant_message.tool_calls or []:
            call_id, fn = call.get("id"), call.get("function") or {}
            name, raw = fn.get("name") or "<unnamed>", fn.get("arguments") or ""
            if call_id in refused:
                said = refused[call_id]
                error = (
                    f"unknown tool {name!r}; offered: {sorted(objects.offered)} (Agno: {said})"
                    if name not in objects.offered
                    else f"arguments refused by Agno: {said}"
                )
                ctx.record_failed_tool_call(ctx.node, ctx.step, name, raw, error)
            elif call_id in running and ctx.mcp_url is None:
                objects.places[str(call_id)] = ctx.recorder.issue()
        return to_run


def gateway_model(ctx: RunContext, node: PlannedNode, objects: RunObjects,
                  stack: AsyncExitStack) -> GatewayModel:  # fmt: skip
    """The node's model at its gateway URL, on the job's shared async HTTP client."""
    s = ctx.client_settings(node.name)
    model = GatewayModel(
        id=s.model, base_url=s.base_url, api_key=s.api_key, timeout=s.timeout_s,
        max_retries=s.max_retries, http_client=s.http_async, **s.sampling(),
        objects=objects, node=node,
        max_rounds=ctx.generation.max_tool_rounds if node.spec.use_tools else 0,
    )  # fmt: skip

    async def close() -> None:  # its own OpenAI client (and httpx client), if it made one
        client = model.async_client
        if client is not None and s.http_async is None:
            await client.close()

    stack.push_async_callback(close)
    return model


def local_tools(ctx: RunContext, objects: RunObjects) -> list[Function]:
    """The protocol's tools as Agno Functions (their JSON schemas as given); each call goes
    through ``ctx.call_tool`` at the place its reply gave it."""

    def make(spec: Any) -> Function:
        async def call(fc: FunctionCall, **arguments: Any) -> str:
            place = objects.places.pop(str(fc.call_id), None)
            result = await ctx.call_tool(ctx.node, ctx.step, spec.name, arguments, issued=place)
            # a failure reads as the tool's error text, as an MCP server's isError result does
            return result.output if result.ok else (result.error or "")

        return Function(
            name=spec.name, description=spec.description, parameters=spec.parameters,
            entrypoint=call, skip_entrypoint_processing=True,
        )  # fmt: skip

    return [make(s) for s in ctx.tools.tool_specs()]


async def mcp_tools(ctx: RunContext, stack: AsyncExitStack) -> Any:
    """Agno's ``MCPTools`` on the run's MCP server, connected for the run (see the module)."""
    from agno.tools.mcp import MCPTools
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    from mastif.frameworks.mcp_transport import HTTPX

    assert ctx.mcp_url is not None and ctx.mcp_http is not None
    make_http = ctx.mcp_http

    def factory(*, headers: Any = None, auth: Any = None, timeout: Any = None, **_: Any) -> Any:
        # what Agno's own factory does (agno.tools.mcp.mcp._http_client_factory), on ours
        timeout = timeout or HTTPX.Timeout(MCP_TIMEOUT_S, read=MCP_SSE_READ_TIMEOUT_S)
        return make_http(headers=headers, timeout=timeout, auth=auth)

    transport = StreamableHttpTransport(ctx.mcp_url, httpx_client_factory=factory)
    client = await stack.enter_async_context(
        Client(transport, timeout=MCP_CLIENT_TIMEOUT_S, mode="legacy")
    )
    tools = MCPTools(session=client, transport="streamable-http")
    await tools.initialize()  # tools/list; raises if it fails (connect() would only log)
    return tools


@dataclass
class RunObjects:
    """What a run builds once: the tools and one Agent per workflow node."""

    ctx: RunContext
    agents: dict[str, Agent] = field(default_factory=dict)
    models: dict[str, GatewayModel] = field(default_factory=dict)
    offered: frozenset[str] = frozenset()
    #: places in the record reserved for the calls of the latest reply (call id -> number)
    places: dict[str, int] = field(default_factory=dict)

    @classmethod
    async def build(cls, ctx: RunContext, stack: AsyncExitStack) -> RunObjects:
        objects = cls(ctx)
        nodes = ctx.plan.nodes
        tools: list[Any] = []
        if ctx.tools.tool_specs() and any(n.spec.use_tools for n in nodes):
            if ctx.mcp_url is not None:
                tools = [await mcp_tools(ctx, stack)]
            else:
                tools = local_tools(ctx, objects)
        objects.offered = frozenset(ctx.tool_names())
        for n in nodes:
            model = gateway_model(ctx, n, objects, stack)
            objects.models[n.name] = model
            objects.agents[n.name] = Agent(
                model=model,
                name=n.name,
                tools=tools if n.spec.use_tools and tools else None,
                db=None,
                add_history_to_context=False,
                retries=0,
                telemetry=False,
            )
        return objects

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One node visit: one run of the node's Agent (Agno's agent run and tool loop)."""
        self.ctx.at(node.name, step)
        self.places.clear()
        out = await self.agents[node.name].arun(prompt)
        if out.status == RunStatus.error:
            error = self.models[node.name].last_error
            cause = openai_cause(error)
            if cause is not None:
                raise cause from error  # classified by the runner as the provider's error
            if error is not None:
                raise error
            raise RuntimeError(f"Agno agent run failed: {out.content}")
        content = out.content
        return content if isinstance(content, str) else ("" if content is None else str(content))


# --------------------------------------------------------------------------- the workflow


@dataclass
class WorkflowState:
    """What the workflow's steps share in one run: the loop's round and the last output."""

    round: int = 0
    last: str = ""


def flatten(outputs: list[StepOutput]) -> list[StepOutput]:
    """Step outputs with those nested in a ``Condition``'s (``steps``), in order."""
    flat: list[StepOutput] = []
    for out in outputs:
        flat.append(out)
        flat.extend(flatten(list(out.steps or [])))
    return flat


def build_workflow(ctx: RunContext, dispatch: Dispatch) -> tuple[Workflow, WorkflowState]:
    """The run's Agno ``Workflow`` (see the module) whose node visits go to ``dispatch``."""
    plan: WorkflowPlan = ctx.plan
    state = WorkflowState()
    first_in_loop = plan.loop[0] if plan.loop else None

    def node_step(node: PlannedNode) -> Step:
        async def visit(step_input: StepInput) -> StepOutput:
            if node is first_in_loop:
                state.round += 1
            step = state.round if node.spec.loop else 1
            state.last = await visit_node(ctx, dispatch, node, step)
            return StepOutput(content=state.last)

        return Step(name=node.name, executor=visit, max_retries=0, human_review=FAIL)

    def unless_stopped(before: PlannedNode, rest: tuple[PlannedNode, ...]) -> Condition:
        """The loop nodes after ``before`` run only if ``before`` did not stop the loop."""

        def went_on(step_input: StepInput) -> bool:
            return not before.stops_loop(str(step_input.previous_step_content or ""))

        steps: list[Any] = [node_step(rest[0])]
        if len(rest) > 1:
            steps.append(unless_stopped(rest[0], rest[1:]))
        return Condition(
            name=f"unless {before.name} stopped the loop", evaluator=went_on, steps=steps,
            human_review=FAIL,
        )  # fmt: skip

    def stopped(outputs: list[StepOutput]) -> bool:
        loop = {n.name: n for n in plan.loop}
        return any(
            o.step_name in loop and loop[o.step_name].stops_loop(str(o.content or ""))
            for o in flatten(outputs)
        )

    steps: list[Any] = [node_step(n) for n in plan.before]
    if plan.loop and plan.max_steps >= 1:
        inner: list[Any] = [node_step(plan.loop[0])]
        if len(plan.loop) > 1:
            inner.append(unless_stopped(plan.loop[0], plan.loop[1:]))
        steps.append(
            Loop(name="loop", steps=inner, max_iterations=plan.max_steps, end_condition=stopped)
        )
    steps.extend(node_step(n) for n in plan.after)
    workflow = Workflow(name="mastif-linear-workflow", steps=steps, db=None, telemetry=False)
    return workflow, state


# --------------------------------------------------------------------------- the adapter


class AgnoAdapter:
    name = "agno"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("agno", "openai")
    mcp_packages = ("fastmcp-slim", "mcp")
    #: no private member of Agno is overridden or called
    private_members = ()

    @asynccontextmanager
    async def _session(self, ctx: RunContext) -> AsyncIterator[RunObjects]:
        """The run's agents and tools, closed on exit (clients, the MCP session)."""
        async with AsyncExitStack() as stack:
            with ctx.setting_up():
                telemetry_off()
                objects = await RunObjects.build(ctx, stack)
            yield objects

    async def run(self, ctx: RunContext) -> str:
        """The Agno workflow, each node visit a run of the node's Agent."""
        async with self._session(ctx) as objects:
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The Agno workflow, each node visit handed to ``dispatch`` (in :meth:`run` the
        node's Agent; under ``a2a`` an A2A request to the node's agent)."""
        with ctx.setting_up():
            telemetry_off()
            workflow, state = build_workflow(ctx, dispatch)
        await workflow.arun(input=ctx.task.confirmed_task)
        return state.last

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        agents, built on the run's first visit and kept in ``ctx.built``."""
        objects = ctx.built.get(self.name)
        if objects is None:
            objects = await ctx.resources.enter_async_context(self._session(ctx))
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.visit(node, step, prompt)


__all__ = ["AgnoAdapter", "build_workflow", "GatewayModel", "RunObjects"]
