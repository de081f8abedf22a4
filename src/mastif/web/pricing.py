"""Money on the sites: rounding to cents, display, and pricing a ShopSphere cart.

The cart page, checkout and the recorded orders all price a cart through
:func:`price_cart`, so what the agent sees is what the success check reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from mastif.web.sitedata import SiteData


def cents(value: float | Decimal) -> float:
    """Round money half-up to cents (float rounding would make 0.125 -> 0.12)."""
    return float(Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def money(value: float) -> str:
    """``1299.0`` -> ``"$1,299.00"``: how every price is shown on the sites."""
    return f"${value:,.2f}"


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
