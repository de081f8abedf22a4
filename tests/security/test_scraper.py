"""Issue 49, item 4: ``beautifulsoup_scraper`` parses a fetched page in a limited child.

Before, the page (up to the fetcher's 5 MiB) was parsed in the harness process without a
bound: 5 MiB of ``<p>a</p>`` grew it by 759 MB in 14 s, 5 MiB of nested ``<i>`` by
1,079 MB in 21 s, and the selector ``i i i`` on the latter had not ended after 250 s
(1,357 MB), in a thread the run's timeout cannot stop. Each test below says what it
failed with before the fix.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from mastif.execution.webenv import WebEnvironment
from mastif.tools import Tool, ToolResult
from mastif.tools.http import MAX_BYTES, HttpFetcher
from mastif.tools.scrape import (
    SCRAPER_CPU_S,
    SCRAPER_MEMORY_MB,
    SCRAPER_TIMEOUT_S,
    make_scraper_tool,
)
from tests.support.memory import child_pids, cpu_seconds, measured
from tests.support.servers import QuietHandler, serve
from tests.support.webfixture import live_web_environment

# --------------------------------------------------------------------------- pages

#: the issue's two pages at the fetcher's cap: 655,360 sibling tags, 1,747,626 nested ones
FLAT = b"<p>a</p>" * (MAX_BYTES // 8)
NESTED = b"<i>" * (MAX_BYTES // 3)
#: the same, 1 MiB: enough to pass a small limit in a fraction of a second
FLAT_1M = FLAT[: 2**20]
NESTED_1M = NESTED[: 3 * (2**20 // 3)]

NORMAL = (
    "<!doctype html><html><head><title> Harbour Books </title>"
    "<style>.price { color: red }</style><script>var basket = [];</script></head><body>"
    '<nav><a href="/">Home</a> <a href="catalogue?page=2">Next page</a> '
    '<a href="https://example.org/about"><img alt="logo" src="/logo.png"></a></nav>'
    "<h1>Catalogue</h1><noscript>Enable JavaScript</noscript>"
    "<table><tr><th>Title</th><th>Price</th></tr>"
    '<tr class="book featured"><td><a href="/b/1">Moby-Dick</a></td>'
    '<td class="price">£12.50</td></tr>'
    '<tr class="book"><td><a href="/b/2">Walden</a></td><td class="price">£7.25</td></tr>'
    "</table><p>Open daily, 9&ndash;17 &amp; by appointment.</p></body></html>"
)


def _catalogue(cards: int) -> bytes:
    """A shop listing like real ones: ~330 bytes and 10 tags a card (3,000 cards: 1 MB,
    30,000 tags; a 1.9 MB mdBook page has 25,000)."""
    head = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Catalogue</title>"
        "<link rel='stylesheet' href='/site.css'><script src='/app.js'></script></head>"
        "<body><header><nav><a href='/'>Home</a> <a href='/cart'>Cart</a></nav></header><main>"
    )
    card = (
        "<article class='card' id='c{n}'><h2><a href='/item/{n}'>Item {n}</a></h2>"
        "<p class='price'>${n}.99</p><ul class='specs'><li>Weight {n} g</li>"
        "<li>Colour: slate grey</li></ul><p class='blurb'>A sturdy, well made item for "
        "everyday use, shipped within two days from our warehouse.</p>"
        "<button data-sku='{n}'>Add to cart</button></article>\n"
    )
    body = "".join(card.format(n=n) for n in range(1, cards + 1))
    return (head + body + "</main><footer>© Example shop</footer></body></html>").encode()


CATALOGUE = _catalogue(3000)
PAGES = {
    "/flat": FLAT,
    "/nested": NESTED,
    "/flat-1m": FLAT_1M,
    "/nested-1m": NESTED_1M,
    "/catalogue": CATALOGUE,
    "/shop/books": NORMAL.encode(),
    "/latin1/books": NORMAL.encode("iso-8859-1"),
}


class _Handler(QuietHandler):
    def do_GET(self) -> None:
        body = PAGES.get(self.path)
        charset = "iso-8859-1" if self.path.startswith("/latin1") else "utf-8"
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", f"text/html; charset={charset}")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(_Handler, poll_interval=0.05) as server:
        yield server.url


@pytest.fixture(scope="module")
def web(base_url: str) -> Iterator[WebEnvironment]:
    env = live_web_environment(base_url, http_timeout_s=10.0)
    yield env
    env.close()


@pytest.fixture(scope="module")
def scraper(web: WebEnvironment) -> Tool:
    """The tool as a run gets it, under the default limits."""
    (tool,) = web.tools(["beautifulsoup_scraper"])
    return tool


@pytest.fixture
def fetch_times(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The wall time of each fetch the tool makes (the part of a call not parsing)."""
    times: list[float] = []
    real_get = HttpFetcher.get

    def timed_get(self: HttpFetcher, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return real_get(self, *args, **kwargs)
        finally:
            times.append(time.monotonic() - started)

    monkeypatch.setattr(HttpFetcher, "get", timed_get)
    return times


# --------------------------------------------------------------------------- helpers


def _measured(call: Callable[[], ToolResult]) -> tuple[ToolResult, float, float, float]:
    """``call()``'s result, its wall time (s), this process's peak resident growth (MB) and
    the CPU this process spent (s)."""
    spent: list[float] = []

    def timed() -> ToolResult:
        # the CPU of the call alone, not of measured()'s own gc.collect() of a big heap
        cpu0 = cpu_seconds()
        try:
            return call()
        finally:
            spent.append(cpu_seconds() - cpu0)

    result, cost = measured(timed)
    return result, cost.seconds, cost.harness_mb, spent[0]


def _limit_hit(error: str | None, work: str) -> bool:
    """``error`` is the tool's sentence for one of its default limits."""
    return any(
        f"{what} {work} (the beautifulsoup_scraper limit)" in (error or "")
        for what in (
            f"needed more than {SCRAPER_CPU_S} s of CPU",
            f"needed more than {SCRAPER_MEMORY_MB} MB of memory",
            f"took more than {SCRAPER_TIMEOUT_S:g} s",
        )
    )


def test_limits_are_named_and_consistent() -> None:
    # the CPU limit sits below the wall clock (an idle machine names the CPU limit), and
    # the wall clock below the issue's 5 s
    assert SCRAPER_CPU_S < SCRAPER_TIMEOUT_S < 5 and SCRAPER_MEMORY_MB > 0


# --------------------------------------------------------------------------- the repros


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "selector", "work"),
    [
        ("/flat", None, "to parse"),
        ("/nested", None, "to parse"),
        ("/nested", "i i i", "to parse and match 'i i i'"),
    ],
)
def test_issue_pages_end_within_the_bound(
    scraper: Tool, base_url: str, fetch_times: list[float], path: str, selector: str, work: str
) -> None:
    # Before the fix, in this process: /flat +759 MB and 14 s, /nested +1,079 MB and 21 s
    # (both then returned their text), /nested with 'i i i' not ended after 250 s (+1,357
    # MB). Now the child is stopped at the CPU limit (~3 s) and this process grows by the
    # page's bytes only (~10 MB).
    ours = child_pids()  # processes other tests of this worker may own
    args = {"url": f"{base_url}{path}"} | ({"selector": selector} if selector else {})
    result, wall, growth, parent_cpu = _measured(lambda: scraper.invoke(args, "sec-scrape"))
    assert len(fetch_times) == 1, fetch_times
    beyond = wall - fetch_times[0]
    print(f"{path} {selector}: {wall:.2f} s ({beyond:.2f} s beyond the fetch), +{growth:.0f} MB")
    assert not result.ok
    assert _limit_hit(result.error, work), result.error
    assert f"the page {base_url}{path} " in result.error and "requests_get" in result.error
    assert "Traceback" not in result.error
    assert beyond < 5, f"{beyond:.2f} s beyond the fetch"
    assert growth < 100, f"the harness's peak resident set grew {growth:.0f} MB"
    assert parent_cpu < 1.0, f"this process spent {parent_cpu:.2f} s of CPU"
    assert child_pids() <= ours


