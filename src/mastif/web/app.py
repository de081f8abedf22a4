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
shows the result. Session handling is in :class:`SessionMiddleware`; the state shape is
documented in :mod:`mastif.web.store`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mastif.web.search import SearchDocument, SearchIndex, tokenize
from mastif.web.store import SessionStore, is_valid_session_id

SESSION_COOKIE = "mastif_session"
SESSION_SCOPE_KEY = "mastif.session"
"""Where :class:`SessionMiddleware` puts the request's session id in the ASGI scope."""

SITES = (
    ("LoopSearch", "/search"),
    ("ShopSphere", "/shop/"),
    ("StayFinder", "/travel/"),
    ("CityPulse", "/events/"),
)
SHOP_SORTS = {
    "relevance": "Relevance",
    "price_asc": "Price: low to high",
    "price_desc": "Price: high to low",
    "rating": "Customer rating",
}
MIN_RATINGS = {"": "Any rating", "3": "3 stars & up", "4": "4 stars & up", "4.5": "4.5 stars & up"}
TRAVEL_SORTS = {
    "recommended": "Recommended",
    "price_asc": "Price: low to high",
    "price_desc": "Price: high to low",
    "rating": "Guest rating",
    "stars": "Star rating",
}
MAX_QTY = 10
MAX_GUESTS = 6
MAX_NIGHTS = 30
MAX_SEATS = 8
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
PDF_DATE = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
"""Fixed PDF creation date: manuals must be byte-identical across runs."""


# --------------------------------------------------------------------------- helpers


