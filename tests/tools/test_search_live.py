"""The live ``web_search`` backend (real ``ddgs`` library) against a local DuckDuckGo fixture.

How ddgs is redirected, and why this way: the ``duckduckgo`` text engine
(``ddgs.engines.duckduckgo.Duckduckgo``) takes its endpoint from the plain class attribute
``search_url = "https://html.duckduckgo.com/html/"``, read on every ``search()`` and never
copied in ``__init__``. Monkeypatching that one attribute to the fixture's URL leaves all of
ddgs's real code path in play (payload building, the ``primp`` HTTP client, status handling,
lxml XPath parsing, ad filtering, dedup and ranking) and touches nothing else. The
alternative, wrapping ``HttpClient.request`` to rewrite URLs, would patch the transport for
every engine and hide what ddgs actually sends.

As a safety net, ``HttpClient.request`` is still *spied on* (not rewritten): every URL ddgs
tries is recorded and anything that is not the fixture is refused before primp sees it, so a
regression (say a fallback to ``backend="auto"``) fails the test instead of touching the
internet. Proxy environment variables are cleared because primp honours ``HTTP_PROXY`` & co
even for 127.0.0.1, and ddgs reads ``DDGS_PROXY``.

The fixture mimics ``POST https://html.duckduckgo.com/html/``: the ``div.result__body`` blocks
that the engine's XPaths (items ``//div[contains(@class, 'body')]``, title ``.//h2//text()``,
href ``./a/@href``, body ``./a//text()``) read, plus one ad (``duckduckgo.com/y.js``) that the
engine must drop. The results are made up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from ddgs.engines.duckduckgo import Duckduckgo
from ddgs.exceptions import DDGSException
from ddgs.http_client import HttpClient

from mastif.tools.base import ToolError
from mastif.tools.search_live import SearchHit, live_search
from tests.support.servers import QuietHandler, serve

pytestmark = pytest.mark.timeout(20)

QUERY = "mastif agent benchmark"

EXPECTED = [
    SearchHit(
        "MASTIF: a benchmark for agent stacks",
        "https://example.org/mastif/overview",
        "MASTIF compares agent frameworks and protocols on the same benchmark tasks.",
    ),
    SearchHit(
        "Agent protocols & tool use in MASTIF",
        "https://docs.example.net/mastif/protocols?lang=en",
        "How MASTIF runs each agent over MCP and A2A, with identical tools per benchmark run.",
    ),
    SearchHit(
        "Benchmark results for agent frameworks",
        "https://blog.example.com/2024/agent-benchmark-results",
        "A made-up agent benchmark write-up, used only by the mastif test-suite.",
    ),
]


def result_block(title_html: str, url: str, snippet_html: str) -> str:
    """One organic result as html.duckduckgo.com lays it out."""
    display = url.split("://", 1)[1]
    return f"""
      <div class="result results_links results_links_deep web-result ">
        <div class="links_main links_deep result__body">
          <h2 class="result__title">
            <a rel="nofollow" class="result__a" href="{url}">{title_html}</a>
          </h2>
          <div class="result__extras">
            <div class="result__extras__url">
              <span class="result__icon"><a rel="nofollow" href="{url}">
                <img class="result__icon__img" width="16" height="16" alt=""
                     src="//external-content.duckduckgo.com/ip3/example.org.ico" name="i15" /></a>
              </span>
              <a class="result__url" href="{url}">{display}</a>
            </div>
          </div>
          <a class="result__snippet" href="{url}">{snippet_html}</a>
          <div class="clear"></div>
        </div>
      </div>"""


AD_BLOCK = """
      <div class="result results_links results_links_deep result--ad ">
        <div class="links_main links_deep result__body">
          <h2 class="result__title">
            <a rel="nofollow" class="result__a"
               href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;ad_provider=bingv7aa&amp;u3=x">Buy agents now</a>
          </h2>
          <a class="result__snippet"
             href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;ad_provider=bingv7aa&amp;u3=x">Sponsored agent deals.</a>
        </div>
      </div>"""


def results_page(blocks: str) -> str:
    return f"""<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
  "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
<head>
  <meta http-equiv="content-type" content="text/html; charset=UTF-8" />
  <title>{QUERY} at DuckDuckGo</title>
  <link rel="stylesheet" href="/dist/h.css" type="text/css" />
