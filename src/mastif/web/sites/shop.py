"""ShopSphere: product search, product pages and PDF manuals, cart, coupons, checkout.

The cart, the applied coupon and the placed orders live in the session's ``shop`` state
(:mod:`mastif.web.store`); every price shown is computed by :mod:`mastif.web.pricing`.
An unknown or ineligible coupon is a 200 cart page with an error banner, as real shops
answer, so an agent can read the reason and recover.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mastif.web.forms import (
    bad_request,
    field_text,
    not_found,
    parse_email,
    parse_float,
    parse_int,
    require_text,
)
from mastif.web.middleware import session_of
from mastif.web.pricing import cents, coupon_problem, price_cart
from mastif.web.search import tokenize
from mastif.web.sitedata import SiteData
from mastif.web.sites.base import Site
from mastif.web.store import SessionStore

SHOP_SORTS = {
    "relevance": "Relevance",
    "price_asc": "Price: low to high",
    "price_desc": "Price: high to low",
    "rating": "Customer rating",
}
MIN_RATINGS = {"": "Any rating", "3": "3 stars & up", "4": "4 stars & up", "4.5": "4.5 stars & up"}
MAX_QTY = 10
PDF_DATE = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
"""Fixed PDF creation date: manuals must be byte-identical across runs."""


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


def _cart_line(cart: list[dict[str, Any]], product: dict[str, Any]) -> dict[str, Any] | None:
    """The cart line holding ``product``, or ``None``."""
    return next((line for line in cart if line["sku"] == product["sku"]), None)


def _line_in_cart(cart: list[dict[str, Any]], product: dict[str, Any]) -> dict[str, Any]:
    """The cart line holding ``product``; 400 if it is not in the cart."""
    line = _cart_line(cart, product)
    if line is None:
        bad_request(f"{product['name']} is not in your cart.")
    return line


class ShopSphere(Site):
    """The shop's pages and cart actions."""

    def __init__(self, data: SiteData, store: SessionStore, templates: jinja2.Environment) -> None:
        super().__init__(data, store, templates)
        self._manual = lru_cache(maxsize=None)(self._manual_uncached)

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
            line = _cart_line(cart, product)
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
            line = _line_in_cart(cart, product)
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
            line = _line_in_cart(cart, product)
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

    def routes(self) -> list[BaseRoute]:
        post = ["POST"]
        return [
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
        ]
