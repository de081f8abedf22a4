"""Live backend of the ``web_search`` tool: real web search through the ``ddgs`` library.

``ddgs`` (DuckDuckGo metasearch, formerly ``duckduckgo_search``) does the HTTP and the
parsing; this module only chooses the backend, turns its result dicts into
:class:`SearchHit` and its exceptions into :class:`~mastif.tools.base.ToolError`.

The default backend is ``"duckduckgo"`` alone: ddgs then sends exactly one
``POST https://html.duckduckgo.com/html/`` (form ``q``, ``b``, ``l``) through its ``primp``
client and parses the HTML with the XPaths in ``ddgs.engines.duckduckgo``. ``"auto"`` (or a
comma list) is accepted but makes ddgs query several engines in parallel, Wikipedia and
Grokipedia first and the rest in random order, so results are not reproducible.

ddgs quirks this module works around (ddgs 9.16):

* any non-200 answer (429 or 202 rate limiting, 5xx) is dropped silently by the engine and
  surfaces as the same ``DDGSException("No results found.")`` as an empty results page, so a
  rate limit cannot be told apart from "no results"; ``RatelimitException`` is never raised
  but is still mapped here in case a later ddgs raises it;
* a transport timeout reaches the caller either as ``TimeoutException`` or as a plain
  ``DDGSException`` wrapping one, depending on the error text;
* an unknown backend name is only logged and ddgs silently falls back to ``"auto"`` (every
  engine on the internet), so names are checked here first;
* the requests do not go through :class:`mastif.tools.http.HttpFetcher`, so the URL policy of
  :mod:`mastif.tools.netpolicy` does not apply (they only go to the search engines' hosts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ddgs import DDGS
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

from mastif.tools.base import ToolError

#: Backend values ddgs accepts besides engine names: every text engine it has.
_META_BACKENDS = frozenset({"auto", "all"})


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


def _text_backends() -> frozenset[str]:
    """The names of the text-search engines this ddgs install provides."""
    from ddgs.engines import ENGINES  # imports every engine module; cheap after the first call

    return frozenset(ENGINES.get("text", {}))


def _check_backend(backend: str) -> str:
    names = [part.strip() for part in backend.split(",") if part.strip()]
    known = _text_backends()
    unknown = [n for n in names if n not in known and n not in _META_BACKENDS]
    if not names or unknown:
        raise ToolError(
            f"unknown web search backend {backend!r}; available: "
            f"{', '.join(sorted(known | _META_BACKENDS))}"
        )
    return ",".join(names)


def _is_timeout(exc: BaseException) -> bool:
    """True if ``exc`` is, wraps or was caused by a ddgs timeout."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, TimeoutException) or "timed out" in str(e).lower():
            return True
        # ddgs re-raises the last engine error as DDGSException(err): look inside args too
        todo.extend([e.__cause__, e.__context__, *e.args])
    return False


def live_search(
    query: str,
    max_results: int = 5,
    *,
    backend: str = "duckduckgo",
    region: str = "wt-wt",
    timeout_s: float = 20,
) -> list[SearchHit]:
    """Search the web for ``query`` and return at most ``max_results`` hits.

    ``backend`` is a ddgs text backend (``"duckduckgo"``, ``"bing"``, ... or ``"auto"``);
    ``region`` a DuckDuckGo region code (``"wt-wt"`` = no region, ``"us-en"``, ...);
    ``timeout_s`` bounds each HTTP request and the wait for the engines.

    Hits come back in ddgs's order: deduplicated by URL and re-ranked (Wikipedia pages
    first, then hits whose title and snippet both contain a query word, ...). One
    DuckDuckGo page gives about 10 hits; asking for more does not fetch a second page.

    Raises :class:`ToolError` for an empty query, bad arguments, no results (which with
    ddgs also covers HTTP errors and rate limiting), a timeout or any other ddgs failure.
    """
    query = query.strip() if isinstance(query, str) else ""
    if not query:
        raise ToolError("web search query must be a non-empty string")
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise ToolError(f"max_results must be a positive integer, got {max_results!r}")
    if not timeout_s or timeout_s <= 0:
        raise ToolError(f"timeout_s must be positive, got {timeout_s!r}")
    backend = _check_backend(backend)

    try:
        # a fresh DDGS per call: instances cache engine objects holding a primp client with
        # cookies, so sharing one across threads or runs would share state
        ddgs = DDGS(timeout=timeout_s)  # type: ignore[arg-type]  # ddgs hints int, uses float
        raw = ddgs.text(
            query,
            region=region,
            safesearch="moderate",
            max_results=max_results,
            backend=backend,
        )
    except RatelimitException as exc:
        raise ToolError(f"web search rate-limited by {backend} for {query!r}: {exc}") from exc
    except DDGSException as exc:
        if _is_timeout(exc):
            raise ToolError(
                f"web search timed out after {timeout_s:g}s ({backend}) for {query!r}"
            ) from exc
        if str(exc) == "No results found.":
            raise ToolError(
                f"no results for {query!r} from {backend} (ddgs reports an empty page, "
                "rate limiting and HTTP errors alike this way)"
            ) from exc
        raise ToolError(f"web search failed ({backend}) for {query!r}: {exc}") from exc

    hits = [
        SearchHit(
            title=str(r.get("title") or ""),
            url=str(r.get("href") or ""),
            snippet=str(r.get("body") or ""),
        )
        for r in raw
    ]
    hits = [h for h in hits if h.url][:max_results]
    if not hits:
        raise ToolError(f"no results for {query!r} from {backend}")
    return hits


__all__ = ["SearchHit", "live_search"]
