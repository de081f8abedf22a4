"""The offline web sandbox: sites, sessions, search, success checks and its task set.

Every task in ``resources/sandbox/tasks/sites.jsonl`` gets two scripted runs against a
real :class:`SandboxServer`: a correct one that drives the site over HTTP (forms found by
their labels, values read from the returned HTML, PDF or search API) and must pass the
task's check, and a plausible wrong one that must fail it. That proves each task is
solvable through the site as built and that its check discriminates.
"""

from __future__ import annotations

import io
import json
import re
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest
from bs4 import BeautifulSoup, Tag
from pypdf import PdfReader

from mastif.tasks import TaskLoadError, load_tasks, resources_dir
from mastif.tasks.checks import (
    CheckResult,
    answer_tokens,
    contains_pattern,
    evaluate_check,
    validate_check,
)
from mastif.tasks.model import Task
from mastif.web.app import SESSION_COOKIE, build_app
from mastif.web.server import SandboxServer

SITES_FILE = resources_dir() / "sandbox" / "tasks" / "sites.jsonl"
SITE_TASKS = [
    Task.model_validate(json.loads(line))
    for line in SITES_FILE.read_text(encoding="utf-8").splitlines()
    if line.strip()
]


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer() as srv:
        yield srv


# --------------------------------------------------------------------------- a tiny browser


def _text(el: Tag) -> str:
    return el.get_text(" ", strip=True)


def _money(text: str) -> float:
    return float(re.sub(r"[^\d.]", "", text))


class Browser:
    """An HTTP client with its own cookie jar (= its own sandbox session) and form filling."""

    def __init__(self, server: SandboxServer) -> None:
        self.server = server
        self.http = httpx.Client(
            base_url=server.base_url, follow_redirects=True, trust_env=False, timeout=10
        )
        self.url = server.base_url + "/"

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _soup(self, response: httpx.Response) -> BeautifulSoup:
        assert response.status_code == 200, (
            f"{response.request.method} {response.url} -> {response.status_code}: "
            f"{response.text[:400]}"
        )
        self.url = str(response.url)
        return BeautifulSoup(response.text, "html.parser")

    def get(self, path: str, **params: Any) -> BeautifulSoup:
        return self._soup(self.http.get(urljoin(self.url, path), params=params or None))

    def click(self, soup: BeautifulSoup, text: str) -> BeautifulSoup:
        """Follow the first link whose text is exactly ``text``."""
        links = [a for a in soup.find_all("a") if _text(a) == text]
        assert links, f"no link {text!r} on {self.url}"
        return self.get(str(links[0]["href"]))

    def submit(
        self, soup: BeautifulSoup, button: str, fields: dict[str, Any] | None = None
    ) -> BeautifulSoup:
        """Fill the form holding ``button`` by label text and submit it as a browser would."""
        form = self._form(soup, button)
        values = self._defaults(form)
        for label_text, value in (fields or {}).items():
            target = self._labelled(form, label_text)
            name = str(target["name"])
            if target.name == "select":
                options = target.find_all("option")
                chosen = [
                    o for o in options if _text(o) == str(value) or o.get("value") == str(value)
                ]
                assert chosen, f"no option {value!r} in {label_text!r}"
                values[name] = str(chosen[0].get("value", _text(chosen[0])))
            elif target.get("type") in ("checkbox", "radio"):
                if value:
                    values[name] = str(target.get("value", "on"))
                else:
                    values.pop(name, None)
            else:
                values[name] = str(value)
        method = str(form.get("method", "get")).upper()
        action = urljoin(self.url, str(form.get("action") or ""))
        if method == "GET":
            return self._soup(self.http.get(action, params=values))
        return self._soup(self.http.post(action, data=values))

    @staticmethod
    def _form(soup: BeautifulSoup, button: str) -> Tag:
        buttons = [b for b in soup.find_all("button") if _text(b) == button]
        assert buttons, f"no button {button!r}"
        form = buttons[0].find_parent("form")
        assert form is not None
        return form

    @staticmethod
    def _defaults(form: Tag) -> dict[str, str]:
        values: dict[str, str] = {}
        for el in form.find_all(["input", "select", "textarea"]):
            name = el.get("name")
            if not name:
                continue
            if el.name == "select":
                opt = el.find("option", selected=True) or el.find("option")
                values[name] = str(opt.get("value", _text(opt))) if opt else ""
            elif el.name == "textarea":
                values[name] = el.get_text()
            elif el.get("type") in ("radio", "checkbox"):
                if el.has_attr("checked"):
                    values[name] = str(el.get("value", "on"))
            else:
                values[name] = str(el.get("value", ""))
        return values

    @staticmethod
    def _labelled(form: Tag, label_text: str) -> Tag:
        labels = form.find_all("label")
        exact = [lb for lb in labels if _text(lb) == label_text]
        prefix = [lb for lb in labels if _text(lb).startswith(label_text)]
        found = exact or prefix
        assert found, f"no label {label_text!r}; labels: {[_text(lb) for lb in labels]}"
        target = form.find(id=found[0]["for"])
        assert target is not None, f"label {label_text!r} points at nothing"
        return target

    def api(self, query: str, n: int = 5) -> list[dict[str, str]]:
        r = self.http.get("/search/api", params={"q": query, "n": n})
        assert r.status_code == 200, r.text
        return list(r.json()["results"])

    def pdf_text(self, soup: BeautifulSoup, link: str = "User manual (PDF)") -> str:
        href = next(a["href"] for a in soup.find_all("a") if _text(a) == link)
        r = self.http.get(urljoin(self.url, str(href)))
        assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
        reader = PdfReader(io.BytesIO(r.content))
        return " ".join(" ".join((page.extract_text() or "").split()) for page in reader.pages)

    @property
    def sid(self) -> str:
        return str(self.http.cookies[SESSION_COOKIE])

    def state(self) -> dict[str, Any]:
        return self.server.state(self.sid)


def rows(soup: BeautifulSoup, table_class: str | None = None) -> list[list[str]]:
    """The body rows of ``table.<table_class>``, or of the page's first table without one."""
    table = soup.find("table", class_=table_class) if table_class else soup.find("table")
    assert table is not None, f"no table.{table_class}"
    return [[_text(td) for td in tr.find_all("td")] for tr in table.find("tbody").find_all("tr")]


def dd(soup: BeautifulSoup, cls: str) -> str:
    el = soup.find("dd", class_=cls)
    assert el is not None, f"no dd.{cls}"
    return _text(el)


def shop_search(b: Browser, **fields: Any) -> BeautifulSoup:
    return b.submit(b.get("/shop/"), "Search", fields)


def open_product(b: Browser, query: str, name: str) -> BeautifulSoup:
    return b.click(shop_search(b, **{"Search products": query}), name)


def add_to_cart(b: Browser, query: str, name: str, qty: int = 1) -> BeautifulSoup:
    page = open_product(b, query, name)
    return b.submit(page, "Add to cart", {"Quantity": qty})


def apply_coupon(b: Browser, code: str) -> BeautifulSoup:
    return b.submit(b.get("/shop/cart"), "Apply coupon", {"Coupon code": code})