# --------------------------------------------------------------------------- each limit


def test_cpu_limit_stops_the_parse_in_a_child(
    web: WebEnvironment, base_url: str, fetch_times: list[float]
) -> None:
    ours = child_pids()
    # Before the fix: make_scraper_tool took no limits (TypeError here; this module's
    # imports fail too); the old tool spent 2.7 s of this process's CPU on this page.
    tool = make_scraper_tool(web, cpu_s=1, timeout_s=30.0)
    children0 = cpu_seconds(resource.RUSAGE_CHILDREN)
    result, wall, _, parent_cpu = _measured(
        lambda: tool.invoke({"url": f"{base_url}/flat-1m"}, "sec-scrape")
    )
    assert not result.ok
    assert result.error == (
        f"the page {base_url}/flat-1m needed more than 1 s of CPU to parse (the "
        "beautifulsoup_scraper limit); use requests_get for its raw text"
    )
    assert cpu_seconds(resource.RUSAGE_CHILDREN) - children0 >= 0.8  # the child did the work
    assert parent_cpu < 0.5, f"this process spent {parent_cpu:.2f} s of CPU on the page"
    assert wall - fetch_times[0] < 5
    assert child_pids() <= ours


def test_cpu_limit_stops_a_selector_with_a_clear_error(web: WebEnvironment, base_url: str) -> None:
    ours = child_pids()
    # Before the fix: TypeError (no limits); the old tool's 'i i i' on nested tags read the
    # text under every match, quadratic in the page (1 MiB: not ended after 300 s).
    tool = make_scraper_tool(web, cpu_s=1, timeout_s=30.0)
    result = tool.invoke({"url": f"{base_url}/nested-1m", "selector": "i i i"}, "sec-scrape")
    assert not result.ok
    assert result.error == (
        f"the page {base_url}/nested-1m needed more than 1 s of CPU to parse and match "
        "'i i i' (the beautifulsoup_scraper limit); use requests_get for its raw text, "
        "or a simpler selector"
    )
    assert child_pids() <= ours


