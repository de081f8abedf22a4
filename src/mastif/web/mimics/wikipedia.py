"""The Wikipedia mimic: MediaWiki's Action API (``api.php``) and article pages.

``action=query`` with ``list=search`` and ``prop=extracts|info`` (``formatversion`` 1
and 2, JSON only), answered in MediaWiki's shapes, including its habit of reporting API
errors with HTTP 200; ``/wiki/{title}`` serves the article as a plain HTML page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mastif.web.mimics.common import all_params, int_param, match_score, query_terms
from mastif.web.search import SearchDocument

_MW_DOCREF = (
    "See https://en.wikipedia.org/w/api.php for API usage. Subscribe to the mediawiki-api-"
    "announce mailing list at <https://lists.wikimedia.org/postorius/lists/mediawiki-api-"
    "announce.lists.wikimedia.org/> for notice of API deprecations and breaking changes."
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


def _mw_error(code: str, info: str, fv2: bool) -> JSONResponse:
    """MediaWiki reports API errors with HTTP 200 and an ``error`` object."""
    error: dict[str, str] = {"code": code, "info": info}
    error["docref" if fv2 else "*"] = _MW_DOCREF
    return JSONResponse(
        {"error": error, "servedby": "mw-api-ext.sandbox"},
        headers={"MediaWiki-API-Error": code},
    )


def _normalise_title(title: str) -> str:
    title = title.replace("_", " ").strip()
    return title[:1].upper() + title[1:]


def _wiki_text(page: Mapping[str, Any], intro_only: bool) -> str:
    if intro_only or not page.get("body"):
        return str(page["intro"])
    return f"{page['intro']}\n\n{page['body']}"


def _snippet(text: str, terms: Sequence[str], width: int = 160) -> str:
    """A window of ``text`` around the first hit with matches wrapped as CirrusSearch does."""
    lowered = text.lower()
    first = min((i for t in terms if (i := lowered.find(t)) >= 0), default=0)
    start = max(0, first - width // 3)
    window = html.escape(text[start : start + width], quote=False)
    for term in sorted(set(terms), key=len, reverse=True):
        window = re.sub(
            rf"\b({re.escape(term)}\w*)",
            r'<span class="searchmatch">\1</span>',
            window,
            flags=re.IGNORECASE,
        )
    return window


class _MwFailure(Exception):
    def __init__(self, code: str, info: str) -> None:
        super().__init__(info)
        self.code = code
        self.info = info


def _page_info(
    page: Mapping[str, Any], params: Mapping[str, str], wiki_base: str
) -> dict[str, Any]:
    """``prop=info``: the page's metadata, and its URLs with ``inprop=url``."""
    info: dict[str, Any] = {
        "contentmodel": "wikitext",
        "pagelanguage": "en",
        "pagelanguagehtmlcode": "en",
        "pagelanguagedir": "ltr",
        "touched": page["timestamp"],
        "length": len(_wiki_text(page, False).encode("utf-8")),
    }
    if "url" in params.get("inprop", "").split("|"):
        url = f"{wiki_base}/wiki/{quote(page['title'].replace(' ', '_'))}"
        info["fullurl"] = url
        info["editurl"] = f"{wiki_base}/w/index.php?title={quote(page['title'])}&action=edit"
        info["canonicalurl"] = url
    return info


def _extract(page: Mapping[str, Any], intro: bool, plain: bool, sentences: int, chars: int) -> str:
    """``prop=extracts``: the page's text, cut to ``exsentences``/``exchars``, as HTML or plain."""
    text = _wiki_text(page, intro)
    if sentences:
        text = " ".join(_SENTENCE_END.split(text)[:sentences])
    if chars and len(text) > chars:
        text = text[:chars].rstrip() + "..."
    if not plain:
        text = "".join(f"<p>{html.escape(par, quote=False)}</p>" for par in text.split("\n\n"))
    return text


def _extract_limits(params: Mapping[str, str]) -> tuple[int, int]:
    """``exsentences`` (0 or 1 to 10) and ``exchars`` (0: no limit)."""
    try:
        sentences = int_param(params, "exsentences", 0)
        chars = int_param(params, "exchars", 0)
    except ValueError:
        raise _MwFailure("badinteger", "Invalid value for integer parameter.") from None
    if sentences and not 1 <= sentences <= 10:
        raise _MwFailure(
            "badinteger", f'Invalid value "{sentences}" for integer parameter "exsentences".'
        )
    return sentences, chars


def _pages_query(
    normalized: list[dict[str, Any]], out_pages: list[dict[str, Any]], fv2: bool
) -> dict[str, Any]:
    """The ``query`` part of a page request: pages as a list (fv2) or keyed by id (fv1)."""
    query: dict[str, Any] = {}
    if normalized:
        query["normalized"] = normalized
    if fv2:
        query["pages"] = [{k: v for k, v in p.items() if k != "_key"} for p in out_pages]
    else:
        query["pages"] = {p["_key"]: {k: v for k, v in p.items() if k != "_key"} for p in out_pages}
    return query


def article_documents(data: Mapping[str, Any], prefix: str) -> list[SearchDocument]:
    """The article pages (served under ``prefix``) as LoopSearch documents."""
    return [
        SearchDocument(
            path=f"{prefix}/wiki/{quote(p['title'].replace(' ', '_'))}",
            title=f"{p['title']} - Wikipedia",
            summary=str(p["intro"]),
            text=str(p.get("body", "")),
            site="Wikipedia",
        )
        for p in data["pages"]
    ]