def checkout(b: Browser, name: str, email: str, address: str, shipping: str) -> BeautifulSoup:
    page = b.click(b.get("/shop/cart"), "Proceed to checkout")
    return b.submit(
        page,
        "Place order",
        {"Full name": name, "Email": email, "Shipping address": address, shipping: True},
    )


# --------------------------------------------------------------------------- recipes
#
# A solution takes a fresh Browser (a fresh session) and returns its answer text. Most are
# alike: reach a page, read a value off it (or off a PDF or a search snippet) and put it in a
# sentence, or change the session's state and say so. So they are put together from parts,
# one table row per task (SOLUTIONS below), and written out only when one of a kind:
#   a Page    reaches one page from scratch in the browser's session (and may change the
#             session's state on the way: add to the cart, book, create an alert);
#   a Reader  picks strings off a page;
#   a Text    fetches text that is not HTML (a PDF manual, a search API snippet).
# ``read`` and ``grep`` make a solution whose answer is a template filled with what was read
# ("{0}" is the first string, "{3}" the fourth column of a table row); ``act`` one that goes
# through pages for the state they leave and answers a fixed sentence.

Solution = Callable[[Browser], str]
Page = Callable[[Browser], BeautifulSoup]
Reader = Callable[[BeautifulSoup], Sequence[str]]
Text = Callable[[Browser], str]


# -- pages


def at(path: str) -> Page:
    return lambda b: b.get(path)


def clicked(page: Page, *links: str) -> Page:
    """``page``, then the links with these texts, each on the page the last one opened."""

    def go(b: Browser) -> BeautifulSoup:
        soup = page(b)
        for link in links:
            soup = b.click(soup, link)
        return soup

    return go


def submitted(page: Page, button: str, fields: dict[str, Any] | None = None) -> Page:
    return lambda b: b.submit(page(b), button, fields)


def filled(fields: dict[str, Any]) -> dict[str, Any]:
    """The form fields that are set: None leaves a field at its default."""
    return {label: value for label, value in fields.items() if value is not None}


def products(
    query: str | None = None,
    *,
    category: str | None = None,
    max_price: int | None = None,
    min_rating: str | None = None,
    sort: str | None = None,
) -> Page:
    """ShopSphere's search results for the search form filled in so."""
    fields = {
        "Search products": query,
        "Category": category,
        "Max price ($)": max_price,
        "Minimum rating": min_rating,
        "Sort by": sort,
    }
    return lambda b: shop_search(b, **filled(fields))


def product(query: str, name: str) -> Page:
    """A product's page, found by searching ``query`` and following its name."""
    return lambda b: open_product(b, query, name)


def hotels(
    city: str,
    *,
    checkin: str | None = None,
    checkout: str | None = None,
    guests: int | None = None,
    free_cancellation: bool = False,
    sort: str | None = None,
) -> Page:
    """StayFinder's search results for the hotel search form filled in so."""
    fields = {
        "Destination": city,
        "Check-in": checkin,
        "Check-out": checkout,
        "Guests": None if guests is None else f"{guests} guests",
        "Free cancellation only": free_cancellation or None,
        "Sort by": sort,
    }
    return lambda b: b.submit(b.get("/travel/"), "Search hotels", filled(fields))


def hotel(city: str, name: str) -> Page:
    return clicked(hotels(city), name)


EVENTS = at("/events/")
LEAGUE = clicked(EVENTS, "Coastal League: table, results and fixtures")


def movie(title: str) -> Page:
    return clicked(EVENTS, "Movies now showing", title)


def round_match(round_label: str, match: str) -> Page:
    """A match's page, reached through the league's round picker."""
    return clicked(submitted(LEAGUE, "Show round", {"Round": round_label}), match)


# -- pages that change the session's state


def add(query: str, name: str, qty: int = 1) -> Page:
    return lambda b: add_to_cart(b, query, name, qty)


def coupon(code: str, *, must_apply: bool = False) -> Page:
    """Apply ``code`` on the cart page; ``must_apply``: and make sure a discount shows."""

    def apply(b: Browser) -> BeautifulSoup:
        cart = apply_coupon(b, code)
        if must_apply:
            assert cart.find(id="discount") is not None, f"{code} was refused"
        return cart

    return apply


Customer = tuple[str, str, str]  # full name, email, shipping address


def order(customer: Customer, shipping: str) -> Page:
    return lambda b: checkout(b, *customer, shipping)


def watch(page: Page) -> Page:
    return submitted(page, "Add to watchlist")


def booking(title: str, showtime: str, seats: int) -> Page:
    return submitted(movie(title), "Book tickets", {"Showtime": showtime, "Seats": seats})


def hotel_alert(
    page: Page, checkin: str, checkout: str, guests: int, max_price: int, email: str
) -> Page:
    """The price alert form on a hotel's ``page``, filled in and sent."""
    fields = {
        "Alert check-in": checkin,
        "Alert check-out": checkout,
        "Alert guests": guests,
        "Maximum price per night (USD)": max_price,
        "Email": email,
    }
    return submitted(page, "Create price alert", fields)


def reykjavik_alert(guests: int) -> Page:
    """A city-wide price alert from the alerts page (no hotel chosen)."""
    fields = {
        "City": "Reykjavik",
        "Check-in": "2025-12-27",
        "Check-out": "2025-12-31",
        "Guests": guests,
        "Maximum price per night (USD)": 150,
        "Email": "aurora.fan@example.net",
    }
    return submitted(clicked(at("/travel/"), "Your price alerts"), "Create price alert", fields)


# -- readers


def field(cls: str) -> Reader:
    """The ``dd.<cls>`` of a details list (price, rating, runtime, score)."""
    return lambda soup: [dd(soup, cls)]


def element(element_id: str) -> Reader:
    return lambda soup: [_text(soup.find(id=element_id))]


def row(index: int, table: str = "results") -> Reader:
    """One row of a table; its columns fill the template."""
    return lambda soup: rows(soup, table)[index]


def result_names(soup: BeautifulSoup) -> list[str]:
    return ["; ".join(r[0] for r in rows(soup, "results"))]


def discounted_subtotal(cart: BeautifulSoup) -> list[str]:
    subtotal = _money(_text(cart.find(id="subtotal")))
    discount = _money(_text(cart.find(id="discount")))
    return [f"${subtotal - discount:.2f}"]


def showtime(cinema: str, index: int) -> Reader:
    """The ``index``-th showtime of a film at ``cinema``, from the film's showtimes table."""

    def pick(soup: BeautifulSoup) -> list[str]:
        times = next(r[1] for r in rows(soup, "showtimes") if r[0] == cinema)
        return [times.split(", ")[index]]

    return pick


def films_with_a_showing(when: Callable[[str], bool]) -> Reader:
    """A cinema's films that have at least one showtime ``when`` holds for."""

    def pick(soup: BeautifulSoup) -> list[str]:
        showtimes = rows(soup, "showtimes")
        return [", ".join(r[0] for r in showtimes if any(when(t) for t in r[1].split(", ")))]

    return pick


