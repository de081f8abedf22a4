"""A right and a wrong scripted solution for every task in ``sites.jsonl``.

Most are one row of :data:`SOLUTIONS`, put together from :mod:`tests.web.recipes`; the
few that are one of a kind are written out first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from tests.web.browser import Browser, add_to_cart, apply_coupon, dd, rows, text_of
from tests.web.recipes import (
    EVENTS,
    LEAGUE,
    Customer,
    Solution,
    act,
    add,
    add_first_result,
    alert_on_top_rated,
    at,
    booking,
    clicked,
    coupon,
    discounted_subtotal,
    element,
    field,
    films_with_a_showing,
    grep,
    hotel,
    hotel_alert,
    hotels,
    manual,
    movie,
    order,
    product,
    products,
    read,
    result_names,
    reykjavik_alert,
    round_match,
    row,
    showtime,
    snippet,
    top_scorers,
    visit,
    watch,
)

# -- solutions that are one of a kind


def outdoor_deal_in_cart(b: Browser) -> str:
    """Look the Outdoor coupon up on the deals page instead of knowing it."""
    code = next(r[0] for r in rows(b.get("/shop/deals")) if "Outdoor" in r[1])
    visit(b, [*BACKPACK_AND_BOTTLE, coupon(code)])
    return f"Both items are in the cart with {code}."


def big20_else_save10(b: Browser) -> str:
    """Try BIG20; when the cart is below its minimum, fall back to SAVE10."""
    add_to_cart(b, "desk lamp", "Lumina Desk Lamp Arc")
    cart = apply_coupon(b, "BIG20")
    error = cart.find(class_="error")
    if error is not None:
        assert "minimum" in text_of(error)
        apply_coupon(b, "SAVE10")
        return "BIG20 was refused (minimum $250), so I applied SAVE10."
    return "BIG20 applied."


def director_of_drama(b: Browser, *, pick: Callable[..., list[str]]) -> str:
    """The director of the Drama film ``pick`` (max or min) chooses by rating."""
    page = b.submit(b.click(b.get("/events/"), "Movies now showing"), "Filter", {"Genre": "Drama"})
    chosen = pick(rows(page, "results"), key=lambda r: float(r[2].split("/")[0]))
    film = b.click(page, chosen[0])
    director = next(
        text_of(d.find_next_sibling("dd")) for d in film.find_all("dt") if text_of(d) == "Director"
    )
    return f"{chosen[0]}, directed by {director}."


def book_and_watch_animation(b: Browser, *, showtime: str | None) -> str:
    """Book 4 seats for the animated film at Riverside (``showtime`` or else its earliest)."""
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


def harbor_city_scorer(b: Browser, *, winner: bool) -> str:
    """Who scored Harbor City's winner at Redcliff (or, wrongly, their first goal)."""
    match = round_match("Round 4", "Redcliff Town vs Harbor City FC")(b)
    home_score = int(re.search(r"(\d+) - \d+", dd(match, "score")).group(1))  # type: ignore[union-attr]
    goals = [text_of(li) for li in match.find("ul", class_="goals").find_all("li")]
    away_goals = [g for g in goals if g.endswith("(Harbor City FC)")]
    # the winner is the goal that put them one ahead for good
    goal = away_goals[home_score] if winner else away_goals[0]
    minute, player = re.match(r"(\d+)' (.+) \(", goal).groups()  # type: ignore[union-attr]
    return f"{player} in the {minute}th minute."


KINGSFORD = "/events/sports/team/kingsford"


def kingsford_fixtures(b: Browser) -> list[list[str]]:
    """Kingsford's matches still to play: a kick-off time where a played one has its score."""
    team = b.click(LEAGUE(b), "Kingsford City")
    return [r for r in rows(team, "results") if re.fullmatch(r"\d\d:\d\d", r[3])]


def watch_kingsford_fixtures(b: Browser) -> str:
    fixtures = kingsford_fixtures(b)
    for fixture in fixtures:
        b.submit(b.click(b.get(KINGSFORD), fixture[2]), "Add to watchlist")
    return f"Added both; the first is on {fixtures[0][1]}."


def watch_last_kingsford_fixture(b: Browser) -> str:
    fixtures = kingsford_fixtures(b)
    b.submit(b.click(b.get(KINGSFORD), fixtures[-1][2]), "Add to watchlist")
    return f"Added; it is on {fixtures[-1][1]}."


