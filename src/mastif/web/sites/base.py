"""What every sandbox site's handlers share: data, sessions, templates, page rendering.

A site is a :class:`Site` subclass whose :meth:`Site.routes` lists its pages. Every page
is rendered through :meth:`Site.render`, which adds the nav bar linking all sites, the
cart count and the session's flash messages; successful POSTs answer with
:meth:`Site.redirect`; and :meth:`Site.error_page` renders the 400/404 answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute

from mastif.web.middleware import SESSION_SCOPE_KEY, session_of
from mastif.web.pricing import money
from mastif.web.sitedata import SiteData
from mastif.web.store import SessionStore

SITES = (
    ("LoopSearch", "/search"),
    ("ShopSphere", "/shop/"),
    ("StayFinder", "/travel/"),
    ("CityPulse", "/events/"),
)
"""The nav bar: every page links every site, by name and front page."""


def make_templates(directory: Path, data: SiteData) -> jinja2.Environment:
    """The sites' Jinja templates, with the ``money`` filter and their helper functions."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["money"] = money
    env.globals["team_name"] = data.team_name
    env.globals["urlencode"] = urlencode
    return env


class Site:
    """Route handlers bound to one data set, one session store and the templates."""

    def __init__(self, data: SiteData, store: SessionStore, templates: jinja2.Environment) -> None:
        self.data = data
        self.store = store
        self.templates = templates

    def routes(self) -> list[BaseRoute]:
        """The site's pages, in the order they are matched."""
        raise NotImplementedError

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        sid = request.scope.get(SESSION_SCOPE_KEY)
        cart_count = 0
        flashes: list[tuple[str, str]] = []
        if sid:
            snapshot = self.store.snapshot(sid)
            cart_count = sum(item["qty"] for item in snapshot["shop"]["cart"])
            flashes = self.store.pop_flashes(sid)
        html = self.templates.get_template(template).render(
            request=request,
            sites=SITES,
            cart_count=cart_count,
            flashes=flashes,
            data=self.data,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def redirect(self, request: Request, path: str, message: str | None = None) -> Response:
        if message:
            self.store.flash(session_of(request), message)
        return RedirectResponse(path, status_code=303)

    async def error_page(self, request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "Internal error."
        if status == 404 and detail in ("Not Found", None):
            detail = f"There is no page at {request.url.path}."
        if request.url.path.startswith("/search/api"):
            return JSONResponse({"error": detail}, status_code=status)
        titles = {400: "Bad request", 404: "Page not found", 405: "Method not allowed"}
        return self.render(
            request,
            "error.html",
            status=status,
            title=titles.get(status, f"Error {status}"),
            message=detail,
        )