def top_scorers(league: BeautifulSoup) -> list[str]:
    """Everyone sharing the most goals (the scorers table is sorted by goals)."""
    table = rows(league, "scorers")
    best = int(table[0][2])
    return [" and ".join(r[0] for r in table if int(r[2]) == best), str(best)]


# -- texts


def manual(page: Page) -> Text:
    """The text of the PDF user manual linked from a product's ``page``."""
    return lambda b: b.pdf_text(page(b))


def snippet(query: str, hit: int = 0) -> Text:
    """The snippet of the ``hit``-th result of the LoopSearch API for ``query``."""
    return lambda b: b.api(query)[hit]["snippet"]


# -- recipes that make a solution


def visit(b: Browser, steps: Sequence[Page]) -> BeautifulSoup:
    """Go through ``steps`` in one session; the page the last one ends on."""
    page = None
    for step in steps:
        page = step(b)
    assert page is not None, "a solution needs at least one step"
    return page


def read(reader: Reader, *steps: Page, say: str = "{0}") -> Solution:
    """Go through ``steps``; answer ``say`` filled with what ``reader`` finds on the last page."""
    return lambda b: say.format(*reader(visit(b, steps)))


def act(*steps: Page, say: str) -> Solution:
    """Go through ``steps`` (the state they leave is what a state check looks at); say ``say``."""

    def solve(b: Browser) -> str:
        visit(b, steps)
        return say

    return solve


def grep(patterns: str | list[str], text: Text, *, say: str) -> Solution:
    """Search ``text`` for each regex; answer ``say`` filled with all their groups in order."""

    def solve(b: Browser) -> str:
        haystack = text(b)
        groups: list[str] = []
        for pattern in [patterns] if isinstance(patterns, str) else patterns:
            found = re.search(pattern, haystack)
            assert found, f"{pattern!r} not in {haystack[:300]!r}"
            groups += found.groups()
        return say.format(*groups)

    return solve


def add_first_result(results: Page) -> Solution:
    """Add the top row of a product search to the cart (the product page's default quantity)."""

    def solve(b: Browser) -> str:
        page = results(b)
        name = rows(page, "results")[0][0]
        b.submit(b.click(page, name), "Add to cart")
        return f"Added {name}."

    return solve


def alert_on_top_rated(ranking: Page, hotel_search: Page, guests: int) -> Solution:
    """Set a Kyoto price alert on the first hotel of ``ranking``, opened from ``hotel_search``."""

    def solve(b: Browser) -> str:
        best = rows(ranking(b), "results")[0][0]
        alert = hotel_alert(
            clicked(hotel_search, best), "2025-11-20", "2025-11-23", guests, 200, "kyo@example.com"
        )
        alert(b)
        return f"Alert set for {best}."

    return solve


# -- solutions that are one of a kind


def outdoor_deal_in_cart(b: Browser) -> str:
    """Look the Outdoor coupon up on the deals page instead of knowing it."""
    code = next(r[0] for r in rows(b.get("/shop/deals")) if "Outdoor" in r[1])
    visit(b, [*BACKPACK_AND_BOTTLE, coupon(code)])
    return f"Both items are in the cart with {code}."


def big20_else_save10(b: Browser) -> str:
    """Try BIG20; when the cart is below its minimum, fall back to SAVE10."""
    add_to_cart(b, "desk lamp", "Lumina Desk Lamp Arc")
    cart = apply_coupon(b, "BIG20")
    error = cart.find(class_="error")
    if error is not None:
        assert "minimum" in _text(error)
        apply_coupon(b, "SAVE10")
        return "BIG20 was refused (minimum $250), so I applied SAVE10."
    return "BIG20 applied."


def director_of_drama(b: Browser, *, pick: Callable[..., list[str]]) -> str:
    """The director of the Drama film ``pick`` (max or min) chooses by rating."""
    page = b.submit(b.click(b.get("/events/"), "Movies now showing"), "Filter", {"Genre": "Drama"})
    chosen = pick(rows(page, "results"), key=lambda r: float(r[2].split("/")[0]))
    film = b.click(page, chosen[0])
    director = next(
        _text(d.find_next_sibling("dd")) for d in film.find_all("dt") if _text(d) == "Director"
    )
    return f"{chosen[0]}, directed by {director}."


def book_and_watch_animation(b: Browser, *, showtime: str | None) -> str:
    """Book 4 seats for the animated film at Riverside (``showtime`` or else its earliest)."""
    page = b.submit(
        b.click(b.get("/events/"), "Movies now showing"), "Filter", {"Genre": "Animation"}
    )
    title = rows(page, "results")[0][0]
    film = b.click(page, title)
    times = next(r for r in rows(film, "showtimes") if r[0] == "Riverside Cineplex")[1]
    chosen = showtime or min(times.split(", "))
    b.submit(film, "Book tickets", {"Showtime": f"Riverside Cineplex - {chosen}", "Seats": 4})
    b.submit(b.click(b.get("/events/watchlist"), title), "Add to watchlist")
    return f"Booked 4 seats for {title} at {chosen} and added it to the watchlist."


def harbor_city_scorer(b: Browser, *, winner: bool) -> str:
    """Who scored Harbor City's winner at Redcliff (or, wrongly, their first goal)."""
    match = round_match("Round 4", "Redcliff Town vs Harbor City FC")(b)
    home_score = int(re.search(r"(\d+) - \d+", dd(match, "score")).group(1))  # type: ignore[union-attr]
    goals = [_text(li) for li in match.find("ul", class_="goals").find_all("li")]
    away_goals = [g for g in goals if g.endswith("(Harbor City FC)")]
    # the winner is the goal that put them one ahead for good
    goal = away_goals[home_score] if winner else away_goals[0]
    minute, player = re.match(r"(\d+)' (.+) \(", goal).groups()  # type: ignore[union-attr]
    return f"{player} in the {minute}th minute."


KINGSFORD = "/events/sports/team/kingsford"


def kingsford_fixtures(b: Browser) -> list[list[str]]:
    """Kingsford's matches still to play: a kick-off time where a played one has its score."""
    team = b.click(LEAGUE(b), "Kingsford City")
    return [r for r in rows(team, "results") if re.fullmatch(r"\d\d:\d\d", r[3])]


def watch_kingsford_fixtures(b: Browser) -> str:
    fixtures = kingsford_fixtures(b)
    for fixture in fixtures:
        b.submit(b.click(b.get(KINGSFORD), fixture[2]), "Add to watchlist")
    return f"Added both; the first is on {fixtures[0][1]}."


def watch_last_kingsford_fixture(b: Browser) -> str:
    fixtures = kingsford_fixtures(b)
    b.submit(b.click(b.get(KINGSFORD), fixtures[-1][2]), "Add to watchlist")
    return f"Added; it is on {fixtures[-1][1]}."


# --------------------------------------------------------------------------- solutions

