"""LoopSearch: the sandbox's start page and its search engine, as HTML and as JSON.

``/search`` shows the ten best results for ``q``; ``/search/api?q=...&n=5`` answers with
absolute URLs and snippets (what the ``web_search`` tool reads). The index is built by
:func:`mastif.web.documents.build_documents` plus any pages mounted next to the sites.
"""

from __future__ import annotations

import jinja2
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mastif.web.forms import parse_int
from mastif.web.search import SearchIndex
from mastif.web.sitedata import SiteData
from mastif.web.sites.base import Site
from mastif.web.store import SessionStore


class LoopSearch(Site):
    """The start page and the search engine over one :class:`SearchIndex`."""

    def __init__(
        self, data: SiteData, store: SessionStore, templates: jinja2.Environment, index: SearchIndex
    ) -> None:
        super().__init__(data, store, templates)
        self.index = index

    async def home(self, request: Request) -> Response:
        return self.render(request, "home.html")

    async def search_page(self, request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        hits = self.index.search(q, 10) if q else []
        base = str(request.base_url).rstrip("/")
        return self.render(request, "search.html", q=q, hits=hits, base=base)

    async def search_api(self, request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        if not q:
            return JSONResponse({"error": "Parameter 'q' is required."}, status_code=400)
        n = parse_int(request.query_params.get("n"), "n", 1, 20, default=5)
        base = str(request.base_url).rstrip("/")
        results = [
            {"title": h.doc.title, "url": base + h.doc.path, "snippet": h.snippet}
            for h in self.index.search(q, n)
        ]
        return JSONResponse({"query": q, "results": results})

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", self.home),
            Route("/search", self.search_page),
            Route("/search/api", self.search_api),
        ]