# --------------------------------------------------------------------------- solutions

# What several solutions use, and what a task's right and wrong solutions share (so that
# its row shows just what they differ in).
Q7 = product("Auralis Q7", "Auralis Q7 Wireless Headphones")
CORVO_NAME = "Corvo Boom Portable Speaker"
CORVO = product("Corvo Boom", CORVO_NAME)
VACUUM = clicked(at("/shop/"), "Home", "Halden Robot Vacuum R3")  # through its category
JUMP_ROPES = add("jump rope", "Strideon Jump Rope Pro", 3)
BACKPACK_AND_BOTTLE = (
    add("Trail 28L", "Northpeak Trail 28L Backpack"),
    add("insulated bottle", "Tidewell Insulated Bottle 1L"),
)
MONITOR_WITH_BIG20 = (add("4K monitor", "Halden 27-inch 4K Monitor"), coupon("BIG20"))
SKILLET = add("skillet", "Kettleworks Cast Iron Skillet")
BUDS_AND_BOOM = (add("Buds Mini", "Auralis Buds Mini", 2), add("Corvo Boom", CORVO_NAME))
LAMP = add("desk lamp", "Lumina Desk Lamp Arc")
DANA: Customer = ("Dana Reyes", "dana.reyes@example.com", "14 Orchard Lane, Springfield")
SAM: Customer = ("Sam Lee", "sam.lee@example.org", "3 Mill Road, Riverton")
ALEX: Customer = ("Alex Kim", "alex.kim@example.com", "88 Harbour Street, Port Ellis")
STANDARD, EXPRESS = "Standard (4-6 days)", "Express (1-2 days)"

LISBON_FROM_10_JULY = partial(hotels, "Lisbon", checkin="2025-07-10", guests=2)
ALFAMA = "Alfama Terrace Hotel"
CAPE_TOWN_STAY = partial(
    hotels, "Cape Town", checkin="2025-09-01", checkout="2025-09-04", guests=2, sort="Guest rating"
)
VANCOUVER_STAY = partial(
    hotels, "Vancouver", checkin="2025-08-15", checkout="2025-08-18", sort="Price: low to high"
)
GASTOWN = hotel("Vancouver", "Gastown Loft Hotel")
KYOTO_FOR_3 = hotels("Kyoto", guests=3, sort="Guest rating")
KM_FROM_CENTRE = r"([\d.]+) km from the centre"

LITTLE_COMET = movie("Little Comet")
STARLIGHT = clicked(EVENTS, "Starlight Drive-In")
ATTENDANCE = r"Attendance ([\d,]+)"

