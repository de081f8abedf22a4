"""``beautifulsoup_scraper``: a fetched page's text and links, or the elements a CSS
selector picks, parsed with BeautifulSoup.

The page is fetched in this process, through the policy-checked fetcher (URL policy on
every hop, the 5 MiB body cap), and parsed in a child process (:func:`scrape_page`, run by
:func:`~mastif.tools.isolation.run_isolated`) with an empty environment, no network and a
CPU, memory and wall-clock bound; only the capped text comes back.

Why (issue 49): BeautifulSoup builds a Python object per tag, so a page within the cap can
cost far more than its size. Parsed here, 5 MiB of ``<p>a</p>`` made the harness grow by
759 MB in 14 s, 5 MiB of nested ``<i>`` by 1,079 MB in 21 s, and the selector ``i i i`` on
the latter had not ended after 250 s (1,357 MB), in a thread the run's timeout cannot
stop. Now the child is stopped at :data:`SCRAPER_CPU_S` seconds of CPU,
:data:`SCRAPER_MEMORY_MB` MB or :data:`SCRAPER_TIMEOUT_S` seconds, whichever comes first,
and the call fails with a sentence naming the limit; this process holds only the page's
bytes.

The parser stays ``html.parser``. lxml (in the lock file) is faster on large pages (a 3.2
MB rustdoc index: 1.0 s of CPU, not 7.3 s, as bs4's ``html.parser`` builder is quadratic
in void elements) and gave the same output on every sandbox page, but when libxml2 runs out
of memory it stops without an error and bs4 returns a truncated tree as if it were the
page (a 1 MiB page under a 64 MB limit: half its ``<p>``), where ``html.parser`` raises
``MemoryError``.
"""

from __future__ import annotations

import gc
from functools import cache
from itertools import chain, islice
from typing import Any, Protocol
from urllib.parse import urljoin

from bs4 import BeautifulSoup

from mastif.core.textclip import clip_text
from mastif.tools.base import Tool, ToolError, text_parameter
from mastif.tools.base import object_schema as _schema
from mastif.tools.http import HttpFetcher
from mastif.tools.isolation import ChildLimitExceeded, ChildLimits, run_isolated
from mastif.tools.snapshot import MAX_LISTED


class PageSource(Protocol):
    """What the scraper needs of :class:`mastif.tools.web.WebAccess` (named here, as
    ``mastif.tools.web`` imports this module)."""

    page_chars: int

    def fetcher(self) -> HttpFetcher: ...

    def resolve(self, url: str, base: str | None = None) -> str: ...


#: The bs4 tree builder (not lxml: see the module docstring).
PARSER = "html.parser"
#: CPU seconds one call may spend parsing and selecting (RLIMIT_CPU in the child): real
#: 1-2 MB pages (mdBook, rustdoc, a shop listing; 16-30k tags) take 0.5-0.8 s; 5 MiB of
#: ``<p>a</p>`` takes 14 s, of nested ``<i>`` 21 s. Tag-dense pages over ~3 MB need more
#: (a 3.2 MB rustdoc index 7.3 s, a 4.4 MB mdBook 7.7 s) and are refused: requests_get
#: still reads them.
SCRAPER_CPU_S = 3
#: Memory (MB) the parsing child may add to what it inherits (RLIMIT_AS): parsing grows
#: by ~55 MB a CPU second, so the CPU limit mostly comes first; the real pages above
#: needed 30-55 MB (1-2 MB pages) and 155 MB (the 4.4 MB one).
SCRAPER_MEMORY_MB = 256
#: Wall-clock seconds the parent waits for the child: above the CPU limit, so an idle
#: machine names the CPU limit, and under 5 s, so a hostile page costs the run less.
SCRAPER_TIMEOUT_S = 4.0
#: Most elements a selector lists.
MAX_ITEMS = 50
#: A selector with a token of every kind: compiling it compiles every regular expression
#: soupsieve's parser would compile lazily
_EVERY_TOKEN = (
    ':is(a, b#i.c[d="e" i]):not(:nth-child(2n+1 of p)):nth-of-type(2):nth-last-child(1)'
    ':lang(en):dir(ltr):-soup-contains("x"):root > f + g ~ h, i'
)


@cache
def _warm_up() -> None:
    """Build here, once, what bs4 and soupsieve build lazily on first use (bs4's table of
    HTML entities, soupsieve's patterns), so every child inherits it: else each child built
    it again, ~45 ms of a call on a page with an entity and ~80 ms of one with a selector
    (~0.25 s once here)."""
    BeautifulSoup("<p>&amp;&#38;&copy;</p>", PARSER).select(_EVERY_TOKEN)