# What several solutions use, and what a task's right and wrong solutions share (so that
# its row shows just what they differ in).
Q7 = product("Auralis Q7", "Auralis Q7 Wireless Headphones")
CORVO_NAME = "Corvo Boom Portable Speaker"
CORVO = product("Corvo Boom", CORVO_NAME)
VACUUM = clicked(at("/shop/"), "Home", "Halden Robot Vacuum R3")  # through its category
JUMP_ROPES = add("jump rope", "Strideon Jump Rope Pro", 3)
BACKPACK_AND_BOTTLE = (
    add("Trail 28L", "Northpeak Trail 28L Backpack"),
    add("insulated bottle", "Tidewell Insulated Bottle 1L"),
)
MONITOR_WITH_BIG20 = (add("4K monitor", "Halden 27-inch 4K Monitor"), coupon("BIG20"))
SKILLET = add("skillet", "Kettleworks Cast Iron Skillet")
BUDS_AND_BOOM = (add("Buds Mini", "Auralis Buds Mini", 2), add("Corvo Boom", CORVO_NAME))
LAMP = add("desk lamp", "Lumina Desk Lamp Arc")
DANA: Customer = ("Dana Reyes", "dana.reyes@example.com", "14 Orchard Lane, Springfield")
SAM: Customer = ("Sam Lee", "sam.lee@example.org", "3 Mill Road, Riverton")
ALEX: Customer = ("Alex Kim", "alex.kim@example.com", "88 Harbour Street, Port Ellis")
STANDARD, EXPRESS = "Standard (4-6 days)", "Express (1-2 days)"

LISBON_FROM_10_JULY = partial(hotels, "Lisbon", checkin="2025-07-10", guests=2)
ALFAMA = "Alfama Terrace Hotel"
CAPE_TOWN_STAY = partial(
    hotels, "Cape Town", checkin="2025-09-01", checkout="2025-09-04", guests=2, sort="Guest rating"
)
VANCOUVER_STAY = partial(
    hotels, "Vancouver", checkin="2025-08-15", checkout="2025-08-18", sort="Price: low to high"
)
GASTOWN = hotel("Vancouver", "Gastown Loft Hotel")
KYOTO_FOR_3 = hotels("Kyoto", guests=3, sort="Guest rating")
KM_FROM_CENTRE = r"([\d.]+) km from the centre"

LITTLE_COMET = movie("Little Comet")
STARLIGHT = clicked(EVENTS, "Starlight Drive-In")
ATTENDANCE = r"Attendance ([\d,]+)"

