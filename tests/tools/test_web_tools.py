"""The six web tools against a real site on loopback, in a real headless Chromium.

Each tool's happy and failure paths; the browser page persisting across calls of one run
and not across runs; the URL policy refusing the metadata address and private networks.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mastif.core.config import WebOptions
from mastif.execution.webenv import WebEnvironment
from mastif.tools import Tool, ToolResult
from mastif.web.server import SandboxServer
from tests.support.webfixture import build_fixture_app


def _options(**over: object) -> WebOptions:
    base = {
        "allow_private": False,
        "allowed_hosts": (),
        "browser_executable": "/usr/bin/chromium",
        "action_timeout_s": 5.0,
        "http_timeout_s": 1.5,
        "page_chars": 2000,
        "search_backend": "duckduckgo",
    }
    return WebOptions(**(base | over))


@pytest.fixture(scope="module")
def site() -> Iterator[SandboxServer]:
    with SandboxServer(app=build_fixture_app()) as server:
        yield server


@pytest.fixture(scope="module")
def web(site: SandboxServer) -> Iterator[WebEnvironment]:
    env = WebEnvironment("live", _options(allowed_hosts=(site.host_port,)), None)
    yield env
    env.close()


@pytest.fixture(scope="module")
def tools(web: WebEnvironment) -> dict[str, Tool]:
    names = [
        "web_browser",
        "web_interaction",
        "keyboard_interaction",
        "requests_get",
        "beautifulsoup_scraper",
    ]
    return {t.name: t for t in web.tools(names)}


def ok(result: ToolResult) -> str:
    assert result.ok, result.error
    return result.output


def fails(result: ToolResult, *fragments: str) -> str:
    assert not result.ok, f"expected a failure, got {result.output[:300]!r}"
    assert result.error and result.output == ""
    for fragment in fragments:
        assert fragment in result.error, (fragment, result.error)
    return result.error


@pytest.mark.slow
def test_web_browser_reads_a_page_with_numbered_links(tools, site) -> None:
    out = ok(tools["web_browser"].invoke({"url": site.base_url + "/"}, "run-read"))
    assert "Page: Fixture home" in out
    assert "lighthouse opened in 1871" in out
    assert "Order form -> /form" in out and "[1]" in out


@pytest.mark.slow
def test_web_browser_fails_on_http_error_and_bad_host(tools, site) -> None:
    fails(tools["web_browser"].invoke({"url": site.base_url + "/missing"}, "run-404"), "HTTP 404")
    fails(
        tools["web_browser"].invoke({"url": "http://127.0.0.1:9/"}, "run-404"),
        "refused",  # loopback other than the allowed fixture
    )


@pytest.mark.parametrize("name", ["web_browser", "requests_get", "beautifulsoup_scraper"])
@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/"])
def test_web_tools_refuse_metadata_and_private_addresses(tools, name, url) -> None:
    fails(tools[name].invoke({"url": url}, "run-ssrf"), "refused")


@pytest.mark.slow
def test_interaction_fills_selects_checks_and_submits_a_form(tools, site) -> None:
    run = "run-form"
    ok(tools["web_browser"].invoke({"url": site.base_url + "/form"}, run))
    ok(
        tools["web_interaction"].invoke(
            {"action": "fill", "target": "Query", "value": "boots"}, run
        )
    )
    ok(
        tools["web_interaction"].invoke(
            {"action": "select", "target": "Color", "value": "Blue"}, run
        )
    )
    ok(tools["web_interaction"].invoke({"action": "check", "target": "Express delivery"}, run))
    out = ok(tools["web_interaction"].invoke({"action": "click", "target": "Go"}, run))
    assert "q=boots color=b express=on" in out


@pytest.mark.slow
def test_interaction_targets_listing_numbers(tools, site) -> None:
    run = "run-refs"
    listing = ok(tools["web_browser"].invoke({"url": site.base_url + "/"}, run))
    ref = next(line.split("]")[0][1:] for line in listing.splitlines() if "Order form ->" in line)
    out = ok(tools["web_interaction"].invoke({"action": "click", "target": f"[{ref}]"}, run))
    assert "Page: Order form" in out


@pytest.mark.slow
def test_interaction_failures(tools, site) -> None:
    run = "run-fail"
    fails(
        tools["web_interaction"].invoke({"action": "click", "target": "Go"}, run),
        "no page is open yet",
    )
    ok(tools["web_browser"].invoke({"url": site.base_url + "/bad-link"}, run))
    fails(
        tools["web_interaction"].invoke({"action": "click", "target": "Checkout now"}, run),
        "no element matches",
    )
    fails(
        tools["web_interaction"].invoke({"action": "fill", "target": "Broken"}, run),
        "needs a value",
    )
    fails(tools["web_interaction"].invoke({"action": "click", "target": "Broken"}, run), "HTTP 404")
    fails(
        tools["web_interaction"].invoke({"action": "hover", "target": "x"}, run),
        "invalid arguments",
    )


@pytest.mark.slow
def test_page_persists_within_a_run_and_not_across_runs(tools, web, site) -> None:
    browse, act = tools["web_browser"], tools["web_interaction"]
    assert "Count: 0" in ok(browse.invoke({"url": site.base_url + "/counter"}, "run-a"))
    assert "Count: 1" in ok(act.invoke({"action": "click", "target": "Add one"}, "run-a"))
    # another run: its own page and cookie jar
    assert "Count: 0" in ok(browse.invoke({"url": site.base_url + "/counter"}, "run-b"))
    # a later step of run a: still on its page, with its state (a relative URL resolves
    # against the page the run is on)
    assert "Count: 1" in ok(browse.invoke({"url": "/counter"}, "run-a"))
    assert web.browser.has_page("run-a")
    web.end_run("run-a")
    assert not web.browser.has_page("run-a")
    fails(act.invoke({"action": "click", "target": "Add one"}, "run-a"), "no page is open yet")


@pytest.mark.slow
def test_keyboard_types_and_presses_enter(tools, site) -> None:
    run = "run-keys"
    keys = tools["keyboard_interaction"]
    ok(tools["web_browser"].invoke({"url": site.base_url + "/form"}, run))
    out = ok(keys.invoke({"target": "Query", "text": "tent", "keys": "Enter"}, run))
    assert "q=tent" in out
    fails(keys.invoke({"keys": "NoSuchKey"}, run), "keyboard input failed")
    fails(keys.invoke({}, run), "give text to type")


def test_requests_get(tools, site) -> None:
    get = tools["requests_get"]
    out = ok(get.invoke({"url": site.base_url + "/data.json"}, "run-get"))
    assert out.startswith("HTTP 200 (application/json)") and '"items":[1,2,3]' in out
    fails(get.invoke({"url": site.base_url + "/missing"}, "run-get"), "HTTP 404")
    fails(get.invoke({"url": site.base_url + "/to-private"}, "run-get"), "refused", "10.0.0.1")
    fails(get.invoke({"url": site.base_url + "/slow"}, "run-get"), "timed out")
    fails(get.invoke({"url": "ftp://example.org/x"}, "run-get"), "only http")


def test_beautifulsoup_scraper(tools, site) -> None:
    scrape = tools["beautifulsoup_scraper"]
    prices = ok(scrape.invoke({"url": site.base_url + "/", "selector": ".price"}, "run-s"))
    assert prices == "1. $12.50\n2. $7.25"
    hrefs = ok(
        scrape.invoke({"url": site.base_url + "/", "selector": "a", "attribute": "href"}, "r")
    )
    assert hrefs == "1. /form\n2. /counter"
    page = ok(scrape.invoke({"url": site.base_url + "/"}, "run-s"))
    assert "Title: Fixture home" in page and f"{site.base_url}/form" in page
    fails(scrape.invoke({"url": site.base_url + "/", "selector": ".nothing"}, "r"), "no element")
    fails(scrape.invoke({"url": site.base_url + "/", "selector": "p[["}, "r"), "invalid CSS")


@pytest.mark.slow
def test_browser_tools_need_a_run(tools, site) -> None:
    fails(tools["web_browser"].invoke({"url": site.base_url + "/"}), "outside a run")


def test_allow_private_lets_tools_reach_loopback(site) -> None:
    env = WebEnvironment("live", _options(allow_private=True), None)
    try:
        (get,) = env.tools(["requests_get"])
        assert "HTTP 200" in ok(get.invoke({"url": site.base_url + "/data.json"}, "r"))
    finally:
        env.close()


def test_every_tool_the_schema_names_exists_with_a_guidance_description() -> None:
    from mastif.execution.experiment import load_schema

    names = load_schema()["properties"]["tools"]["items"]["enum"]
    assert len(names) == 15
    env = WebEnvironment("live", _options(), None)
    try:
        tools = env.tools(names)
    finally:
        env.close()
    assert [t.name for t in tools] == names
    for tool in tools:
        assert "Use this tool" in tool.description and "Do NOT" in tool.description, tool.name
        assert tool.parameters["additionalProperties"] is False, tool.name


@pytest.mark.slow
def test_a_runs_page_opens_at_the_tasks_start_page(tools, web, site) -> None:
    from mastif.tasks import Task

    task = Task(
        task_id="t", confirmed_task="fill the form", website="fixture", domain="Test",
        subdomain="Form", level="easy", start_url=site.base_url + "/form",
    )  # fmt: skip
    assert web.begin_run("run-start", task) == site.base_url + "/form"
    # no web_browser call first: the page is already on the start page
    out = ok(
        tools["web_interaction"].invoke(
            {"action": "fill", "target": "Query", "value": "x"}, "run-start"
        )
    )
    assert "Page: Order form" in out
    web.end_run("run-start")
