"""The ``wikipedia`` tool: MediaWiki Action API search, then the article's plain-text intro.

It asks the API at :attr:`mastif.tools.knowledge.KnowledgeEndpoints.wikipedia` (the
public host or the offline sandbox's mimic, which serves the same format) through the
policy-checked :class:`~mastif.tools.http.HttpFetcher`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from mastif.core.textclip import clip_text
from mastif.tools.apitext import clean, json_body, require_text
from mastif.tools.base import Tool, ToolError, count_parameter, object_schema, text_parameter
from mastif.tools.http import HttpFetcher


def _api(fetcher: HttpFetcher, api: str, params: dict[str, str | int]) -> dict[str, Any]:
    """One Action API request's answer; MediaWiki reports API errors with HTTP 200."""
    data = json_body(fetcher.get(api, params=params), "Wikipedia")
    if not isinstance(data, dict):
        raise ToolError("Wikipedia returned an unexpected JSON value")
    if "error" in data:
        error = data["error"]
        raise ToolError(f"Wikipedia API error {error.get('code')}: {error.get('info')}")
    return data


def _search(fetcher: HttpFetcher, api: str, query: str) -> list[dict[str, Any]]:
    """The articles matching ``query``, best first (at most 5)."""
    found = _api(
        fetcher,
        api,
        {
            "action": "query",
            "list": "search",
            "srsearch": query,
            "srlimit": 5,
            "srprop": "snippet",
            "format": "json",
            "formatversion": 2,
        },
    )
    hits: list[dict[str, Any]] = found.get("query", {}).get("search", [])
    return hits


def _intro(fetcher: HttpFetcher, api: str, title: str, sentences: int) -> dict[str, Any]:
    """The article ``title`` (redirects followed) with the plain text of its introduction."""
    pages = (
        _api(
            fetcher,
            api,
            {
                "action": "query",
                "prop": "extracts",
                "exintro": 1,
                "explaintext": 1,
                "exsentences": sentences,
                "redirects": 1,
                "titles": title,
                "format": "json",
                "formatversion": 2,
            },
        )
        .get("query", {})
        .get("pages", [])
    )
    return pages[0] if pages else {}


def make_wikipedia_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``wikipedia``: MediaWiki Action API search, then the article's plain-text intro."""
    api = f"{base_url.rstrip('/')}/w/api.php"

    def wikipedia(query: str, sentences: int = 5) -> str:
        query = require_text(query, "query")
        hits = _search(fetcher, api, query)
        if not hits:
            raise ToolError(f"no Wikipedia article matches {query!r}; try fewer or other words")
        title = str(hits[0]["title"])
        page = _intro(fetcher, api, title, sentences)
        extract = clean(page.get("extract"))
        if page.get("missing") or not extract:
            raise ToolError(f"Wikipedia has no text for the article {title!r}")
        title = str(page.get("title", title))
        url = f"{base_url.rstrip('/')}/wiki/{quote(title.replace(' ', '_'))}"
        lines = [title, url, "", extract]
        others = [str(h["title"]) for h in hits[1:]]
        if others:
            lines += ["", "Other matching articles: " + "; ".join(others)]
        return clip_text("\n".join(lines))

    description = (
        "Use this tool when you need encyclopedic facts about a named thing: a place, "
        "person, organisation, species or concept. It finds the best-matching Wikipedia "
        "article and returns its introduction. Do NOT use it for recent news, scientific "
        "papers (use arxiv or pubmed) or pages at a given URL."
    )
    parameters = object_schema(
        {
            "query": text_parameter("Article name or a few keywords, e.g. 'Eiffel Tower'."),
            "sentences": count_parameter(
                "How many sentences of the introduction to return (default 5).", maximum=10
            ),
        },
        ["query"],
    )
    return Tool("wikipedia", description, parameters, wikipedia)