def scrape_page(
    content: bytes,
    encoding: str,
    page_url: str,
    url: str,
    selector: str | None,
    attribute: str | None,
    chars: int,
) -> str:
    """The text and links of the page ``content`` (``encoding``; fetched from ``url``, which
    redirected to ``page_url``), or what ``selector`` (and ``attribute``) picks, capped at
    ``chars``. Untrusted input: :func:`make_scraper_tool` runs it in a limited child."""
    soup = BeautifulSoup(content.decode(encoding, errors="replace"), PARSER)
    if not selector:
        for tag in soup(["script", "style", "noscript"]):
            tag.decompose()
        title = soup.title.get_text(strip=True) if soup.title else "(untitled)"
        text = soup.get_text("\n", strip=True)
        links = [
            f"- {a.get_text(' ', strip=True) or a['href']} -> {urljoin(page_url, a['href'])}"
            for a in soup.find_all("a", href=True, limit=MAX_LISTED)
        ]
        return clip_text(f"Title: {title}\n\n{text}\n\nLinks:\n" + "\n".join(links), chars)
    # lazily: only the first MAX_ITEMS matches are ever shown, so only those are read
    try:
        found = soup.css.iselect(selector)
        first = next(found, None)
    except MemoryError:
        raise  # the memory limit, reported as such by the parent
    except Exception as exc:  # noqa: BLE001 - soupsieve's error for a bad selector
        raise ToolError(f"invalid CSS selector {selector!r}: {exc}") from None
    if first is None:
        raise ToolError(f"no element matches {selector!r} on {url}")
    elements = chain([first], found)
    if attribute:
        values = (el.get(attribute) for el in elements)
        items = [
            v if isinstance(v, str) else " ".join(v)
            for v in islice((v for v in values if v is not None), MAX_ITEMS)
        ]
        if not items:
            raise ToolError(f"no element matching {selector!r} has attribute {attribute!r}")
    else:
        items = [el.get_text(" ", strip=True) for el in islice(elements, MAX_ITEMS)]
    return clip_text("\n".join(f"{i}. {t}" for i, t in enumerate(items, 1)), chars)


def scrape_in_child(*args: Any) -> str:
    """:func:`scrape_page` as the child runs it. The objects it inherited from the harness
    are first set apart from the garbage collector (:func:`gc.freeze`): a full collection
    would walk all of them, copying every page of the harness's heap (~45 ms of a call on a
    sandbox page in a process with the test suite loaded, every call)."""
    gc.freeze()
    return scrape_page(*args)


def make_scraper_tool(
    web: PageSource,
    cpu_s: int = SCRAPER_CPU_S,
    memory_mb: int = SCRAPER_MEMORY_MB,
    timeout_s: float = SCRAPER_TIMEOUT_S,
) -> Tool:
    """``beautifulsoup_scraper`` bound to ``web``: fetch in this process, parse in a child
    limited to ``cpu_s`` CPU seconds and ``memory_mb`` MB, without network, killed after
    ``timeout_s``."""
    chars = web.page_chars
    limits = ChildLimits(cpu_s=cpu_s, memory_mb=memory_mb, workdir=False, network=False)

    def beautifulsoup_scraper(
        url: str, selector: str | None = None, attribute: str | None = None
    ) -> str:
        absolute = web.resolve(url)
        response = web.fetcher().get(absolute)
        page = (response.content, response.encoding or "utf-8", str(response.url), absolute)
        _warm_up()
        try:
            return run_isolated(
                scrape_in_child, (*page, selector, attribute, chars), timeout_s, limits
            )
        except ChildLimitExceeded as exc:
            work = f"to parse and match {selector!r}" if selector else "to parse"
            if exc.kind == "cpu":
                raise ToolError(
                    f"the page {absolute} needed more than {cpu_s} s of CPU {work} (the "
                    "beautifulsoup_scraper limit); use requests_get for its raw text"
                    + (", or a simpler selector" if selector else "")
                ) from None
            if exc.kind == "memory":
                raise ToolError(
                    f"the page {absolute} needed more than {memory_mb} MB of memory {work} "
                    "(the beautifulsoup_scraper limit); use requests_get for its raw text"
                ) from None
            raise ToolError(
                f"the page {absolute} took more than {timeout_s:g} s {work} (the "
                "beautifulsoup_scraper limit); use requests_get for its raw text"
            ) from None

    return Tool(
        "beautifulsoup_scraper",
        "Use this tool to pull data out of a web page: its readable text and links, or "
        "only the elements matching a CSS selector (optionally one attribute of them). "
        "Do NOT use it to click or fill forms.",
        _schema(
            {
                "url": text_parameter(minLength=1),
                "selector": text_parameter("CSS selector, e.g. '.price'"),
                "attribute": text_parameter("e.g. 'href'"),
            },
            ["url"],
        ),
        beautifulsoup_scraper,
    )
