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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest
from bs4 import BeautifulSoup, Tag
from pypdf import PdfReader

from mastif.sandbox import (
    SESSION_COOKIE,
    CheckResult,
    SandboxServer,
    build_app,
    evaluate_check,
    validate_check,
)
from mastif.sandbox.checks import answer_tokens, contains_pattern
from mastif.tasks import TaskLoadError, load_tasks, resources_dir
from mastif.tasks.model import Task

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


def rows(soup: BeautifulSoup, table_class: str) -> list[list[str]]:
    table = soup.find("table", class_=table_class)
    assert table is not None, f"no table.{table_class}"
    return [[_text(td) for td in tr.find_all("td")] for tr in table.find("tbody").find_all("tr")]


def dd(soup: BeautifulSoup, cls: str) -> str:
    el = soup.find("dd", class_=cls)
    assert el is not None, f"no dd.{cls}"
    return _text(el)


# --------------------------------------------------------------------------- solutions

Solution = Callable[[Browser], str]
RIGHT: dict[str, Solution] = {}
WRONG: dict[str, Solution] = {}


def right(task_id: str) -> Callable[[Solution], Solution]:
    def deco(fn: Solution) -> Solution:
        RIGHT[task_id] = fn
        return fn

    return deco


def wrong(task_id: str) -> Callable[[Solution], Solution]:
    def deco(fn: Solution) -> Solution:
        WRONG[task_id] = fn
        return fn

    return deco


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


# -- shopping: answers


@right("sb-shop-01")
def _(b: Browser) -> str:
    page = open_product(b, "Auralis Q7", "Auralis Q7 Wireless Headphones")
    return f"The Auralis Q7 Wireless Headphones cost {dd(page, 'price')}."


@wrong("sb-shop-01")
def _(b: Browser) -> str:
    page = open_product(b, "Auralis", "Auralis Buds Mini")
    return f"They cost {dd(page, 'price')}."


@right("sb-shop-02")
def _(b: Browser) -> str:
    snippet = b.api("Strideon Cork Yoga Mat rating")[0]["snippet"]
    rating = re.search(r"rated ([\d.]+)/5", snippet)
    assert rating
    return f"It is rated {rating.group(1)} out of 5."


@wrong("sb-shop-02")
def _(b: Browser) -> str:
    page = open_product(b, "Road Runner", "Strideon Road Runner Shoes")
    return f"Rated {dd(page, 'rating')}."


@right("sb-shop-03")
def _(b: Browser) -> str:
    page = shop_search(
        b, **{"Search products": "backpack", "Category": "Outdoor", "Sort by": "Price: low to high"}
    )
    first = rows(page, "results")[0]
    return f"The cheapest is the {first[0]} at {first[3]}."


@wrong("sb-shop-03")
def _(b: Browser) -> str:
    page = shop_search(
        b, **{"Search products": "backpack", "Category": "Outdoor", "Sort by": "Price: high to low"}
    )
    first = rows(page, "results")[0]
    return f"{first[0]}, {first[3]}"


@right("sb-shop-04")
def _(b: Browser) -> str:
    page = shop_search(b, **{"Category": "Kitchen", "Sort by": "Customer rating"})
    first = rows(page, "results")[0]
    return f"{first[0]} with {first[4]}"


@wrong("sb-shop-04")
def _(b: Browser) -> str:
    page = shop_search(b, **{"Category": "Kitchen", "Sort by": "Price: high to low"})
    first = rows(page, "results")[0]
    return f"{first[0]} with {first[4]}"


@right("sb-shop-05")
def _(b: Browser) -> str:
    text = b.pdf_text(open_product(b, "Corvo Boom", "Corvo Boom Portable Speaker"))
    years = re.search(r"(\d+) year limited warranty on the speaker", text)
    assert years
    return f"Corvo gives a {years.group(1)}-year warranty on the speaker."