#: the memory case, run in a Python of its own (argv: the server's base URL): a child forked
#: from a long-lived process (a test worker that has run hundreds of tests, a stack job) can
#: reuse the free heap it inherits beyond its RLIMIT_AS budget (docs/security.md, "Known
#: limits"), so there the 8 MB budget can let this whole tree through (seen in CI)
_MEMORY_CASE = """
import json, sys
from mastif.core.config import WebOptions
from mastif.execution.webenv import WebEnvironment
from mastif.tools.scrape import make_scraper_tool

base = sys.argv[1]
options = WebOptions(
    allow_private=False, allowed_hosts=(base.removeprefix("http://"),),
    browser_executable="/usr/bin/chromium", action_timeout_s=5.0, http_timeout_s=10.0,
    page_chars=2000, search_backend="duckduckgo",
)
env = WebEnvironment("live", options, None)
tool = make_scraper_tool(env, memory_mb=8, cpu_s=30, timeout_s=30.0)
result = tool.invoke({"url": base + "/nested-1m"}, "sec-scrape")
print(json.dumps({"ok": result.ok, "error": result.error}))
"""


def test_memory_limit_stops_the_parse(base_url: str, tmp_path: Path) -> None:
    # Before the fix: no memory limit (TypeError here); the old tool's tree of this page
    # grew the harness by 213 MB (and took 4 s of its CPU). The tree needs far more than
    # the limit plus the free memory a child forked from a fresh Python finds in its heaps.
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_CASE, base_url],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert not result["ok"]
    assert result["error"] == (
        f"the page {base_url}/nested-1m needed more than 8 MB of memory to parse (the "
        "beautifulsoup_scraper limit); use requests_get for its raw text"
    )


def test_wall_clock_stops_the_parse(web: WebEnvironment, base_url: str) -> None:
    ours = child_pids()
    # Before the fix: no wall clock (TypeError here); the work went on after the run's
    # timeout, in a thread nothing could stop.
    tool = make_scraper_tool(web, cpu_s=60, timeout_s=0.5)
    wall0 = time.monotonic()
    result = tool.invoke({"url": f"{base_url}/nested-1m", "selector": "i"}, "sec-scrape")
    assert not result.ok
    assert result.error == (
        f"the page {base_url}/nested-1m took more than 0.5 s to parse and match 'i' (the "
        "beautifulsoup_scraper limit); use requests_get for its raw text"
    )
    assert time.monotonic() - wall0 < 5
    assert child_pids() <= ours  # killed, not left to finish in the background


