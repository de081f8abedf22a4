"""The web a stack job's tools act on: the offline sandbox or the live web.

One :class:`WebEnvironment` per stack job (opened by the runner around all its runs):

* ``sandbox`` — the sandbox sites (:mod:`mastif.web`) with the knowledge-API mimics
  are served on loopback for the job and stopped with it; ``web_search`` queries the
  sandbox's engine, the knowledge tools its mimics. Each run is its own sandbox session
  (cookie ``mastif_session`` = run id, in the browser and in HTTP tools alike), and at the
  end of the run its state is snapshotted for the task's check.
* ``live`` — the real web: DuckDuckGo through ``ddgs``, the public Wikipedia / arXiv /
  PubMed / YouTube endpoints, any public URL.

In both, every URL a tool opens passes the same policy (:mod:`mastif.tools.netpolicy`);
the sandbox's own ``host:port`` is the only private address allowed unless the config
says otherwise. The browser starts on the first browser tool call, so stacks whose
models never browse do not pay for Chromium.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urljoin, urlsplit

from mastif.core.config import WebOptions
from mastif.tasks import Task
from mastif.tools import BUILTIN_TOOLS, Tool, ToolError
from mastif.tools.base import current_run_id
from mastif.tools.browser import BrowserOptions, BrowserService
from mastif.tools.http import HttpFetcher
from mastif.tools.netpolicy import UrlPolicy
from mastif.tools.web import SearchHit, hits_from_json, make_web_tools, snapshot_page

log = logging.getLogger(__name__)


class WebEnvironment:
    def __init__(self, mode: str, options: WebOptions, sandbox: Any | None) -> None:
        self.mode = mode
        self.options = options
        self.sandbox = sandbox
        allowed = set(options.allowed_hosts)
        if sandbox is not None:
            allowed.add(sandbox.host_port)
        self.policy = UrlPolicy(options.allow_private, frozenset(allowed))
        self.page_chars = options.page_chars
        self.home = f"{sandbox.base_url}/" if sandbox is not None else None
        self._starts: dict[str, str] = {}
        self.browser = BrowserService(
            BrowserOptions(options.browser_executable, True, options.action_timeout_s),
            self.policy,
            self._browser_cookies,
            self._starts.get,
        )
        self._plain = HttpFetcher(self.policy, options.http_timeout_s)

    # ------------------------------------------------------------- sessions

    def _session_cookies(self, run_id: str) -> dict[str, dict[str, str]]:
        if self.sandbox is None:
            return {}
        from mastif.web.app import SESSION_COOKIE

        return {self.sandbox.host_port: {SESSION_COOKIE: run_id}}

    def _browser_cookies(self, run_id: str) -> list[dict[str, str]]:
        if self.sandbox is None:
            return []
        from mastif.web.app import SESSION_COOKIE

        return [{"name": SESSION_COOKIE, "value": run_id, "url": self.sandbox.base_url}]

    def fetcher(self) -> HttpFetcher:
        return HttpFetcher(
            self.policy, self.options.http_timeout_s, self._session_cookies(current_run_id())
        )

    # ---------------------------------------------------------------- URLs

    def resolve(self, url: str, base: str | None = None) -> str:
        url = url.strip()
        if urlsplit(url).scheme:
            return url
        if url.startswith("//"):
            return f"https:{url}"
        anchor = base or self.home
        if anchor is None:
            if "." in url.split("/")[0]:
                return f"https://{url}"  # "example.org/page": a host without a scheme
            raise ToolError(f"{url!r} is not an absolute URL (http:// or https://)")
        return urljoin(anchor, url)

    def start_url(self, task: Task) -> str | None:
        """The task's start page as an absolute URL (sandbox paths resolved); ``None`` for a
        task that names none (e.g. a Mind2Web task on a site the sandbox does not have)."""
        return self.resolve(task.start_url) if task.start_url else None

    def begin_run(self, run_id: str, task: Task) -> str | None:
        """Remember the run's start page (its browser page opens there); return it."""
        start = self.start_url(task)
        if start:
            self._starts[run_id] = start
        return start

    # -------------------------------------------------------------- search

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        if self.sandbox is not None:
            response = self.fetcher().get(
                f"{self.sandbox.base_url}/search/api", params={"q": query, "n": max_results}
            )
            return hits_from_json(response.content)[:max_results]
        from mastif.tools.search_live import live_search

        hits = live_search(
            query,
            max_results,
            backend=self.options.search_backend,
            timeout_s=self.options.http_timeout_s,
        )
        return [SearchHit(h.title, h.url, h.snippet) for h in hits]

    # ---------------------------------------------------------------- runs

    def page_view(self, run_id: str) -> str:
        """The run's browser page as the web tools list it (opening it at the task's start
        page if the run has not browsed yet); a short note when there is no page to show."""
        if not self.browser.has_page(run_id) and run_id not in self._starts:
            return "(no page is open)"
        chars = self.page_chars

        async def view(page: Any) -> str:
            if not page.url.startswith("http"):
                return "(no page is open)"
            return await snapshot_page(page, chars)

        try:
            return self.browser.call(run_id, view)
        except Exception as exc:  # noqa: BLE001 - a page that cannot be read is shown as such
            return f"(the page could not be read: {exc})"

    def end_run(self, run_id: str) -> dict[str, Any] | None:
        """Close the run's page; the run's sandbox state (``None`` on the live web)."""
        self._starts.pop(run_id, None)
        try:
            self.browser.end_run(run_id)
        except Exception:  # noqa: BLE001 - a page that will not close must not lose the run
            log.exception("closing the browser page of run %s failed", run_id)
        return self.sandbox.state(run_id) if self.sandbox is not None else None

    def tools(self, names: list[str]) -> list[Tool]:
        """The tools called ``names``, in that order, the web ones bound to this environment."""
        available = {t.name: t for t in BUILTIN_TOOLS}
        available.update({t.name: t for t in make_web_tools(self)})
        if any(n not in available for n in names):
            # the knowledge tools load pypdf and youtube-transcript-api: only when asked for
            from mastif.tools.knowledge import KnowledgeEndpoints, make_knowledge_tools

            endpoints = (
                KnowledgeEndpoints.sandbox(self.sandbox.base_url)
                if self.sandbox is not None
                else KnowledgeEndpoints()
            )
            available.update({t.name: t for t in make_knowledge_tools(self._plain, endpoints)})
        missing = [n for n in names if n not in available]
        if missing:
            raise KeyError(f"unknown tool(s) {missing}; available: {sorted(available)}")
        return [available[n] for n in names]

    def close(self) -> None:
        self.browser.close()


@contextmanager
def open_web_environment(mode: str, options: WebOptions) -> Iterator[WebEnvironment]:
    """Start the sandbox (in ``sandbox`` mode) and the browser service; stop both after."""
    if mode == "sandbox":
        from mastif.core.paths import resources_dir
        from mastif.web.mimics import mimic_documents, mimic_routes
        from mastif.web.server import SandboxServer

        data_dir = resources_dir() / "sandbox"
        with SandboxServer(
            data_dir,
            extra_routes=mimic_routes(data_dir),
            extra_documents=mimic_documents(data_dir),
        ) as sandbox:
            env = WebEnvironment(mode, options, sandbox)
            try:
                yield env
            finally:
                env.close()
    else:
        env = WebEnvironment(mode, options, None)
        try:
            yield env
        finally:
            env.close()