@wrong("sb-shop-05")
def _(b: Browser) -> str:
    text = b.pdf_text(open_product(b, "Corvo Boom", "Corvo Boom Portable Speaker"))
    years = re.search(r"(\d+) year warranty on the charging cable", text)
    assert years
    return f"The warranty is {years.group(1)} year."


@right("sb-shop-06")
def _(b: Browser) -> str:
    text = b.pdf_text(open_product(b, "Auralis Q7", "Auralis Q7 Wireless Headphones"))
    hours = re.search(r"up to (\d+) hours of playback", text)
    assert hours
    return f"Up to {hours.group(1)} hours."


@wrong("sb-shop-06")
def _(b: Browser) -> str:
    text = b.pdf_text(open_product(b, "Auralis Q7", "Auralis Q7 Wireless Headphones"))
    hours = re.search(r"takes about ([\d.]+) hours", text)
    assert hours
    return f"About {hours.group(1)} hours."


@right("sb-shop-07")
def _(b: Browser) -> str:
    page = b.click(b.get("/shop/"), "Home")
    text = b.pdf_text(b.click(page, "Halden Robot Vacuum R3"))
    runtime = re.search(r"up to (\d+) minutes", text)
    charge = re.search(r"Recharging takes about (\d+) hours", text)
    assert runtime and charge
    return f"It cleans for {runtime.group(1)} minutes; recharging takes {charge.group(1)} hours."


@wrong("sb-shop-07")
def _(b: Browser) -> str:
    page = b.click(b.get("/shop/"), "Home")
    text = b.pdf_text(b.click(page, "Halden Robot Vacuum R3"))
    runtime = re.search(r"up to (\d+) minutes", text)
    assert runtime
    return f"It cleans for {runtime.group(1)} minutes."


@right("sb-shop-08")
def _(b: Browser) -> str:
    page = shop_search(b, **{"Category": "Audio", "Max price ($)": 100})
    return "; ".join(r[0] for r in rows(page, "results"))


@wrong("sb-shop-08")
def _(b: Browser) -> str:
    page = shop_search(b, **{"Category": "Audio"})
    return "; ".join(r[0] for r in rows(page, "results"))


@right("sb-shop-09")
def _(b: Browser) -> str:
    add_to_cart(b, "gooseneck kettle", "Kettleworks Gooseneck Kettle", 2)
    cart = apply_coupon(b, "BREW25")
    subtotal = _money(_text(cart.find(id="subtotal")))
    discount = _money(_text(cart.find(id="discount")))
    return f"After BREW25 the subtotal is ${subtotal - discount:.2f}."


@wrong("sb-shop-09")
def _(b: Browser) -> str:
    add_to_cart(b, "gooseneck kettle", "Kettleworks Gooseneck Kettle", 1)
    cart = apply_coupon(b, "BREW25")
    subtotal = _money(_text(cart.find(id="subtotal")))
    discount = _money(_text(cart.find(id="discount")))
    return f"${subtotal - discount:.2f}"


# -- shopping: state


@right("sb-shop-10")
def _(b: Browser) -> str:
    add_to_cart(b, "silent mouse", "Bytecraft Silent Mouse")
    return "Added the Bytecraft Silent Mouse to your cart."


@wrong("sb-shop-10")
def _(b: Browser) -> str:
    add_to_cart(b, "keyboard", "Bytecraft Mechanical Keyboard K87")
    return "Added it."


@right("sb-shop-11")
def _(b: Browser) -> str:
    add_to_cart(b, "jump rope", "Strideon Jump Rope Pro", 3)
    cart = apply_coupon(b, "save10")
    assert cart.find(id="discount") is not None
    return "Done: 3 jump ropes with SAVE10."


@wrong("sb-shop-11")
def _(b: Browser) -> str:
    add_to_cart(b, "jump rope", "Strideon Jump Rope Pro", 3)
    return "Done."


def rows_any(soup: BeautifulSoup) -> list[list[str]]:
    """Rows of the page's first table (the deals page has one unnamed table)."""
    table = soup.find("table")
    assert table is not None
    return [[_text(td) for td in tr.find_all("td")] for tr in table.find("tbody").find_all("tr")]


