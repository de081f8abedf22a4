"""LoopSearch's index: one search document per sandbox page worth finding.

Each document's summary holds the facts people search for (prices, ratings, scores,
showtimes), so a search result's snippet can answer a question on its own. The order of
the documents is the index order, which breaks ties between equally good results.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from mastif.web.pricing import money
from mastif.web.search import SearchDocument
from mastif.web.sitedata import SiteData


def build_documents(data: SiteData) -> list[SearchDocument]:
    """One search document per page worth finding, with the facts people ask about."""
    return [
        *_landing_documents(data),
        *_shop_documents(data),
        *_travel_documents(data),
        *_movie_documents(data),
        *_league_documents(data),
    ]


def _listing(count: int, what: str, names: Any) -> str:
    """``"34 products in Audio, Computing."``: a landing page's count of what it lists."""
    return f"{count} {what} in " + ", ".join(names) + "."


def _landing_documents(data: SiteData) -> list[SearchDocument]:
    """The start page and each site's front pages."""
    active = "; ".join(
        f"{c['code']}: {c['description']}" for c in data.coupons.values() if not c.get("expired")
    )
    movies = ", ".join(m["title"] for m in data.movies.values())
    rows = [
        (
            "/",
            "Sandbox home - all sites",
            "Start page linking ShopSphere, StayFinder, CityPulse and LoopSearch.",
            "",
            "LoopSearch",
        ),
        (
            "/shop/",
            "ShopSphere - online shop",
            _listing(len(data.products), "products", (c["name"] for c in data.categories.values())),
            "Search products, compare prices and ratings, use coupon codes.",
            "ShopSphere",
        ),
        (
            "/shop/deals",
            "Coupon codes and deals - ShopSphere",
            "Current ShopSphere coupon codes: " + active,
            "",
            "ShopSphere",
        ),
        (
            "/travel/",
            "StayFinder - hotel search",
            _listing(len(data.hotels), "hotels", (c["name"] for c in data.cities.values())),
            "Compare hotel prices for your dates and set price alerts.",
            "StayFinder",
        ),
        (
            "/travel/alerts",
            "Price alerts - StayFinder",
            "Create a price alert for a hotel or city and your travel dates.",
            "",
            "StayFinder",
        ),
        (
            "/events/",
            "CityPulse - movies and sports",
            "Cinema showtimes, ticket booking, and Coastal League football scores.",
            "",
            "CityPulse",
        ),
        (
            "/events/movies",
            "Movies now showing - CityPulse",
            "Now showing: " + movies + ".",
            "",
            "CityPulse",
        ),
    ]
    return [
        SearchDocument(path, title, summary, text, site=site)
        for path, title, summary, text, site in rows
    ]


def _shop_documents(data: SiteData) -> list[SearchDocument]:
    """ShopSphere's category listings, then its product pages."""
    docs = []
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
    return docs


def _travel_documents(data: SiteData) -> list[SearchDocument]:
    """StayFinder's per-city hotel searches, then its hotel pages."""
    docs = []
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
    return docs


def _movie_documents(data: SiteData) -> list[SearchDocument]:
    """CityPulse's movie pages, then its cinema pages."""
    docs = []
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
    return docs


def _top_scorers(data: SiteData) -> str:
    """``"Top scorer: X, 5 goals."``, or the joint top scorers; ``""`` before any goal."""
    best = data.scorers[0]["goals"] if data.scorers else 0
    top = [s["player"] for s in data.scorers if s["goals"] == best]
    if len(top) > 1:
        return f"Joint top scorers: {' and '.join(top)}, {best} goals each."
    return f"Top scorer: {top[0]}, {best} goals." if top else ""


def _league_documents(data: SiteData) -> list[SearchDocument]:
    """The league's table page, its team pages, then its match pages."""
    league = data.events["league"]
    leader = data.standings[0]
    docs = [
        SearchDocument(
            "/events/sports",
            f"{league['name']} {league['season']} table and results - CityPulse",
            f"Leader: {data.teams[leader['team']]['name']} with {leader['points']} points after "
            f"{leader['played']} matches. {_top_scorers(data)}",
            " ".join(
                f"Position {r['pos']}: {data.teams[r['team']]['name']}, {r['points']} points."
                for r in data.standings
            ),
            site="CityPulse",
        )
    ]
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
    docs.extend(_match_document(data, league, m) for m in data.matches.values())
    return docs


def _match_document(data: SiteData, league: dict[str, Any], m: dict[str, Any]) -> SearchDocument:
    """A played match's result page, or an upcoming one's fixture page."""
    home, away = data.teams[m["home"]]["name"], data.teams[m["away"]]["name"]
    if data.played(m):
        goals = ", ".join(f"{g['player']} {g['minute']}'" for g in m["goals"]) or "none"
        return SearchDocument(
            f"/events/sports/match/{m['id']}",
            f"{home} {m['home_score']}-{m['away_score']} {away} - CityPulse",
            f"{league['name']} round {m['round']}, {m['date']} at {m['venue']}. Final score: "
            f"{home} {m['home_score']}, {away} {m['away_score']}.",
            f"Goals: {goals}. Attendance {m['attendance']:,}.",
            site="CityPulse",
        )
    return SearchDocument(
        f"/events/sports/match/{m['id']}",
        f"{home} vs {away} - CityPulse",
        f"{league['name']} round {m['round']} fixture: {m['date']}, kick-off "
        f"{m['kickoff']} at {m['venue']}.",
        site="CityPulse",
    )
