"""One cap on every text a tool hands an agent and every error text a run stores (issue 49).

Before: only tool *outputs* went through the cap. An error carried whatever a page put in
it — a 2,000,134-character ``no element matches … on {page.url}`` after a page rewrote its
URL with ``history.replaceState`` — into the next prompt, the run's Parquet and the viewer.
Each tool family here is fed a page-controlled 2 MB string where it builds its output or
its error; the browser family's case is in ``test_hostile_pages.py`` (it needs Chromium).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mastif.core.server import ServerThread
from mastif.core.textclip import MAX_TEXT_CHARS, clip_text
from mastif.core.trace import LLMCall, RunTrace, ToolCall, runs_to_table
from mastif.reporting.viewer.export import run_detail
from mastif.tools.base import Tool, ToolError, ToolResult, object_schema
from mastif.tools.builtin import PYTHON_REPL
from mastif.tools.http import HttpFetcher
from mastif.tools.knowledge import KnowledgeEndpoints, make_knowledge_tools
from mastif.tools.netpolicy import UrlPolicy
from mastif.tools.web import SearchHit, make_web_tools

#: what a hostile page puts where a tool will quote it: 2 MB, no space to cut at
HUGE = "u" * 2_000_000


def _bounded(result: ToolResult) -> None:
    """Within the cap, and saying it was cut (so the 2 MB string did reach the text)."""
    assert len(result.output) <= MAX_TEXT_CHARS, len(result.output)
    assert result.error is None or len(result.error) <= MAX_TEXT_CHARS, len(result.error)
    said = result.output if result.ok else result.error
    assert said and "truncated" in said, (said or "")[:200]


# ------------------------------------------------------------------------------ the cap


def test_clip_text_says_what_it_cut_and_a_second_cut_changes_nothing() -> None:
    text = "word " * 5000
    once = clip_text(text, 1000)
    assert len(once) <= 1000 and once.endswith("characters]")
    dropped = int(once.rsplit("[truncated ", 1)[1].split()[0])
    assert len(once.split("\n... [truncated")[0]) + dropped == len(text)
    assert clip_text(once, 1000) == once
    assert clip_text(HUGE) == clip_text(clip_text(HUGE))
    assert len(clip_text(HUGE)) <= MAX_TEXT_CHARS
    assert clip_text("short", 1000) == "short"
    assert clip_text("x" * 50, 10) == "x" * 10  # too small for a note


def test_every_tool_result_is_cut_output_and_error() -> None:
    """The cap is in :class:`ToolResult` itself: a tool's own output and error, and a result
    an adapter or protocol makes of a refusal (an unknown tool's name is the model's)."""

    def loud(fail: bool) -> str:
        if fail:
            raise ToolError(f"failed on {HUGE}")
        return HUGE

    tool = Tool("loud", "x", object_schema({"fail": {"type": "boolean"}}, ["fail"]), loud)
    _bounded(tool.invoke({"fail": True}))
    _bounded(tool.invoke({"fail": False}))
    assert "truncated" in tool.invoke({"fail": False}).output
    _bounded(ToolResult(False, "", f"unknown tool {HUGE!r}"))


# ------------------------------------------------------------- a hostile API and web site


async def _wikipedia(request: Request) -> Response:
    return JSONResponse({"error": {"code": "badquery", "info": HUGE}})


async def _pubmed(request: Request) -> Response:
    return JSONResponse({"esearchresult": {"ERROR": HUGE}})


async def _page(request: Request) -> Response:
    # within the fetcher's 5 MiB: the title and the text, or an attribute
    if request.query_params.get("attribute"):
        body = f"<html><body><p data-x={HUGE}>x</p></body></html>"
    else:
        body = f"<html><head><title>{HUGE}</title></head><body><p>{HUGE}</p></body></html>"
    return Response(body, media_type="text/html")


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    routes = [
        Route("/wiki/w/api.php", _wikipedia),
        Route("/pubmed/esearch.fcgi", _pubmed),
        Route("/page", _page),
    ]
    with ServerThread(Starlette(routes=routes), "hostile") as server:
        yield server.base_url


def test_knowledge_tools_cut_a_huge_api_error(hostile: str) -> None:
    """Before: the Wikipedia and PubMed error texts were 2,000,0xx characters."""
    fetcher = HttpFetcher(UrlPolicy(allowed=frozenset({hostile.removeprefix("http://")})), 5.0)
    endpoints = KnowledgeEndpoints(wikipedia=f"{hostile}/wiki", pubmed=f"{hostile}/pubmed")
    tools = {t.name: t for t in make_knowledge_tools(fetcher, endpoints)}
    for name in ("wikipedia", "pubmed"):
        result = tools[name].invoke({"query": "anything"})
        assert not result.ok and HUGE[:100] in (result.error or ""), name
        _bounded(result)


class _Web:
    """The HTTP tools' side of a web environment (no browser is started)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.page_chars = 2000
        self.browser = type("NoBrowser", (), {"options": type("O", (), {"action_timeout_s": 5})})()
        self._fetcher = HttpFetcher(UrlPolicy(allowed=frozenset({base[len("http://") :]})), 5.0)

    def fetcher(self) -> HttpFetcher:
        return self._fetcher

    def resolve(self, url: str, base: str | None = None) -> str:
        return url if url.startswith("http") else self.base + url

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        # what a search engine's page says of a hit: its title and snippet
        return [SearchHit(HUGE, f"{self.base}/page", HUGE)]


