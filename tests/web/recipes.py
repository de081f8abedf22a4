"""Parts that solutions to the sandbox's tasks are put together from."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from bs4 import BeautifulSoup

from tests.web.browser import (
    Browser,
    add_to_cart,
    apply_coupon,
    checkout,
    dd,
    money_of,
    open_product,
    rows,
    shop_search,
    text_of,
)

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
    return lambda soup: [text_of(soup.find(id=element_id))]


def row(index: int, table: str = "results") -> Reader:
    """One row of a table; its columns fill the template."""
    return lambda soup: rows(soup, table)[index]


def result_names(soup: BeautifulSoup) -> list[str]:
    return ["; ".join(r[0] for r in rows(soup, "results"))]


def discounted_subtotal(cart: BeautifulSoup) -> list[str]:
    subtotal = money_of(text_of(cart.find(id="subtotal")))
    discount = money_of(text_of(cart.find(id="discount")))
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
