"""Sandbox pages: 400 and 404 answers that say what was wrong, nav bars, labelled forms."""

from __future__ import annotations

import httpx
import pytest
from bs4 import BeautifulSoup

from mastif.web.server import SandboxServer
from tests.web.browser import Browser

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