def test_http_and_search_tools_cut_a_huge_page(hostile: str) -> None:
    tools = {t.name: t for t in make_web_tools(_Web(hostile))}  # type: ignore[arg-type]
    _bounded(tools["web_search"].invoke({"query": "anything"}))
    _bounded(tools["requests_get"].invoke({"url": "/page"}))
    scraper = tools["beautifulsoup_scraper"]
    _bounded(scraper.invoke({"url": "/page"}))
    _bounded(scraper.invoke({"url": "/page", "selector": "p"}))
    _bounded(scraper.invoke({"url": "/page?attribute=1", "selector": "p", "attribute": "data-x"}))


def test_a_childs_huge_error_is_cut() -> None:
    result = PYTHON_REPL.invoke({"code": "raise ValueError('u' * 2_000_000)"})
    assert not result.ok
    _bounded(result)


# ------------------------------------------------------------ what a run stores and shows


def _run(error: str) -> RunTrace:
    return RunTrace(
        run_id="r1", experiment="e", model="m", protocol="standard", framework="f",
        task_id="t", task_text="x", website="w", domain=None, level=None, status="error",
        error_class="tool", error_message=error, final_answer="",
        tool_calls=[ToolCall("n", 1, "web_interaction", "{}", False, HUGE, HUGE, 0.1)],
        llm_calls=[LLMCall("n", 0.0, 0.1, None, None, 500, HUGE, 1)],
    )  # fmt: skip


def test_a_runs_stored_error_texts_are_cut(tmp_path) -> None:
    """The run's, its tool calls' and its LLM calls' texts, however the trace was made (a
    framework's exception, an imported log, a checkpoint line), reach Parquet cut."""
    run = _run(f"RuntimeError: {HUGE}")
    again = RunTrace.from_json(json.dumps({**json.loads(run.to_json()), "error_message": HUGE}))
    path = tmp_path / "runs.parquet"
    pq.write_table(runs_to_table([run, again]), path)
    for row in pq.read_table(path).to_pylist():
        assert len(row["error_message"]) <= MAX_TEXT_CHARS
        for call in row["tool_calls"]:
            assert len(call["error"]) <= MAX_TEXT_CHARS and len(call["output"]) <= MAX_TEXT_CHARS
        assert all(len(c["error"]) <= MAX_TEXT_CHARS for c in row["llm_calls"])


def test_the_viewer_shows_a_tables_error_texts_cut() -> None:
    """A runs table written before the cap (or by another tool) is cut on the run page."""
    row = {
        "run_id": "r1",
        "error_message": HUGE,
        "tool_calls": [{"name": "x", "output": HUGE, "error": HUGE}],
        "llm_calls": [{"node": "n", "error": HUGE}],
    }
    detail = run_detail(row, {"judge_error": HUGE}, None, None)
    assert len(detail["run"]["error_message"]) <= MAX_TEXT_CHARS
    assert len(detail["tool_calls"][0]["error"]) <= MAX_TEXT_CHARS
    assert len(detail["tool_calls"][0]["output"]) <= MAX_TEXT_CHARS
    assert len(detail["llm_calls"][0]["error"]) <= MAX_TEXT_CHARS
    assert len(detail["judge"]["judge_error"]) <= MAX_TEXT_CHARS
