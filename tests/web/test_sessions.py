"""Sandbox sessions: isolated per cookie, and the shop state they keep or refuse to change."""

from __future__ import annotations

import httpx

from mastif.web.app import SESSION_COOKIE
from mastif.web.server import SandboxServer
from tests.web.browser import Browser, add_to_cart, apply_coupon, checkout, text_of


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
        assert "not a valid coupon code" in text_of(page.find(class_="error"))
        page = apply_coupon(b, "SPRING24")
        assert "expired" in text_of(page.find(class_="error"))
        page = apply_coupon(b, "OUTDOOR15")
        assert "only applies to Outdoor items" in text_of(page.find(class_="error"))
        page = apply_coupon(b, "BREW25")
        assert "Kitchen" in text_of(page.find(class_="error"))
        assert b.state() == before and before["shop"]["coupon"] is None
        r = b.http.post("/shop/cart/coupon", data={"code": "  "})
        assert r.status_code == 400 and "Enter a coupon code" in r.text


def test_cart_totals_and_coupon_dropped_when_no_longer_eligible(server: SandboxServer) -> None:
    with Browser(server) as b:
        add_to_cart(b, "4K monitor", "Halden 27-inch 4K Monitor")
        add_to_cart(b, "silent mouse", "Bytecraft Silent Mouse")
        cart = apply_coupon(b, "BIG20")
        assert text_of(cart.find(id="subtotal")) == "$348.99"
        assert text_of(cart.find(id="discount")) == "-$69.80"
        assert text_of(cart.find(id="shipping")) == "$0.00"
        assert text_of(cart.find(id="total")) == "$279.19"
        cart = b.submit(cart, "Update", {"Quantity for Halden 27-inch 4K Monitor": 0})
        assert "Coupon BIG20 was removed" in cart.get_text()
        state = b.state()["shop"]
        assert state["coupon"] is None and state["cart"] == [{"sku": "CMP-203", "qty": 1}]
        assert text_of(cart.find(id="shipping")) == "$4.99"  # below the free-shipping line


def test_order_records_totals_and_clears_cart(server: SandboxServer) -> None:
    with Browser(server) as b:
        add_to_cart(b, "jump rope", "Strideon Jump Rope Pro", 2)
        page = checkout(b, "Kim", "kim@example.com", "1 Road", "Express (1-2 days)")
        order = b.state()["shop"]["orders"][0]
        assert order["total"] == 44.97 and order["shipping_cost"] == 12.99
        assert order["order_id"] in page.get_text()
        assert b.state()["shop"]["cart"] == []
        assert order["order_id"] in b.get("/shop/orders").get_text()


def test_failed_post_leaves_state_unchanged(server: SandboxServer) -> None:
    with Browser(server) as b:
        add_to_cart(b, "Buds Mini", "Auralis Buds Mini", 10)
        before = b.state()
        r = b.http.post("/shop/cart/add", data={"sku": "AUD-102", "qty": "1"})
        assert r.status_code == 400
        assert b.state() == before
