"""A small site on loopback for the web tools' tests: links, a form, per-cookie state,
errors and a redirect to a private address. Served like the sandbox, by
:class:`mastif.web.server.SandboxServer` (uvicorn on a thread of its own)."""

from __future__ import annotations

import asyncio
import html
import itertools
from collections import Counter

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from mastif.core.config import WebOptions
from mastif.execution.webenv import WebEnvironment
from mastif.web.store import SessionStore

COOKIE = "mastif_session"


def live_web_environment(
    allowed: str,
    *,
    action_timeout_s: float = 5.0,
    http_timeout_s: float = 1.5,
    page_chars: int = 2000,
) -> WebEnvironment:
    """A ``web: live`` environment whose URL policy allows only ``allowed`` (a loopback
    ``host:port`` or URL of a test's own server), with Debian's Chromium; close it after."""
    options = WebOptions(
        allow_private=False,
        allowed_hosts=(allowed.removeprefix("http://"),),
        browser_executable="/usr/bin/chromium",
        action_timeout_s=action_timeout_s,
        http_timeout_s=http_timeout_s,
        page_chars=page_chars,
        search_backend="duckduckgo",
    )
    return WebEnvironment("live", options, None)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>",
        status_code=status,
    )


def build_fixture_app() -> Starlette:
    counts: Counter[str] = Counter()
    fresh = itertools.count(1)

    async def home(request: Request) -> Response:
        return _page(
            "Fixture home",
            "<h1>Welcome</h1><p>The lighthouse opened in 1871.</p>"
            '<a href="/form">Order form</a> <a href="/counter">Counter</a>'
            '<p class="price">$12.50</p><p class="price">$7.25</p>',
        )

    async def form(request: Request) -> Response:
        return _page(
            "Order form",
            '<form action="/result" method="get">'
            '<label for="q">Query</label><input id="q" name="q">'
            '<label for="color">Color</label><select id="color" name="color">'
            '<option value="r">Red</option><option value="b">Blue</option></select>'
            '<label><input type="checkbox" name="express"> Express delivery</label>'
            '<button type="submit">Go</button></form>',
        )

    async def result(request: Request) -> Response:
        p = request.query_params
        text = f"q={p.get('q', '')} color={p.get('color', '')} express={p.get('express', 'off')}"
        return _page("Result", f"<p id='out'>{html.escape(text)}</p>")

    async def counter(request: Request) -> Response:
        # a visitor without the cookie gets a fresh one, as the sandbox does
        who = request.cookies.get(COOKIE) or f"anon-{next(fresh)}"
        if request.method == "POST":
            counts[who] += 1
            response: Response = RedirectResponse("/counter", status_code=303)
        else:
            response = _page(
                "Counter",
                f"<p>Count: {counts[who]}</p><form method='post'><button>Add one</button></form>",
            )
        response.set_cookie(COOKIE, who)
        return response

    async def missing(request: Request) -> Response:
        return _page("Not found", "<p>No such page</p>", 404)

    async def bad_link(request: Request) -> Response:
        return _page("Bad link", '<a href="/missing">Broken</a>')

    async def data(request: Request) -> Response:
        return JSONResponse({"items": [1, 2, 3], "cookie": request.cookies.get(COOKIE)})

    async def to_private(request: Request) -> Response:
        return RedirectResponse("http://10.0.0.1/secret", status_code=302)

    async def slow(request: Request) -> Response:
        await asyncio.sleep(3)
        return _page("Slow", "<p>late</p>")

    app = Starlette(
        routes=[
            Route("/", home),
            Route("/form", form),
            Route("/result", result),
            Route("/counter", counter, methods=["GET", "POST"]),
            Route("/missing", missing),
            Route("/bad-link", bad_link),
            Route("/data.json", data),
            Route("/to-private", to_private),
            Route("/slow", slow),
        ]
    )
    app.state.store = SessionStore()  # SandboxServer serves any app that carries one
    return app
