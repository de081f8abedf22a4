"""A tiny browser for the sandbox's tests: forms filled by label, pages read with bs4.

Each :class:`Browser` has its own cookie jar, so its own sandbox session; the helpers
below it drive ShopSphere the way a person would (search, open, add, apply, check out).
"""

from __future__ import annotations

import io
import re
from typing import Any
from urllib.parse import urljoin

import httpx
from bs4 import BeautifulSoup, Tag
from pypdf import PdfReader

from mastif.web.app import SESSION_COOKIE
from mastif.web.server import SandboxServer


def text_of(el: Tag) -> str:
    return el.get_text(" ", strip=True)


def money_of(text: str) -> float:
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
        links = [a for a in soup.find_all("a") if text_of(a) == text]
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
                    o for o in options if text_of(o) == str(value) or o.get("value") == str(value)
                ]
                assert chosen, f"no option {value!r} in {label_text!r}"
                values[name] = str(chosen[0].get("value", text_of(chosen[0])))
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
        buttons = [b for b in soup.find_all("button") if text_of(b) == button]
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
                values[name] = str(opt.get("value", text_of(opt))) if opt else ""
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
        exact = [lb for lb in labels if text_of(lb) == label_text]
        prefix = [lb for lb in labels if text_of(lb).startswith(label_text)]
        found = exact or prefix
        assert found, f"no label {label_text!r}; labels: {[text_of(lb) for lb in labels]}"
        target = form.find(id=found[0]["for"])
        assert target is not None, f"label {label_text!r} points at nothing"
        return target

    def api(self, query: str, n: int = 5) -> list[dict[str, str]]:
        r = self.http.get("/search/api", params={"q": query, "n": n})
        assert r.status_code == 200, r.text
        return list(r.json()["results"])

    def pdf_text(self, soup: BeautifulSoup, link: str = "User manual (PDF)") -> str:
        href = next(a["href"] for a in soup.find_all("a") if text_of(a) == link)
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
    return [[text_of(td) for td in tr.find_all("td")] for tr in table.find("tbody").find_all("tr")]


def dd(soup: BeautifulSoup, cls: str) -> str:
    el = soup.find("dd", class_=cls)
    assert el is not None, f"no dd.{cls}"
    return text_of(el)


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