</head>
<body class="body--html">
  <a name="top" id="top"></a>
  <form action="/html/" method="post">
    <input type="text" name="q" class="search__input" value="{QUERY}" />
    <input name="b" id="search_button_homepage" class="search__button" type="submit" value="" />
  </form>
  <div>
    <div class="serp__results">
      <div id="links" class="results">
{blocks}
        <div class="nav-link">
          <form action="/html/" method="post">
            <input type="submit" class="btn btn--alt" value="Next" />
            <input type="hidden" name="q" value="{QUERY}" />
            <input type="hidden" name="s" value="10" />
          </form>
        </div>
      </div>
    </div>
  </div>
</body>
</html>
"""


RESULTS_HTML = results_page(
    AD_BLOCK
    + result_block(
        "<b>MASTIF</b>: a <b>benchmark</b> for <b>agent</b> stacks",
        EXPECTED[0].url,
        "<b>MASTIF</b> compares <b>agent</b> frameworks and protocols on the same "
        "<b>benchmark</b>\n   tasks.",
    )
    + result_block(
        "<b>Agent</b> protocols &amp; tool use in <b>MASTIF</b>",
        # DuckDuckGo sends hrefs percent-encoded; ddgs unquotes them
        "https://docs.example.net/mastif/protocols%3Flang%3Den",
        "How <b>MASTIF</b> runs each <b>agent</b> over MCP and A2A, with identical tools per "
        "<b>benchmark</b> run.",
    )
    + result_block(
        "<b>Benchmark</b> results for <b>agent</b> frameworks",
        EXPECTED[2].url,
        "A made-up <b>agent</b> <b>benchmark</b> write-up, used only by the <b>mastif</b> "
        "test-suite.",
    )
)

NO_RESULTS_HTML = results_page(
    """
        <div class="result results_links results_links_deep result--no-result">
          <div class="no-results">No  results.</div>
        </div>"""
)


@dataclass
class Fixture:
    base_url: str
    mode: str = "results"
    requests: list[dict[str, object]] = field(default_factory=list)  # as the server saw them
    attempted_urls: list[str] = field(default_factory=list)  # as ddgs asked primp for them

    @property
    def search_url(self) -> str:
        return f"{self.base_url}/html/"


class _Handler(QuietHandler):
    fixture: Fixture  # set on a per-server subclass

    def _send(self, status: int, body: str, content_type: str = "text/html; charset=UTF-8") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.fixture.requests.append({"method": "GET", "path": self.path, "form": {}})
        self._send(404, "not found", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
        self.fixture.requests.append(
            {
                "method": "POST",
                "path": self.path,
                "form": form,
                "user_agent": self.headers.get("User-Agent", ""),
            }
        )
        if self.path != "/html/":
            self._send(404, "not found", "text/plain")
            return
        mode = self.fixture.mode
        if mode == "results":
            self._send(200, RESULTS_HTML)
        elif mode == "empty":
            self._send(200, NO_RESULTS_HTML)
        elif mode == "slow":
            time.sleep(1.5)
            self._send(200, RESULTS_HTML)
        else:  # an HTTP status code: 500, 429, or 202 (DuckDuckGo's "anomaly" rate limit)
            self._send(int(mode), "<html><body>rate limited or broken</body></html>")


@pytest.fixture
def ddg(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fixture]:
    """A local html.duckduckgo.com; ddgs's duckduckgo engine pointed at it; egress fenced."""
    fixture = Fixture(base_url="")
    served = serve(type("Handler", (_Handler,), {"fixture": fixture}), poll_interval=0.05)
    fixture.base_url = served.url
    served.start()

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "DDGS_PROXY"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.lower(), raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")

    # the redirect: the engine's endpoint (see the module docstring)
    monkeypatch.setattr(Duckduckgo, "search_url", fixture.search_url)

    # the fence: record every URL ddgs asks primp for, refuse any that is not the fixture
    real_request = HttpClient.request

    def fenced_request(self: HttpClient, method: str, url: str, *args: object, **kwargs: object):
        fixture.attempted_urls.append(url)
        if not url.startswith(fixture.base_url + "/"):
            raise DDGSException(f"test fence: refused non-fixture URL {url}")
        return real_request(self, method, url, *args, **kwargs)

    monkeypatch.setattr(HttpClient, "request", fenced_request)
    try:
        yield fixture
    finally:
        served.stop()


def assert_only_fixture_traffic(fixture: Fixture, expected_requests: int) -> None:
    assert fixture.attempted_urls == [fixture.search_url] * expected_requests
    assert len(fixture.requests) == expected_requests
    for req in fixture.requests:
        assert req["method"] == "POST" and req["path"] == "/html/"


