"""What the sites show: the shop, travel and events data, loaded and checked once.

:class:`SiteData` reads ``shop.json``, ``travel.json`` and ``events.json``, indexes each
kind of item by its id, rejects dangling references at load time, and derives the
league table and top scorers from the match results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class SiteData:
    """Everything the sites show, loaded once from the JSON files of ``data_dir``."""

    shop: dict[str, Any]
    travel: dict[str, Any]
    events: dict[str, Any]
    products: dict[str, dict[str, Any]] = field(init=False)
    categories: dict[str, dict[str, Any]] = field(init=False)
    coupons: dict[str, dict[str, Any]] = field(init=False)
    hotels: dict[str, dict[str, Any]] = field(init=False)
    cities: dict[str, dict[str, Any]] = field(init=False)
    movies: dict[str, dict[str, Any]] = field(init=False)
    cinemas: dict[str, dict[str, Any]] = field(init=False)
    teams: dict[str, dict[str, Any]] = field(init=False)
    matches: dict[str, dict[str, Any]] = field(init=False)
    standings: list[dict[str, Any]] = field(init=False)
    scorers: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.products = _by_key(self.shop["products"], "sku", "product")
        self.categories = _by_key(self.shop["categories"], "id", "category")
        self.coupons = _by_key(self.shop["coupons"], "code", "coupon")
        self.hotels = _by_key(self.travel["hotels"], "id", "hotel")
        self.cities = _by_key(self.travel["cities"], "id", "city")
        self.movies = _by_key(self.events["movies"], "id", "movie")
        self.cinemas = _by_key(self.events["cinemas"], "id", "cinema")
        league = self.events["league"]
        self.teams = _by_key(league["teams"], "id", "team")
        self.matches = _by_key(league["matches"], "id", "match")
        for p in self.products.values():
            _require(p["category"] in self.categories, f"product {p['sku']}: unknown category")
        for h in self.hotels.values():
            _require(h["city"] in self.cities, f"hotel {h['id']}: unknown city")
        for m in self.movies.values():
            for cinema in m["showtimes"]:
                _require(cinema in self.cinemas, f"movie {m['id']}: unknown cinema {cinema}")
        for m in self.matches.values():
            _require(
                m["home"] in self.teams and m["away"] in self.teams,
                f"match {m['id']}: unknown team",
            )
        self.standings = _standings(self.teams, self.matches.values(), league["points"])
        self.scorers = _scorers(self.teams, self.matches.values())

    @classmethod
    def load(cls, data_dir: Path) -> SiteData:
        def read(name: str) -> dict[str, Any]:
            path = data_dir / name
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}: cannot load sandbox data: {exc}") from exc

        return cls(read("shop.json"), read("travel.json"), read("events.json"))

    def city_by_name(self, raw: str) -> dict[str, Any] | None:
        """A city by id (``cape-town``) or display name (``Cape Town``), case-insensitive."""
        key = raw.strip().lower()
        for city in self.cities.values():
            if key in (city["id"], city["name"].lower()):
                return city
        return None

    def played(self, match: dict[str, Any]) -> bool:
        return match.get("home_score") is not None

    def team_name(self, team_id: str) -> str:
        return str(self.teams[team_id]["name"])


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"sandbox data: {message}")


def _by_key(items: list[dict[str, Any]], key: str, what: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        _require(item[key] not in out, f"duplicate {what} {item[key]!r}")
        out[item[key]] = item
    return out


def _standings(
    teams: dict[str, dict[str, Any]], matches: Any, points: dict[str, int]
) -> list[dict[str, Any]]:
    """League table from played matches: points, then goal difference, goals, name."""
    rows = {
        t: {"team": t, "played": 0, "won": 0, "drawn": 0, "lost": 0, "gf": 0, "ga": 0, "points": 0}
        for t in teams
    }
    for m in matches:
        if m.get("home_score") is None:
            continue
        for me, mine, theirs in (
            (m["home"], m["home_score"], m["away_score"]),
            (m["away"], m["away_score"], m["home_score"]),
        ):
            row = rows[me]
            row["played"] += 1
            row["gf"] += mine
            row["ga"] += theirs
            if mine > theirs:
                row["won"] += 1
                row["points"] += points["win"]
            elif mine == theirs:
                row["drawn"] += 1
                row["points"] += points["draw"]
            else:
                row["lost"] += 1
                row["points"] += points["loss"]
    table = sorted(
        rows.values(),
        key=lambda r: (-r["points"], -(r["gf"] - r["ga"]), -r["gf"], teams[r["team"]]["name"]),
    )
    for pos, row in enumerate(table, start=1):
        row["pos"] = pos
        row["gd"] = row["gf"] - row["ga"]
    return table


def _scorers(teams: dict[str, dict[str, Any]], matches: Any) -> list[dict[str, Any]]:
    counts: dict[tuple[str, str], int] = {}
    for m in matches:
        for goal in m.get("goals", []):
            key = (goal["player"], goal["team"])
            counts[key] = counts.get(key, 0) + 1
    rows = [{"player": p, "team": t, "goals": n} for (p, t), n in counts.items()]
    rows.sort(key=lambda r: (-r["goals"], r["player"]))
    return rows