@right("sb-shop-12")
def _(b: Browser) -> str:
    code = next(r[0] for r in rows_any(b.get("/shop/deals")) if "Outdoor" in r[1])
    add_to_cart(b, "Trail 28L", "Northpeak Trail 28L Backpack")
    add_to_cart(b, "insulated bottle", "Tidewell Insulated Bottle 1L")
    apply_coupon(b, code)
    return f"Both items are in the cart with {code}."


@wrong("sb-shop-12")
def _(b: Browser) -> str:
    add_to_cart(b, "Trail 28L", "Northpeak Trail 28L Backpack")
    add_to_cart(b, "insulated bottle", "Tidewell Insulated Bottle 1L")
    apply_coupon(b, "SAVE10")
    return "Done."


@right("sb-shop-13")
def _(b: Browser) -> str:
    add_to_cart(b, "4K monitor", "Halden 27-inch 4K Monitor")
    apply_coupon(b, "BIG20")
    order = checkout(
        b,
        "Dana Reyes",
        "dana.reyes@example.com",
        "14 Orchard Lane, Springfield",
        "Express (1-2 days)",
    )
    return f"Order placed, total {_text(order.find(id='total'))}."


@wrong("sb-shop-13")
def _(b: Browser) -> str:
    add_to_cart(b, "4K monitor", "Halden 27-inch 4K Monitor")
    apply_coupon(b, "BIG20")
    checkout(
        b,
        "Dana Reyes",
        "dana.reyes@example.com",
        "14 Orchard Lane, Springfield",
        "Standard (4-6 days)",
    )
    return "Order placed."


@right("sb-shop-14")
def _(b: Browser) -> str:
    add_to_cart(b, "skillet", "Kettleworks Cast Iron Skillet")
    checkout(b, "Sam Lee", "sam.lee@example.org", "3 Mill Road, Riverton", "Standard (4-6 days)")
    return "Ordered."


@wrong("sb-shop-14")
def _(b: Browser) -> str:
    add_to_cart(b, "skillet", "Kettleworks Cast Iron Skillet")
    return "The skillet is in the cart."


@right("sb-shop-15")
def _(b: Browser) -> str:
    page = shop_search(
        b,
        **{
            "Category": "Fitness",
            "Minimum rating": "4.5 stars & up",
            "Sort by": "Price: low to high",
        },
    )
    name = rows(page, "results")[0][0]
    b.submit(b.click(page, name), "Add to cart")
    return f"Added {name}."


@wrong("sb-shop-15")
def _(b: Browser) -> str:
    page = shop_search(b, **{"Category": "Fitness", "Sort by": "Price: low to high"})
    name = rows(page, "results")[0][0]
    b.submit(b.click(page, name), "Add to cart")
    return f"Added {name}."


@right("sb-shop-16")
def _(b: Browser) -> str:
    add_to_cart(b, "Buds Mini", "Auralis Buds Mini", 2)
    add_to_cart(b, "Corvo Boom", "Corvo Boom Portable Speaker")
    apply_coupon(b, "WELCOME5")
    checkout(
        b,
        "Alex Kim",
        "alex.kim@example.com",
        "88 Harbour Street, Port Ellis",
        "Standard (4-6 days)",
    )
    return "Ordered."


@wrong("sb-shop-16")
def _(b: Browser) -> str:
    add_to_cart(b, "Buds Mini", "Auralis Buds Mini", 2)
    add_to_cart(b, "Corvo Boom", "Corvo Boom Portable Speaker")
    checkout(
        b,
        "Alex Kim",
        "alex.kim@example.com",
        "88 Harbour Street, Port Ellis",
        "Standard (4-6 days)",
    )
    return "Ordered."


@right("sb-shop-17")
def _(b: Browser) -> str:
    add_to_cart(b, "desk lamp", "Lumina Desk Lamp Arc")
    cart = apply_coupon(b, "BIG20")
    error = cart.find(class_="error")
    if error is not None:
        assert "minimum" in _text(error)
        apply_coupon(b, "SAVE10")
        return "BIG20 was refused (minimum $250), so I applied SAVE10."
    return "BIG20 applied."