def test_returns_the_fixture_hits(ddg: Fixture) -> None:
    hits = live_search(QUERY, 5, timeout_s=5)

    assert hits == EXPECTED  # ad dropped, tags stripped, entities and %-escapes decoded
    assert all(isinstance(h, SearchHit) for h in hits)
    assert_only_fixture_traffic(ddg, 1)
    form = ddg.requests[0]["form"]
    assert form == {"q": [QUERY], "b": [""], "l": ["wt-wt"]}
    assert ddg.requests[0]["user_agent"]  # primp impersonates a browser


def test_max_results_and_region_are_passed_on(ddg: Fixture) -> None:
    hits = live_search(QUERY, max_results=2, region="de-de", timeout_s=5)

    assert hits == EXPECTED[:2]
    assert_only_fixture_traffic(ddg, 1)
    assert ddg.requests[0]["form"]["l"] == ["de-de"]


def test_searchhit_is_frozen() -> None:
    hit = EXPECTED[0]
    with pytest.raises(AttributeError):
        hit.title = "changed"  # type: ignore[misc]


def test_empty_results_page_is_a_tool_error(ddg: Fixture) -> None:
    ddg.mode = "empty"
    with pytest.raises(ToolError, match=r"^no results for 'nothing matches this'"):
        live_search("nothing matches this", timeout_s=5)
    assert_only_fixture_traffic(ddg, 1)


@pytest.mark.parametrize("status", ["500", "429", "202"])
def test_http_error_fails_fast_without_retry_or_fallback(ddg: Fixture, status: str) -> None:
    # ddgs turns any non-200 into "no results": one request, no retry, no other engine
    ddg.mode = status
    start = time.monotonic()
    with pytest.raises(ToolError, match=r"^no results for .*rate limiting and HTTP errors"):
        live_search(QUERY, timeout_s=5)
    assert time.monotonic() - start < 3
    assert_only_fixture_traffic(ddg, 1)


def test_timeout_is_a_tool_error(ddg: Fixture) -> None:
    ddg.mode = "slow"
    start = time.monotonic()
    with pytest.raises(ToolError, match=r"timed out after 0\.5s"):
        live_search(QUERY, timeout_s=0.5)
    assert time.monotonic() - start < 1.4  # the server would answer after 1.5 s
    assert_only_fixture_traffic(ddg, 1)


def test_connection_refused_is_a_tool_error(ddg: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # a port that was free a moment ago: nothing listens there now
    probe = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    dead_url = f"http://127.0.0.1:{probe.server_address[1]}/html/"
    probe.server_close()
    monkeypatch.setattr(Duckduckgo, "search_url", dead_url)
    ddg.base_url = dead_url.removesuffix("/html/")  # let the fence allow it

    with pytest.raises(ToolError, match=r"web search failed \(duckduckgo\).*ConnectError"):
        live_search(QUERY, timeout_s=5)
    assert ddg.attempted_urls == [dead_url]
    assert ddg.requests == []


def test_unknown_backend_is_refused_before_any_request(ddg: Fixture) -> None:
    # ddgs itself would only log this and silently search every engine ("auto")
    with pytest.raises(ToolError, match=r"unknown web search backend 'duckduckgoo'.*duckduckgo"):
        live_search(QUERY, backend="duckduckgoo")
    assert ddg.attempted_urls == []
    assert ddg.requests == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "  "}, "non-empty"),
        ({"query": QUERY, "max_results": 0}, "positive integer"),
        ({"query": QUERY, "timeout_s": 0}, "timeout_s must be positive"),
    ],
)
def test_bad_arguments_are_tool_errors(ddg: Fixture, kwargs: dict, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        live_search(**kwargs)
    assert ddg.attempted_urls == []


def test_web_search_tool_in_live_mode_uses_ddgs(ddg: Fixture) -> None:
    """The ``web_search`` tool of a ``web: live`` environment is this backend."""
    from mastif.core.config import WebOptions
    from mastif.execution.webenv import WebEnvironment

    options = WebOptions(
        allow_private=False, allowed_hosts=(), browser_executable="/usr/bin/chromium",
        action_timeout_s=5, http_timeout_s=5, page_chars=1500, search_backend="duckduckgo",
    )  # fmt: skip
    env = WebEnvironment("live", options, None)
    try:
        (search,) = env.tools(["web_search"])
        result = search.invoke({"query": QUERY, "max_results": 2}, "run-live")
    finally:
        env.close()
    assert result.ok, result.error
    assert result.output.startswith(f"1. {EXPECTED[0].title}\n   {EXPECTED[0].url}")
    assert_only_fixture_traffic(ddg, 1)