# task id -> (a correct solution, which must pass the task's check;
#             a plausible wrong one, which must fail it)
SOLUTIONS: dict[str, tuple[Solution, Solution]] = {
    # -- shopping: answers
    "sb-shop-01": (
        read(field("price"), Q7, say="The Auralis Q7 Wireless Headphones cost {0}."),
        read(field("price"), product("Auralis", "Auralis Buds Mini"), say="They cost {0}."),
    ),
    "sb-shop-02": (
        grep(
            r"rated ([\d.]+)/5",
            snippet("Strideon Cork Yoga Mat rating"),
            say="It is rated {0} out of 5.",
        ),
        read(
            field("rating"), product("Road Runner", "Strideon Road Runner Shoes"), say="Rated {0}."
        ),
    ),
    "sb-shop-03": (
        read(
            row(0),
            products("backpack", category="Outdoor", sort="Price: low to high"),
            say="The cheapest is the {0} at {3}.",
        ),
        read(
            row(0),
            products("backpack", category="Outdoor", sort="Price: high to low"),
            say="{0}, {3}",
        ),
    ),
    "sb-shop-04": (
        read(row(0), products(category="Kitchen", sort="Customer rating"), say="{0} with {4}"),
        read(row(0), products(category="Kitchen", sort="Price: high to low"), say="{0} with {4}"),
    ),
    "sb-shop-05": (
        grep(
            r"(\d+) year limited warranty on the speaker",
            manual(CORVO),
            say="Corvo gives a {0}-year warranty on the speaker.",
        ),
        grep(
            r"(\d+) year warranty on the charging cable",
            manual(CORVO),
            say="The warranty is {0} year.",
        ),
    ),
    "sb-shop-06": (
        grep(r"up to (\d+) hours of playback", manual(Q7), say="Up to {0} hours."),
        grep(r"takes about ([\d.]+) hours", manual(Q7), say="About {0} hours."),
    ),
    "sb-shop-07": (
        grep(
            [r"up to (\d+) minutes", r"Recharging takes about (\d+) hours"],
            manual(VACUUM),
            say="It cleans for {0} minutes; recharging takes {1} hours.",
        ),
        grep(r"up to (\d+) minutes", manual(VACUUM), say="It cleans for {0} minutes."),
    ),
    "sb-shop-08": (
        read(result_names, products(category="Audio", max_price=100)),
        read(result_names, products(category="Audio")),
    ),
    "sb-shop-09": (
        read(
            discounted_subtotal,
            add("gooseneck kettle", "Kettleworks Gooseneck Kettle", 2),
            coupon("BREW25"),
            say="After BREW25 the subtotal is {0}.",
        ),
        read(
            discounted_subtotal,
            add("gooseneck kettle", "Kettleworks Gooseneck Kettle", 1),
            coupon("BREW25"),
        ),
    ),
    # -- shopping: state
    "sb-shop-10": (
        act(
            add("silent mouse", "Bytecraft Silent Mouse"),
            say="Added the Bytecraft Silent Mouse to your cart.",
        ),
        act(add("keyboard", "Bytecraft Mechanical Keyboard K87"), say="Added it."),
    ),
    "sb-shop-11": (
        act(JUMP_ROPES, coupon("save10", must_apply=True), say="Done: 3 jump ropes with SAVE10."),
        act(JUMP_ROPES, say="Done."),
    ),
    "sb-shop-12": (
        outdoor_deal_in_cart,
        act(*BACKPACK_AND_BOTTLE, coupon("SAVE10"), say="Done."),
    ),
    "sb-shop-13": (
        read(
            element("total"),
            *MONITOR_WITH_BIG20,
            order(DANA, EXPRESS),
            say="Order placed, total {0}.",
        ),
        act(*MONITOR_WITH_BIG20, order(DANA, STANDARD), say="Order placed."),
    ),
    "sb-shop-14": (
        act(SKILLET, order(SAM, STANDARD), say="Ordered."),
        act(SKILLET, say="The skillet is in the cart."),
    ),
    "sb-shop-15": (
        add_first_result(
            products(category="Fitness", min_rating="4.5 stars & up", sort="Price: low to high")
        ),
        add_first_result(products(category="Fitness", sort="Price: low to high")),
    ),
    "sb-shop-16": (
        act(*BUDS_AND_BOOM, coupon("WELCOME5"), order(ALEX, STANDARD), say="Ordered."),
        act(*BUDS_AND_BOOM, order(ALEX, STANDARD), say="Ordered."),
    ),
    "sb-shop-17": (
        big20_else_save10,
        act(LAMP, coupon("BIG20"), say="Applied BIG20."),
    ),
    # -- travel
    "sb-travel-01": (
        grep(
            r"guest rating ([\d.]+)/10",
            snippet("Gion Lantern Ryokan"),
            say="Its guest rating is {0}/10.",
        ),
        read(field("rating"), hotel("Kyoto", "Kamo River Hotel")),
    ),
    "sb-travel-02": (
        read(row(0), hotels("Reykjavik", sort="Price: low to high"), say="{0} at {4} per night."),
        read(row(0), hotels("Reykjavik", sort="Price: high to low"), say="{0} at {4} per night."),
    ),
    "sb-travel-03": (
        read(element("stay-total"), clicked(LISBON_FROM_10_JULY(checkout="2025-07-14"), ALFAMA)),
        read(element("stay-total"), clicked(LISBON_FROM_10_JULY(checkout="2025-07-13"), ALFAMA)),
    ),
    "sb-travel-04": (
        read(row(0), CAPE_TOWN_STAY(free_cancellation=True), say="{0}: {5}"),
        read(row(0), CAPE_TOWN_STAY(), say="{0}: {5}"),
    ),
    "sb-travel-05": (
        read(row(0), VANCOUVER_STAY(guests=4), say="{0}, {5}"),
        read(row(0), VANCOUVER_STAY(guests=2), say="{0}, {5}"),
    ),
    "sb-travel-06": (
        act(
            hotel_alert(GASTOWN, "2025-10-03", "2025-10-05", 2, 170, "jo@example.com"),
            say="Alert created.",
        ),
        act(
            hotel_alert(GASTOWN, "2025-10-03", "2025-10-06", 2, 170, "jo@example.com"),
            say="Alert created.",
        ),
    ),
    "sb-travel-07": (
        act(reykjavik_alert(guests=2), say="Alert created."),
        act(reykjavik_alert(guests=3), say="Alert created."),
    ),
    "sb-travel-08": (
        alert_on_top_rated(KYOTO_FOR_3, KYOTO_FOR_3, guests=3),
        alert_on_top_rated(hotels("Kyoto", sort="Guest rating"), hotels("Kyoto"), guests=2),
    ),
    "sb-travel-09": (
        grep(
            KM_FROM_CENTRE,
            snippet("Arashiyama Bamboo Lodge distance from centre"),
            say="It is {0} km from the centre.",
        ),
        grep(
            KM_FROM_CENTRE,
            snippet("Gion Lantern Ryokan distance from centre"),
            say="It is {0} km from the centre.",
        ),
    ),
    # -- entertainment
    "sb-movies-01": (
        read(field("runtime"), movie("Orbit of Ash"), say="Orbit of Ash runs {0}."),
        read(field("runtime"), movie("Dune Riders"), say="It runs {0}."),
    ),
    "sb-movies-02": (
        read(showtime("Orpheum Downtown", -1), LITTLE_COMET, say="The last showing is at {0}."),
        read(showtime("Orpheum Downtown", 0), LITTLE_COMET, say="The last showing is at {0}."),
    ),
    "sb-movies-03": (
        partial(director_of_drama, pick=max),
        partial(director_of_drama, pick=min),
    ),
    "sb-movies-04": (
        read(
            row(-1, "bookings"),
            booking("Night Train to Vell", "Orpheum Downtown - 21:45", 3),
            say="Booked; the total is {5}.",
        ),
        read(
            row(-1, "bookings"),
            booking("Night Train to Vell", "Orpheum Downtown - 17:15", 3),
            say="Booked; the total is {5}.",
        ),
    ),
    "sb-movies-05": (
        act(watch(movie("Salt and Stone")), say="Added."),
        act(watch(movie("Second Serve")), say="Added."),
    ),
    "sb-movies-06": (
        partial(book_and_watch_animation, showtime=None),
        partial(book_and_watch_animation, showtime="14:00"),
    ),
    "sb-movies-07": (
        read(films_with_a_showing(lambda t: t > "21:00"), STARLIGHT),
        read(films_with_a_showing(lambda t: t >= "20:30"), STARLIGHT),
    ),
    # -- sports
    "sb-sports-01": (
        grep(
            r"Leader: (.+?) with (\d+) points",
            snippet("Coastal League table leader"),
            say="{0} leads with {1} points.",
        ),
        read(row(1, "standings"), LEAGUE, say="{1} with {9} points."),
    ),
    "sb-sports-02": (
        read(field("score"), clicked(LEAGUE, "Southbay Mariners vs Harbor City FC")),
        read(field("score"), clicked(LEAGUE, "Harbor City FC vs Kingsford City")),
    ),
    "sb-sports-03": (
        partial(harbor_city_scorer, winner=True),
        partial(harbor_city_scorer, winner=False),
    ),
    "sb-sports-04": (
        read(top_scorers, LEAGUE, say="{0} share the lead with {1} goals."),
        read(row(0, "scorers"), LEAGUE, say="{0} with {2} goals."),
    ),
    "sb-sports-05": (
        act(watch(round_match("Round 6", "Millbrook Athletic vs Harbor City FC")), say="Added."),
        act(watch(round_match("Round 7", "Harbor City FC vs Northgate Rovers")), say="Added."),
    ),
    "sb-sports-06": (watch_kingsford_fixtures, watch_last_kingsford_fixture),
    "sb-sports-07": (
        grep(ATTENDANCE, snippet("Millbrook Westmoor attendance"), say="The attendance was {0}."),
        grep(
            ATTENDANCE, snippet("Millbrook Westmoor attendance", 1), say="The attendance was {0}."
        ),
    ),
}
RIGHT = {task_id: right for task_id, (right, _) in SOLUTIONS.items()}
WRONG = {task_id: wrong for task_id, (_, wrong) in SOLUTIONS.items()}


# --------------------------------------------------------------------------- task set


def test_site_tasks_have_both_solutions() -> None:
    ids = {t.task_id for t in SITE_TASKS}
    assert len(SITE_TASKS) >= 30
    assert set(RIGHT) == ids, sorted(ids ^ set(RIGHT))
    assert set(WRONG) == ids, sorted(ids ^ set(WRONG))


def _run(server: SandboxServer, task: Task, solution: Solution) -> CheckResult:
    with Browser(server) as browser:
        answer = solution(browser)
        assert task.check is not None
        return evaluate_check(task.check, answer, browser.state())


@pytest.mark.parametrize("task", SITE_TASKS, ids=lambda t: t.task_id)
def test_correct_solution_passes(server: SandboxServer, task: Task) -> None:
    result = _run(server, task, RIGHT[task.task_id])
    assert result.success, result.detail


@pytest.mark.parametrize("task", SITE_TASKS, ids=lambda t: t.task_id)
def test_wrong_solution_fails(server: SandboxServer, task: Task) -> None:
    result = _run(server, task, WRONG[task.task_id])
    assert not result.success, result.detail


def test_site_tasks_are_well_formed() -> None:
    levels = {t.level for t in SITE_TASKS}
    assert levels == {"easy", "medium", "hard"}
    for task in SITE_TASKS:
        assert task.start_url and task.start_url.startswith("/")
        assert task.check is not None
        validate_check(task.check)
        assert task.website in task.confirmed_task or "LoopSearch" in task.confirmed_task

    def kinds(check: dict[str, Any]) -> set[str]:
        if check["kind"] == "all":
            return set().union(*(kinds(c) for c in check["checks"]))
        return {check["kind"]}

    with_state = [t for t in SITE_TASKS if t.check and "state" in kinds(t.check)]
    assert len(with_state) >= 12


