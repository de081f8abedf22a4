"""One headless Chromium per stack job, one page per run, for the browser tools.

Playwright's API is bound to the event loop it started on, while tools are called from
worker threads (``asyncio.to_thread``) of whatever loop a framework runs. So the browser
lives on a thread of its own with its own loop; :meth:`BrowserService.call` submits a
coroutine there and blocks the calling tool thread until it finishes or times out.

Each run gets its own ``BrowserContext`` (a fresh cookie jar and storage, seeded with the
run's sandbox session cookie) holding one page, created on the run's first browser call
(already showing the task's start page, if it has one) and closed by
:meth:`BrowserService.end_run`. A click in one step is therefore still
there in the next step of the same run, and never visible to another run.

Every connection the browser makes goes through a loopback forward proxy
(:mod:`mastif.tools.egress_proxy`) that the service runs for each run's context (and one
for the browser as a whole): every hop of a redirect chain, every sub-resource, form post,
WebSocket and Worker connection passes the URL policy (:mod:`mastif.tools.netpolicy`)
there, and the proxy connects to the address the policy checked, not to the name again
(DNS rebinding). A Playwright route handler alone would not do: Playwright calls it only
for the first URL of a redirect chain, and never for WebSockets. What the proxy refuses
is answered 403 with the reason and recorded as the run's refusal. Chromium is Debian's
(``/usr/bin/chromium``), started headless with background networking, component updates
and sync off and a fresh profile (Playwright's default temporary one), and with an
environment of its own (:func:`browser_environment`): none of the harness's variables, so
no API key, token or proxy setting is in any browser process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mastif.tools.base import ToolError
from mastif.tools.egress_proxy import EgressProxy
from mastif.tools.netpolicy import ALLOWED_SCHEMES, UrlPolicy

log = logging.getLogger(__name__)

T = TypeVar("T")

CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    # WebRTC sends STUN/ICE over UDP straight from the renderer, past any proxy (a page
    # could reach a UDP service on a private address): no UDP, TCP through the proxy only
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)


#: the harness's variables Chromium keeps: none that can hold a secret
BROWSER_ENV_KEPT = ("TZ", "LANG", "LC_ALL")


def browser_environment(home: str) -> dict[str, str]:
    """Chromium's whole environment: a home of its own (``home``, for its caches) and the
    time zone and language, if set; nothing else of the harness's (issue 37)."""
    env = {name: os.environ[name] for name in BROWSER_ENV_KEPT if name in os.environ}
    env["HOME"] = home
    return env


@dataclass(frozen=True)
class BrowserOptions:
    executable: str = "/usr/bin/chromium"
    headless: bool = True
    #: per browser action (navigation, click, fill); a tool call waits a little longer
    action_timeout_s: float = 15.0


#: how long closing a crashed or hung page may take
REPLACE_TIMEOUT_S = 5.0
#: how long a page has to run ``0`` before an action, before it counts as hung
PROBE_TIMEOUT_S = 2.0

#: refusals kept per run action (and browser-wide): a page may retry a refused URL forever
MAX_REFUSALS = 100


def _recorder(refusals: list[str]) -> Callable[[str], None]:
    def record(message: str) -> None:
        if len(refusals) < MAX_REFUSALS:
            refusals.append(message)

    return record


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Take an abandoned action's outcome, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


async def _responsive(page: Any) -> bool:
    """Whether the page's renderer still runs a script within :data:`PROBE_TIMEOUT_S`
    (False when it is stuck in one, or crashed; True when it answers or fails otherwise,
    e.g. while it navigates)."""
    try:
        await asyncio.wait_for(page.evaluate("0"), PROBE_TIMEOUT_S)
    except TimeoutError:
        return False
    except Exception:  # noqa: BLE001 - closed, crashed, navigating: not stuck in a script
        return not page.is_closed()
    return True


@dataclass
class _RunPage:
    context: Any  # playwright BrowserContext
    page: Any  # playwright Page
    proxy: EgressProxy | None = None
    refused: list[str] = field(default_factory=list)
    #: why the page must be replaced before its next action ("crashed", "hung"), or None
    broken: str | None = None
    #: done when the page's renderer crashes (an action in progress fails at once)
    crashed: asyncio.Future[None] | None = None


