"""The research tools (``wikipedia``, ``arxiv``, ``pubmed``, ``youtube_transcript``,
``pdf_reader``) against the local API mimics, over real HTTP on 127.0.0.1.

The mimics serve the real services' formats, so these tests run the tools' live parsing
code; extra routes add the failures a live service can produce (HTTP 500, a redirect to a
private address, a response slower than the timeout, files that are not PDFs). Nothing
here reaches beyond the loopback server.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from xml.etree import ElementTree as ET

import httpx
import pytest
from fpdf import FPDF
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mastif.core.server import ServerThread
from mastif.tasks.model import Task
from mastif.tools.base import Tool, ToolError
from mastif.tools.http import HttpFetcher
from mastif.tools.knowledge import KnowledgeEndpoints, make_knowledge_tools
from mastif.tools.netpolicy import UrlPolicy
from mastif.tools.papers import arxiv_search_query, parse_arxiv_feed
from mastif.tools.pdf import parse_page_range
from mastif.tools.youtube import YOUTUBE_ORIGIN, PolicyAdapter, parse_video_id, youtube_session
from mastif.web.mimics import PREFIXES, mimic_routes
from tests.support.paths import REPO

SANDBOX_DATA = REPO / "resources" / "sandbox"
SLOW_SECONDS = 1.5
SHORT_TIMEOUT = 0.4


# --------------------------------------------------------------------------------------
# Server fixture: the mimics plus failure routes
# --------------------------------------------------------------------------------------


def _pdf(pages: list[str]) -> bytes:
    doc = FPDF()
    doc.set_font("helvetica", size=12)
    for text in pages:
        doc.add_page()
        if text:
            doc.multi_cell(0, 8, text)
    return bytes(doc.output())


REPORT_PDF = _pdf(
    [
        "Harbour survey 2024. The northern quay needs 14 new bollards.",
        "Dredging removed 3,200 cubic metres of silt from the channel.",
        "Appendix: tide tables for the Mordane estuary.",
    ]
)
BLANK_PDF = _pdf([""])


async def _error_500(request: Request) -> Response:
    return Response("upstream exploded", status_code=500)


async def _slow(request: Request) -> Response:
    await asyncio.sleep(SLOW_SECONDS)
    return Response("too late")


async def _echo_cookie(request: Request) -> Response:
    return Response(f"cookie: {request.headers.get('cookie', '')}")


async def _to_private(request: Request) -> Response:
    return RedirectResponse("http://10.0.0.1/x.pdf", status_code=302)


FILE_ROUTES = {
    "report.pdf": (REPORT_PDF, "application/pdf"),
    "report-octet": (REPORT_PDF, "application/octet-stream"),
    "blank.pdf": (BLANK_PDF, "application/pdf"),
    "corrupt.pdf": (b"%PDF-1.7\n this is not really a PDF body \n%%EOF", "application/pdf"),
    "page.html": (b"<html><body><p>Just a web page.</p></body></html>", "text/html"),
}


def _file_route(name: str, body: bytes, media_type: str) -> Route:
    async def serve(request: Request) -> Response:
        return Response(body, media_type=media_type)

    return Route(f"/files/{name}", serve)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    routes = [
        *mimic_routes(SANDBOX_DATA),
        Route("/broken/{rest:path}", _error_500, methods=["GET", "POST"]),
        Route("/slow/{rest:path}", _slow, methods=["GET", "POST"]),
        Route("/redirect/{rest:path}", _to_private, methods=["GET", "POST"]),
        Route("/echo/{rest:path}", _echo_cookie),
        *(_file_route(name, body, mt) for name, (body, mt) in FILE_ROUTES.items()),
    ]
    with ServerThread(Starlette(routes=routes), "mimic") as server:
        yield server.base_url


def _policy(base_url: str) -> UrlPolicy:
    return UrlPolicy(allowed=frozenset({base_url.removeprefix("http://")}))


def _tools(fetcher: HttpFetcher, endpoints: KnowledgeEndpoints) -> dict[str, Tool]:
    return {t.name: t for t in make_knowledge_tools(fetcher, endpoints)}


@pytest.fixture(scope="module")
def tools(base_url: str) -> dict[str, Tool]:
    fetcher = HttpFetcher(_policy(base_url), timeout_s=5.0)
    return _tools(fetcher, KnowledgeEndpoints.sandbox(base_url))


def _ok(tool: Tool, **args: object) -> str:
    result = tool.invoke(dict(args))
    assert result.ok, result.error
    assert result.error is None
    return result.output


def _fails(tool: Tool, **args: object) -> str:
    result = tool.invoke(dict(args))
    assert not result.ok, result.output
    assert result.output == ""
    assert result.error
    return result.error


# --------------------------------------------------------------------------------------
# Endpoints and schemas
# --------------------------------------------------------------------------------------


def test_sandbox_endpoints_match_the_mimic_mounts() -> None:
    endpoints = KnowledgeEndpoints.sandbox("http://127.0.0.1:8765/")
    assert endpoints.wikipedia == "http://127.0.0.1:8765" + PREFIXES["wikipedia"]
    assert endpoints.arxiv == "http://127.0.0.1:8765" + PREFIXES["arxiv"]
    assert endpoints.pubmed == "http://127.0.0.1:8765" + PREFIXES["pubmed"]
    assert endpoints.youtube == "http://127.0.0.1:8765" + PREFIXES["youtube"]
    assert KnowledgeEndpoints().youtube == YOUTUBE_ORIGIN == "https://www.youtube.com"


def test_tool_names_schemas_and_short_guidance(tools: dict[str, Tool]) -> None:
    assert list(tools) == ["wikipedia", "arxiv", "pubmed", "youtube_transcript", "pdf_reader"]
    required = {
        "wikipedia": ["query"],
        "arxiv": ["query"],
        "pubmed": ["query"],
        "youtube_transcript": ["video"],
        "pdf_reader": ["url"],
    }
    for name, tool in tools.items():
        assert tool.parameters["required"] == required[name]
        assert tool.parameters["additionalProperties"] is False
        assert tool.description.startswith("Use this tool when")
        assert "Do NOT" in tool.description
        assert len(tool.description.split()) <= 60, name
    assert not tools["wikipedia"].invoke({"query": "x", "sentences": 11}).ok
    assert not tools["arxiv"].invoke({"query": "x", "bogus": 1}).ok


# --------------------------------------------------------------------------------------
# wikipedia
# --------------------------------------------------------------------------------------


def test_wikipedia_returns_title_url_and_intro(tools: dict[str, Tool], base_url: str) -> None:
    out = _ok(tools["wikipedia"], query="Varnholm Lake depth")
    lines = out.splitlines()
    assert lines[0] == "Varnholm Lake"
    assert lines[1] == f"{base_url}/api/wikipedia/wiki/Varnholm_Lake"
    assert "maximum depth of 131 metres" in out
    assert "Arctic char" not in out  # the intro only, not the whole article
    page = httpx.get(lines[1])
    assert page.status_code == 200 and "Varnholm Lake" in page.text


def test_wikipedia_sentences_and_other_matches(tools: dict[str, Tool]) -> None:
    out = _ok(tools["wikipedia"], query="Orrery Institute", sentences=1)
    assert out.splitlines()[0] == "Orrery Institute of Technology"
    assert "founded in 1907" not in out  # second sentence cut by exsentences
    assert "Other matching articles: Castemar" in out


def test_wikipedia_no_match_is_a_failure(tools: dict[str, Tool]) -> None:
    error = _fails(tools["wikipedia"], query="zorblax quintessential")
    assert "no Wikipedia article matches" in error


def test_wikipedia_mimic_speaks_mediawiki(base_url: str) -> None:
    api = f"{base_url}/api/wikipedia/w/api.php"
    v2 = httpx.get(
        api,
        params={"action": "query", "list": "search", "srsearch": "bridge", "format": "json",
                "formatversion": "2", "srlimit": "1"},
    ).json()  # fmt: skip
    assert v2["batchcomplete"] is True
    assert v2["query"]["searchinfo"]["totalhits"] >= 1
    hit = v2["query"]["search"][0]
    assert hit["title"] == "Quillon Bridge" and hit["ns"] == 0 and isinstance(hit["pageid"], int)
    assert '<span class="searchmatch">' in hit["snippet"]
    v1 = httpx.get(
        api,
        params={"action": "query", "prop": "extracts", "exintro": "", "explaintext": "",
                "titles": "castemar|No such page", "format": "json"},
    ).json()  # fmt: skip
    assert v1["batchcomplete"] == ""
    assert v1["query"]["normalized"] == [
        {"fromencoded": False, "from": "castemar", "to": "Castemar"}
    ]
    pages = v1["query"]["pages"]
    assert pages["3982210"]["extract"].startswith("Castemar is a port city")
    assert pages["-1"] == {"ns": 0, "title": "No such page", "missing": ""}
    error = httpx.get(api, params={"action": "query", "list": "search", "format": "json"})
    assert error.status_code == 200  # MediaWiki reports API errors in the body
    assert error.headers["MediaWiki-API-Error"] == "missingparam"
    assert error.json()["error"]["code"] == "missingparam"


# --------------------------------------------------------------------------------------
# arxiv
# --------------------------------------------------------------------------------------


def test_arxiv_search_returns_parsed_entries(tools: dict[str, Tool]) -> None:
    out = _ok(tools["arxiv"], query="sparse lantern attention")
    assert out.startswith("arXiv: 1 of 1 results")
    assert "Sparse Lantern Attention: Sub-quadratic Context Windows" in out
    assert "id: 2403.01877v2 | published: 2024-03-04 | cs.CL" in out
    assert "authors: Mirela Vantongeren, Kofi Adjei-Brandt, Lu Shaoqing" in out
    assert "peak activation memory by 37%" in out
    assert "\n  " not in out.split("summary: ")[1]  # arXiv's hard wraps are collapsed


@pytest.mark.parametrize(
    "query", ["2401.07733", "arXiv:2401.07733", "https://arxiv.org/abs/2401.07733v1"]
)
def test_arxiv_looks_up_ids(tools: dict[str, Tool], query: str) -> None:
    out = _ok(tools["arxiv"], query=query)
    assert "Quantized Speculative Decoding on Commodity CPUs" in out
    assert "2.4x" in out


def test_arxiv_field_syntax_and_limits(tools: dict[str, Tool]) -> None:
    out = _ok(tools["arxiv"], query="au:Solberg")
    assert "Tool-Call Faithfulness" in out
    out = _ok(tools["arxiv"], query="language models", max_results=2)
    assert re.search(r"arXiv: 2 of \d+ results", out)
    assert "3. " not in out


def test_arxiv_no_results_is_a_failure(tools: dict[str, Tool]) -> None:
    assert "no arXiv papers match" in _fails(tools["arxiv"], query="zorblax quintessential")


def test_arxiv_error_feed_and_non_atom_bodies_raise(base_url: str) -> None:
    bad = httpx.get(f"{base_url}/api/arxiv/api/query", params={"id_list": "not-an-id"})
    assert bad.status_code == 200  # arXiv reports errors inside a feed
    with pytest.raises(ToolError, match="incorrect id format for not-an-id"):
        parse_arxiv_feed(bad.content)
    with pytest.raises(ToolError, match="unparsable XML"):
        parse_arxiv_feed(b"Rate exceeded.")


def test_arxiv_mimic_feed_uses_atom_namespaces(base_url: str) -> None:
    resp = httpx.get(
        f"{base_url}/api/arxiv/api/query",
        params={"search_query": "cat:cs.LG", "start": "0", "max_results": "2"},
    )
    assert resp.headers["content-type"].startswith("application/atom+xml")
    root = ET.fromstring(resp.content)
    atom, os_ns = "{http://www.w3.org/2005/Atom}", "{http://a9.com/-/spec/opensearch/1.1/}"
    assert root.tag == f"{atom}feed"
    assert int(root.findtext(f"{os_ns}totalResults") or 0) >= 3
    entries = root.findall(f"{atom}entry")
    assert len(entries) == 2
    assert entries[0].find("{http://arxiv.org/schemas/atom}primary_category") is not None
    assert entries[0].findtext(f"{atom}id", "").startswith("http://arxiv.org/abs/")


def test_arxiv_query_building() -> None:
    assert arxiv_search_query("the glacial lake bathymetry") == (
        "all:glacial AND all:lake AND all:bathymetry"
    )
    assert arxiv_search_query('"speculative decoding" CPUs') == (
        'all:"speculative decoding" AND all:CPUs'
    )
    assert arxiv_search_query("au:Solberg AND ti:faithfulness") == (
        "au:Solberg AND ti:faithfulness"
    )


# --------------------------------------------------------------------------------------
# pubmed
# --------------------------------------------------------------------------------------


def test_pubmed_search_and_fetch(tools: dict[str, Tool]) -> None:
    out = _ok(tools["pubmed"], query="morning evening dosing antihypertensive")
    assert out.startswith("PubMed: 1 of 1 results")
    assert "PMID: 38211407 | Journal of Cardiovascular Practice | 2024 Jan 12" in out
    assert "authors: Lindgren KE, Osei-Bonsu A, Farrant M" in out
    assert "doi: 10.5555/jcp.2024.0044" in out
    assert "METHODS: In this crossover trial, 1,204 adults" in out


def test_pubmed_respects_max_results(tools: dict[str, Tool]) -> None:
    out = _ok(tools["pubmed"], query="trial", max_results=1)
    assert re.match(r"PubMed: 1 of [2-9] results", out)


def test_pubmed_no_results_is_a_failure(tools: dict[str, Tool]) -> None:
    assert "no PubMed articles match" in _fails(tools["pubmed"], query="zorblax quintessential")


def test_pubmed_mimic_speaks_eutils(base_url: str) -> None:
    base = f"{base_url}/api/pubmed"
    found = httpx.get(
        f"{base}/esearch.fcgi", params={"db": "pubmed", "term": "atrial fibrillation",
                                        "retmode": "json"},
    ).json()  # fmt: skip
    assert found["header"]["type"] == "esearch"
    result = found["esearchresult"]
    assert result["count"] == "1" and result["idlist"] == ["38025567"]
    empty = httpx.get(
        f"{base}/esearch.fcgi", params={"db": "pubmed", "term": "zorblax", "retmode": "json"}
    ).json()["esearchresult"]
    assert empty["count"] == "0" and empty["idlist"] == []
    assert empty["errorlist"]["phrasesnotfound"] == ["zorblax"]
    assert empty["warninglist"]["outputmessages"] == ["No items found."]
    no_term = httpx.get(f"{base}/esearch.fcgi", params={"db": "pubmed", "retmode": "json"})
    assert "ERROR" in no_term.json()["esearchresult"]
    summary = httpx.get(
        f"{base}/esummary.fcgi", params={"db": "pubmed", "id": "38025567,1", "retmode": "json"}
    ).json()["result"]
    assert summary["uids"] == ["38025567", "1"]
    assert summary["38025567"]["title"].startswith("A smartphone camera app")
    assert summary["38025567"]["fulljournalname"] == "Digital Cardiology"
    assert summary["1"]["error"] == "cannot get document summary"
    xml = httpx.get(f"{base}/efetch.fcgi", params={"db": "pubmed", "id": "38025567"})
    assert xml.headers["content-type"].startswith("text/xml")
    assert ET.fromstring(xml.content).findtext(".//PMID") == "38025567"


# --------------------------------------------------------------------------------------
# youtube_transcript
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "video",
    [
        "kV7rQ2mXw0A",
        "https://www.youtube.com/watch?v=kV7rQ2mXw0A&t=30s",
        "youtu.be/kV7rQ2mXw0A",
        "https://m.youtube.com/shorts/kV7rQ2mXw0A",
        "https://www.youtube.com/embed/kV7rQ2mXw0A?start=3",
    ],
)
def test_video_ids_are_parsed_from_urls(video: str) -> None:
    assert parse_video_id(video) == "kV7rQ2mXw0A"


def test_bad_video_reference_is_rejected(tools: dict[str, Tool]) -> None:
    with pytest.raises(ToolError, match="not a YouTube video id"):
        parse_video_id("https://example.com/watch/clip")
    assert "not a YouTube video id" in _fails(tools["youtube_transcript"], video="short")


def test_youtube_transcript_through_the_library(tools: dict[str, Tool]) -> None:
    out = _ok(tools["youtube_transcript"], video="https://youtu.be/kV7rQ2mXw0A")
    lines = out.splitlines()
    assert lines[0] == (
        "Transcript of YouTube video kV7rQ2mXw0A (English (auto-generated), auto-generated):"
    )
    assert "[0:17] heat the water to 94 degrees Celsius, just off the boil" in lines
    assert "[0:22] if it's hotter than that the cup tastes bitter & flat" in lines


def test_youtube_falls_back_to_another_language(tools: dict[str, Tool]) -> None:
    out = _ok(tools["youtube_transcript"], video="Fr5oUrDoUgH")
    assert "(French, manual)" in out.splitlines()[0]
    assert "levain double" in out


@pytest.mark.parametrize(
    ("video", "reason"),
    [
        ("Zt5hN0capsQ", "Subtitles are disabled for this video"),
        ("Pr1vateVid0", "This video is private"),
        ("Ag3Restrict", "age-restricted"),
        ("AAAAAAAAAAA", "The video is no longer available"),
    ],
)
def test_youtube_without_transcript_is_a_failure(
    tools: dict[str, Tool], video: str, reason: str
) -> None:
    error = _fails(tools["youtube_transcript"], video=video)
    assert f"no transcript for YouTube video {video}" in error
    assert reason in error
    assert "github.com" not in error  # the library's boilerplate is not passed on


def test_youtube_mimic_checks_the_innertube_key(base_url: str) -> None:
    resp = httpx.post(
        f"{base_url}/api/youtube/youtubei/v1/player?key=wrong", json={"videoId": "kV7rQ2mXw0A"}
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_youtube_session_relocates_only_off_youtube(base_url: str) -> None:
    fetcher = HttpFetcher(_policy(base_url))
    adapter = youtube_session(fetcher, f"{base_url}/api/youtube").get_adapter(YOUTUBE_ORIGIN)
    assert isinstance(adapter, PolicyAdapter)
    assert adapter.relocate("https://www.youtube.com/watch?v=x") == (
        f"{base_url}/api/youtube/watch?v=x"
    )
    assert adapter.relocate("https://www.youtube.com.evil.test/") == (
        "https://www.youtube.com.evil.test/"
    )
    live = youtube_session(fetcher, YOUTUBE_ORIGIN).get_adapter(YOUTUBE_ORIGIN)
    assert isinstance(live, PolicyAdapter)
    assert live.relocate("https://www.youtube.com/watch?v=x") == (
        "https://www.youtube.com/watch?v=x"
    )


def test_youtube_session_sends_cookies_only_to_their_address(base_url: str) -> None:
    hostport = base_url.removeprefix("http://")
    mine = HttpFetcher(_policy(base_url), cookies={hostport: {"mastif_session": "run-1"}})
    echoed = youtube_session(mine, f"{base_url}/echo").get(f"{YOUTUBE_ORIGIN}/watch?v=x")
    assert "mastif_session=run-1" in echoed.text
    other = HttpFetcher(_policy(base_url), cookies={"10.0.0.1:80": {"mastif_session": "no"}})
    echoed = youtube_session(other, f"{base_url}/echo").get(f"{YOUTUBE_ORIGIN}/watch?v=x")
    assert "mastif_session" not in echoed.text


# --------------------------------------------------------------------------------------
# pdf_reader
# --------------------------------------------------------------------------------------


def test_pdf_reader_extracts_numbered_pages(tools: dict[str, Tool], base_url: str) -> None:
    url = f"{base_url}/files/report.pdf"
    out = _ok(tools["pdf_reader"], url=url)
    assert out.splitlines()[0] == f"PDF {url} (3 pages; showing pages 1-3)"
    assert "--- page 1 ---\nHarbour survey 2024. The northern quay needs 14 new bollards." in out
    assert "--- page 3 ---" in out and "tide tables" in out
    only = _ok(tools["pdf_reader"], url=url, pages="2")
    assert "showing page 2)" in only
    assert "3,200 cubic metres" in only and "bollards" not in only


def test_pdf_reader_trusts_the_magic_bytes(tools: dict[str, Tool], base_url: str) -> None:
    out = _ok(tools["pdf_reader"], url=f"{base_url}/files/report-octet")
    assert "bollards" in out


@pytest.mark.parametrize(
    ("name", "pages", "message"),
    [
        ("page.html", None, "is not a PDF (content-type text/html"),
        ("corrupt.pdf", None, "damaged or unreadable PDF"),
        ("blank.pdf", None, "no extractable text"),
        ("report.pdf", "7", "page 7 does not exist: the PDF has 3 pages"),
        ("report.pdf", "two", "bad pages 'two'"),
    ],
)
def test_pdf_reader_failures(
    tools: dict[str, Tool], base_url: str, name: str, pages: str | None, message: str
) -> None:
    args: dict[str, object] = {"url": f"{base_url}/files/{name}"}
    if pages is not None:
        args["pages"] = pages
    assert message in _fails(tools["pdf_reader"], **args)


def test_page_ranges() -> None:
    assert parse_page_range("1,3-4", 10) == [1, 3, 4]
    assert parse_page_range("2-99", 4) == [2, 3, 4]
    with pytest.raises(ToolError, match="at most"):
        parse_page_range("1-30", 50)


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest", "http://10.0.0.1/x.pdf"])
def test_pdf_reader_refuses_private_addresses(tools: dict[str, Tool], url: str) -> None:
    assert "refused" in _fails(tools["pdf_reader"], url=url)


# --------------------------------------------------------------------------------------
# Failures every tool must report: HTTP 500, redirect to a private host, timeout, policy
# --------------------------------------------------------------------------------------

CALLS: dict[str, dict[str, object]] = {
    "wikipedia": {"query": "Varnholm Lake"},
    "arxiv": {"query": "lantern attention"},
    "pubmed": {"query": "atrial fibrillation"},
    "youtube_transcript": {"video": "kV7rQ2mXw0A"},
}


def _pointed_at(fetcher: HttpFetcher, base: str) -> dict[str, Tool]:
    endpoints = KnowledgeEndpoints(wikipedia=base, arxiv=base, pubmed=base, youtube=base)
    return _tools(fetcher, endpoints)


def _pdf_url(base: str) -> dict[str, object]:
    return {"url": f"{base}/report.pdf"}


@pytest.mark.parametrize("name", [*CALLS, "pdf_reader"])
def test_http_500_is_a_failure(base_url: str, name: str) -> None:
    base = f"{base_url}/broken"
    tool = _pointed_at(HttpFetcher(_policy(base_url), timeout_s=5.0), base)[name]
    error = _fails(tool, **CALLS.get(name, _pdf_url(base)))
    assert "500" in error


@pytest.mark.parametrize("name", [*CALLS, "pdf_reader"])
def test_redirect_to_private_address_is_refused(base_url: str, name: str) -> None:
    base = f"{base_url}/redirect"
    tool = _pointed_at(HttpFetcher(_policy(base_url), timeout_s=5.0), base)[name]
    error = _fails(tool, **CALLS.get(name, _pdf_url(base)))
    assert "refused" in error and "10.0.0.1" in error


@pytest.mark.parametrize("name", [*CALLS, "pdf_reader"])
def test_slow_service_times_out(base_url: str, name: str) -> None:
    base = f"{base_url}/slow"
    tool = _pointed_at(HttpFetcher(_policy(base_url), timeout_s=SHORT_TIMEOUT), base)[name]
    started = time.monotonic()
    error = _fails(tool, **CALLS.get(name, _pdf_url(base)))
    assert "timed out" in error
    assert time.monotonic() - started < SLOW_SECONDS


@pytest.mark.parametrize("name", [*CALLS, "pdf_reader"])
def test_default_policy_refuses_the_loopback_endpoint(base_url: str, name: str) -> None:
    tool = _tools(HttpFetcher(), KnowledgeEndpoints.sandbox(base_url))[name]
    args = CALLS.get(name, {"url": f"{base_url}/files/report.pdf"})
    error = _fails(tool, **args)
    assert "refused" in error and "127.0.0.1" in error


# --------------------------------------------------------------------------------------
# The task set: every reference path reaches an answer that passes its check
# --------------------------------------------------------------------------------------

_STEP = re.compile(r"^\[tool\] (\w+) -> (QUERY|VIDEO|URL): (.+)$")
_ARG = {"QUERY": "query", "VIDEO": "video", "URL": "url"}


def test_knowledge_tasks_are_solvable_from_the_mimics(tools: dict[str, Tool]) -> None:
    from mastif.tasks.checks import evaluate_check, validate_check

    path = SANDBOX_DATA / "tasks" / "knowledge.jsonl"
    tasks = [Task.model_validate(json.loads(line)) for line in path.read_text().splitlines()]
    assert 5 <= len(tasks) <= 6
    for task in tasks:
        assert task.website == "knowledge" and task.domain == "Research"
        assert task.check is not None
        validate_check(task.check)
        outputs = []
        for step in task.reference_steps:
            match = _STEP.match(step)
            assert match, step
            name, kind, value = match.groups()
            outputs.append(_ok(tools[name], **{_ARG[kind]: value}))
        assert evaluate_check(task.check, "\n".join(outputs), {}).success, task.task_id


def test_default_data_dir_serves_the_shipped_corpus() -> None:
    mounts = mimic_routes()
    assert [getattr(m, "path", "") for m in mounts] == list(PREFIXES.values())