class Wikipedia:
    """The API and article pages over one corpus of pages."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.pages: list[dict[str, Any]] = list(data["pages"])
        self.by_title = {p["title"]: p for p in self.pages}

    def search(self, params: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``list=search``: the ranked hits, and the ``continue`` block if more remain."""
        srsearch = params.get("srsearch", "")
        if not srsearch.strip():
            raise _MwFailure("missingparam", 'The "srsearch" parameter must be set.')
        try:
            limit = min(max(int_param(params, "srlimit", 10), 1), 500)
            offset = max(int_param(params, "sroffset", 0), 0)
        except ValueError:
            raise _MwFailure("badinteger", "Invalid value for integer parameter.") from None
        props = set(params.get("srprop", "size|wordcount|timestamp|snippet").split("|"))
        terms = query_terms(srsearch)
        ranked = sorted(
            (
                (score, page)
                for page in self.pages
                if (score := match_score(terms, [(page["title"], 5), (_wiki_text(page, False), 1)]))
            ),
            key=lambda pair: (-pair[0], pair[1]["title"]),
        )
        hits = []
        for _, page in ranked[offset : offset + limit]:
            text = _wiki_text(page, False)
            hit: dict[str, Any] = {"ns": 0, "title": page["title"], "pageid": page["pageid"]}
            if "size" in props:
                hit["size"] = len(text.encode("utf-8"))
            if "wordcount" in props:
                hit["wordcount"] = len(text.split())
            if "snippet" in props:
                hit["snippet"] = _snippet(text, terms)
            if "timestamp" in props:
                hit["timestamp"] = page["timestamp"]
            hits.append(hit)
        query = {"searchinfo": {"totalhits": len(ranked)}, "search": hits}
        cont = {}
        if offset + limit < len(ranked):
            cont = {"sroffset": offset + limit, "continue": "-||"}
        return query, cont

    def page_props(self, params: Mapping[str, str], fv2: bool, wiki_base: str) -> dict[str, Any]:
        """``titles=...``: each page's ``prop=info|extracts``, and the missing ones."""
        titles = [t for t in params.get("titles", "").split("|") if t.strip()]
        props = set(params.get("prop", "").split("|"))
        intro = "exintro" in params
        plain = "explaintext" in params
        sentences, chars = _extract_limits(params)
        normalized = []
        out_pages: list[dict[str, Any]] = []
        missing_count = 0
        for raw in titles:
            title = _normalise_title(raw)
            if title != raw:
                normalized.append({"fromencoded": False, "from": raw, "to": title})
            page = self.by_title.get(title)
            if page is None:
                missing_count += 1
                missing: dict[str, Any] = {"ns": 0, "title": title, "missing": True if fv2 else ""}
                missing["_key"] = str(-missing_count)
                out_pages.append(missing)
                continue
            entry: dict[str, Any] = {"pageid": page["pageid"], "ns": 0, "title": page["title"]}
            if "info" in props:
                entry.update(_page_info(page, params, wiki_base))
            if "extracts" in props:
                entry["extract"] = _extract(page, intro, plain, sentences, chars)
            entry["_key"] = str(page["pageid"])
            out_pages.append(entry)
        return _pages_query(normalized, out_pages, fv2)

    async def api(self, request: Request) -> Response:
        params = await all_params(request)
        fv2 = params.get("formatversion") in ("2", "latest")
        if params.get("format") != "json":
            return _mw_error(
                "mimic-unsupported", "This sandbox mimic only serves format=json.", fv2
            )
        action = params.get("action", "help")
        if action != "query":
            return _mw_error(
                "badvalue", f'Unrecognized value for parameter "action": {action}.', fv2
            )
        result: dict[str, Any] = {"batchcomplete": True if fv2 else ""}
        query: dict[str, Any] = {}
        # the mount prefix is part of the site's address: keep it in the article URLs
        wiki_base = str(request.url.replace(query="")).rsplit("/w/api.php", 1)[0]
        try:
            lists = [x for x in params.get("list", "").split("|") if x]
            for name in lists:
                if name != "search":
                    raise _MwFailure(
                        "badvalue", f'Unrecognized value for parameter "list": {name}.'
                    )
                found, cont = self.search(params)
                query.update(found)
                if cont:
                    result["continue"] = cont
            if params.get("titles"):
                query.update(self.page_props(params, fv2, wiki_base))
        except _MwFailure as failure:
            return _mw_error(failure.code, failure.info, fv2)
        if query:
            result["query"] = query
        return JSONResponse(result)

    async def article(self, request: Request) -> Response:
        title = _normalise_title(request.path_params["title"])
        page = self.by_title.get(title)
        if page is None:
            body = (
                f"<!DOCTYPE html><html><head><title>{html.escape(title)} - Wikipedia</title>"
                '</head><body><h1 id="firstHeading">'
                f'{html.escape(title)}</h1><div id="mw-content-text"><p>Wikipedia does not '
                "have an article with this exact name.</p></div></body></html>"
            )
            return HTMLResponse(body, status_code=404)
        paragraphs = "".join(
            f"<p>{html.escape(par)}</p>" for par in _wiki_text(page, False).split("\n\n")
        )
        body = (
            f'<!DOCTYPE html><html lang="en"><head><meta charset="UTF-8"><title>'
            f"{html.escape(page['title'])} - Wikipedia</title></head><body>"
            f'<h1 id="firstHeading">{html.escape(page["title"])}</h1>'
            f'<div id="mw-content-text">{paragraphs}</div></body></html>'
        )
        return HTMLResponse(body)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/w/api.php", self.api, methods=["GET", "POST"]),
            Route("/wiki/{title:path}", self.article),
        ]