def cents(value: float | Decimal) -> float:
    """Round money half-up to cents (float rounding would make 0.125 -> 0.12)."""
    return float(Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def money(value: float) -> str:
    """``1299.0`` -> ``"$1,299.00"``: how every price is shown on the sites."""
    return f"${value:,.2f}"


def bad_request(message: str) -> NoReturn:
    """Reject malformed input with a 400 page that says what to fix."""
    raise HTTPException(status_code=400, detail=message)


def not_found(message: str) -> NoReturn:
    raise HTTPException(status_code=404, detail=message)


def parse_int(raw: str | None, name: str, lo: int, hi: int, default: int | None = None) -> int:
    """An integer form/query field in ``[lo, hi]``; ``default`` when empty (else 400)."""
    if raw is None or not raw.strip():
        if default is not None:
            return default
        bad_request(f"'{name}' is required.")
    try:
        value = int(raw.strip())
    except ValueError:
        bad_request(f"'{name}' must be a whole number, got {raw!r}.")
    if not lo <= value <= hi:
        bad_request(f"'{name}' must be between {lo} and {hi}, got {value}.")
    return value


def parse_float(raw: str | None, name: str, lo: float, hi: float) -> float | None:
    """An optional decimal field in ``[lo, hi]`` (``$`` and ``,`` allowed); ``None`` if empty."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip().lstrip("$").replace(",", "")
    try:
        value = float(text)
    except ValueError:
        bad_request(f"'{name}' must be a number, got {raw!r}.")
    if not (lo <= value <= hi):
        bad_request(f"'{name}' must be between {lo:g} and {hi:g}, got {raw!r}.")
    return value


def parse_date(raw: str | None, name: str) -> dt.date | None:
    """An optional ``YYYY-MM-DD`` date (the value an ``<input type=date>`` submits)."""
    if raw is None or not raw.strip():
        return None
    try:
        return dt.date.fromisoformat(raw.strip())
    except ValueError:
        bad_request(f"'{name}' must be a date in YYYY-MM-DD format, got {raw!r}.")


def parse_stay(checkin_raw: str | None, checkout_raw: str | None) -> tuple[dt.date, dt.date] | None:
    """Check-in and check-out dates, both or neither; 1 to ``MAX_NIGHTS`` nights."""
    checkin = parse_date(checkin_raw, "checkin")
    checkout = parse_date(checkout_raw, "checkout")
    if checkin is None and checkout is None:
        return None
    if checkin is None or checkout is None:
        bad_request("Give both a check-in and a check-out date, or neither.")
    nights = (checkout - checkin).days
    if nights < 1:
        bad_request("The check-out date must be after the check-in date.")
    if nights > MAX_NIGHTS:
        bad_request(f"Stays are limited to {MAX_NIGHTS} nights; this one has {nights}.")
    return checkin, checkout


def field_text(form: FormData, name: str) -> str:
    """A text form field, stripped; ``""`` when absent (uploads are not text)."""
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def require_text(form: FormData, name: str, label: str) -> str:
    value = field_text(form, name)
    if not value:
        bad_request(f"{label} is required.")
    return value


def parse_email(raw: str) -> str:
    if not EMAIL_RE.match(raw):
        bad_request(f"{raw!r} is not a valid email address.")
    return raw


# --------------------------------------------------------------------------- data


@dataclass
class SiteData:
    """Everything the sites show, loaded once from the JSON files of ``data_dir``."""

    shop: dict[str, Any]
    travel: dict[str, Any]
    events: dict[str, Any]
    products: dict[str, dict[str, Any]] = field(init=False)
    categories: dict[str, dict[str, Any]] = field(init=False)
    coupons: dict[str, dict[str, Any]] = field(init=False)
    hotels: dict[str, dict[str, Any]] = field(init=False)
    cities: dict[str, dict[str, Any]] = field(init=False)
    movies: dict[str, dict[str, Any]] = field(init=False)
    cinemas: dict[str, dict[str, Any]] = field(init=False)
    teams: dict[str, dict[str, Any]] = field(init=False)
    matches: dict[str, dict[str, Any]] = field(init=False)
    standings: list[dict[str, Any]] = field(init=False)
    scorers: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.products = _by_key(self.shop["products"], "sku", "product")
        self.categories = _by_key(self.shop["categories"], "id", "category")
        self.coupons = _by_key(self.shop["coupons"], "code", "coupon")
        self.hotels = _by_key(self.travel["hotels"], "id", "hotel")
        self.cities = _by_key(self.travel["cities"], "id", "city")
        self.movies = _by_key(self.events["movies"], "id", "movie")
        self.cinemas = _by_key(self.events["cinemas"], "id", "cinema")
        league = self.events["league"]
        self.teams = _by_key(league["teams"], "id", "team")
        self.matches = _by_key(league["matches"], "id", "match")
        for p in self.products.values():
            _require(p["category"] in self.categories, f"product {p['sku']}: unknown category")
        for h in self.hotels.values():
            _require(h["city"] in self.cities, f"hotel {h['id']}: unknown city")
        for m in self.movies.values():
            for cinema in m["showtimes"]:
                _require(cinema in self.cinemas, f"movie {m['id']}: unknown cinema {cinema}")
        for m in self.matches.values():
            _require(
                m["home"] in self.teams and m["away"] in self.teams,
                f"match {m['id']}: unknown team",
            )
        self.standings = _standings(self.teams, self.matches.values(), league["points"])
        self.scorers = _scorers(self.teams, self.matches.values())

    @classmethod
    def load(cls, data_dir: Path) -> SiteData:
        def read(name: str) -> dict[str, Any]:
            path = data_dir / name
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}: cannot load sandbox data: {exc}") from exc

        return cls(read("shop.json"), read("travel.json"), read("events.json"))

    def city_by_name(self, raw: str) -> dict[str, Any] | None:
        """A city by id (``cape-town``) or display name (``Cape Town``), case-insensitive."""
        key = raw.strip().lower()
        for city in self.cities.values():
            if key in (city["id"], city["name"].lower()):
                return city
        return None

    def played(self, match: dict[str, Any]) -> bool:
        return match.get("home_score") is not None


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"sandbox data: {message}")


def _by_key(items: list[dict[str, Any]], key: str, what: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        _require(item[key] not in out, f"duplicate {what} {item[key]!r}")
        out[item[key]] = item
    return out


def _standings(
    teams: dict[str, dict[str, Any]], matches: Any, points: dict[str, int]
) -> list[dict[str, Any]]:
    """League table from played matches: points, then goal difference, goals, name."""
    rows = {
        t: {"team": t, "played": 0, "won": 0, "drawn": 0, "lost": 0, "gf": 0, "ga": 0, "points": 0}
        for t in teams
    }
    for m in matches:
        if m.get("home_score") is None:
            continue
        for me, mine, theirs in (
            (m["home"], m["home_score"], m["away_score"]),
            (m["away"], m["away_score"], m["home_score"]),
        ):
            row = rows[me]
            row["played"] += 1
            row["gf"] += mine
            row["ga"] += theirs
            if mine > theirs:
                row["won"] += 1
                row["points"] += points["win"]
            elif mine == theirs:
                row["drawn"] += 1
                row["points"] += points["draw"]
            else:
                row["lost"] += 1
                row["points"] += points["loss"]
    table = sorted(
        rows.values(),
        key=lambda r: (-r["points"], -(r["gf"] - r["ga"]), -r["gf"], teams[r["team"]]["name"]),
    )
    for pos, row in enumerate(table, start=1):
        row["pos"] = pos
        row["gd"] = row["gf"] - row["ga"]
    return table


def _scorers(teams: dict[str, dict[str, Any]], matches: Any) -> list[dict[str, Any]]:
    counts: dict[tuple[str, str], int] = {}
    for m in matches:
        for goal in m.get("goals", []):
            key = (goal["player"], goal["team"])
            counts[key] = counts.get(key, 0) + 1
    rows = [{"player": p, "team": t, "goals": n} for (p, t), n in counts.items()]
    rows.sort(key=lambda r: (-r["goals"], r["player"]))
    return rows


# --------------------------------------------------------------------------- shop logic


@dataclass
class CartView:
    """A priced cart: what the cart page, checkout and orders all compute the same way."""

    lines: list[dict[str, Any]]
    subtotal: float
    coupon: dict[str, Any] | None
    discount: float

    @property
    def after_discount(self) -> float:
        return cents(self.subtotal - self.discount)

    def shipping_cost(self, method: str, rules: dict[str, Any]) -> float:
        rule = rules[method]
        free_over = rule.get("free_over")
        if free_over is not None and self.after_discount >= free_over:
            return 0.0
        return float(rule["cost"])


def coupon_problem(
    coupon: dict[str, Any], lines: list[dict[str, Any]], data: SiteData
) -> str | None:
    """Why ``coupon`` cannot apply to these cart lines, or ``None`` if it can."""
    code = coupon["code"]
    if coupon.get("expired"):
        return f"Coupon {code} has expired."
    if not lines:
        return "Add something to your cart before using a coupon."
    category = coupon.get("category")
    if category:
        base = sum(line["line_total"] for line in lines if line["product"]["category"] == category)
        cat_name = data.categories[category]["name"]
        if base == 0:
            return f"Coupon {code} only applies to {cat_name} items, and your cart has none."
        scope = f"your {cat_name} items total"
    else:
        base = sum(line["line_total"] for line in lines)
        scope = "your subtotal is"
    minimum = coupon.get("min_subtotal")
    if minimum is not None and base < minimum:
        return f"Coupon {code} needs a minimum of {money(minimum)}; {scope} {money(cents(base))}."
    return None


def coupon_discount(coupon: dict[str, Any], lines: list[dict[str, Any]]) -> float:
    category = coupon.get("category")
    base = sum(
        line["line_total"]
        for line in lines
        if not category or line["product"]["category"] == category
    )
    if coupon["kind"] == "percent":
        return cents(Decimal(str(base)) * Decimal(str(coupon["value"])) / 100)
    return cents(min(float(coupon["value"]), base))


def price_cart(state: dict[str, Any], data: SiteData) -> CartView:
    lines = []
    for item in state["shop"]["cart"]:
        product = data.products[item["sku"]]
        lines.append(
            {
                "product": product,
                "qty": item["qty"],
                "line_total": cents(Decimal(str(product["price"])) * item["qty"]),
            }
        )
    subtotal = cents(sum(line["line_total"] for line in lines))
    coupon = data.coupons.get(state["shop"]["coupon"] or "")
    discount = 0.0
    if coupon is not None and coupon_problem(coupon, lines, data) is None:
        discount = coupon_discount(coupon, lines)
    else:
        coupon = None
    return CartView(lines, subtotal, coupon, discount)


# --------------------------------------------------------------------------- sessions


class SessionMiddleware:
    """Give every request a sandbox session, from the cookie or freshly made.

    A valid ``mastif_session`` cookie selects that session (registering it if the id is
    new, so a runner may choose ids itself); a request without one, or with a malformed
    one, gets a new random session and a ``Set-Cookie`` on its response.
    """

    def __init__(self, app: ASGIApp, store: SessionStore) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_cookie = ""
        for name, value in scope.get("headers", []):
            if name == b"cookie":
                raw_cookie = value.decode("latin-1")
                break
        sid = cookie_parser(raw_cookie).get(SESSION_COOKIE, "") if raw_cookie else ""
        fresh = not is_valid_session_id(sid)
        if fresh:
            sid = self.store.new_session()
        else:
            self.store.ensure(sid)
        scope[SESSION_SCOPE_KEY] = sid

        async def send_with_cookie(message: Message) -> None:
            if fresh and message["type"] == "http.response.start":
                cookie = f"{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Lax"
                headers = [*message.get("headers", []), (b"set-cookie", cookie.encode("latin-1"))]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


#: Largest request body the sandbox reads (bytes); its forms are a few hundred bytes.
MAX_BODY_BYTES = 64 * 1024


class _BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Answer 413 to a request whose body exceeds ``max_bytes``, without reading it whole.

    A declared ``Content-Length`` above the limit is refused before any byte is read; a
    chunked or understated body is counted as it streams and refused at the first chunk
    that crosses the limit (Starlette's ``request.form()`` would otherwise buffer it all).
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _too_large(self, send: Send) -> None:
        body = f"request body larger than {self.max_bytes} bytes".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await self._too_large(send)
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
            await self._too_large(send)


def session_of(request: Request) -> str:
    return str(request.scope[SESSION_SCOPE_KEY])


# --------------------------------------------------------------------------- search docs


def build_documents(data: SiteData) -> list[SearchDocument]:
    """One search document per page worth finding, with the facts people ask about."""
    docs = [
        SearchDocument(
            "/",
            "Sandbox home - all sites",
            "Start page linking ShopSphere, StayFinder, CityPulse and LoopSearch.",
            site="LoopSearch",
        ),
        SearchDocument(
            "/shop/",
            "ShopSphere - online shop",
            f"{len(data.products)} products in "
            + ", ".join(c["name"] for c in data.categories.values())
            + ".",
            "Search products, compare prices and ratings, use coupon codes.",
            site="ShopSphere",
        ),
        SearchDocument(
            "/shop/deals",
            "Coupon codes and deals - ShopSphere",
            "Current ShopSphere coupon codes: "
            + "; ".join(
                f"{c['code']}: {c['description']}"
                for c in data.coupons.values()
                if not c.get("expired")
            ),
            site="ShopSphere",
        ),
        SearchDocument(
            "/travel/",
            "StayFinder - hotel search",
            f"{len(data.hotels)} hotels in "
            + ", ".join(c["name"] for c in data.cities.values())
            + ".",
            "Compare hotel prices for your dates and set price alerts.",
            site="StayFinder",
        ),
        SearchDocument(
            "/travel/alerts",
            "Price alerts - StayFinder",
            "Create a price alert for a hotel or city and your travel dates.",
            site="StayFinder",
        ),
        SearchDocument(
            "/events/",
            "CityPulse - movies and sports",
            "Cinema showtimes, ticket booking, and Coastal League football scores.",
            site="CityPulse",
        ),
        SearchDocument(
            "/events/movies",
            "Movies now showing - CityPulse",
            "Now showing: " + ", ".join(m["title"] for m in data.movies.values()) + ".",
            site="CityPulse",
        ),
    ]
    for cat in data.categories.values():
        items = [p for p in data.products.values() if p["category"] == cat["id"]]
        cheapest = min(items, key=lambda p: p["price"])
        docs.append(
            SearchDocument(
                "/shop/search?" + urlencode({"category": cat["id"]}),
                f"{cat['name']} - ShopSphere",
                f"{len(items)} {cat['name']} products from {money(cheapest['price'])}. {cat['blurb']}",
                " ".join(p["name"] + "." for p in items),
                site="ShopSphere",
            )
        )
    for p in data.products.values():
        stock = f"In stock ({p['stock']} left)." if p["stock"] else "Out of stock."
        specs = " ".join(f"{k}: {v}." for k, v in p["specs"].items())
        docs.append(
            SearchDocument(
                f"/shop/product/{p['sku']}",
                f"{p['name']} - ShopSphere",
                f"{money(p['price'])}, rated {p['rating']}/5 ({p['reviews']} reviews). {stock}",
                f"{p['description']} Brand: {p['brand']}. Category: "
                f"{data.categories[p['category']]['name']}. SKU {p['sku']}. {specs}",
                site="ShopSphere",
            )
        )
    for city in data.cities.values():
        hotels = [h for h in data.hotels.values() if h["city"] == city["id"]]
        docs.append(
            SearchDocument(
                "/travel/search?" + urlencode({"city": city["id"]}),
                f"Hotels in {city['name']} - StayFinder",
                f"{len(hotels)} hotels in {city['name']}, {city['country']}, from "
                f"{money(min(h['price'] for h in hotels))} per night.",
                city["blurb"] + " " + " ".join(h["name"] + "." for h in hotels),
                site="StayFinder",
            )
        )
    for h in data.hotels.values():
        city = data.cities[h["city"]]
        cancel = "Free cancellation." if h["free_cancellation"] else "Non-refundable."
        docs.append(
            SearchDocument(
                f"/travel/hotel/{h['id']}",
                f"{h['name']}, {city['name']} - StayFinder",
                f"{h['stars']}-star hotel in {h['neighbourhood']}, {city['name']}. "
                f"{money(h['price'])} per night, guest rating {h['rating']}/10. {cancel}",
                f"{h['description']} Amenities: {', '.join(h['amenities'])}. Up to "
                f"{h['max_guests']} guests per room. {h['distance_km']} km from the centre.",
                site="StayFinder",
            )
        )
    for m in data.movies.values():
        times = "; ".join(
            f"{data.cinemas[c]['name']} {', '.join(ts)}" for c, ts in m["showtimes"].items()
        )
        docs.append(
            SearchDocument(
                f"/events/movies/{m['id']}",
                f"{m['title']} ({m['year']}) - CityPulse",
                f"{m['genre']}, {m['runtime']} min, rated {m['age_rating']}, audience score "
                f"{m['rating']}/10. Showtimes today: {times}.",
                f"{m['synopsis']} Directed by {m['director']}.",
                site="CityPulse",
            )
        )
    for c in data.cinemas.values():
        showing = [m for m in data.movies.values() if c["id"] in m["showtimes"]]
        docs.append(
            SearchDocument(
                f"/events/cinema/{c['id']}",
                f"{c['name']} - CityPulse",
                f"Cinema at {c['address']}. Tickets {money(c['seat_price'])} per seat.",
                " ".join(f"{m['title']} at {', '.join(m['showtimes'][c['id']])}." for m in showing),
                site="CityPulse",
            )
        )
    league = data.events["league"]
    leader = data.standings[0]
    best = data.scorers[0]["goals"] if data.scorers else 0
    top = [s["player"] for s in data.scorers if s["goals"] == best]
    scorers = (
        f"Joint top scorers: {' and '.join(top)}, {best} goals each."
        if len(top) > 1
        else f"Top scorer: {top[0]}, {best} goals."
        if top
        else ""
    )
    docs.append(
        SearchDocument(
            "/events/sports",
            f"{league['name']} {league['season']} table and results - CityPulse",
            f"Leader: {data.teams[leader['team']]['name']} with {leader['points']} points after "
            f"{leader['played']} matches. {scorers}",
            " ".join(
                f"Position {r['pos']}: {data.teams[r['team']]['name']}, {r['points']} points."
                for r in data.standings
            ),
            site="CityPulse",
        )
    )
    for row in data.standings:
        t = data.teams[row["team"]]
        docs.append(
            SearchDocument(
                f"/events/sports/team/{t['id']}",
                f"{t['name']} - CityPulse",
                f"{league['name']} position {row['pos']} with {row['points']} points "
                f"(W{row['won']} D{row['drawn']} L{row['lost']}, goal difference {row['gd']:+d}).",
                f"Home ground: {t['stadium']}, {t['city']}. Squad: {', '.join(t['players'])}.",
                site="CityPulse",
            )
        )
    for m in data.matches.values():
        home, away = data.teams[m["home"]]["name"], data.teams[m["away"]]["name"]
        if data.played(m):
            goals = ", ".join(f"{g['player']} {g['minute']}'" for g in m["goals"]) or "none"
            docs.append(
                SearchDocument(
                    f"/events/sports/match/{m['id']}",
                    f"{home} {m['home_score']}-{m['away_score']} {away} - CityPulse",
                    f"{league['name']} round {m['round']}, {m['date']} at {m['venue']}. Final score: "
                    f"{home} {m['home_score']}, {away} {m['away_score']}.",
                    f"Goals: {goals}. Attendance {m['attendance']:,}.",
                    site="CityPulse",
                )
            )
        else:
            docs.append(
                SearchDocument(
                    f"/events/sports/match/{m['id']}",
                    f"{home} vs {away} - CityPulse",
                    f"{league['name']} round {m['round']} fixture: {m['date']}, kick-off "
                    f"{m['kickoff']} at {m['venue']}.",
                    site="CityPulse",
                )
            )
    return docs


# --------------------------------------------------------------------------- PDF manuals


def render_manual(product: dict[str, Any]) -> bytes:
    """The product's manual as a PDF, byte-identical on every call (fixed date, no IDs).

    Its facts (battery life, warranty) are deliberately absent from the HTML product page
    and from the search index, so finding them needs a PDF reader.
    """
    from fpdf import FPDF

    manual = product["manual"]
    pdf = FPDF(format="A4")
    pdf.set_creation_date(PDF_DATE)
    pdf.set_title(manual["title"])
    pdf.set_author(product["brand"])
    pdf.set_producer("ShopSphere manual service")
    pdf.add_page()
    pdf.set_font("Helvetica", style="B", size=16)
    pdf.multi_cell(0, 9, manual["title"], new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(
        0, 6, f"Model: {product['name']} (SKU {product['sku']})", new_x="LMARGIN", new_y="NEXT"
    )
    pdf.ln(4)
    for heading, body in manual["sections"]:
        pdf.set_font("Helvetica", style="B", size=12)
        pdf.multi_cell(0, 7, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, body, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    return bytes(pdf.output())


# --------------------------------------------------------------------------- the app


class Sandbox:
    """Route handlers bound to one data set, one store and one search index."""

    def __init__(
        self, data: SiteData, store: SessionStore, index: SearchIndex, templates: jinja2.Environment
    ) -> None:
        self.data = data
        self.store = store
        self.index = index
        self.templates = templates
        self._manual = lru_cache(maxsize=None)(self._manual_uncached)

    # -- rendering

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

    # -- home and search engine

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

    # -- shop

    def _product(self, sku: str) -> dict[str, Any]:
        product = self.data.products.get(sku.strip().upper())
        if product is None:
            not_found(f"No product with SKU {sku!r}.")
        return product

    async def shop_home(self, request: Request) -> Response:
        top = sorted(self.data.products.values(), key=lambda p: (-p["rating"], p["price"]))[:6]
        return self.render(request, "shop_home.html", top=top)

    async def shop_deals(self, request: Request) -> Response:
        coupons = [c for c in self.data.coupons.values() if not c.get("expired")]
        return self.render(request, "shop_deals.html", coupons=coupons)

    async def shop_search(self, request: Request) -> Response:
        params = request.query_params
        q = params.get("q", "").strip()
        category = params.get("category", "").strip().lower()
        if category and category not in self.data.categories:
            bad_request(
                f"Unknown category {category!r}; choose one of "
                + ", ".join(self.data.categories)
                + "."
            )
        max_price = parse_float(params.get("max_price"), "max_price", 0, 100000)
        min_rating = parse_float(params.get("min_rating"), "min_rating", 0, 5)
        sort = params.get("sort", "").strip() or "relevance"
        if sort not in SHOP_SORTS:
            bad_request(f"Unknown sort {sort!r}; use one of {', '.join(SHOP_SORTS)}.")
        terms = set(tokenize(q))
        results = []
        for order, p in enumerate(self.data.products.values()):
            if category and p["category"] != category:
                continue
            if max_price is not None and p["price"] > max_price:
                continue
            if min_rating is not None and p["rating"] < min_rating:
                continue
            if terms:
                name_tokens = set(tokenize(f"{p['name']} {p['brand']}"))
                all_tokens = name_tokens | set(
                    tokenize(
                        f"{p['description']} {self.data.categories[p['category']]['name']} "
                        f"{p['sku']} " + " ".join(f"{k} {v}" for k, v in p["specs"].items())
                    )
                )
                if not terms <= all_tokens:
                    continue
                results.append((-len(terms & name_tokens), order, p))
            else:
                results.append((0, order, p))
        results.sort(key=lambda r: (r[0], r[1]))
        products = [p for _, _, p in results]
        if sort == "price_asc":
            products.sort(key=lambda p: p["price"])
        elif sort == "price_desc":
            products.sort(key=lambda p: -p["price"])
        elif sort == "rating":
            products.sort(key=lambda p: (-p["rating"], -p["reviews"]))
        return self.render(
            request,
            "shop_search.html",
            products=products,
            q=q,
            category=category,
            max_price=params.get("max_price", ""),
            min_rating=params.get("min_rating", ""),
            sort=sort,
            sorts=SHOP_SORTS,
            min_ratings=MIN_RATINGS,
        )

    async def shop_product(self, request: Request) -> Response:
        product = self._product(request.path_params["sku"])
        return self.render(
            request,
            "shop_product.html",
            product=product,
            category=self.data.categories[product["category"]],
            max_qty=min(MAX_QTY, product["stock"]),
        )

    def _manual_uncached(self, sku: str) -> bytes:
        return render_manual(self.data.products[sku])

    async def shop_manual(self, request: Request) -> Response:
        product = self._product(request.path_params["sku"])
        if "manual" not in product:
            not_found(f"{product['name']} has no downloadable manual.")
        filename = f"{product['sku'].lower()}-manual.pdf"
        return Response(
            self._manual(product["sku"]),
            media_type="application/pdf",
            headers={"Content-Disposition": f'inline; filename="{filename}"'},
        )

    def _recheck_coupon(self, sid: str, state: dict[str, Any]) -> None:
        """Drop a coupon that no longer applies after a cart change, and say why."""
        code = state["shop"]["coupon"]
        if not code:
            return
        view = price_cart(state, self.data)
        if view.coupon is None:
            state["shop"]["coupon"] = None
            coupon = self.data.coupons[code]
            lines = view.lines
            reason = coupon_problem(coupon, lines, self.data) or ""
            self.store.flash(sid, f"Coupon {code} was removed: {reason}", "error")

    async def cart_add(self, request: Request) -> Response:
        form = await request.form()
        product = self._product(require_text(form, "sku", "SKU"))
        qty = parse_int(field_text(form, "qty"), "qty", 1, MAX_QTY, default=1)
        sid = session_of(request)
        with self.store.edit(sid) as state:
            cart = state["shop"]["cart"]
            line = next((i for i in cart if i["sku"] == product["sku"]), None)
            new_qty = qty + (line["qty"] if line else 0)
            if product["stock"] == 0:
                bad_request(f"{product['name']} is out of stock.")
            if new_qty > min(product["stock"], MAX_QTY):
                bad_request(
                    f"Cannot have {new_qty} of {product['name']} in the cart: "
                    f"the limit is {min(product['stock'], MAX_QTY)}."
                )
            if line:
                line["qty"] = new_qty
            else:
                cart.append({"sku": product["sku"], "qty": qty})
        return self.redirect(
            request, "/shop/cart", f"Added {qty} x {product['name']} to your cart."
        )

    async def cart_update(self, request: Request) -> Response:
        form = await request.form()
        product = self._product(require_text(form, "sku", "SKU"))
        qty = parse_int(field_text(form, "qty"), "qty", 0, MAX_QTY)
        sid = session_of(request)
        with self.store.edit(sid) as state:
            cart = state["shop"]["cart"]
            line = next((i for i in cart if i["sku"] == product["sku"]), None)
            if line is None:
                bad_request(f"{product['name']} is not in your cart.")
            if qty > product["stock"]:
                bad_request(f"Only {product['stock']} of {product['name']} in stock.")
            if qty == 0:
                cart.remove(line)
                message = f"Removed {product['name']} from your cart."
            else:
                line["qty"] = qty
                message = f"Updated {product['name']} to quantity {qty}."
            self._recheck_coupon(sid, state)
        return self.redirect(request, "/shop/cart", message)

    async def cart_remove(self, request: Request) -> Response:
        form = await request.form()
        product = self._product(require_text(form, "sku", "SKU"))
        sid = session_of(request)
        with self.store.edit(sid) as state:
            cart = state["shop"]["cart"]
            line = next((i for i in cart if i["sku"] == product["sku"]), None)
            if line is None:
                bad_request(f"{product['name']} is not in your cart.")
            cart.remove(line)
            self._recheck_coupon(sid, state)
        return self.redirect(request, "/shop/cart", f"Removed {product['name']} from your cart.")

    async def cart_page(
        self, request: Request, coupon_error: str | None = None, entered_code: str = ""
    ) -> Response:
        state = self.store.snapshot(session_of(request))
        view = price_cart(state, self.data)
        shipping = view.shipping_cost("standard", self.data.shop["shipping"]) if view.lines else 0.0
        return self.render(
            request,
            "shop_cart.html",
            view=view,
            coupon_error=coupon_error,
            entered_code=entered_code,
            shipping=shipping,
            total=cents(view.after_discount + shipping),
        )

    async def cart_coupon(self, request: Request) -> Response:
        form = await request.form()
        raw = field_text(form, "code")
        if not raw:
            bad_request("Enter a coupon code.")
        code = raw.upper()
        sid = session_of(request)
        coupon = self.data.coupons.get(code)
        if coupon is None:
            return await self.cart_page(request, f"{raw!r} is not a valid coupon code.", raw)
        with self.store.edit(sid) as state:
            problem = coupon_problem(coupon, price_cart(state, self.data).lines, self.data)
            if problem is None:
                state["shop"]["coupon"] = code
        if problem is not None:
            return await self.cart_page(request, problem, raw)
        return self.redirect(
            request, "/shop/cart", f"Coupon {code} applied: {coupon['description']}"
        )

    async def cart_coupon_remove(self, request: Request) -> Response:
        with self.store.edit(session_of(request)) as state:
            state["shop"]["coupon"] = None
        return self.redirect(request, "/shop/cart", "Coupon removed.")

    async def checkout_page(self, request: Request) -> Response:
        state = self.store.snapshot(session_of(request))
        view = price_cart(state, self.data)
        rules = self.data.shop["shipping"]
        options = [
            {"id": k, "label": v["label"], "cost": view.shipping_cost(k, rules)}
            for k, v in rules.items()
        ]
        return self.render(request, "shop_checkout.html", view=view, options=options)

    async def checkout_submit(self, request: Request) -> Response:
        form = await request.form()
        name = require_text(form, "name", "Full name")
        email = parse_email(require_text(form, "email", "Email"))
        address = require_text(form, "address", "Shipping address")
        method = field_text(form, "shipping") or "standard"
        rules = self.data.shop["shipping"]
        if method not in rules:
            bad_request(f"Unknown shipping method {method!r}; use one of {', '.join(rules)}.")
        sid = session_of(request)
        with self.store.edit(sid) as state:
            view = price_cart(state, self.data)
            if not view.lines:
                bad_request("Your cart is empty; add a product before checking out.")
            shipping = view.shipping_cost(method, rules)
            order_id = f"SS-{self.store.next_number('order', 1001)}"
            state["shop"]["orders"].append(
                {
                    "order_id": order_id,
                    "items": [
                        {
                            "sku": line["product"]["sku"],
                            "qty": line["qty"],
                            "unit_price": line["product"]["price"],
                        }
                        for line in view.lines
                    ],
                    "coupon": view.coupon["code"] if view.coupon else None,
                    "subtotal": view.subtotal,
                    "discount": view.discount,
                    "shipping_method": method,
                    "shipping_cost": shipping,
                    "total": cents(view.after_discount + shipping),
                    "name": name,
                    "email": email,
                    "address": address,
                }
            )
            state["shop"]["cart"] = []
            state["shop"]["coupon"] = None
        return self.redirect(
            request, f"/shop/orders/{order_id}", f"Thank you! Order {order_id} has been placed."
        )

    async def orders_page(self, request: Request) -> Response:
        orders = self.store.snapshot(session_of(request))["shop"]["orders"]
        return self.render(request, "shop_orders.html", orders=orders)

    async def order_page(self, request: Request) -> Response:
        orders = self.store.snapshot(session_of(request))["shop"]["orders"]
        order_id = request.path_params["order_id"]
        order = next((o for o in orders if o["order_id"].lower() == order_id.lower()), None)
        if order is None:
            not_found(f"No order {order_id!r} in this session.")
        return self.render(request, "shop_order.html", order=order)

    # -- travel

    def _hotel(self, hotel_id: str) -> dict[str, Any]:
        hotel = self.data.hotels.get(hotel_id.strip().lower())
        if hotel is None:
            not_found(f"No hotel {hotel_id!r}.")
        return hotel

    def _stay_context(self, params: Any) -> dict[str, Any]:
        stay = parse_stay(params.get("checkin"), params.get("checkout"))
        guests = parse_int(params.get("guests"), "guests", 1, MAX_GUESTS, default=2)
        nights = (stay[1] - stay[0]).days if stay else None
        return {
            "checkin": stay[0].isoformat() if stay else "",
            "checkout": stay[1].isoformat() if stay else "",
            "guests": guests,
            "nights": nights,
        }

    async def travel_home(self, request: Request) -> Response:
        return self.render(
            request,
            "travel_home.html",
            stay=self._stay_context({}),
            sort="recommended",
            sorts=TRAVEL_SORTS,
            city=None,
        )

    async def travel_search(self, request: Request) -> Response:
        params = request.query_params
        raw_city = params.get("city", "").strip()
        city = None
        if raw_city:
            city = self.data.city_by_name(raw_city)
            if city is None:
                bad_request(
                    f"Unknown city {raw_city!r}; choose one of "
                    + ", ".join(c["name"] for c in self.data.cities.values())
                    + "."
                )
        stay = self._stay_context(params)
        sort = params.get("sort", "").strip() or "recommended"
        if sort not in TRAVEL_SORTS:
            bad_request(f"Unknown sort {sort!r}; use one of {', '.join(TRAVEL_SORTS)}.")
        free_only = params.get("free_cancellation", "") in ("1", "on", "true", "yes")
        hotels = [
            h
            for h in self.data.hotels.values()
            if (city is None or h["city"] == city["id"])
            and h["max_guests"] >= stay["guests"]
            and (h["free_cancellation"] or not free_only)
        ]
        keys: dict[str, Callable[[dict[str, Any]], Any]] = {
            "price_asc": lambda h: h["price"],
            "price_desc": lambda h: -h["price"],
            "rating": lambda h: (-h["rating"], h["price"]),
            "stars": lambda h: (-h["stars"], -h["rating"]),
        }
        if sort in keys:
            hotels.sort(key=keys[sort])
        results = [{"hotel": h, "total": self._total(h, stay["nights"])} for h in hotels]
        return self.render(
            request,
            "travel_search.html",
            results=results,
            city=city,
            stay=stay,
            sort=sort,
            sorts=TRAVEL_SORTS,
            free_only=free_only,
            searched=True,
        )

    @staticmethod
    def _total(hotel: dict[str, Any], nights: int | None) -> float | None:
        return None if nights is None else cents(Decimal(str(hotel["price"])) * nights)

    def _stay_query(self, stay: dict[str, Any]) -> str:
        if not stay["nights"]:
            return urlencode({"guests": stay["guests"]})
        return urlencode(
            {"checkin": stay["checkin"], "checkout": stay["checkout"], "guests": stay["guests"]}
        )

    async def travel_hotel(self, request: Request) -> Response:
        hotel = self._hotel(request.path_params["hotel_id"])
        stay = self._stay_context(request.query_params)
        return self.render(
            request,
            "travel_hotel.html",
            hotel=hotel,
            city=self.data.cities[hotel["city"]],
            stay=stay,
            total=self._total(hotel, stay["nights"]),
            too_many=stay["guests"] > hotel["max_guests"],
        )

    async def alerts_page(self, request: Request) -> Response:
        alerts = self.store.snapshot(session_of(request))["travel"]["alerts"]
        return self.render(
            request, "travel_alerts.html", alerts=alerts, stay=self._stay_context({})
        )

    async def alerts_create(self, request: Request) -> Response:
        form = await request.form()
        hotel_id = field_text(form, "hotel")
        hotel = self._hotel(hotel_id) if hotel_id else None
        raw_city = field_text(form, "city")
        city = self.data.city_by_name(raw_city) if raw_city else None
        if raw_city and city is None:
            bad_request(f"Unknown city {raw_city!r}.")
        if hotel is not None:
            if city is not None and city["id"] != hotel["city"]:
                bad_request(
                    f"{hotel['name']} is in {self.data.cities[hotel['city']]['name']}, "
                    f"not in {city['name']}."
                )
            city = self.data.cities[hotel["city"]]
        if city is None:
            bad_request("Choose a city or a hotel for the alert.")
        stay = parse_stay(field_text(form, "checkin"), field_text(form, "checkout"))
        if stay is None:
            bad_request("A price alert needs check-in and check-out dates.")
        guests = parse_int(field_text(form, "guests"), "guests", 1, MAX_GUESTS, default=2)
        if hotel is not None and guests > hotel["max_guests"]:
            bad_request(f"{hotel['name']} takes at most {hotel['max_guests']} guests per room.")
        max_price = parse_float(field_text(form, "max_price"), "max_price", 1, 100000)
        if max_price is None:
            bad_request("Enter the maximum price per night for the alert.")
        email = parse_email(require_text(form, "email", "Email"))
        sid = session_of(request)
        with self.store.edit(sid) as state:
            alert_id = self.store.next_number("alert", 1)
            state["travel"]["alerts"].append(
                {
                    "alert_id": alert_id,
                    "hotel": hotel["id"] if hotel else None,
                    "city": city["id"],
                    "checkin": stay[0].isoformat(),
                    "checkout": stay[1].isoformat(),
                    "guests": guests,
                    "max_price": cents(max_price),
                    "email": email,
                }
            )
        target = hotel["name"] if hotel else f"hotels in {city['name']}"
        return self.redirect(
            request, "/travel/alerts", f"Price alert #{alert_id} created for {target}."
        )

    async def alerts_delete(self, request: Request) -> Response:
        form = await request.form()
        alert_id = parse_int(field_text(form, "alert_id"), "alert_id", 1, 10**9)
        with self.store.edit(session_of(request)) as state:
            alerts = state["travel"]["alerts"]
            alert = next((a for a in alerts if a["alert_id"] == alert_id), None)
            if alert is None:
                bad_request(f"You have no price alert #{alert_id}.")
            alerts.remove(alert)
        return self.redirect(request, "/travel/alerts", f"Price alert #{alert_id} deleted.")

    # -- events: movies

    def _movie(self, movie_id: str) -> dict[str, Any]:
        movie = self.data.movies.get(movie_id.strip().lower())
        if movie is None:
            not_found(f"No movie {movie_id!r}.")
        return movie

    async def events_home(self, request: Request) -> Response:
        upcoming = [m for m in self.data.matches.values() if not self.data.played(m)][:4]
        return self.render(request, "events_home.html", upcoming=upcoming)

    async def movies_page(self, request: Request) -> Response:
        params = request.query_params
        genres = sorted({m["genre"] for m in self.data.movies.values()})
        genre = params.get("genre", "").strip()
        if genre and genre.lower() not in {g.lower() for g in genres}:
            bad_request(f"Unknown genre {genre!r}; choose one of {', '.join(genres)}.")
        cinema = params.get("cinema", "").strip().lower()
        if cinema and cinema not in self.data.cinemas:
            bad_request(
                f"Unknown cinema {cinema!r}; choose one of " + ", ".join(self.data.cinemas) + "."
            )
        movies = [
            m
            for m in self.data.movies.values()
            if (not genre or m["genre"].lower() == genre.lower())
            and (not cinema or cinema in m["showtimes"])
        ]
        return self.render(
            request, "movies.html", movies=movies, genres=genres, genre=genre, cinema=cinema
        )

    async def movie_page(self, request: Request) -> Response:
        movie = self._movie(request.path_params["movie_id"])
        return self.render(request, "movie.html", movie=movie, max_seats=MAX_SEATS)

    async def cinema_page(self, request: Request) -> Response:
        cinema = self.data.cinemas.get(request.path_params["cinema_id"].lower())
        if cinema is None:
            not_found(f"No cinema {request.path_params['cinema_id']!r}.")
        showing = [m for m in self.data.movies.values() if cinema["id"] in m["showtimes"]]
        return self.render(request, "cinema.html", cinema=cinema, showing=showing)

    async def booking_create(self, request: Request) -> Response:
        form = await request.form()
        movie = self._movie(require_text(form, "movie", "Movie"))
        showtime = require_text(form, "showtime", "Showtime")
        cinema_id, _, time = showtime.partition("|")
        times = movie["showtimes"].get(cinema_id.strip().lower())
        if not times or time.strip() not in times:
            bad_request(
                f"{showtime!r} is not a showtime of {movie['title']}; pick one from "
                "the list on the movie page."
            )
        cinema = self.data.cinemas[cinema_id.strip().lower()]
        seats = parse_int(field_text(form, "seats"), "seats", 1, MAX_SEATS, default=1)
        with self.store.edit(session_of(request)) as state:
            booking_id = f"CP-{self.store.next_number('booking', 501)}"
            state["events"]["bookings"].append(
                {
                    "booking_id": booking_id,
                    "movie": movie["id"],
                    "cinema": cinema["id"],
                    "time": time.strip(),
                    "seats": seats,
                    "total": cents(Decimal(str(cinema["seat_price"])) * seats),
                }
            )
        return self.redirect(
            request,
            "/events/watchlist",
            f"Booked {seats} seat(s) for {movie['title']} at "
            f"{cinema['name']}, {time.strip()} (booking {booking_id}).",
        )

    # -- events: sports

    def team_name(self, team_id: str) -> str:
        return str(self.data.teams[team_id]["name"])

    async def sports_page(self, request: Request) -> Response:
        raw_round = request.query_params.get("round", "")
        rounds = sorted({m["round"] for m in self.data.matches.values()})
        chosen = parse_int(raw_round, "round", rounds[0], rounds[-1]) if raw_round.strip() else None
        matches = [m for m in self.data.matches.values() if chosen in (None, m["round"])]
        results = [m for m in matches if self.data.played(m)]
        fixtures = [m for m in matches if not self.data.played(m)]
        return self.render(
            request,
            "sports.html",
            league=self.data.events["league"],
            table=self.data.standings,
            results=results,
            fixtures=fixtures,
            rounds=rounds,
            chosen=chosen,
            scorers=self.data.scorers[:8],
        )

    async def match_page(self, request: Request) -> Response:
        match = self.data.matches.get(request.path_params["match_id"].lower())
        if match is None:
            not_found(f"No match {request.path_params['match_id']!r}.")
        return self.render(
            request,
            "match.html",
            match=match,
            league=self.data.events["league"],
            played=self.data.played(match),
        )

    async def team_page(self, request: Request) -> Response:
        team = self.data.teams.get(request.path_params["team_id"].lower())
        if team is None:
            not_found(f"No team {request.path_params['team_id']!r}.")
        row = next(r for r in self.data.standings if r["team"] == team["id"])
        matches = [m for m in self.data.matches.values() if team["id"] in (m["home"], m["away"])]
        return self.render(request, "team.html", team=team, row=row, matches=matches)

    # -- events: watchlist

    def _watch_target(self, kind: str, item_id: str) -> str:
        """The display name of a watchlist target; 400 for an unknown one."""
        if kind == "movie":
            movie = self.data.movies.get(item_id)
            if movie is None:
                bad_request(f"No movie {item_id!r}.")
            return str(movie["title"])
        if kind == "match":
            match = self.data.matches.get(item_id)
            if match is None:
                bad_request(f"No match {item_id!r}.")
            return f"{self.team_name(match['home'])} vs {self.team_name(match['away'])}"
        bad_request(f"'kind' must be 'movie' or 'match', got {kind!r}.")

    async def watchlist_page(self, request: Request) -> Response:
        state = self.store.snapshot(session_of(request))["events"]
        items = [
            {**item, "name": self._watch_target(item["kind"], item["id"])}
            for item in state["watchlist"]
        ]
        return self.render(request, "watchlist.html", items=items, bookings=state["bookings"])

    async def watchlist_add(self, request: Request) -> Response:
        form = await request.form()
        kind = field_text(form, "kind").lower()
        item_id = field_text(form, "id").lower()
        name = self._watch_target(kind, item_id)
        with self.store.edit(session_of(request)) as state:
            watchlist = state["events"]["watchlist"]
            if any(w["kind"] == kind and w["id"] == item_id for w in watchlist):
                message = f"{name} is already on your watchlist."
            else:
                watchlist.append({"kind": kind, "id": item_id})
                message = f"Added {name} to your watchlist."
        return self.redirect(request, "/events/watchlist", message)

    async def watchlist_remove(self, request: Request) -> Response:
        form = await request.form()
        kind = field_text(form, "kind").lower()
        item_id = field_text(form, "id").lower()
        name = self._watch_target(kind, item_id)
        with self.store.edit(session_of(request)) as state:
            watchlist = state["events"]["watchlist"]
            entry = next((w for w in watchlist if w["kind"] == kind and w["id"] == item_id), None)
            if entry is None:
                bad_request(f"{name} is not on your watchlist.")
            watchlist.remove(entry)
        return self.redirect(request, "/events/watchlist", f"Removed {name} from your watchlist.")

    def routes(self) -> list[BaseRoute]:
        post = ["POST"]
        return [
            Route("/", self.home),
            Route("/search", self.search_page),
            Route("/search/api", self.search_api),
            Route("/shop/", self.shop_home),
            Route("/shop/deals", self.shop_deals),
            Route("/shop/search", self.shop_search),
            Route("/shop/product/{sku}", self.shop_product),
            Route("/shop/product/{sku}/manual.pdf", self.shop_manual),
            Route("/shop/cart", self.cart_page),
            Route("/shop/cart/add", self.cart_add, methods=post),
            Route("/shop/cart/update", self.cart_update, methods=post),
            Route("/shop/cart/remove", self.cart_remove, methods=post),
            Route("/shop/cart/coupon", self.cart_coupon, methods=post),
            Route("/shop/cart/coupon/remove", self.cart_coupon_remove, methods=post),
            Route("/shop/checkout", self.checkout_page, methods=["GET"]),
            Route("/shop/checkout", self.checkout_submit, methods=post),
            Route("/shop/orders", self.orders_page),
            Route("/shop/orders/{order_id}", self.order_page),
            Route("/travel/", self.travel_home),
            Route("/travel/search", self.travel_search),
            Route("/travel/hotel/{hotel_id}", self.travel_hotel),
            Route("/travel/alerts", self.alerts_page, methods=["GET"]),
            Route("/travel/alerts", self.alerts_create, methods=post),
            Route("/travel/alerts/delete", self.alerts_delete, methods=post),
            Route("/events/", self.events_home),
            Route("/events/movies", self.movies_page),
            Route("/events/movies/{movie_id}", self.movie_page),
            Route("/events/cinema/{cinema_id}", self.cinema_page),
            Route("/events/bookings", self.booking_create, methods=post),
            Route("/events/sports", self.sports_page),
            Route("/events/sports/match/{match_id}", self.match_page),
            Route("/events/sports/team/{team_id}", self.team_page),
            Route("/events/watchlist", self.watchlist_page),
            Route("/events/watchlist/add", self.watchlist_add, methods=post),
            Route("/events/watchlist/remove", self.watchlist_remove, methods=post),
        ]


def _templates(directory: Path, sandbox_ref: list[Sandbox]) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["money"] = money
    env.globals["team_name"] = lambda team_id: sandbox_ref[0].team_name(team_id)
    env.globals["urlencode"] = urlencode
    return env


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
        # imported here: the task loader imports the sandbox's checks, so a module-level
        # import in the other direction would be circular
        from mastif.core.paths import resources_dir

        data_dir = resources_dir() / "sandbox"
    data_dir = Path(data_dir)
    data = SiteData.load(data_dir)
    store = SessionStore()
    index = SearchIndex([*build_documents(data), *extra_documents])
    ref: list[Sandbox] = []
    sandbox = Sandbox(data, store, index, _templates(data_dir / "templates", ref))
    ref.append(sandbox)
    app = Starlette(
        routes=[*sandbox.routes(), *extra_routes],
        middleware=[Middleware(BodyLimitMiddleware), Middleware(SessionMiddleware, store=store)],
        exception_handlers={HTTPException: sandbox.error_page},
    )
    app.state.store = store
    app.state.data = data
    app.state.index = index
    return app