@wrong("sb-shop-17")
def _(b: Browser) -> str:
    add_to_cart(b, "desk lamp", "Lumina Desk Lamp Arc")
    apply_coupon(b, "BIG20")
    return "Applied BIG20."


# -- travel


def hotel_search(b: Browser, **fields: Any) -> BeautifulSoup:
    return b.submit(b.get("/travel/"), "Search hotels", fields)


@right("sb-travel-01")
def _(b: Browser) -> str:
    snippet = b.api("Gion Lantern Ryokan")[0]["snippet"]
    rating = re.search(r"guest rating ([\d.]+)/10", snippet)
    assert rating
    return f"Its guest rating is {rating.group(1)}/10."


@wrong("sb-travel-01")
def _(b: Browser) -> str:
    page = b.click(hotel_search(b, Destination="Kyoto"), "Kamo River Hotel")
    return dd(page, "rating")


@right("sb-travel-02")
def _(b: Browser) -> str:
    first = rows(
        hotel_search(b, **{"Destination": "Reykjavik", "Sort by": "Price: low to high"}), "results"
    )[0]
    return f"{first[0]} at {first[4]} per night."


@wrong("sb-travel-02")
def _(b: Browser) -> str:
    first = rows(
        hotel_search(b, **{"Destination": "Reykjavik", "Sort by": "Price: high to low"}), "results"
    )[0]
    return f"{first[0]} at {first[4]} per night."


@right("sb-travel-03")
def _(b: Browser) -> str:
    page = hotel_search(
        b,
        **{
            "Destination": "Lisbon",
            "Check-in": "2025-07-10",
            "Check-out": "2025-07-14",
            "Guests": "2 guests",
        },
    )
    hotel = b.click(page, "Alfama Terrace Hotel")
    return _text(hotel.find(id="stay-total"))


@wrong("sb-travel-03")
def _(b: Browser) -> str:
    page = hotel_search(
        b,
        **{
            "Destination": "Lisbon",
            "Check-in": "2025-07-10",
            "Check-out": "2025-07-13",
            "Guests": "2 guests",
        },
    )
    return _text(b.click(page, "Alfama Terrace Hotel").find(id="stay-total"))


@right("sb-travel-04")
def _(b: Browser) -> str:
    page = hotel_search(
        b,
        **{
            "Destination": "Cape Town",
            "Check-in": "2025-09-01",
            "Check-out": "2025-09-04",
            "Guests": "2 guests",
            "Free cancellation only": True,
            "Sort by": "Guest rating",
        },
    )
    first = rows(page, "results")[0]
    return f"{first[0]}: {first[5]}"


@wrong("sb-travel-04")
def _(b: Browser) -> str:
    page = hotel_search(
        b,
        **{
            "Destination": "Cape Town",
            "Check-in": "2025-09-01",
            "Check-out": "2025-09-04",
            "Guests": "2 guests",
            "Sort by": "Guest rating",
        },
    )
    first = rows(page, "results")[0]
    return f"{first[0]}: {first[5]}"


@right("sb-travel-05")
def _(b: Browser) -> str:
    page = hotel_search(
        b,
        **{
            "Destination": "Vancouver",
            "Check-in": "2025-08-15",
            "Check-out": "2025-08-18",
            "Guests": "4 guests",
            "Sort by": "Price: low to high",
        },
    )
    first = rows(page, "results")[0]
    return f"{first[0]}, {first[5]}"


@wrong("sb-travel-05")
def _(b: Browser) -> str:
    page = hotel_search(
        b,
        **{
            "Destination": "Vancouver",
            "Check-in": "2025-08-15",
            "Check-out": "2025-08-18",
            "Guests": "2 guests",
            "Sort by": "Price: low to high",
        },
    )
    first = rows(page, "results")[0]
    return f"{first[0]}, {first[5]}"


