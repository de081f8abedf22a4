"""The offline web sandbox: four small websites in one Starlette app.

Benchmarks against the live web are neither reproducible nor checkable: prices change,
pages move, and nobody can see what an agent put in a real cart. These sites are small
but real (HTML forms with labels, links, redirects, cookies, a PDF), run on loopback, and
record every state-changing action per session so tasks get objective success checks.

Sites (every page has a nav bar linking all of them):

* ``/shop/`` **ShopSphere** - product search with filters and sorting, product pages,
  manuals as PDF, a cart with coupons, checkout and orders;
* ``/travel/`` **StayFinder** - hotel search with dates and guests, stay totals, hotel
  pages and price alerts;
* ``/events/`` **CityPulse** - movies with showtimes and ticket booking, and a football
  league with standings, results, fixtures and match pages; a watchlist for both;
* ``/search`` **LoopSearch** - a BM25 search engine over all of the above, with an HTML
  page and a JSON API (``/search/api?q=...&n=5``).

Status codes: unknown pages are 404 and malformed form or query input is 400, both as an
HTML page whose message says what was wrong (tools treat >= 400 as a failed call).
Well-formed requests that a site declines for business reasons (an unknown or ineligible
coupon code) are answered 200 with the page and an error banner, as real shops do, so an
agent can read the reason and recover. Successful POSTs redirect (303) to a page that
shows the result. Session handling is in :class:`mastif.web.middleware.SessionMiddleware`; the state shape is
documented in :mod:`mastif.web.store`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from mastif.core.paths import resources_dir
from mastif.web.documents import build_documents
from mastif.web.middleware import SESSION_COOKIE, BodyLimitMiddleware, SessionMiddleware
from mastif.web.search import SearchDocument, SearchIndex
from mastif.web.sitedata import SiteData
from mastif.web.sites.base import make_templates
from mastif.web.sites.events import CityPulse
from mastif.web.sites.search_engine import LoopSearch
from mastif.web.sites.shop import ShopSphere
from mastif.web.sites.travel import StayFinder
from mastif.web.store import SessionStore

__all__ = ["SESSION_COOKIE", "build_app"]


def build_app(
    data_dir: Path | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    extra_documents: Sequence[SearchDocument] = (),
) -> Starlette:
    """The sandbox app: the sites, the search engine and ``extra_routes`` (mounted last).

    ``data_dir`` holds ``shop.json``, ``travel.json``, ``events.json`` and ``templates/``
    (default: ``resources/sandbox``). ``extra_documents`` are added to the search index so
    pages served by ``extra_routes`` can be found too. The app exposes ``app.state.store``
    (the :class:`SessionStore`), ``app.state.data`` and ``app.state.index``.
    """
    if data_dir is None:
        data_dir = resources_dir() / "sandbox"
    data_dir = Path(data_dir)
    data = SiteData.load(data_dir)
    store = SessionStore()
    index = SearchIndex([*build_documents(data), *extra_documents])
    templates = make_templates(data_dir / "templates", data)
    search = LoopSearch(data, store, templates, index)
    sites = [
        search,
        *(site(data, store, templates) for site in (ShopSphere, StayFinder, CityPulse)),
    ]
    app = Starlette(
        routes=[*(route for site in sites for route in site.routes()), *extra_routes],
        middleware=[Middleware(BodyLimitMiddleware), Middleware(SessionMiddleware, store=store)],
        exception_handlers={HTTPException: search.error_page},
    )
    app.state.store = store
    app.state.data = data
    app.state.index = index
    return app