# --------------------------------------------------------------------------- normal pages


def test_a_large_real_world_like_page_parses_under_the_defaults_in_a_child(
    scraper: Tool, base_url: str
) -> None:
    ours = child_pids()
    # A 1 MB listing of 30,000 tags. Before the fix it was parsed in this process: its
    # peak resident set grew 35 MB (a 4.4 MB real page's: 164 MB, and 9 s of its CPU).
    children0 = cpu_seconds(resource.RUSAGE_CHILDREN)
    result, wall, growth, parent_cpu = _measured(
        lambda: scraper.invoke({"url": f"{base_url}/catalogue"}, "sec-scrape")
    )
    assert result.ok, result.error
    assert result.output.startswith("Title: Catalogue\n\nCatalogue\nHome\nCart\nItem 1\n$1.99")
    assert result.output.endswith("characters]")  # cut at the page's 2,000 characters
    prices = scraper.invoke(
        {"url": f"{base_url}/catalogue", "selector": "article:last-child .price"}, "sec-scrape"
    )
    assert prices.ok and prices.output == "1. $3000.99", prices.error
    assert cpu_seconds(resource.RUSAGE_CHILDREN) - children0 > parent_cpu
    assert growth < 20, f"the harness's peak resident set grew {growth:.0f} MB"
    assert wall < SCRAPER_TIMEOUT_S
    assert child_pids() <= ours


NORMAL_TEXT = (
    "Title: Harbour Books\n\nHarbour Books\nHome\nNext page\nCatalogue\nTitle\nPrice\n"
    "Moby-Dick\n£12.50\nWalden\n£7.25\nOpen daily, 9–17 & by appointment.\n\nLinks:\n"
    "- Home -> {base}/\n- Next page -> {base}/{dir}/catalogue?page=2\n"
    "- https://example.org/about -> https://example.org/about\n"
    "- Moby-Dick -> {base}/b/1\n- Walden -> {base}/b/2"
)


@pytest.fixture
def no_parse_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """BeautifulSoup fails if this process (not a child forked from it) builds a tree."""
    harness, real_init = os.getpid(), BeautifulSoup.__init__

    def guarded(self: BeautifulSoup, *args: Any, **kwargs: Any) -> None:
        assert os.getpid() != harness, "the page was parsed in the harness process"
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(BeautifulSoup, "__init__", guarded)


@pytest.mark.parametrize("directory", ["shop", "latin1"])
def test_a_normal_page_scrapes_as_before(
    scraper: Tool, base_url: str, directory: str, no_parse_here: None
) -> None:
    # Every output and error below is the old (in-process, html.parser) tool's, byte for
    # byte, for the page served as UTF-8 and as ISO-8859-1; but no longer parsed in this
    # process (before the fix every call failed with no_parse_here's assertion).
    url = f"{base_url}/{directory}/books"

    def call(**args: str) -> ToolResult:
        return scraper.invoke({"url": url, **args}, "sec-scrape")

    assert call().output == NORMAL_TEXT.format(base=base_url, dir=directory)
    assert call(selector=".price").output == "1. £12.50\n2. £7.25"
    assert call(selector="tr").output == "1. Title Price\n2. Moby-Dick £12.50\n3. Walden £7.25"
    assert call(selector="tr.book", attribute="class").output == "1. book featured\n2. book"
    assert call(selector="a", attribute="href").output == (
        "1. /\n2. catalogue?page=2\n3. https://example.org/about\n4. /b/1\n5. /b/2"
    )
    assert call(selector=".missing").error == f"no element matches '.missing' on {url}"
    assert call(selector="img", attribute="title").error == (
        "no element matching 'img' has attribute 'title'"
    )
    assert call(selector="td[[").error == (
        "invalid CSS selector 'td[[': Malformed attribute selector at position 2\n"
        "  line 1:\ntd[[\n  ^"
    )
