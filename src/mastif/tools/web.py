"""The web tools: search, browse, fetch, scrape, click and type.

``web_search``, ``web_browser``, ``requests_get``, ``beautifulsoup_scraper``,
``web_interaction`` and ``keyboard_interaction`` are built by :func:`make_web_tools` for
one :class:`WebAccess` (the stack job's web environment: the offline sandbox or the live
web). Their state is per run: the browser tools act on the run's own page (see
:mod:`mastif.tools.browser`), the HTTP tools carry the run's sandbox session cookie.

Page listings number every link, field and button (``[7]``) and the interaction tools
accept that number as a target, because small models cannot write CSS selectors reliably;
labels, button texts and selectors work too. Every failure — a refused or unreachable URL,
an HTTP status of 400 or more, an element that is not there, a timeout — raises
:class:`~mastif.tools.base.ToolError`, so the trace records a failed call (paper Eq. 5),
never a success whose text happens to describe an error.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mastif.core.textclip import clip_text
from mastif.tools.base import Tool, ToolError, count_parameter, current_run_id, text_parameter
from mastif.tools.base import object_schema as _schema
from mastif.tools.browser import BrowserService
from mastif.tools.http import HttpFetcher
from mastif.tools.netpolicy import check_url
from mastif.tools.scrape import make_scraper_tool
from mastif.tools.snapshot import MAX_LISTED, format_snapshot, page_text_head, snapshot_page

__all__ = ["MAX_LISTED", "WEB_TOOL_NAMES", "format_snapshot", "make_web_tools", "snapshot_page"]

WEB_TOOL_NAMES = (
    "web_search",
    "web_browser",
    "requests_get",
    "beautifulsoup_scraper",
    "web_interaction",
    "keyboard_interaction",
)

#: how many hits one web_search returns at most
MAX_SEARCH_RESULTS = 10
#: how much of an HTTP error page's own text its failed call quotes
ERROR_PAGE_CHARS = 300
#: the longest URL and target an error message quotes (a page sets its own URL: one set
#: to 2,000,000 characters by ``history.replaceState`` made a 2 MB error, issue 49)
MAX_ERROR_URL_CHARS = 300
MAX_TARGET_CHARS = 200


def shown_url(url: str) -> str:
    """``url`` as an error message quotes it: its start, saying how long it was if cut."""
    if len(url) <= MAX_ERROR_URL_CHARS:
        return url
    return f"{url[:MAX_ERROR_URL_CHARS]}... ({len(url)} characters)"


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class WebAccess(Protocol):
    """What the web tools need from the environment they run in."""

    browser: BrowserService
    page_chars: int

    def fetcher(self) -> HttpFetcher:
        """The HTTP fetcher of the run in progress (its policy and session cookie)."""
        ...

    def resolve(self, url: str, base: str | None = None) -> str:
        """An absolute URL for ``url`` (a bare path is taken relative to ``base`` or the
        environment's home)."""
        ...

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        """The search backend: the sandbox's engine or the live one."""
        ...


_REF = re.compile(r"^\s*\[?\s*(\d+)\s*\]?\s*$")
_CSS_HINT = re.compile(r"^[#.\[]|[=>:\[]")


async def _locate(page: Any, target: str) -> Any:
    """The element ``target`` names: a listing number, a CSS selector, a label, a button or
    link text, a placeholder or visible text, tried in that order."""
    target = target.strip()
    if not target:
        raise ToolError("target is empty; give an element number like [3], a label or a text")
    ref = _REF.match(target)
    candidates: list[Any] = []
    if ref:
        candidates.append(page.locator(f'[data-mastif-ref="{ref.group(1)}"]'))
    else:
        if _CSS_HINT.search(target):
            candidates.append(page.locator(target))
        candidates += [
            page.get_by_label(target, exact=True),
            page.get_by_role("button", name=target, exact=True),
            page.get_by_role("link", name=target, exact=True),
            page.get_by_label(target),
            page.get_by_role("button", name=target),
            page.get_by_role("link", name=target),
            page.get_by_placeholder(target),
            page.get_by_text(target),
        ]
    for locator in candidates:
        try:
            if await locator.count() > 0:
                return locator.first
        except Exception:  # noqa: BLE001 - an invalid selector: try the next reading of target
            continue
    raise ToolError(
        f"no element matches {target[:MAX_TARGET_CHARS]!r} on {shown_url(page.url)}; use a "
        "number from the page listing, a field label or a button/link text"
    )


class _Navigation:
    """Follows the navigation an action starts (a click on a link, Enter in a form).

    ``page.goto`` reports its response, but a navigation a click or key press starts is
    only visible in the page's events: the status of the main frame's document response is
    taken from there, so an HTTP error page after a click is a failed action.
    """

    #: how long a key press gets to start a navigation before it counts as in-page only
    #: (Playwright's click already waits for a navigation it starts to begin); Enter, which
    #: submits a form, gets longer: on a loaded machine its request can come after 0.15 s,
    #: and the snapshot would then show the old page
    START_S = 0.15
    SUBMIT_START_S = 1.0

    def __init__(self, page: Any) -> None:
        self.page = page
        self.requested = False
        self.status: int | None = None
        self.url: str | None = None

    def __enter__(self) -> _Navigation:
        self.page.on("request", self._on_request)
        self.page.on("response", self._on_response)
        return self

    def __exit__(self, *exc: object) -> None:
        self.page.remove_listener("request", self._on_request)
        self.page.remove_listener("response", self._on_response)

    def _main(self, request: Any) -> bool:
        return bool(request.is_navigation_request() and request.frame == self.page.main_frame)

    def _on_request(self, request: Any) -> None:
        if self._main(request):
            self.requested = True

    def _on_response(self, response: Any) -> None:
        if self._main(response.request):
            self.status, self.url = response.status, response.url

    async def settle(self, timeout_s: float, start_s: float = START_S) -> None:
        """Wait for a navigation the action started (if any); fail on an HTTP error page."""
        await asyncio.sleep(start_s)
        deadline = time.monotonic() + timeout_s
        while self.requested and self.status is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        try:
            await self.page.wait_for_load_state("domcontentloaded", timeout=timeout_s * 1000)
        except Exception:  # noqa: BLE001 - a slow page is not the action's failure
            pass
        if self.status is not None and self.status >= 400:
            text = await page_text_head(self.page, ERROR_PAGE_CHARS)
            raise ToolError(f"HTTP {self.status} from {shown_url(self.url or '')}: {text}")


def make_web_tools(web: WebAccess) -> list[Tool]:
    """The six web tools bound to ``web``."""
    return [
        _web_search_tool(web),
        _web_browser_tool(web),
        _requests_get_tool(web),
        make_scraper_tool(web),
        _web_interaction_tool(web),
        _keyboard_interaction_tool(web),
    ]


def _on_page(web: WebAccess, action: Callable[[Any], Any]) -> str:
    """``action`` run on the page of the run in progress, in the browser's thread."""
    return web.browser.call(current_run_id(), action)


def _web_search_tool(web: WebAccess) -> Tool:
    def web_search(query: str, max_results: int = 5) -> str:
        # a search page holds at most 10 hits, as a real engine's does: asking for more
        # gets 10, not a failed call (small models write max_results 250)
        hits = web.search(query, min(max_results, MAX_SEARCH_RESULTS))
        if not hits:
            raise ToolError(f"no results for {query!r}")
        return "\n".join(
            f"{i}. {h.title}\n   {h.url}\n   {h.snippet}" for i, h in enumerate(hits, 1)
        )

    return Tool(
        "web_search",
        "Use this tool to search the web for titles, links and snippets, first when you "
        "do not know which page has the answer; snippets often contain prices, ratings or "
        "dates. Do NOT use it to read a page you already have a link to.",
        _schema(
            {
                "query": text_parameter("what to look for", minLength=1),
                "max_results": count_parameter("at most 10 are returned"),
            },
            ["query"],
        ),
        web_search,
    )


def _web_browser_tool(web: WebAccess) -> Tool:
    chars = web.page_chars

    def web_browser(url: str) -> str:
        run_id = current_run_id()

        async def go(page: Any) -> str:
            current = page.url if page.url.startswith("http") else None
            absolute = web.resolve(url, current)
            # a clear refusal before Chromium tries (the egress proxy would also refuse it)
            check_url(absolute, web.browser.policy)
            try:
                response = await page.goto(absolute, wait_until="domcontentloaded")
            except Exception as exc:  # noqa: BLE001 - Playwright's errors: navigation failed
                raise ToolError(f"could not open {absolute}: {str(exc).splitlines()[0]}") from None
            if response is not None and response.status >= 400:
                body = await page_text_head(page, ERROR_PAGE_CHARS)
                raise ToolError(f"HTTP {response.status} from {shown_url(absolute)}: {body}")
            return await snapshot_page(page, chars)

        return web.browser.call(run_id, go)

    return Tool(
        "web_browser",
        "Use this tool to open a URL or path in the browser and read the page: its text "
        "and numbered links, form fields and buttons. Do NOT use it to click buttons or "
        "fill forms (use web_interaction).",
        _schema({"url": text_parameter("URL or path", minLength=1)}, ["url"]),
        web_browser,
    )


def _requests_get_tool(web: WebAccess) -> Tool:
    chars = web.page_chars

    def requests_get(url: str) -> str:
        absolute = web.resolve(url)
        response = web.fetcher().get(absolute)
        kind = response.headers.get("content-type", "unknown")
        return clip_text(f"HTTP {response.status_code} ({kind})\n\n{response.text}", chars)

    return Tool(
        "requests_get",
        "Use this tool to fetch a URL with a plain HTTP GET and get the raw response body "
        "(HTML, JSON or text), e.g. for APIs and raw files. Do NOT use it for pages you "
        "need to click through.",
        _schema({"url": text_parameter(minLength=1)}, ["url"]),
        requests_get,
    )


def _web_interaction_tool(web: WebAccess) -> Tool:
    chars = web.page_chars
    timeout = web.browser.options.action_timeout_s

    def web_interaction(action: str, target: str, value: str | None = None) -> str:
        async def act(page: Any) -> str:
            if not page.url.startswith("http"):
                raise ToolError("no page is open yet; open one with web_browser first")
            element = await _locate(page, target)
            with _Navigation(page) as nav:
                try:
                    if action == "click":
                        await element.click()
                    elif action == "fill":
                        await element.fill(_need(value, action))
                    elif action == "select":
                        await _select(element, _need(value, action))
                    elif action == "check":
                        await element.check()
                    elif action == "uncheck":
                        await element.uncheck()
                except ToolError:
                    raise
                except Exception as exc:  # noqa: BLE001 - Playwright refused the action
                    raise ToolError(
                        f"could not {action} {target!r}: {str(exc).splitlines()[0]}"
                    ) from None
                await nav.settle(timeout, 0.0)
            return await snapshot_page(page, chars)

        return _on_page(web, act)

    return Tool(
        "web_interaction",
        "Use this tool to act on the page open in the browser: click a link or button, "
        "fill a text field, select an option, check a box. Target an element by its "
        "[number] from the page listing, its label or its text. Do NOT use it before "
        "web_browser has opened a page.",
        _schema(
            {
                "action": text_parameter(enum=["click", "fill", "select", "check", "uncheck"]),
                "target": text_parameter("[number], label or text", minLength=1),
                "value": text_parameter("text to fill or option to select"),
            },
            ["action", "target"],
        ),
        web_interaction,
    )


def _keyboard_interaction_tool(web: WebAccess) -> Tool:
    chars = web.page_chars
    timeout = web.browser.options.action_timeout_s

    def keyboard_interaction(
        keys: str | None = None, text: str | None = None, target: str | None = None
    ) -> str:
        if not keys and not text:
            raise ToolError("give text to type, keys to press, or both")

        async def press(page: Any) -> str:
            if not page.url.startswith("http"):
                raise ToolError("no page is open yet; open one with web_browser first")
            if target:
                await (await _locate(page, target)).focus()
            with _Navigation(page) as nav:
                try:
                    if text:
                        await page.keyboard.type(text)
                    for key in (keys or "").replace(",", " ").split():
                        await page.keyboard.press(key)
                except Exception as exc:  # noqa: BLE001 - e.g. an unknown key name
                    raise ToolError(f"keyboard input failed: {str(exc).splitlines()[0]}") from None
                pressed = (keys or "").replace(",", " ").split()
                submits = any(k.lower() in ("enter", "numpadenter") for k in pressed)
                await nav.settle(timeout, nav.SUBMIT_START_S if submits else nav.START_S)
            return await snapshot_page(page, chars)

        return _on_page(web, press)

    return Tool(
        "keyboard_interaction",
        "Use this tool to type text and press keys (Enter, Tab, ArrowDown, Control+A) in "
        "the page open in the browser, optionally into a target field first, e.g. to "
        "submit a search with Enter. Do NOT use it to open URLs.",
        _schema(
            {
                "keys": text_parameter("keys to press, e.g. 'Enter'"),
                "text": text_parameter("text to type"),
                "target": text_parameter("[number] or label to focus first"),
            },
            [],
        ),
        keyboard_interaction,
    )


def _need(value: str | None, action: str) -> str:
    if value is None:
        raise ToolError(f"action {action!r} needs a value")
    return value


async def _select(element: Any, value: str) -> None:
    """Select by visible label first (what the model reads), then by option value."""
    try:
        await element.select_option(label=value, timeout=3000)
    except Exception:  # noqa: BLE001 - not a label: try it as the option's value
        await element.select_option(value=value, timeout=3000)


def hits_from_json(payload: str | bytes) -> list[SearchHit]:
    """Hits from the sandbox engine's ``/search/api`` JSON."""
    data = json.loads(payload)
    return [SearchHit(r["title"], r["url"], r.get("snippet", "")) for r in data["results"]]
