"""What a web tool call costs on the offline sandbox, without a model: ratios from one run.

Serves the sandbox as a stack job does, then times N calls of each way to read a product
page (``requests_get``, ``beautifulsoup_scraper``, ``web_browser``), of ``web_search``, of
``web_interaction`` (a click that posts a form and loads the next page), and the first
browser call of a run (a new browser context and page). Prints the mean milliseconds per
call and each as a ratio to ``requests_get``; also the one-off Chromium start.

    .venv/bin/python bench/web_tools.py [N]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from mastif.core.config import WebOptions
from mastif.execution.webenv import open_web_environment

OPTIONS = WebOptions(
    allow_private=False,
    allowed_hosts=(),
    browser_executable="/usr/bin/chromium",
    action_timeout_s=15,
    http_timeout_s=20,
    page_chars=2000,
    search_backend="duckduckgo",
)
PRODUCT = "/shop/product/FIT-602"


def mean_ms(n: int, call: Callable[[int], object]) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        call(i)
    return (time.perf_counter() - t0) / n * 1000


def main(n: int) -> None:
    names = [
        "requests_get",
        "beautifulsoup_scraper",
        "web_browser",
        "web_search",
        "web_interaction",
    ]
    with open_web_environment("sandbox", OPTIONS) as web:
        tools = {t.name: t for t in web.tools(names)}

        def ok(name: str, args: dict, run: str) -> None:
            result = tools[name].invoke(args, run)
            assert result.ok, (name, result.error)

        t0 = time.perf_counter()
        ok("web_browser", {"url": PRODUCT}, "warm-up")  # starts Chromium
        start_ms = (time.perf_counter() - t0) * 1000
        rows = {
            "requests_get": mean_ms(n, lambda i: ok("requests_get", {"url": PRODUCT}, "r")),
            "beautifulsoup_scraper (selector)": mean_ms(
                n, lambda i: ok("beautifulsoup_scraper", {"url": PRODUCT, "selector": "h1"}, "r")
            ),
            "web_browser (same run)": mean_ms(
                n, lambda i: ok("web_browser", {"url": PRODUCT}, "r")
            ),
            "web_browser (first call of a run)": mean_ms(
                n,
                lambda i: (
                    ok("web_browser", {"url": PRODUCT}, f"new-{i}"),
                    web.end_run(f"new-{i}"),
                ),
            ),
            "web_search": mean_ms(n, lambda i: ok("web_search", {"query": "cork yoga mat"}, "r")),
        }

        def add_to_cart(i: int) -> None:
            # a run per click: a cart holds at most 10 of a product
            ok("web_browser", {"url": PRODUCT}, f"click-{i}")
            ok("web_interaction", {"action": "click", "target": "Add to cart"}, f"click-{i}")
            web.end_run(f"click-{i}")

        first = rows["web_browser (first call of a run)"]
        rows["web_interaction click (form post + next page)"] = mean_ms(n, add_to_cart) - first
    base = rows["requests_get"]
    print(f"sandbox, {n} calls each; Chromium start {start_ms:.0f} ms (once per stack job)")
    print(f"{'call':46} {'ms':>8} {'x requests_get':>15}")
    for name, ms in rows.items():
        print(f"{name:46} {ms:8.1f} {ms / base:15.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
