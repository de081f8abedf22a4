"""CityPulse: movies with showtimes and ticket booking, a football league, a watchlist.

The league's table and top scorers are derived from the match results at load time
(:class:`mastif.web.sitedata.SiteData`); bookings and the watchlist (movies and matches)
live in the session's ``events`` state.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mastif.web.forms import bad_request, field_text, not_found, parse_int, require_text
from mastif.web.middleware import session_of
from mastif.web.pricing import cents
from mastif.web.sites.base import Site

MAX_SEATS = 8


class CityPulse(Site):
    """The movie, league and watchlist pages and their actions."""

    # -- movies

    def _movie(self, movie_id: str) -> dict[str, Any]:
        movie = self.data.movies.get(movie_id.strip().lower())
        if movie is None:
            not_found(f"No movie {movie_id!r}.")
        return movie

    async def events_home(self, request: Request) -> Response:
        upcoming = [m for m in self.data.matches.values() if not self.data.played(m)][:4]
        return self.render(request, "events_home.html", upcoming=upcoming)

    async def movies_page(self, request: Request) -> Response:
        params = request.query_params
        genres = sorted({m["genre"] for m in self.data.movies.values()})
        genre = params.get("genre", "").strip()
        if genre and genre.lower() not in {g.lower() for g in genres}:
            bad_request(f"Unknown genre {genre!r}; choose one of {', '.join(genres)}.")
        cinema = params.get("cinema", "").strip().lower()
        if cinema and cinema not in self.data.cinemas:
            bad_request(
                f"Unknown cinema {cinema!r}; choose one of " + ", ".join(self.data.cinemas) + "."
            )
        movies = [
            m
            for m in self.data.movies.values()
            if (not genre or m["genre"].lower() == genre.lower())
            and (not cinema or cinema in m["showtimes"])
        ]
        return self.render(
            request, "movies.html", movies=movies, genres=genres, genre=genre, cinema=cinema
        )

    async def movie_page(self, request: Request) -> Response:
        movie = self._movie(request.path_params["movie_id"])
        return self.render(request, "movie.html", movie=movie, max_seats=MAX_SEATS)

    async def cinema_page(self, request: Request) -> Response:
        cinema = self.data.cinemas.get(request.path_params["cinema_id"].lower())
        if cinema is None:
            not_found(f"No cinema {request.path_params['cinema_id']!r}.")
        showing = [m for m in self.data.movies.values() if cinema["id"] in m["showtimes"]]
        return self.render(request, "cinema.html", cinema=cinema, showing=showing)

    async def booking_create(self, request: Request) -> Response:
        form = await request.form()
        movie = self._movie(require_text(form, "movie", "Movie"))
        showtime = require_text(form, "showtime", "Showtime")
        cinema_id, _, time = showtime.partition("|")
        times = movie["showtimes"].get(cinema_id.strip().lower())
        if not times or time.strip() not in times:
            bad_request(
                f"{showtime!r} is not a showtime of {movie['title']}; pick one from "
                "the list on the movie page."
            )
        cinema = self.data.cinemas[cinema_id.strip().lower()]
        seats = parse_int(field_text(form, "seats"), "seats", 1, MAX_SEATS, default=1)
        with self.store.edit(session_of(request)) as state:
            booking_id = f"CP-{self.store.next_number('booking', 501)}"
            state["events"]["bookings"].append(
                {
                    "booking_id": booking_id,
                    "movie": movie["id"],
                    "cinema": cinema["id"],
                    "time": time.strip(),
                    "seats": seats,
                    "total": cents(Decimal(str(cinema["seat_price"])) * seats),
                }
            )
        return self.redirect(
            request,
            "/events/watchlist",
            f"Booked {seats} seat(s) for {movie['title']} at "
            f"{cinema['name']}, {time.strip()} (booking {booking_id}).",
        )

    # -- sports

    async def sports_page(self, request: Request) -> Response:
        raw_round = request.query_params.get("round", "")
        rounds = sorted({m["round"] for m in self.data.matches.values()})
        chosen = parse_int(raw_round, "round", rounds[0], rounds[-1]) if raw_round.strip() else None
        matches = [m for m in self.data.matches.values() if chosen in (None, m["round"])]
        results = [m for m in matches if self.data.played(m)]
        fixtures = [m for m in matches if not self.data.played(m)]
        return self.render(
            request,
            "sports.html",
            league=self.data.events["league"],
            table=self.data.standings,
            results=results,
            fixtures=fixtures,
            rounds=rounds,
            chosen=chosen,
            scorers=self.data.scorers[:8],
        )

    async def match_page(self, request: Request) -> Response:
        match = self.data.matches.get(request.path_params["match_id"].lower())
        if match is None:
            not_found(f"No match {request.path_params['match_id']!r}.")
        return self.render(
            request,
            "match.html",
            match=match,
            league=self.data.events["league"],
            played=self.data.played(match),
        )

    async def team_page(self, request: Request) -> Response:
        team = self.data.teams.get(request.path_params["team_id"].lower())
        if team is None:
            not_found(f"No team {request.path_params['team_id']!r}.")
        row = next(r for r in self.data.standings if r["team"] == team["id"])
        matches = [m for m in self.data.matches.values() if team["id"] in (m["home"], m["away"])]
        return self.render(request, "team.html", team=team, row=row, matches=matches)

    # -- watchlist

    def _watch_target(self, kind: str, item_id: str) -> str:
        """The display name of a watchlist target; 400 for an unknown one."""
        if kind == "movie":
            movie = self.data.movies.get(item_id)
            if movie is None:
                bad_request(f"No movie {item_id!r}.")
            return str(movie["title"])
        if kind == "match":
            match = self.data.matches.get(item_id)
            if match is None:
                bad_request(f"No match {item_id!r}.")
            return f"{self.data.team_name(match['home'])} vs {self.data.team_name(match['away'])}"
        bad_request(f"'kind' must be 'movie' or 'match', got {kind!r}.")

    async def _posted_target(self, request: Request) -> tuple[str, str, str]:
        """The watchlist target a form posted: its kind, id and display name (400 if unknown)."""
        form = await request.form()
        kind = field_text(form, "kind").lower()
        item_id = field_text(form, "id").lower()
        return kind, item_id, self._watch_target(kind, item_id)

    async def watchlist_page(self, request: Request) -> Response:
        state = self.store.snapshot(session_of(request))["events"]
        items = [
            {**item, "name": self._watch_target(item["kind"], item["id"])}
            for item in state["watchlist"]
        ]
        return self.render(request, "watchlist.html", items=items, bookings=state["bookings"])

    async def watchlist_add(self, request: Request) -> Response:
        kind, item_id, name = await self._posted_target(request)
        with self.store.edit(session_of(request)) as state:
            watchlist = state["events"]["watchlist"]
            if any(w["kind"] == kind and w["id"] == item_id for w in watchlist):
                message = f"{name} is already on your watchlist."
            else:
                watchlist.append({"kind": kind, "id": item_id})
                message = f"Added {name} to your watchlist."
        return self.redirect(request, "/events/watchlist", message)

    async def watchlist_remove(self, request: Request) -> Response:
        kind, item_id, name = await self._posted_target(request)
        with self.store.edit(session_of(request)) as state:
            watchlist = state["events"]["watchlist"]
            entry = next((w for w in watchlist if w["kind"] == kind and w["id"] == item_id), None)
            if entry is None:
                bad_request(f"{name} is not on your watchlist.")
            watchlist.remove(entry)
        return self.redirect(request, "/events/watchlist", f"Removed {name} from your watchlist.")

    def routes(self) -> list[BaseRoute]:
        post = ["POST"]
        return [
            Route("/events/", self.events_home),
            Route("/events/movies", self.movies_page),
            Route("/events/movies/{movie_id}", self.movie_page),
            Route("/events/cinema/{cinema_id}", self.cinema_page),
            Route("/events/bookings", self.booking_create, methods=post),
            Route("/events/sports", self.sports_page),
            Route("/events/sports/match/{match_id}", self.match_page),
            Route("/events/sports/team/{team_id}", self.team_page),
            Route("/events/watchlist", self.watchlist_page),
            Route("/events/watchlist/add", self.watchlist_add, methods=post),
            Route("/events/watchlist/remove", self.watchlist_remove, methods=post),
        ]