def hotel_alert(
    b: Browser,
    city: str,
    hotel: str,
    checkin: str,
    checkout: str,
    guests: int,
    max_price: int,
    email: str,
    **search: Any,
) -> BeautifulSoup:
    page = b.click(hotel_search(b, Destination=city, **search), hotel)
    return b.submit(
        page,
        "Create price alert",
        {
            "Alert check-in": checkin,
            "Alert check-out": checkout,
            "Alert guests": guests,
            "Maximum price per night (USD)": max_price,
            "Email": email,
        },
    )


@right("sb-travel-06")
def _(b: Browser) -> str:
    hotel_alert(
        b, "Vancouver", "Gastown Loft Hotel", "2025-10-03", "2025-10-05", 2, 170, "jo@example.com"
    )
    return "Alert created."


@wrong("sb-travel-06")
def _(b: Browser) -> str:
    hotel_alert(
        b, "Vancouver", "Gastown Loft Hotel", "2025-10-03", "2025-10-06", 2, 170, "jo@example.com"
    )
    return "Alert created."


def city_alert(b: Browser, guests: int) -> None:
    page = b.click(b.get("/travel/"), "Your price alerts")
    b.submit(
        page,
        "Create price alert",
        {
            "City": "Reykjavik",
            "Check-in": "2025-12-27",
            "Check-out": "2025-12-31",
            "Guests": guests,
            "Maximum price per night (USD)": 150,
            "Email": "aurora.fan@example.net",
        },
    )


@right("sb-travel-07")
def _(b: Browser) -> str:
    city_alert(b, 2)
    return "Alert created."


@wrong("sb-travel-07")
def _(b: Browser) -> str:
    city_alert(b, 3)
    return "Alert created."


@right("sb-travel-08")
def _(b: Browser) -> str:
    page = hotel_search(
        b, **{"Destination": "Kyoto", "Guests": "3 guests", "Sort by": "Guest rating"}
    )
    best = rows(page, "results")[0][0]
    hotel_alert(
        b,
        "Kyoto",
        best,
        "2025-11-20",
        "2025-11-23",
        3,
        200,
        "kyo@example.com",
        **{"Guests": "3 guests", "Sort by": "Guest rating"},
    )
    return f"Alert set for {best}."


@wrong("sb-travel-08")
def _(b: Browser) -> str:
    page = hotel_search(b, **{"Destination": "Kyoto", "Sort by": "Guest rating"})
    best = rows(page, "results")[0][0]
    hotel_alert(b, "Kyoto", best, "2025-11-20", "2025-11-23", 2, 200, "kyo@example.com")
    return f"Alert set for {best}."


@right("sb-travel-09")
def _(b: Browser) -> str:
    snippet = b.api("Arashiyama Bamboo Lodge distance from centre")[0]["snippet"]
    km = re.search(r"([\d.]+) km from the centre", snippet)
    assert km
    return f"It is {km.group(1)} km from the centre."


@wrong("sb-travel-09")
def _(b: Browser) -> str:
    snippet = b.api("Gion Lantern Ryokan distance from centre")[0]["snippet"]
    km = re.search(r"([\d.]+) km from the centre", snippet)
    assert km
    return f"It is {km.group(1)} km from the centre."


# -- entertainment


def movie(b: Browser, title: str) -> BeautifulSoup:
    return b.click(b.click(b.get("/events/"), "Movies now showing"), title)


@right("sb-movies-01")
def _(b: Browser) -> str:
    return f"Orbit of Ash runs {dd(movie(b, 'Orbit of Ash'), 'runtime')}."


@wrong("sb-movies-01")
def _(b: Browser) -> str:
    return f"It runs {dd(movie(b, 'Dune Riders'), 'runtime')}."


def orpheum_times(b: Browser) -> list[str]:
    page = movie(b, "Little Comet")
    row = next(r for r in rows(page, "showtimes") if r[0] == "Orpheum Downtown")
    return row[1].split(", ")


@right("sb-movies-02")
def _(b: Browser) -> str:
    return f"The last showing is at {orpheum_times(b)[-1]}."