class BrowserService:
    """Headless Chromium on a private thread; thread-safe :meth:`call` per run."""

    def __init__(
        self,
        options: BrowserOptions,
        policy: UrlPolicy,
        cookies_for: Callable[[str], list[dict[str, str]]] | None = None,
        start_for: Callable[[str], str | None] | None = None,
    ) -> None:
        self.options = options
        self.policy = policy
        self._cookies_for = cookies_for
        self._start_for = start_for
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="browser", daemon=True)
        self._thread.start()
        self._playwright: Any = None
        self._browser: Any = None
        self._pages: dict[str, _RunPage] = {}
        self._proxy: EgressProxy | None = None
        self._home: str | None = None
        #: refusals of the browser-wide proxy (requests outside any run's context)
        self.refused_outside: list[str] = []
        self._closed = False

    # ------------------------------------------------------------------ public

    def call(self, run_id: str, action: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``action(page)`` on the run's page (created on first use); return its result.

        Blocks the calling thread. Raises :class:`ToolError` when the browser cannot be
        started or the action overruns its time; exceptions of ``action`` propagate.
        """
        if self._closed:
            raise ToolError("the browser has been shut down")
        future = asyncio.run_coroutine_threadsafe(self._on_page(run_id, action), self._loop)
        # the action's own budget ends it first; this is the backstop for the rest (making
        # or replacing the page, closing a page that will not close)
        backstop = (
            self.action_budget_s + PROBE_TIMEOUT_S + REPLACE_TIMEOUT_S
            + self.options.action_timeout_s + 5
        )  # fmt: skip
        try:
            return future.result(timeout=backstop)
        except FutureTimeout:
            future.cancel()
            raise ToolError(f"browser action took longer than {backstop:g}s") from None

    @property
    def action_budget_s(self) -> float:
        """How long one tool's work on a page may take: a few browser actions (an action,
        the navigation it starts, the listing), each of which has its own time-out."""
        return self.options.action_timeout_s * 2 + 10

    def has_page(self, run_id: str) -> bool:
        return run_id in self._pages

    def end_run(self, run_id: str) -> None:
        """Close the run's page and context (nothing to do if it never browsed)."""
        if self._closed or run_id not in self._pages:
            return
        asyncio.run_coroutine_threadsafe(self._close_run(run_id), self._loop).result(timeout=30)

    def close(self) -> None:
        """Close every page, the browser and Playwright; stop the thread."""
        if self._closed:
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=30)
        except Exception:  # noqa: BLE001 - shutting down: log, then stop the loop regardless
            log.exception("browser shutdown failed")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> BrowserService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ browser loop

    async def _ensure_browser(self) -> Any:
        if self._browser is None:
            from playwright.async_api import async_playwright

            try:
                if self._proxy is None:
                    self._proxy = await EgressProxy(
                        self.policy, _recorder(self.refused_outside)
                    ).start()
                self._playwright = await async_playwright().start()
                self._home = self._home or tempfile.mkdtemp(prefix="mastif-chromium-")
                self._browser = await self._playwright.chromium.launch(
                    executable_path=self.options.executable,
                    headless=self.options.headless,
                    args=list(CHROMIUM_ARGS),
                    env=browser_environment(self._home),
                    # loopback too: Playwright adds <-loopback> to Chromium's bypass list
                    proxy={"server": self._proxy.url},
                )
            except Exception as exc:
                raise ToolError(
                    f"could not start Chromium at {self.options.executable}: {exc}"
                ) from exc
        return self._browser

    async def _page_for(self, run_id: str) -> _RunPage:
        if run_id not in self._pages:
            browser = await self._ensure_browser()
            refused: list[str] = []
            proxy = await EgressProxy(self.policy, _recorder(refused)).start()
            try:
                context = await browser.new_context(
                    service_workers="block", proxy={"server": proxy.url}
                )
            except BaseException:
                await proxy.close()
                raise
            context.set_default_timeout(self.options.action_timeout_s * 1000)
            context.set_default_navigation_timeout(self.options.action_timeout_s * 1000)
            run = _RunPage(context, None, proxy, refused)
            await context.route("**/*", lambda route: self._guard(route, run))
            if self._cookies_for is not None:
                cookies = self._cookies_for(run_id)
                if cookies:
                    await context.add_cookies(cookies)
            await self._open_page(run, run_id)
            self._pages[run_id] = run
        run = self._pages[run_id]
        if run.broken is not None:
            run = await self._replace_page(run, run_id)
        return run

    async def _open_page(self, run: _RunPage, run_id: str) -> None:
        """A new page in the run's context, watched for a renderer crash, at the task's
        start page (if it has one)."""
        run.page = await run.context.new_page()
        run.broken = None
        crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        run.crashed = crashed

        def on_crash(_page: Any) -> None:
            run.broken = "crashed"
            if not crashed.done():
                crashed.set_result(None)

        run.page.on("crash", on_crash)
        start = self._start_for(run_id) if self._start_for is not None else None
        if start:
            # the prompt says the browser starts at the task's start page: make it so,
            # so acting on the page works before any explicit navigation
            try:
                await run.page.goto(start, wait_until="domcontentloaded")
            except Exception:  # noqa: BLE001 - the agent's own action will meet the failure
                log.warning("run %s: start page %s did not load", run_id, start)

    async def _replace_page(self, run: _RunPage, run_id: str) -> _RunPage:
        """Close the run's crashed or hung page and open a fresh one in the same context
        (the run's cookies stay). Closing a page whose renderer spins in a script ends it
        (measured: 0.5 s); a context that will not give a new page is rebuilt."""
        log.warning("run %s: its page %s; opening a fresh one", run_id, run.broken)
        old = run.page
        with contextlib.suppress(Exception):
            await asyncio.wait_for(old.close(), REPLACE_TIMEOUT_S)
        try:
            await asyncio.wait_for(self._open_page(run, run_id), self.options.action_timeout_s)
        except Exception:  # noqa: BLE001 - the context itself is gone: a new one
            log.warning("run %s: no new page in its context; a new context", run_id)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._close_run(run_id), REPLACE_TIMEOUT_S)
            self._pages.pop(run_id, None)
            return await self._page_for(run_id)
        return run

    async def _guard(self, route: Any, run: _RunPage) -> None:
        """Refuse a request whose scheme the proxy never sees (``file:``, ``chrome:`` ...).

        Addresses are checked by the egress proxy, on every connection; this handler only
        keeps schemes that do not go through a proxy away from the page (it sees only the
        first URL of a redirect chain, which is enough for a scheme an http page cannot
        redirect to anyway).
        """
        url = route.request.url
        scheme = url.split(":", 1)[0].lower()
        if scheme in ALLOWED_SCHEMES or scheme in ("data", "about", "blob"):
            await route.continue_()
            return
        run.refused.append(f"refused {url[:200]!r}: only http, https URLs are allowed")
        await route.abort("blockedbyclient")

    async def _on_page(self, run_id: str, action: Callable[[Any], Awaitable[T]]) -> T:
        """``action`` on the run's page, within :attr:`action_budget_s`; a crash of the
        page's renderer ends it at once. A crashed page, one the action did not finish on
        in time, or one that does not run a script within :data:`PROBE_TIMEOUT_S` when the
        next action comes (a renderer stuck in a script) is replaced by a fresh one first
        (issue 49: the run's page was kept, and every later call waited out its time)."""
        run = await self._page_for(run_id)
        if not await _responsive(run.page):  # stuck in a script since the last action
            run.broken = "hung"
            run = await self._page_for(run_id)
        run.refused.clear()
        crashed = run.crashed
        assert crashed is not None
        work = asyncio.ensure_future(action(run.page))
        done, _ = await asyncio.wait(
            {work, crashed}, timeout=self.action_budget_s, return_when=asyncio.FIRST_COMPLETED
        )
        if work in done:
            return work.result()
        # not waited for: its clean-up may wait on the dead renderer (a DevTools detach)
        work.add_done_callback(_retrieved)
        work.cancel()
        if crashed.done():
            raise ToolError(
                "the page crashed (its renderer died); the next browser call starts on a fresh page"
            )
        run.broken = "hung"
        raise ToolError(
            f"the page did not answer within {self.action_budget_s:g}s; the next browser "
            "call starts on a fresh page"
        )

    def refused(self, run_id: str) -> list[str]:
        """Requests the policy refused during the run's last browser action."""
        run = self._pages.get(run_id)
        return list(run.refused) if run else []

    async def _close_run(self, run_id: str) -> None:
        run = self._pages.pop(run_id, None)
        if run is not None:
            try:
                await run.context.close()
            finally:
                if run.proxy is not None:
                    await run.proxy.close()

    async def _shutdown(self) -> None:
        for run_id in list(self._pages):
            await self._close_run(run_id)
        if self._browser is not None:
            await self._browser.close()
        if self._playwright is not None:
            await self._playwright.stop()
        if self._proxy is not None:
            await self._proxy.close()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
