"""The ``a2a`` protocol: the workflow's agents are real A2A agents on a loopback HTTP server.

Each workflow node (or the single worker) is an A2A agent described by an :class:`AgentSpec`.
All agents live in ONE ASGI app served by :func:`~mastif.protocols.wire.serve_asgi` behind
the :class:`~mastif.protocols.wire.WireMeter`. An agent is reached at
``{base_url}/r/{run_id}/{agent}/`` (trailing slash: stock clients resolve the card's path
relative to it, see :meth:`A2AAgents.agent_url`): its agent card is under that URL at the
well-known path (``.well-known/agent-card.json``) and its JSON-RPC endpoint is the URL
itself. The origin root serves no card (docs/protocols.md, "Served versions and foreign
clients"). The orchestrator (:class:`A2AOrchestratorClient`, one per run) resolves each
agent's card once, builds an a2a-sdk client from it and delegates subtasks as A2A
``SendMessage`` calls: a user ``Message`` with a text part and a data part, ``context_id`` =
run id. The agent answers with a ``Task`` that ends completed (one text artifact holding the
answer) or failed (the status message carries the error).

Only the orchestrator's clients are served: the agents' server has a
:class:`~mastif.protocols.wire.LoopbackKey` (:attr:`A2AAgents.key`), every request without it
(the agent card too) gets 401 before any agent sees it (no agent runs, no model is called,
nothing is counted), and :meth:`A2AAgents.http_client` sends it.

Run attribution: the run id and agent name travel in the URL prefix, which the meter strips
and records in the ASGI scope. The card served for a request advertises the very URL the
client used (prefix included), so a client that follows the card stays on that run's prefix
and all of its traffic is counted for that run.

Counted per run: everything :class:`WireMeter` counts (HTTP requests, JSON-RPC messages, body
bytes), the time the agents' work took (``inner_s``, reported by the executor around the
``handle`` callback), the A2A messages the agents' executors handled
(:meth:`A2AAgents.messages_received`), and the time the orchestrator's clients waited on each
exchange (their httpx client is :meth:`A2AAgents.http_client`), so ``exchange_s - inner_s`` is
what A2A cost the run, defined and measured as for MCP (:mod:`mastif.protocols.wire`). The
orchestrator agent's work contains its own exchanges with the node agents; they are timed
both inside its work and as exchanges, so they cancel and each exchange's overhead counts once.

Versions: A2A v1.0, and v0.3 on the same endpoint for the clients still deployed (a2a-sdk's
v0.3 adapter routes v0.3 method names such as ``message/send``; the card gets the v0.3
fields when requested without ``A2A-Version: 1.x``, which is how the spec tells a v0.3
client; v1.0 clients, ours included, get the same card and bytes as without it).

a2a-sdk (1.x) pieces used. Server: ``AgentExecutor`` subclass + ``TaskUpdater``,
``DefaultRequestHandler`` with ``InMemoryTaskStore``, ``create_jsonrpc_routes`` with a
``ServerCallContextBuilder`` that hands the run to the executor, and a card route serving
``AgentCard`` (protobuf) through the SDK's ``agent_card_to_dict``. The SDK's own
``create_agent_card_routes(card_modifier=...)`` is not used because its modifier does not
see the request, and the card's interface URL depends on the request's run. Client:
``A2ACardResolver``, ``ClientFactory``/``ClientConfig`` (JSON-RPC over a shared
``httpx.AsyncClient``, non-streaming), ``Client.send_message``/``get_task``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_data_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_CURRENT,
    VERSION_HEADER,
    TransportProtocol,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mastif.protocols.wire import (
    SCOPE_KEY,
    ProtocolServer,
    Scope,
    metered_client,
    scope_run,
    serve_asgi,
)


class _NoTracebackForBadRequests(logging.Filter):
    """An invalid JSON-RPC request is the client's error, not the server's (issue 22).

    a2a-sdk logs a request it cannot validate (no ``jsonrpc`` member, params that do not
    parse) with ``logger.exception``: a traceback at ERROR per request. The v1.0
    dispatcher logs the same failure again right after as a one-line WARNING with the
    JSON-RPC code and the parse error, so its ERROR record is dropped; the v0.3 adapter
    logs nothing else, so its record becomes that one line. Server errors ("Unhandled
    exception", internal errors) keep their tracebacks.
    """

    DUPLICATES = ("Failed to validate base JSON-RPC request", "Failed to parse request params")
    V03 = "Failed to validate base JSON-RPC request for v0.3"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in self.DUPLICATES:
            return False
        if record.msg == self.V03:
            exc = record.exc_info[1] if record.exc_info else None
            first = str(exc).splitlines()[0] if exc is not None and str(exc) else ""
            record.msg, record.args = "Invalid v0.3 JSON-RPC request refused: %s", (first,)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


for _name in ("a2a.server.routes.jsonrpc_dispatcher", "a2a.compat.v0_3.jsonrpc_adapter"):
    logging.getLogger(_name).addFilter(_NoTracebackForBadRequests())

#: (agent name, run_id, text of the message's text parts, its data part or {}) -> answer text
AgentHandler = Callable[[str, str, str, dict[str, Any]], Awaitable[str]]

AGENT_VERSION = "1.0.0"
# all agents of a job share one origin, so none owns /.well-known/agent-card.json there
_NOT_AN_AGENT = (
    "no such agent: each agent's URL is {origin}/r/{run_id}/{agent}/ (with the trailing "
    "slash), its card at {origin}/r/{run_id}/{agent}/.well-known/agent-card.json; "
    "the origin root serves no card"
)
_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
# a task the agent parked (it asked for input or auth) will not finish by itself: we never reply
_INTERRUPTED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


@dataclass(frozen=True)
class AgentSpec:
    """One A2A agent: its card's identity and its single skill."""

    name: str  # URL-safe, e.g. "navigate" or "worker"
    description: str
    skill_id: str
    skill_name: str
    skill_description: str


class A2ATaskFailed(RuntimeError):
    """An agent's task ended other than completed; the message is the agent's error text."""

    def __init__(self, message: str, *, agent: str = "", state: str = "") -> None:
        super().__init__(message)
        self.agent = agent
        self.state = state


def agent_card(spec: AgentSpec, url: str, *, v03: bool = False) -> AgentCard:
    """The card of ``spec`` whose JSON-RPC interface is ``url``.

    ``v03``: the same endpoint is listed a second time as an A2A v0.3 interface, which
    makes :func:`agent_card_to_dict` add the v0.3 card fields (``url``,
    ``protocolVersion``, ``preferredTransport``...) that v0.3 clients read.
    """
    versions = [PROTOCOL_VERSION_CURRENT] + ([PROTOCOL_VERSION_0_3] if v03 else [])
    return AgentCard(
        name=spec.name,
        description=spec.description,
        version=AGENT_VERSION,
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=version,
            )
            for version in versions
        ],
        # non-streaming: one blocking SendMessage per delegation keeps the exchange countable
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=spec.skill_id,
                name=spec.skill_name,
                description=spec.skill_description,
                tags=[spec.name],
            )
        ],
    )