@wrong("sb-movies-02")
def _(b: Browser) -> str:
    return f"The last showing is at {orpheum_times(b)[0]}."


def drama(b: Browser, pick: Callable[..., list[str]]) -> str:
    page = b.submit(b.click(b.get("/events/"), "Movies now showing"), "Filter", {"Genre": "Drama"})
    chosen = pick(rows(page, "results"), key=lambda r: float(r[2].split("/")[0]))
    film = b.click(page, chosen[0])
    director = next(
        _text(d.find_next_sibling("dd")) for d in film.find_all("dt") if _text(d) == "Director"
    )
    return f"{chosen[0]}, directed by {director}."


@right("sb-movies-03")
def _(b: Browser) -> str:
    return drama(b, max)


@wrong("sb-movies-03")
def _(b: Browser) -> str:
    return drama(b, min)


def book(b: Browser, title: str, showtime: str, seats: int) -> BeautifulSoup:
    return b.submit(movie(b, title), "Book tickets", {"Showtime": showtime, "Seats": seats})


@right("sb-movies-04")
def _(b: Browser) -> str:
    page = book(b, "Night Train to Vell", "Orpheum Downtown - 21:45", 3)
    total = rows(page, "bookings")[-1][5]
    return f"Booked; the total is {total}."


@wrong("sb-movies-04")
def _(b: Browser) -> str:
    page = book(b, "Night Train to Vell", "Orpheum Downtown - 17:15", 3)
    return f"Booked; the total is {rows(page, 'bookings')[-1][5]}."


@right("sb-movies-05")
def _(b: Browser) -> str:
    b.submit(movie(b, "Salt and Stone"), "Add to watchlist")
    return "Added."


@wrong("sb-movies-05")
def _(b: Browser) -> str:
    b.submit(movie(b, "Second Serve"), "Add to watchlist")
    return "Added."


def animation(b: Browser, showtime: str) -> str:
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


@right("sb-movies-06")
def _(b: Browser) -> str:
    return animation(b, "")


@wrong("sb-movies-06")
def _(b: Browser) -> str:
    return animation(b, "14:00")


def starlight(b: Browser, after: Callable[[str], bool]) -> str:
    page = b.click(b.get("/events/"), "Starlight Drive-In")
    return ", ".join(
        r[0] for r in rows(page, "showtimes") if any(after(t) for t in r[1].split(", "))
    )


@right("sb-movies-07")
def _(b: Browser) -> str:
    return starlight(b, lambda t: t > "21:00")


@wrong("sb-movies-07")
def _(b: Browser) -> str:
    return starlight(b, lambda t: t >= "20:30")


# -- sports


def league(b: Browser) -> BeautifulSoup:
    return b.click(b.get("/events/"), "Coastal League: table, results and fixtures")


@right("sb-sports-01")
def _(b: Browser) -> str:
    snippet = b.api("Coastal League table leader")[0]["snippet"]
    leader = re.search(r"Leader: (.+?) with (\d+) points", snippet)
    assert leader
    return f"{leader.group(1)} leads with {leader.group(2)} points."


@wrong("sb-sports-01")
def _(b: Browser) -> str:
    second = rows(league(b), "standings")[1]
    return f"{second[1]} with {second[9]} points."


@right("sb-sports-02")
def _(b: Browser) -> str:
    return dd(b.click(league(b), "Southbay Mariners vs Harbor City FC"), "score")


@wrong("sb-sports-02")
def _(b: Browser) -> str:
    return dd(b.click(league(b), "Harbor City FC vs Kingsford City"), "score")


def redcliff_goals(b: Browser) -> tuple[list[str], int]:
    page = b.submit(league(b), "Show round", {"Round": "Round 4"})
    match = b.click(page, "Redcliff Town vs Harbor City FC")
    home_score = int(re.search(r"(\d+) - \d+", dd(match, "score")).group(1))  # type: ignore[union-attr]
    goals = [_text(li) for li in match.find("ul", class_="goals").find_all("li")]
    return [g for g in goals if g.endswith("(Harbor City FC)")], home_score