def test_load_sandbox_source() -> None:
    tasks = load_tasks("sandbox")
    ids = [t.task_id for t in tasks]
    assert len(tasks) >= 30 and len(ids) == len(set(ids))
    assert {t.task_id for t in SITE_TASKS} <= set(ids)
    for task in tasks:
        if task.check is not None:
            validate_check(task.check)
    with pytest.raises(ValueError, match="takes no path"):
        load_tasks("sandbox", "x.jsonl")


def _task_line(task_id: str, check: Any = None) -> str:
    record = {
        "task_id": task_id,
        "confirmed_task": "Do it.",
        "website": "w",
        "domain": "d",
        "subdomain": "s",
        "reference_steps": ["[button] Go -> CLICK"],
    }
    if check is not None:
        record["check"] = check
    return json.dumps(record) + "\n"


def test_sandbox_source_order_duplicates_and_bad_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks_dir = tmp_path / "sandbox" / "tasks"
    tasks_dir.mkdir(parents=True)
    monkeypatch.setenv("MASTIF_RESOURCES", str(tmp_path))
    (tasks_dir / "b.jsonl").write_text(_task_line("t2"))
    (tasks_dir / "a.jsonl").write_text(_task_line("t1", {"kind": "answer", "any": ["x"]}))
    assert [t.task_id for t in load_tasks("sandbox")] == ["t1", "t2"]

    (tasks_dir / "b.jsonl").write_text(_task_line("t1"))
    with pytest.raises(
        TaskLoadError, match=r"b\.jsonl:1: duplicate task_id 't1' \(first at .*a\.jsonl:1\)"
    ):
        load_tasks("sandbox")

    (tasks_dir / "b.jsonl").write_text(
        _task_line("t2") + _task_line("t3", {"kind": "answer", "any": []})
    )
    with pytest.raises(TaskLoadError, match=r"b\.jsonl:2: invalid check of task 't3'"):
        load_tasks("sandbox")

    (tasks_dir / "a.jsonl").unlink()
    (tasks_dir / "b.jsonl").unlink()
    with pytest.raises(TaskLoadError, match="no sandbox task files"):
        load_tasks("sandbox")


# --------------------------------------------------------------------------- sessions


def test_sessions_are_isolated(server: SandboxServer) -> None:
    with Browser(server) as alice, Browser(server) as bob:
        add_to_cart(alice, "silent mouse", "Bytecraft Silent Mouse", 2)
        bob.get("/shop/cart")
        assert alice.sid != bob.sid
        assert alice.state()["shop"]["cart"] == [{"sku": "CMP-203", "qty": 2}]
        assert bob.state()["shop"]["cart"] == []
        assert "Your cart is empty" in bob.get("/shop/cart").get_text()


def test_cookie_is_set_only_when_missing(server: SandboxServer) -> None:
    with httpx.Client(base_url=server.base_url, trust_env=False) as client:
        first = client.get("/shop/")
        cookie = first.headers.get("set-cookie", "")
        assert cookie.startswith(f"{SESSION_COOKIE}=") and "HttpOnly" in cookie
        second = client.get("/shop/")
        assert "set-cookie" not in second.headers
    # a runner may mint the id itself and just send it
    sid = server.new_session()
    with httpx.Client(
        base_url=server.base_url, trust_env=False, cookies={SESSION_COOKIE: sid}
    ) as client:
        r = client.post("/shop/cart/add", data={"sku": "FIT-604", "qty": "2"})
        assert r.status_code == 303 and "set-cookie" not in r.headers
    assert server.state(sid)["shop"]["cart"] == [{"sku": "FIT-604", "qty": 2}]
    # malformed ids are replaced, unknown sessions read as empty
    with httpx.Client(
        base_url=server.base_url, trust_env=False, cookies={SESSION_COOKIE: "bad id!"}
    ) as client:
        assert "set-cookie" in client.get("/").headers
    assert server.state("never-used-session-id") == server.state("another-unused-id")
    assert "never-used-session-id" not in server.store


def test_invalid_coupon_shows_error_and_keeps_state(server: SandboxServer) -> None:
    with Browser(server) as b:
        add_to_cart(b, "desk lamp", "Lumina Desk Lamp Arc")
        before = b.state()
        page = apply_coupon(b, "NOPE99")
        assert "not a valid coupon code" in _text(page.find(class_="error"))
        page = apply_coupon(b, "SPRING24")
        assert "expired" in _text(page.find(class_="error"))
        page = apply_coupon(b, "OUTDOOR15")
        assert "only applies to Outdoor items" in _text(page.find(class_="error"))
        page = apply_coupon(b, "BREW25")
        assert "Kitchen" in _text(page.find(class_="error"))
        assert b.state() == before and before["shop"]["coupon"] is None
        r = b.http.post("/shop/cart/coupon", data={"code": "  "})
        assert r.status_code == 400 and "Enter a coupon code" in r.text


def test_cart_totals_and_coupon_dropped_when_no_longer_eligible(server: SandboxServer) -> None:
    with Browser(server) as b:
        add_to_cart(b, "4K monitor", "Halden 27-inch 4K Monitor")
        add_to_cart(b, "silent mouse", "Bytecraft Silent Mouse")
        cart = apply_coupon(b, "BIG20")
        assert _text(cart.find(id="subtotal")) == "$348.99"
        assert _text(cart.find(id="discount")) == "-$69.80"
        assert _text(cart.find(id="shipping")) == "$0.00"
        assert _text(cart.find(id="total")) == "$279.19"
        cart = b.submit(cart, "Update", {"Quantity for Halden 27-inch 4K Monitor": 0})
        assert "Coupon BIG20 was removed" in cart.get_text()
        state = b.state()["shop"]
        assert state["coupon"] is None and state["cart"] == [{"sku": "CMP-203", "qty": 1}]
        assert _text(cart.find(id="shipping")) == "$4.99"  # below the free-shipping line


def test_order_records_totals_and_clears_cart(server: SandboxServer) -> None:
    with Browser(server) as b:
        add_to_cart(b, "jump rope", "Strideon Jump Rope Pro", 2)
        page = checkout(b, "Kim", "kim@example.com", "1 Road", "Express (1-2 days)")
        order = b.state()["shop"]["orders"][0]
        assert order["total"] == 44.97 and order["shipping_cost"] == 12.99
        assert order["order_id"] in page.get_text()
        assert b.state()["shop"]["cart"] == []
        assert order["order_id"] in b.get("/shop/orders").get_text()


# a price alert's fields but for its city, hotel and guests, which the cases below vary
ALERT_FORM = {
    "checkin": "2025-07-10",
    "checkout": "2025-07-12",
    "max_price": "90",
    "email": "a@b.co",
}


