"""HTTP for web tools: every URL, and every redirect hop, passes the URL policy first.

All tools that fetch over HTTP (``requests_get``, ``beautifulsoup_scraper``, ``pdf_reader``,
``wikipedia``, ``arxiv``, ``pubmed``, ``web_search`` in sandbox mode) go through
:class:`HttpFetcher.get`, so the SSRF rule of :mod:`mastif.tools.netpolicy` has one
enforcement point and redirects cannot smuggle a request to a private address. Failures
(refused URL, DNS, connection, timeout, HTTP status >= 400) raise :class:`ToolError`, which
``Tool.invoke`` turns into a failed call in the trace.

``cookies`` are per fetcher and per ``host:port``: the web environment gives each run a
fetcher carrying that run's sandbox session cookie for the sandbox's address only, so runs
never share server-side state and the cookie never leaves for another host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx

from mastif.tools.base import ToolError
from mastif.tools.netpolicy import UrlPolicy, check_url

USER_AGENT = "mastif/0.1 (agent benchmark; +https://github.com/mastif)"
MAX_REDIRECTS = 5
MAX_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class HttpFetcher:
    policy: UrlPolicy = field(default_factory=UrlPolicy)
    timeout_s: float = 20.0
    #: ``host:port`` -> cookies sent to that address only
    cookies: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    user_agent: str = USER_AGENT

    def _cookie_header(self, url: str) -> dict[str, str]:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        jar = self.cookies.get(f"{parts.hostname}:{port}")
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())} if jar else {}

    def get(
        self,
        url: str,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """GET ``url`` following at most :data:`MAX_REDIRECTS` redirects, each hop checked.

        Returns the final response (status < 400); raises :class:`ToolError` otherwise.
        """
        return self.request("GET", url, params=params, headers=headers)

    def post(
        self, url: str, data: Mapping[str, str] | None = None, json: object | None = None
    ) -> httpx.Response:
        return self.request("POST", url, data=data, json=json)

    def request(
        self,
        method: str,
        url: str,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        data: Mapping[str, str] | None = None,
        json: object | None = None,
    ) -> httpx.Response:
        send_headers = {"User-Agent": self.user_agent, **(headers or {})}
        with httpx.Client(timeout=self.timeout_s, follow_redirects=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                check_url(url, self.policy)
                hop_headers = {**send_headers, **self._cookie_header(url)}
                try:
                    response = client.request(
                        method, url, params=params, headers=hop_headers, data=data, json=json
                    )
                except httpx.TimeoutException:
                    raise ToolError(f"timed out after {self.timeout_s:g}s fetching {url}") from None
                except httpx.HTTPError as exc:
                    raise ToolError(f"could not fetch {url}: {type(exc).__name__}: {exc}") from None
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(str(response.url), response.headers["location"])
                    method, params, data, json = "GET", None, None, None
                    continue
                if len(response.content) > MAX_BYTES:
                    raise ToolError(f"{url} is larger than {MAX_BYTES // 1024 // 1024} MiB")
                if response.status_code >= 400:
                    raise ToolError(
                        f"HTTP {response.status_code} {response.reason_phrase} from {url}"
                    )
                return response
        raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url}")