@right("sb-sports-03")
def _(b: Browser) -> str:
    away_goals, home_score = redcliff_goals(b)
    winner = away_goals[home_score]  # the goal that put them one ahead for good
    minute, player = re.match(r"(\d+)' (.+) \(", winner).groups()  # type: ignore[union-attr]
    return f"{player} in the {minute}th minute."


@wrong("sb-sports-03")
def _(b: Browser) -> str:
    away_goals, _ = redcliff_goals(b)
    minute, player = re.match(r"(\d+)' (.+) \(", away_goals[0]).groups()  # type: ignore[union-attr]
    return f"{player} in the {minute}th minute."


@right("sb-sports-04")
def _(b: Browser) -> str:
    table = rows(league(b), "scorers")
    best = int(table[0][2])
    names = [r[0] for r in table if int(r[2]) == best]
    return f"{' and '.join(names)} share the lead with {best} goals."


@wrong("sb-sports-04")
def _(b: Browser) -> str:
    top = rows(league(b), "scorers")[0]
    return f"{top[0]} with {top[2]} goals."


def watch_match(b: Browser, round_label: str, link: str) -> None:
    page = b.submit(league(b), "Show round", {"Round": round_label})
    b.submit(b.click(page, link), "Add to watchlist")


@right("sb-sports-05")
def _(b: Browser) -> str:
    watch_match(b, "Round 6", "Millbrook Athletic vs Harbor City FC")
    return "Added."


@wrong("sb-sports-05")
def _(b: Browser) -> str:
    watch_match(b, "Round 7", "Harbor City FC vs Northgate Rovers")
    return "Added."


def kingsford_fixtures(b: Browser) -> list[list[str]]:
    team = b.click(league(b), "Kingsford City")
    return [r for r in rows(team, "results") if re.fullmatch(r"\d\d:\d\d", r[3])]


@right("sb-sports-06")
def _(b: Browser) -> str:
    fixtures = kingsford_fixtures(b)
    for fixture in fixtures:
        b.submit(b.click(b.get("/events/sports/team/kingsford"), fixture[2]), "Add to watchlist")
    return f"Added both; the first is on {fixtures[0][1]}."


@wrong("sb-sports-06")
def _(b: Browser) -> str:
    fixtures = kingsford_fixtures(b)
    b.submit(b.click(b.get("/events/sports/team/kingsford"), fixtures[-1][2]), "Add to watchlist")
    return f"Added; it is on {fixtures[-1][1]}."


@right("sb-sports-07")
def _(b: Browser) -> str:
    snippet = b.api("Millbrook Westmoor attendance")[0]["snippet"]
    crowd = re.search(r"Attendance ([\d,]+)", snippet)
    assert crowd
    return f"The attendance was {crowd.group(1)}."


@wrong("sb-sports-07")
def _(b: Browser) -> str:
    snippet = b.api("Millbrook Westmoor attendance")[1]["snippet"]
    crowd = re.search(r"Attendance ([\d,]+)", snippet)
    assert crowd
    return f"The attendance was {crowd.group(1)}."


# --------------------------------------------------------------------------- task set


def test_site_tasks_have_both_solutions() -> None:
    ids = {t.task_id for t in SITE_TASKS}
    assert len(SITE_TASKS) >= 30
    assert set(RIGHT) == ids, sorted(ids ^ set(RIGHT))
    assert set(WRONG) == ids, sorted(ids ^ set(WRONG))


def _run(server: SandboxServer, task: Task, solution: Solution) -> CheckResult:
    browser = Browser(server)
    try:
        answer = solution(browser)
        assert task.check is not None
        return evaluate_check(task.check, answer, browser.state())
    finally:
        browser.close()


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
    alice, bob = Browser(server), Browser(server)
    try:
        add_to_cart(alice, "silent mouse", "Bytecraft Silent Mouse", 2)
        bob.get("/shop/cart")
        assert alice.sid != bob.sid
        assert alice.state()["shop"]["cart"] == [{"sku": "CMP-203", "qty": 2}]
        assert bob.state()["shop"]["cart"] == []
        assert "Your cart is empty" in bob.get("/shop/cart").get_text()
    finally:
        alice.close()
        bob.close()


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
    b = Browser(server)
    try:
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
    finally:
        b.close()


