"""LoopSearch over the sandbox, and the ShopSphere manuals only a PDF reader can see."""

from __future__ import annotations

import httpx

from mastif.web.server import SandboxServer
from tests.web.browser import Browser


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