@pytest.mark.parametrize(
    ("method", "path", "data", "message"),
    [
        ("GET", "/shop/search?max_price=cheap", None, "must be a number"),
        ("GET", "/shop/search?sort=newest", None, "Unknown sort"),
        ("GET", "/shop/search?category=toys", None, "Unknown category"),
        ("POST", "/shop/cart/add", {"sku": "AUD-101", "qty": "0"}, "between 1 and 10"),
        ("POST", "/shop/cart/add", {"sku": "CMP-205"}, "out of stock"),
        ("POST", "/shop/cart/add", {"sku": "HOM-505", "qty": "5"}, "the limit is 3"),
        (
            "POST",
            "/shop/checkout",
            {"name": "A", "email": "a@b.co", "address": "x"},
            "cart is empty",
        ),
        (
            "POST",
            "/shop/checkout",
            {"name": "A", "email": "nope", "address": "x"},
            "not a valid email",
        ),
        ("GET", "/travel/search?city=Atlantis", None, "Unknown city"),
        ("GET", "/travel/search?city=lisbon&checkin=2025-07-10", None, "both a check-in"),
        (
            "GET",
            "/travel/search?checkin=2025-07-10&checkout=2025-07-09",
            None,
            "after the check-in",
        ),
        ("GET", "/travel/search?checkin=10/07/2025&checkout=2025-07-12", None, "YYYY-MM-DD"),
        ("GET", "/travel/search?guests=9", None, "between 1 and 6"),
        ("POST", "/travel/alerts", ALERT_FORM, "Choose a city"),
        (
            "POST",
            "/travel/alerts",
            {**ALERT_FORM, "hotel": "gion-lantern", "city": "lisbon"},
            "not in Lisbon",
        ),
        (
            "POST",
            "/travel/alerts",
            {**ALERT_FORM, "hotel": "station-capsule", "guests": "2"},
            "at most 1 guests",
        ),
        (
            "POST",
            "/events/bookings",
            {"movie": "little-comet", "showtime": "orpheum|09:00"},
            "not a showtime",
        ),
        ("POST", "/events/watchlist/add", {"kind": "book", "id": "x"}, "'kind' must be"),
        ("GET", "/events/sports?round=12", None, "between 1 and 7"),
    ],
)
def test_bad_input_is_400_with_message(
    server: SandboxServer, method: str, path: str, data: dict[str, str] | None, message: str
) -> None:
    with httpx.Client(base_url=server.base_url, trust_env=False) as client:
        r = client.request(method, path, data=data)
    assert r.status_code == 400, r.text[:300]
    assert message in BeautifulSoup(r.text, "html.parser").get_text()
    assert "<nav" in r.text  # the error page keeps the site navigation


@pytest.mark.parametrize(
    "path",
    [
        "/nowhere",
        "/shop/product/NOPE-1",
        "/shop/product/KIT-401/manual.pdf",
        "/travel/hotel/x",
        "/events/movies/x",
        "/events/sports/match/x",
        "/events/sports/team/x",
        "/shop/orders/SS-1",
    ],
)
def test_unknown_pages_are_404(server: SandboxServer, path: str) -> None:
    with httpx.Client(base_url=server.base_url, trust_env=False) as client:
        r = client.get(path)
    assert r.status_code == 404
    assert "text/html" in r.headers["content-type"]


def test_failed_post_leaves_state_unchanged(server: SandboxServer) -> None:
    with Browser(server) as b:
        add_to_cart(b, "Buds Mini", "Auralis Buds Mini", 10)
        before = b.state()
        r = b.http.post("/shop/cart/add", data={"sku": "AUD-102", "qty": "1"})
        assert r.status_code == 400
        assert b.state() == before


def test_every_page_links_all_sites(server: SandboxServer) -> None:
    with Browser(server) as b:
        for path in ["/", "/search", "/shop/", "/travel/", "/events/", "/events/sports"]:
            nav = b.get(path).find("nav")
            hrefs = {a["href"] for a in nav.find_all("a")}
            assert {"/search", "/shop/", "/travel/", "/events/"} <= hrefs


def test_every_form_field_has_a_label(server: SandboxServer) -> None:
    with Browser(server) as b:
        for path in [
            "/shop/",
            "/shop/product/AUD-101",
            "/travel/",
            "/travel/alerts",
            "/travel/hotel/kamo-river",
            "/events/movies",
            "/events/movies/little-comet",
            "/events/sports",
            "/search",
        ]:
            page = b.get(path)
            for el in page.find_all(["input", "select", "textarea"]):
                if el.get("type") == "hidden":
                    continue
                assert el.get("id") and page.find("label", attrs={"for": el["id"]}), (path, el)


# --------------------------------------------------------------------------- search and PDF


def test_search_api_absolute_urls_and_product_lookup(server: SandboxServer) -> None:
    with httpx.Client(base_url=server.base_url, trust_env=False) as client:
        body = client.get("/search/api", params={"q": "Halden Robot Vacuum R3", "n": 3}).json()
        assert body["query"] == "Halden Robot Vacuum R3"
        assert len(body["results"]) == 3
        top = body["results"][0]
        assert top["url"] == f"{server.base_url}/shop/product/HOM-503"
        assert "$279.00" in top["snippet"] and "4.1/5" in top["snippet"]
        assert all(r["url"].startswith(server.base_url + "/") for r in body["results"])
        assert client.get(top["url"]).status_code == 200
        assert client.get("/search/api", params={"q": ""}).status_code == 400
        assert client.get("/search/api", params={"q": "x", "n": 99}).status_code == 400
        assert client.get("/search/api", params={"q": "zzzqqq"}).json()["results"] == []
        html = client.get("/search", params={"q": "Kamo River Hotel"}).text
        assert f'href="{server.base_url}/travel/hotel/kamo-river"' in html


def test_search_covers_all_sites(server: SandboxServer) -> None:
    with Browser(server) as b:
        expect = {
            "Gastown Loft Hotel": "/travel/hotel/gastown-loft",
            "Hollow Pines film": "/events/movies/hollow-pines",
            "Northgate Rovers": "/events/sports/team/northgate",
            "Riverside Cineplex tickets": "/events/cinema/riverside",
            "coupon codes": "/shop/deals",
        }
        for query, path in expect.items():
            assert b.api(query, 1)[0]["url"] == server.base_url + path, query


def test_manuals_are_pdf_only_and_deterministic(server: SandboxServer) -> None:
    with Browser(server) as b:
        page = b.get("/shop/product/AUD-101")
        assert "38 hours" not in page.get_text()
        assert all("38 hours" not in r["snippet"] for r in b.api("Auralis Q7 battery hours", 10))
        first = b.http.get("/shop/product/AUD-101/manual.pdf").content
        second = b.http.get("/shop/product/aud-101/manual.pdf").content
        assert first == second and first.startswith(b"%PDF")
        assert "38 hours" in b.pdf_text(page)


# --------------------------------------------------------------------------- server lifecycle