# task id -> (a correct solution, which must pass the task's check;
#             a plausible wrong one, which must fail it)
SOLUTIONS: dict[str, tuple[Solution, Solution]] = {
    # -- shopping: answers
    "sb-shop-01": (
        read(field("price"), Q7, say="The Auralis Q7 Wireless Headphones cost {0}."),
        read(field("price"), product("Auralis", "Auralis Buds Mini"), say="They cost {0}."),
    ),
    "sb-shop-02": (
        grep(
            r"rated ([\d.]+)/5",
            snippet("Strideon Cork Yoga Mat rating"),
            say="It is rated {0} out of 5.",
        ),
        read(
            field("rating"), product("Road Runner", "Strideon Road Runner Shoes"), say="Rated {0}."
        ),
    ),
    "sb-shop-03": (
        read(
            row(0),
            products("backpack", category="Outdoor", sort="Price: low to high"),
            say="The cheapest is the {0} at {3}.",
        ),
        read(
            row(0),
            products("backpack", category="Outdoor", sort="Price: high to low"),
            say="{0}, {3}",
        ),
    ),
    "sb-shop-04": (
        read(row(0), products(category="Kitchen", sort="Customer rating"), say="{0} with {4}"),
        read(row(0), products(category="Kitchen", sort="Price: high to low"), say="{0} with {4}"),
    ),
    "sb-shop-05": (
        grep(
            r"(\d+) year limited warranty on the speaker",
            manual(CORVO),
            say="Corvo gives a {0}-year warranty on the speaker.",
        ),
        grep(
            r"(\d+) year warranty on the charging cable",
            manual(CORVO),
            say="The warranty is {0} year.",
        ),
    ),
    "sb-shop-06": (
        grep(r"up to (\d+) hours of playback", manual(Q7), say="Up to {0} hours."),
        grep(r"takes about ([\d.]+) hours", manual(Q7), say="About {0} hours."),
    ),
    "sb-shop-07": (
        grep(
            [r"up to (\d+) minutes", r"Recharging takes about (\d+) hours"],
            manual(VACUUM),
            say="It cleans for {0} minutes; recharging takes {1} hours.",
        ),
        grep(r"up to (\d+) minutes", manual(VACUUM), say="It cleans for {0} minutes."),
    ),
    "sb-shop-08": (
        read(result_names, products(category="Audio", max_price=100)),
        read(result_names, products(category="Audio")),
    ),
    "sb-shop-09": (
        read(
            discounted_subtotal,
            add("gooseneck kettle", "Kettleworks Gooseneck Kettle", 2),
            coupon("BREW25"),
            say="After BREW25 the subtotal is {0}.",
        ),
        read(
            discounted_subtotal,
            add("gooseneck kettle", "Kettleworks Gooseneck Kettle", 1),
            coupon("BREW25"),
        ),
    ),
    # -- shopping: state
    "sb-shop-10": (
        act(
            add("silent mouse", "Bytecraft Silent Mouse"),
            say="Added the Bytecraft Silent Mouse to your cart.",
        ),
        act(add("keyboard", "Bytecraft Mechanical Keyboard K87"), say="Added it."),
    ),
    "sb-shop-11": (
        act(JUMP_ROPES, coupon("save10", must_apply=True), say="Done: 3 jump ropes with SAVE10."),
        act(JUMP_ROPES, say="Done."),
    ),
    "sb-shop-12": (
        outdoor_deal_in_cart,
        act(*BACKPACK_AND_BOTTLE, coupon("SAVE10"), say="Done."),
    ),
    "sb-shop-13": (
        read(
            element("total"),
            *MONITOR_WITH_BIG20,
            order(DANA, EXPRESS),
            say="Order placed, total {0}.",
        ),
        act(*MONITOR_WITH_BIG20, order(DANA, STANDARD), say="Order placed."),
    ),
    "sb-shop-14": (
        act(SKILLET, order(SAM, STANDARD), say="Ordered."),
        act(SKILLET, say="The skillet is in the cart."),
    ),
    "sb-shop-15": (
        add_first_result(
            products(category="Fitness", min_rating="4.5 stars & up", sort="Price: low to high")
        ),
        add_first_result(products(category="Fitness", sort="Price: low to high")),
    ),
    "sb-shop-16": (
        act(*BUDS_AND_BOOM, coupon("WELCOME5"), order(ALEX, STANDARD), say="Ordered."),
        act(*BUDS_AND_BOOM, order(ALEX, STANDARD), say="Ordered."),
    ),
    "sb-shop-17": (
        big20_else_save10,
        act(LAMP, coupon("BIG20"), say="Applied BIG20."),
    ),
    # -- travel
    "sb-travel-01": (
        grep(
            r"guest rating ([\d.]+)/10",
            snippet("Gion Lantern Ryokan"),
            say="Its guest rating is {0}/10.",
        ),
        read(field("rating"), hotel("Kyoto", "Kamo River Hotel")),
    ),
    "sb-travel-02": (
        read(row(0), hotels("Reykjavik", sort="Price: low to high"), say="{0} at {4} per night."),
        read(row(0), hotels("Reykjavik", sort="Price: high to low"), say="{0} at {4} per night."),
    ),
    "sb-travel-03": (
        read(element("stay-total"), clicked(LISBON_FROM_10_JULY(checkout="2025-07-14"), ALFAMA)),
        read(element("stay-total"), clicked(LISBON_FROM_10_JULY(checkout="2025-07-13"), ALFAMA)),
    ),
    "sb-travel-04": (
        read(row(0), CAPE_TOWN_STAY(free_cancellation=True), say="{0}: {5}"),
        read(row(0), CAPE_TOWN_STAY(), say="{0}: {5}"),
    ),
    "sb-travel-05": (
        read(row(0), VANCOUVER_STAY(guests=4), say="{0}, {5}"),
        read(row(0), VANCOUVER_STAY(guests=2), say="{0}, {5}"),
    ),
    "sb-travel-06": (
        act(
            hotel_alert(GASTOWN, "2025-10-03", "2025-10-05", 2, 170, "jo@example.com"),
            say="Alert created.",
        ),
        act(
            hotel_alert(GASTOWN, "2025-10-03", "2025-10-06", 2, 170, "jo@example.com"),
            say="Alert created.",
        ),
    ),
    "sb-travel-07": (
        act(reykjavik_alert(guests=2), say="Alert created."),
        act(reykjavik_alert(guests=3), say="Alert created."),
    ),
    "sb-travel-08": (
        alert_on_top_rated(KYOTO_FOR_3, KYOTO_FOR_3, guests=3),
        alert_on_top_rated(hotels("Kyoto", sort="Guest rating"), hotels("Kyoto"), guests=2),
    ),
    "sb-travel-09": (
        grep(
            KM_FROM_CENTRE,
            snippet("Arashiyama Bamboo Lodge distance from centre"),
            say="It is {0} km from the centre.",
        ),
        grep(
            KM_FROM_CENTRE,
            snippet("Gion Lantern Ryokan distance from centre"),
            say="It is {0} km from the centre.",
        ),
    ),
    # -- entertainment
    "sb-movies-01": (
        read(field("runtime"), movie("Orbit of Ash"), say="Orbit of Ash runs {0}."),
        read(field("runtime"), movie("Dune Riders"), say="It runs {0}."),
    ),
    "sb-movies-02": (
        read(showtime("Orpheum Downtown", -1), LITTLE_COMET, say="The last showing is at {0}."),
        read(showtime("Orpheum Downtown", 0), LITTLE_COMET, say="The last showing is at {0}."),
    ),
    "sb-movies-03": (
        partial(director_of_drama, pick=max),
        partial(director_of_drama, pick=min),
    ),
    "sb-movies-04": (
        read(
            row(-1, "bookings"),
            booking("Night Train to Vell", "Orpheum Downtown - 21:45", 3),
            say="Booked; the total is {5}.",
        ),
        read(
            row(-1, "bookings"),
            booking("Night Train to Vell", "Orpheum Downtown - 17:15", 3),
            say="Booked; the total is {5}.",
        ),
    ),
    "sb-movies-05": (
        act(watch(movie("Salt and Stone")), say="Added."),
        act(watch(movie("Second Serve")), say="Added."),
    ),
    "sb-movies-06": (
        partial(book_and_watch_animation, showtime=None),
        partial(book_and_watch_animation, showtime="14:00"),
    ),
    "sb-movies-07": (
        read(films_with_a_showing(lambda t: t > "21:00"), STARLIGHT),
        read(films_with_a_showing(lambda t: t >= "20:30"), STARLIGHT),
    ),
    # -- sports
    "sb-sports-01": (
        grep(
            r"Leader: (.+?) with (\d+) points",
            snippet("Coastal League table leader"),
            say="{0} leads with {1} points.",
        ),
        read(row(1, "standings"), LEAGUE, say="{1} with {9} points."),
    ),
    "sb-sports-02": (
        read(field("score"), clicked(LEAGUE, "Southbay Mariners vs Harbor City FC")),
        read(field("score"), clicked(LEAGUE, "Harbor City FC vs Kingsford City")),
    ),
    "sb-sports-03": (
        partial(harbor_city_scorer, winner=True),
        partial(harbor_city_scorer, winner=False),
    ),
    "sb-sports-04": (
        read(top_scorers, LEAGUE, say="{0} share the lead with {1} goals."),
        read(row(0, "scorers"), LEAGUE, say="{0} with {2} goals."),
    ),
    "sb-sports-05": (
        act(watch(round_match("Round 6", "Millbrook Athletic vs Harbor City FC")), say="Added."),
        act(watch(round_match("Round 7", "Harbor City FC vs Northgate Rovers")), say="Added."),
    ),
    "sb-sports-06": (watch_kingsford_fixtures, watch_last_kingsford_fixture),
    "sb-sports-07": (
        grep(ATTENDANCE, snippet("Millbrook Westmoor attendance"), say="The attendance was {0}."),
        grep(
            ATTENDANCE, snippet("Millbrook Westmoor attendance", 1), say="The attendance was {0}."
        ),
    ),
}
RIGHT = {task_id: right for task_id, (right, _) in SOLUTIONS.items()}
WRONG = {task_id: wrong for task_id, (_, wrong) in SOLUTIONS.items()}