def speaks_v1(version: str | None) -> bool:
    """Whether an ``A2A-Version`` header value asks for v1.0 or later.

    A request without the header is a v0.3 client's, as the A2A v1.0 spec and a2a-sdk's
    ``validate_version`` read it; a value that does not parse is taken as current.
    """
    if not version or not version.strip():
        return False
    major = version.strip().split(".", 1)[0]
    return not major.isdigit() or int(major) >= 1


def _restore_ints(value: Any) -> Any:
    """Whole-number floats back to ints: protobuf's ``Value`` stores every number as a double."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _restore_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_ints(v) for v in value]
    return value


def message_data(message: Message) -> dict[str, Any]:
    """The first object-valued data part of a message, or {}."""
    for data in get_data_parts(message.parts):
        if isinstance(data, dict):
            return _restore_ints(data)
    return {}


class _RunContextBuilder(DefaultServerCallContextBuilder):
    """Puts the request's (run_id, agent) into the call context, where the executor reads it."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[SCOPE_KEY] = scope_run(request.scope)
        return context


class _NodeExecutor(AgentExecutor):
    """Runs one agent's work through the ``handle`` callback and reports it as a task."""

    def __init__(self, agent: str, handle: AgentHandler, owner: A2AAgents) -> None:
        self.agent = agent
        self.handle = handle
        self.owner = owner

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        if message is None:  # the handler only calls execute for SendMessage; be explicit
            raise ValueError("A2A request without a message")
        run_id, _ = context.call_context.state[SCOPE_KEY]
        task_id = str(context.task_id)
        context_id = str(context.context_id)
        if context.current_task is None:
            # the SDK requires a Task event before any status update on a new task
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        self.owner._received[run_id] += 1
        text = get_message_text(message)
        data = message_data(message)
        t0 = time.perf_counter()
        try:
            answer = await self.handle(self.agent, run_id, text, data)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            await updater.failed(updater.new_agent_message([Part(text=error)]))
            return
        finally:
            # also on failure or cancellation: the time went into the work either way
            self.owner.meter.add_inner(run_id, time.perf_counter() - t0)
        await updater.add_artifact([Part(text=answer)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The SDK calls this first and then cancels the task running execute(), which
        # interrupts ``handle``; our part is to record the terminal CANCELED state.
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel(updater.new_agent_message([Part(text="cancelled by the client")]))


class A2AAgents(ProtocolServer):
    """The running agents: their URLs per run and what their runs cost."""

    NOT_FOUND = _NOT_AN_AGENT

    def __init__(self, agents: list[AgentSpec], handle: AgentHandler) -> None:
        super().__init__()
        names = [spec.name for spec in agents]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate agent names: {names}")
        for name in names:
            if not name or "/" in name:
                raise ValueError(f"agent name must be a non-empty URL path segment: {name!r}")
        self.specs = {spec.name: spec for spec in agents}
        self._received: Counter[str] = Counter()
        self._handlers: list[DefaultRequestHandler] = []
        self._apps = {spec.name: self._agent_app(spec, handle) for spec in agents}

    def agent_url(self, run_id: str, agent: str) -> str:
        """The agent's URL for ``run_id``: its JSON-RPC endpoint, and its card's base.

        It ends with "/" so that a stock client's URL resolution (WHATWG ``new URL(
        ".well-known/agent-card.json", url)``, as in ``@a2a-js/sdk``'s ``createFromUrl``)
        stays under the agent: without it the last segment, the agent, would be replaced.
        """
        return f"{self.base_url}/r/{run_id}/{agent}/"

    def http_client(self) -> httpx.AsyncClient:
        """An httpx client for the agents: sends their key, times exchanges for their runs."""
        return metered_client(self.meter, self.key)

    def messages_received(self, run_id: str) -> int:
        """A2A messages the agents' executors handled for that run (kept after pop_stats)."""
        return self._received[run_id]

    def _agent_app(self, spec: AgentSpec, handle: AgentHandler) -> Starlette:
        # The handler's copy of the card only matters for its capabilities (streaming, push);
        # clients always get the per-request card below.
        template = agent_card(spec, f"{{base_url}}/r/{{run_id}}/{spec.name}")
        handler = DefaultRequestHandler(
            agent_executor=_NodeExecutor(spec.name, handle, self),
            task_store=InMemoryTaskStore(),
            agent_card=template,
        )
        self._handlers.append(handler)

        async def card(request: Request) -> Response:
            run_id, agent = scope_run(request.scope)
            url = self.agent_url(run_id, agent)
            v03 = not speaks_v1(request.headers.get(VERSION_HEADER))
            return JSONResponse(agent_card_to_dict(agent_card(spec, url, v03=v03)))

        routes = [Route(AGENT_CARD_WELL_KNOWN_PATH, card, methods=["GET"])]
        # v0.3 methods (message/send, tasks/get, ...) are told apart from v1.0's by name
        routes += create_jsonrpc_routes(
            handler, rpc_url="/", context_builder=_RunContextBuilder(), enable_v0_3_compat=True
        )
        return Starlette(routes=routes)

    def route(self, scope: Scope) -> Starlette | None:
        """Each request to its agent's A2A app (the one app below the meter)."""
        try:
            _, agent = scope_run(scope)
            return self._apps[agent]
        except LookupError:  # no /r/{run}/{agent}/ prefix, or no such agent
            return None

    async def _aclose(self) -> None:
        # drains the SDK's active tasks so none outlives the server
        for handler in self._handlers:
            await handler.aclose()


@asynccontextmanager
async def open_a2a_agents(
    agents: list[AgentSpec], handle: AgentHandler
) -> AsyncIterator[A2AAgents]:
    """Serve ``agents`` on a loopback port for the duration of the block."""
    running = A2AAgents(agents, handle)
    try:
        async with serve_asgi(running.meter, "a2a", running.key) as base_url:
            running.base_url = base_url
            yield running
    finally:
        await running._aclose()


class A2AOrchestratorClient:
    """The orchestrator's side of one run: delegates to the agents over A2A.

    ``httpx_client``: a caller's own client, which must send ``agents.key`` itself (else
    every request gets 401); by default the agents' :meth:`A2AAgents.http_client`.
    """

    def __init__(
        self, agents: A2AAgents, run_id: str, httpx_client: httpx.AsyncClient | None = None
    ) -> None:
        self.agents = agents
        self.run_id = run_id
        self._owns_http = httpx_client is None
        # no read timeout: an agent's node may run a slow model; the job bounds the run.
        # Its transport times every exchange for the run (protocol seconds).
        self._http = httpx_client or agents.http_client()
        self._factory = ClientFactory(
            ClientConfig(
                streaming=False,
                httpx_client=self._http,
                supported_protocol_bindings=[TransportProtocol.JSONRPC.value],
            )
        )
        self._clients: dict[str, Client] = {}
        self._cards: dict[str, AgentCard] = {}
        self._lock = asyncio.Lock()

    async def card(self, agent: str) -> AgentCard:
        """The agent's card, fetched once per run."""
        async with self._lock:
            if agent not in self._cards:
                resolver = A2ACardResolver(self._http, self.agents.agent_url(self.run_id, agent))
                self._cards[agent] = await resolver.get_agent_card()
            return self._cards[agent]

    async def _client(self, agent: str) -> Client:
        card = await self.card(agent)
        if agent not in self._clients:
            self._clients[agent] = self._factory.create(card)
        return self._clients[agent]

    async def send(self, agent: str, text: str, data: dict[str, Any]) -> str:
        """Delegate to ``agent``; its answer text, or :class:`A2ATaskFailed`."""
        client = await self._client(agent)
        request = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER,
                message_id=uuid.uuid4().hex,
                context_id=self.run_id,
                parts=[Part(text=text), new_data_part(data)],
            ),
            configuration=SendMessageConfiguration(return_immediately=False),
        )
        task: Task | None = None
        async for event in client.send_message(request):
            if event.HasField("message"):  # an agent may answer with a plain message
                return get_message_text(event.message)
            if event.HasField("task"):
                task = event.task
        if task is None:
            raise A2ATaskFailed(f"{agent} returned neither a task nor a message", agent=agent)
        # a blocking SendMessage returns at a terminal state; poll in case a server does not
        while task.status.state not in _TERMINAL | _INTERRUPTED:
            await asyncio.sleep(0.05)
            task = await client.get_task(GetTaskRequest(id=task.id))
        if task.status.state != TaskState.TASK_STATE_COMPLETED:
            state = TaskState.Name(task.status.state)
            reason = (
                get_message_text(task.status.message) if task.status.HasField("message") else ""
            )
            raise A2ATaskFailed(reason or f"{agent} task ended {state}", agent=agent, state=state)
        return "\n".join(get_artifact_text(artifact) for artifact in task.artifacts)

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()  # the httpx client is shared, so this releases nothing else
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> A2AOrchestratorClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = [
    "A2AAgents",
    "A2AOrchestratorClient",
    "A2ATaskFailed",
    "AgentHandler",
    "AgentSpec",
    "agent_card",
    "open_a2a_agents",
]