def test_server_thread_stops_on_exit() -> None:
    before = set(threading.enumerate())
    with SandboxServer() as srv:
        started = [t for t in threading.enumerate() if t not in before]
        assert started and srv.running
        port = srv.port
        assert srv.host_port == f"127.0.0.1:{port}" and srv.base_url.endswith(f":{port}")
        assert httpx.get(srv.url("/shop/"), trust_env=False).status_code == 200
    assert not srv.running
    assert all(not t.is_alive() for t in started)
    with socket.socket() as sock, pytest.raises(OSError):
        sock.settimeout(1)
        sock.connect(("127.0.0.1", port))
    with pytest.raises(RuntimeError):
        _ = srv.base_url


def test_extra_routes_are_mounted_and_searchable() -> None:
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from mastif.web.search import SearchDocument

    async def hello(request: Any) -> PlainTextResponse:
        return PlainTextResponse("hi")

    app = build_app(
        extra_routes=[Route("/kb/hello", hello)],
        extra_documents=[SearchDocument("/kb/hello", "Zebra facts", "Stripes.")],
    )
    with TestClient(app) as client:
        r = client.get("/kb/hello")
        assert r.text == "hi" and SESSION_COOKIE in r.cookies
        top = client.get("/search/api", params={"q": "zebra"}).json()["results"][0]
        assert top["url"].endswith("/kb/hello")
    assert app.state.store is not None


# --------------------------------------------------------------------------- checks


@pytest.mark.parametrize(
    ("answer", "pattern", "expected"),
    [
        ("It costs $1,299.00 today.", "1299", True),
        ("It costs 1299", "$1,299.00", True),
        ("Rated 4.5/5 by buyers", "4.5", True),
        ("Rated 45 times", "4.5", False),
        ("Rated 4.5", "45", False),
        ("Price 4.50", "$4.5", True),
        ("cataloged", "cat", False),
        ("The CAT sat", "cat", True),
        ("Reykjavík is cold", "Reykjavik", True),
        ("Up to 38-hour battery", "38 hours", True),
        ("38hours", "38 hours", True),
        ("Score 4–1 to the hosts", "4-1", True),
        ("Score 1-4", "4-1", False),
        ("at 16:00", "16:00", True),
        ("at 16:05", "16:00", False),
        ("1,2345 units", "1234", False),
        ("scores 2,1", "21", False),
        ("  many\n\tspaces  here ", "many spaces here", True),
        ("Chef’s Knife", "Chef's Knife", True),
        ("v2", "2", True),
        ("", "x", False),
    ],
)
def test_answer_normalisation(answer: str, pattern: str, expected: bool) -> None:
    assert contains_pattern(answer, pattern) is expected, (answer_tokens(answer), pattern)


def test_answer_check_any_all_none() -> None:
    check = {"kind": "answer", "any": ["$39.99", "39.99 dollars"], "all": ["Daypack"]}
    assert evaluate_check(check, "The Northpeak Daypack 18L is $39.99", {}).success
    missing = evaluate_check(check, "The Daypack is $74.95", {})
    assert not missing.success and "none of" in missing.detail
    hedged = {"kind": "answer", "all": ["Orbit of Ash"], "none": ["Dune Riders"]}
    result = evaluate_check(hedged, "Orbit of Ash or maybe Dune Riders", {})
    assert not result.success and "forbidden" in result.detail
    assert evaluate_check({"kind": "answer", "any": [129.99]}, "129.99", {}).success
    assert not evaluate_check({"kind": "answer", "any": ["x"]}, None, {}).success  # type: ignore[arg-type]


def test_state_matching_rules() -> None:
    state = {
        "shop": {
            "cart": [{"sku": "A-1", "qty": 1}, {"sku": "B-2", "qty": 3}],
            "coupon": "SAVE10",
            "orders": [],
        },
        "travel": {
            "alerts": [
                {
                    "hotel": None,
                    "city": "kyoto",
                    "checkin": "2025-01-02",
                    "guests": 2,
                    "max_price": 150.0,
                    "email": "Ana@Example.com",
                }
            ]
        },
        "events": {"watchlist": [], "bookings": []},
    }

    def ok(expect: dict[str, Any]) -> bool:
        return evaluate_check({"kind": "state", "expect": expect}, "", state).success

    # lists: unordered multiset of subset matches, same length
    assert ok({"shop": {"cart": [{"sku": "B-2"}, {"sku": "A-1", "qty": 1}]}})
    assert not ok({"shop": {"cart": [{"sku": "A-1"}]}})
    assert not ok({"shop": {"cart": [{"sku": "A-1"}, {"sku": "A-1"}]}})
    # a loose item must not steal the only partner of a strict one
    assert ok({"shop": {"cart": [{}, {"sku": "A-1"}]}})
    # strings case-insensitive, numbers within a cent, ints equal floats, null only null
    assert ok(
        {
            "shop": {"coupon": "save10"},
            "travel": {"alerts": [{"email": "ana@example.com", "max_price": 150}]},
        }
    )
    assert not ok({"travel": {"alerts": [{"checkin": "2025-01-03"}]}})
    assert not ok({"travel": {"alerts": [{"guests": True}]}})
    assert not ok({"travel": {"alerts": [{"hotel": "x"}]}})
    assert ok({"travel": {"alerts": [{"hotel": None}]}})
    assert not ok({"shop": {"coupon": None}})
    result = evaluate_check({"kind": "state", "expect": {"shop": {"cart": []}}}, "", state)
    assert not result.success and "expected 0 item(s), found 2" in result.detail
    both = {
        "kind": "all",
        "checks": [
            {"kind": "state", "expect": {"shop": {"coupon": "SAVE10"}}},
            {"kind": "answer", "any": ["done"]},
        ],
    }
    assert evaluate_check(both, "Done.", state).success
    failed = evaluate_check(both, "Finished.", state)
    assert not failed.success and failed.detail.startswith("ok: ") and "FAILED" in failed.detail


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ("answer", "must be an object"),
        ({"kind": "regex"}, "'kind' must be one of"),
        ({"kind": "answer"}, "needs 'any' and/or 'all'"),
        ({"kind": "answer", "any": []}, "non-empty list"),
        ({"kind": "answer", "any": "x"}, "non-empty list"),
        ({"kind": "answer", "any": [True]}, "string or number"),
        ({"kind": "answer", "any": ["$"]}, "no words or numbers"),
        ({"kind": "answer", "any": ["x"], "anyy": ["y"]}, "unknown key"),
        ({"kind": "state"}, "non-empty object"),
        ({"kind": "state", "expect": {"shopp": {}}}, "unknown state section 'shopp'"),
        ({"kind": "state", "expect": {"shop": {"cartt": []}}}, "unknown key 'cartt'"),
        ({"kind": "state", "expect": {"shop": []}}, "must be an object"),
        ({"kind": "state", "expect": {"shop": {"cart": [{1, 2}]}}}, "not a JSON value"),
        ({"kind": "all", "checks": []}, "non-empty list"),
        ({"kind": "all", "checks": [{"kind": "answer"}]}, r"check\.checks\[0\]"),
    ],
)
def test_validate_check_rejects_malformed(check: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_check(check)
    if isinstance(check, dict):
        with pytest.raises(ValueError):
            evaluate_check(check, "", {})