def test_cart_totals_and_coupon_dropped_when_no_longer_eligible(server: SandboxServer) -> None:
    b = Browser(server)
    try:
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
    finally:
        b.close()


def test_order_records_totals_and_clears_cart(server: SandboxServer) -> None:
    b = Browser(server)
    try:
        add_to_cart(b, "jump rope", "Strideon Jump Rope Pro", 2)
        page = checkout(b, "Kim", "kim@example.com", "1 Road", "Express (1-2 days)")
        order = b.state()["shop"]["orders"][0]
        assert order["total"] == 44.97 and order["shipping_cost"] == 12.99
        assert order["order_id"] in page.get_text()
        assert b.state()["shop"]["cart"] == []
        assert order["order_id"] in b.get("/shop/orders").get_text()
    finally:
        b.close()


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
        (
            "POST",
            "/travel/alerts",
            {
                "checkin": "2025-07-10",
                "checkout": "2025-07-12",
                "max_price": "90",
                "email": "a@b.co",
            },
            "Choose a city",
        ),
        (
            "POST",
            "/travel/alerts",
            {
                "hotel": "gion-lantern",
                "city": "lisbon",
                "checkin": "2025-07-10",
                "checkout": "2025-07-12",
                "max_price": "90",
                "email": "a@b.co",
            },
            "not in Lisbon",
        ),
        (
            "POST",
            "/travel/alerts",
            {
                "hotel": "station-capsule",
                "checkin": "2025-07-10",
                "checkout": "2025-07-12",
                "guests": "2",
                "max_price": "90",
                "email": "a@b.co",
            },
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
    b = Browser(server)
    try:
        add_to_cart(b, "Buds Mini", "Auralis Buds Mini", 10)
        before = b.state()
        r = b.http.post("/shop/cart/add", data={"sku": "AUD-102", "qty": "1"})
        assert r.status_code == 400
        assert b.state() == before
    finally:
        b.close()


def test_every_page_links_all_sites(server: SandboxServer) -> None:
    b = Browser(server)
    try:
        for path in ["/", "/search", "/shop/", "/travel/", "/events/", "/events/sports"]:
            nav = b.get(path).find("nav")
            hrefs = {a["href"] for a in nav.find_all("a")}
            assert {"/search", "/shop/", "/travel/", "/events/"} <= hrefs
    finally:
        b.close()


def test_every_form_field_has_a_label(server: SandboxServer) -> None:
    b = Browser(server)
    try:
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
    finally:
        b.close()


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
    b = Browser(server)
    try:
        expect = {
            "Gastown Loft Hotel": "/travel/hotel/gastown-loft",
            "Hollow Pines film": "/events/movies/hollow-pines",
            "Northgate Rovers": "/events/sports/team/northgate",
            "Riverside Cineplex tickets": "/events/cinema/riverside",
            "coupon codes": "/shop/deals",
        }
        for query, path in expect.items():
            assert b.api(query, 1)[0]["url"] == server.base_url + path, query
    finally:
        b.close()


def test_manuals_are_pdf_only_and_deterministic(server: SandboxServer) -> None:
    b = Browser(server)
    try:
        page = b.get("/shop/product/AUD-101")
        assert "38 hours" not in page.get_text()
        assert all("38 hours" not in r["snippet"] for r in b.api("Auralis Q7 battery hours", 10))
        first = b.http.get("/shop/product/AUD-101/manual.pdf").content
        second = b.http.get("/shop/product/aud-101/manual.pdf").content
        assert first == second and first.startswith(b"%PDF")
        assert "38 hours" in b.pdf_text(page)
    finally:
        b.close()


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

    from mastif.sandbox.search import SearchDocument

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
