"""The frameworks the contract tests run on: mastif's own, or the ones named in
``MASTIF_TEST_FRAMEWORKS`` (comma-separated), so a plugin's author runs the same contract
on an installed plugin: ``MASTIF_TEST_FRAMEWORKS=myframework pytest tests/frameworks/test_workflow.py``."""

from __future__ import annotations

import os

from mastif.frameworks import FRAMEWORKS

CONTRACT_FRAMEWORKS: tuple[str, ...] = (
    tuple(n.strip() for n in os.environ.get("MASTIF_TEST_FRAMEWORKS", "").split(",") if n.strip())
    or FRAMEWORKS
)


def wire_tool_name(framework: str, tool: str) -> str:
    """The name ``framework`` offers ``tool`` under in its requests: its own naming is kept
    (docs/frameworks.md, "One policy"), e.g. a plugin prefix."""
    return WIRE_TOOL_NAMES.get(framework, "{tool}").format(tool=tool)


#: each framework's own wire name of a tool, where it is not the tool's name
WIRE_TOOL_NAMES: dict[str, str] = {
    "semantic_kernel": "mastif_tools-{tool}",  # SK's <plugin>-<function>
}

#: what the recorded error of a call whose arguments are not valid JSON contains, where a
#: framework's own handling differs from refusing them as "not valid JSON" (None: the
#: framework repairs such arguments itself and the call is made with what it recovered)
INVALID_JSON_ERRORS: dict[str, str | None] = {
    "crewai": "Failed to parse tool arguments as JSON",  # CrewAI's own refusal text
    "semantic_kernel": "Arguments must be in JSON format",  # SK's own refusal text
    "llamaindex": None,  # get_tool_calls_from_response repairs them (parse_partial_json)
    "smolagents": "SyntaxError",  # handed to python_repl as its code (its one input)
    "agent_framework": "Argument parsing failed",  # {"raw": text} fails the schema check
    "openai_agents": "Invalid JSON input for tool",  # the Agents SDK's own refusal text
    "pydantic_ai": "Invalid JSON",  # Pydantic AI's validation error (json_invalid) retry text
    "haystack": "malformed JSON string",  # OpenAIChatGenerator drops the call (its warning)
    # Upsonic reads what it can of the text (a partial parse) and its executor refuses the
    # call for the argument it could not recover
    "upsonic": "Missing required argument",
    "agno": "Error while decoding function arguments",  # Agno's own refusal text
    # OpenAILlm logs arguments that are not JSON and calls the tool with {}: the tool's refusal
    "google_adk": "is a required property",
    "strands": "'code' is a required property",  # parsed as {} (its warning), the tool runs with it
    "ag2": "JSONDecodeError",  # AG2 parses with json.loads and answers with its error
    "beeai": "Response could not be produced because it is invalid",  # its litellm adapter's
    "langroid": None,  # OpenAIToolCall.from_dict repairs them (parse_imperfect_json)
}


def invalid_json_error(framework: str) -> str | None:
    return INVALID_JSON_ERRORS.get(framework, "not valid JSON")


#: frameworks that write tool results back to the model as text turns of their own instead
#: of OpenAI ``tool`` messages (smolagents: "Observation:" / "Error:" user turns; a failed
#: call ends its step, so the results of the reply's other calls are not shown)
TEXT_TOOL_RESULTS: frozenset[str] = frozenset({"smolagents"})


#: how a framework writes a tool's text output back in the ``tool`` message, where it is not the
#: text as it is (Upsonic: its executor's result dict, as JSON; ADK: the JSON of its function
#: response, a text result as ``result``)
TOOL_RESULT_FORMATS: dict[str, str] = {
    "upsonic": '{{"func":"{output}"}}',
    "google_adk": '{{"result": "{output}"}}',
}


def tool_result_text(framework: str, output: str) -> str:
    """The ``tool`` message content ``framework`` sends back for a tool's text ``output``."""
    return TOOL_RESULT_FORMATS.get(framework, "{output}").format(output=output)


def results_follow_up(framework: str, requests: list[dict]) -> dict:
    """The first request that carries tool results back to the model."""
    if framework in TEXT_TOOL_RESULTS:
        for r in requests:
            users = [m for m in r["messages"] if m["role"] == "user"]
            text = users[-1]["content"] if users else ""
            after = text[text.rfind("interaction round") :]
            if "interaction round" in text and ("Observation:" in after or "Error:" in after):
                return r
        raise AssertionError("no request carried tool results back as text")
    return next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))


#: the ``clientInfo`` name each framework's own MCP client declares in ``initialize``, where
#: it is not the MCP SDK's default ("mcp"): the MCP server logs it for every run
#: (framework, MCP SDK line of its environment) -> name
MCP_CLIENT_NAMES: dict[tuple[str, int], str] = {
    ("pydantic_ai", 2): "fastmcp",  # FastMCP 4, Pydantic AI's client on the SDK 2 line
    ("agno", 2): "fastmcp",  # Agno's MCPTools runs on a fastmcp Client (agno[mcp]: SDK 2 only)
    ("google_adk", 1): "google-adk",  # ADK's McpToolset declares itself on either SDK line
    ("google_adk", 2): "google-adk",
}


def mcp_client_name(framework: str) -> str:
    from mastif.protocols.mcp import SDK_LINE

    return MCP_CLIENT_NAMES.get((framework, SDK_LINE), "mcp")
