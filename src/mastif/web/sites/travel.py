"""StayFinder: hotel search with dates and guests, stay totals, hotel pages, price alerts.

A stay is optional on every page (no dates: nightly prices only); given, it must be
1 to :data:`MAX_NIGHTS` nights. Price alerts live in the session's ``travel`` state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mastif.web.forms import (
    bad_request,
    field_text,
    not_found,
    parse_date,
    parse_email,
    parse_float,
    parse_int,
    require_text,
)
from mastif.web.middleware import session_of
from mastif.web.pricing import cents
from mastif.web.sites.base import Site

TRAVEL_SORTS = {
    "recommended": "Recommended",
    "price_asc": "Price: low to high",
    "price_desc": "Price: high to low",
    "rating": "Guest rating",
    "stars": "Star rating",
}
MAX_GUESTS = 6
MAX_NIGHTS = 30


def parse_stay(checkin_raw: str | None, checkout_raw: str | None) -> tuple[dt.date, dt.date] | None:
    """Check-in and check-out dates, both or neither; 1 to ``MAX_NIGHTS`` nights."""
    checkin = parse_date(checkin_raw, "checkin")
    checkout = parse_date(checkout_raw, "checkout")
    if checkin is None and checkout is None:
        return None
    if checkin is None or checkout is None:
        bad_request("Give both a check-in and a check-out date, or neither.")
    nights = (checkout - checkin).days
    if nights < 1:
        bad_request("The check-out date must be after the check-in date.")
    if nights > MAX_NIGHTS:
        bad_request(f"Stays are limited to {MAX_NIGHTS} nights; this one has {nights}.")
    return checkin, checkout


class StayFinder(Site):
    """The hotel search's pages and price-alert actions."""

    def _hotel(self, hotel_id: str) -> dict[str, Any]:
        hotel = self.data.hotels.get(hotel_id.strip().lower())
        if hotel is None:
            not_found(f"No hotel {hotel_id!r}.")
        return hotel

    def _stay_context(self, params: Any) -> dict[str, Any]:
        stay = parse_stay(params.get("checkin"), params.get("checkout"))
        guests = parse_int(params.get("guests"), "guests", 1, MAX_GUESTS, default=2)
        nights = (stay[1] - stay[0]).days if stay else None
        return {
            "checkin": stay[0].isoformat() if stay else "",
            "checkout": stay[1].isoformat() if stay else "",
            "guests": guests,
            "nights": nights,
        }

    async def travel_home(self, request: Request) -> Response:
        return self.render(
            request,
            "travel_home.html",
            stay=self._stay_context({}),
            sort="recommended",
            sorts=TRAVEL_SORTS,
            city=None,
        )

    async def travel_search(self, request: Request) -> Response:
        params = request.query_params
        raw_city = params.get("city", "").strip()
        city = None
        if raw_city:
            city = self.data.city_by_name(raw_city)
            if city is None:
                bad_request(
                    f"Unknown city {raw_city!r}; choose one of "
                    + ", ".join(c["name"] for c in self.data.cities.values())
                    + "."
                )
        stay = self._stay_context(params)
        sort = params.get("sort", "").strip() or "recommended"
        if sort not in TRAVEL_SORTS:
            bad_request(f"Unknown sort {sort!r}; use one of {', '.join(TRAVEL_SORTS)}.")
        free_only = params.get("free_cancellation", "") in ("1", "on", "true", "yes")
        hotels = [
            h
            for h in self.data.hotels.values()
            if (city is None or h["city"] == city["id"])
            and h["max_guests"] >= stay["guests"]
            and (h["free_cancellation"] or not free_only)
        ]
        keys: dict[str, Callable[[dict[str, Any]], Any]] = {
            "price_asc": lambda h: h["price"],
            "price_desc": lambda h: -h["price"],
            "rating": lambda h: (-h["rating"], h["price"]),
            "stars": lambda h: (-h["stars"], -h["rating"]),
        }
        if sort in keys:
            hotels.sort(key=keys[sort])
        results = [{"hotel": h, "total": self._total(h, stay["nights"])} for h in hotels]
        return self.render(
            request,
            "travel_search.html",
            results=results,
            city=city,
            stay=stay,
            sort=sort,
            sorts=TRAVEL_SORTS,
            free_only=free_only,
            searched=True,
        )

    @staticmethod
    def _total(hotel: dict[str, Any], nights: int | None) -> float | None:
        return None if nights is None else cents(Decimal(str(hotel["price"])) * nights)

    async def travel_hotel(self, request: Request) -> Response:
        hotel = self._hotel(request.path_params["hotel_id"])
        stay = self._stay_context(request.query_params)
        return self.render(
            request,
            "travel_hotel.html",
            hotel=hotel,
            city=self.data.cities[hotel["city"]],
            stay=stay,
            total=self._total(hotel, stay["nights"]),
            too_many=stay["guests"] > hotel["max_guests"],
        )

    async def alerts_page(self, request: Request) -> Response:
        alerts = self.store.snapshot(session_of(request))["travel"]["alerts"]
        return self.render(
            request, "travel_alerts.html", alerts=alerts, stay=self._stay_context({})
        )

    async def alerts_create(self, request: Request) -> Response:
        form = await request.form()
        hotel_id = field_text(form, "hotel")
        hotel = self._hotel(hotel_id) if hotel_id else None
        raw_city = field_text(form, "city")
        city = self.data.city_by_name(raw_city) if raw_city else None
        if raw_city and city is None:
            bad_request(f"Unknown city {raw_city!r}.")
        if hotel is not None:
            if city is not None and city["id"] != hotel["city"]:
                bad_request(
                    f"{hotel['name']} is in {self.data.cities[hotel['city']]['name']}, "
                    f"not in {city['name']}."
                )
            city = self.data.cities[hotel["city"]]
        if city is None:
            bad_request("Choose a city or a hotel for the alert.")
        stay = parse_stay(field_text(form, "checkin"), field_text(form, "checkout"))
        if stay is None:
            bad_request("A price alert needs check-in and check-out dates.")
        guests = parse_int(field_text(form, "guests"), "guests", 1, MAX_GUESTS, default=2)
        if hotel is not None and guests > hotel["max_guests"]:
            bad_request(f"{hotel['name']} takes at most {hotel['max_guests']} guests per room.")
        max_price = parse_float(field_text(form, "max_price"), "max_price", 1, 100000)
        if max_price is None:
            bad_request("Enter the maximum price per night for the alert.")
        email = parse_email(require_text(form, "email", "Email"))
        sid = session_of(request)
        with self.store.edit(sid) as state:
            alert_id = self.store.next_number("alert", 1)
            state["travel"]["alerts"].append(
                {
                    "alert_id": alert_id,
                    "hotel": hotel["id"] if hotel else None,
                    "city": city["id"],
                    "checkin": stay[0].isoformat(),
                    "checkout": stay[1].isoformat(),
                    "guests": guests,
                    "max_price": cents(max_price),
                    "email": email,
                }
            )
        target = hotel["name"] if hotel else f"hotels in {city['name']}"
        return self.redirect(
            request, "/travel/alerts", f"Price alert #{alert_id} created for {target}."
        )

    async def alerts_delete(self, request: Request) -> Response:
        form = await request.form()
        alert_id = parse_int(field_text(form, "alert_id"), "alert_id", 1, 10**9)
        with self.store.edit(session_of(request)) as state:
            alerts = state["travel"]["alerts"]
            alert = next((a for a in alerts if a["alert_id"] == alert_id), None)
            if alert is None:
                bad_request(f"You have no price alert #{alert_id}.")
            alerts.remove(alert)
        return self.redirect(request, "/travel/alerts", f"Price alert #{alert_id} deleted.")

    def routes(self) -> list[BaseRoute]:
        post = ["POST"]
        return [
            Route("/travel/", self.travel_home),
            Route("/travel/search", self.travel_search),
            Route("/travel/hotel/{hotel_id}", self.travel_hotel),
            Route("/travel/alerts", self.alerts_page, methods=["GET"]),
            Route("/travel/alerts", self.alerts_create, methods=post),
            Route("/travel/alerts/delete", self.alerts_delete, methods=post),
        ]
