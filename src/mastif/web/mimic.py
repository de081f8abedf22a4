"""Local stand-ins for the public knowledge APIs the research tools call.

The ``wikipedia``, ``arxiv``, ``pubmed`` and ``youtube_transcript`` tools talk to real
services (MediaWiki Action API, arXiv export API, NCBI E-utilities, YouTube through
``youtube-transcript-api``). Runs on an offline cluster, and the tests, cannot reach them,
so this module serves the *same wire formats* — field names, nesting, XML namespaces,
content types, and the odd ways each service reports errors — over a small made-up corpus
in ``resources/sandbox/knowledge/*.json``. Because the formats match, the tools run their
real parsing code against the mimics; only the base URL differs
(:meth:`mastif.tools.knowledge.KnowledgeEndpoints.sandbox`).

Routes (mounted by :func:`mimic_routes`):

* ``/api/wikipedia/w/api.php`` — ``action=query`` with ``list=search`` and
  ``prop=extracts|info`` (``formatversion`` 1 and 2, JSON only); ``/api/wikipedia/wiki/T``.
* ``/api/arxiv/api/query`` — Atom 1.0 feed with ``opensearch`` and ``arxiv`` extensions;
  ``search_query`` field prefixes and ``AND``/``OR``/``ANDNOT``, ``id_list``, paging.
* ``/api/pubmed/{esearch,esummary,efetch}.fcgi`` — JSON/XML search, JSON summaries,
  PubMed XML (or plain-text) records.
* ``/api/youtube/watch``, ``/api/youtube/youtubei/v1/player``, ``/api/youtube/api/timedtext``
  — the three requests ``youtube-transcript-api`` 1.2 makes.

Search is deliberately simple (every non-stopword query term must occur; title hits rank
higher): enough for tasks written against the corpus, and deterministic.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode
from xml.sax.saxutils import escape, quoteattr

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from mastif.web.search import SearchDocument

KNOWLEDGE_DIR = "knowledge"
PREFIXES: dict[str, str] = {
    "wikipedia": "/api/wikipedia",
    "arxiv": "/api/arxiv",
    "pubmed": "/api/pubmed",
    "youtube": "/api/youtube",
}
"""Where each mimic is mounted; :meth:`KnowledgeEndpoints.sandbox` uses the same paths."""

# --------------------------------------------------------------------------------------
# Shared: corpus loading and a tiny matcher
# --------------------------------------------------------------------------------------

_WORD = re.compile(r"[0-9a-z]+")
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from how in into is it its of on or that "
    "the their this to was were what when where which who why with".split()
)


def _stem(token: str) -> str:
    """Fold simple plurals so 'lakes' finds 'lake' (real engines stem much more)."""
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def _tokens(text: str) -> list[str]:
    return [_stem(t) for t in _WORD.findall(text.lower())]


def _query_terms(text: str) -> list[str]:
    return [_stem(t) for t in _WORD.findall(text.lower()) if t not in _STOPWORDS]


def _score(terms: Sequence[str], fields: Sequence[tuple[str, int]]) -> int:
    """Weighted hit count, or 0 if any term is missing: the big engines AND their terms."""
    if not terms:
        return 0
    token_sets = [(set(_tokens(text)), weight) for text, weight in fields]
    total = 0
    for term in terms:
        hit = sum(weight for tokens, weight in token_sets if term in tokens)
        if not hit:
            return 0
        total += hit
    return total


async def _all_params(request: Request) -> dict[str, str]:
    """Query string merged with a urlencoded POST body: these APIs accept both."""
    params = dict(request.query_params)
    if request.method == "POST":
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("application/x-www-form-urlencoded"):
            form = await request.form()
            params.update({k: str(v) for k, v in form.items()})
    return params


def _load(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as fh:
            data: dict[str, Any] = json.load(fh)
    except FileNotFoundError:
        raise FileNotFoundError(f"knowledge mimic corpus missing: {path}") from None
    return data


def _int_param(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name)
    return default if raw in (None, "") else int(raw)


# --------------------------------------------------------------------------------------
# Wikipedia: MediaWiki Action API (api.php) and article pages
# --------------------------------------------------------------------------------------

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


def _wikipedia_routes(data: Mapping[str, Any]) -> list[BaseRoute]:
    pages: list[dict[str, Any]] = list(data["pages"])
    by_title = {p["title"]: p for p in pages}

    def search(params: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
        srsearch = params.get("srsearch", "")
        if not srsearch.strip():
            raise _MwFailure("missingparam", 'The "srsearch" parameter must be set.')
        try:
            limit = min(max(_int_param(params, "srlimit", 10), 1), 500)
            offset = max(_int_param(params, "sroffset", 0), 0)
        except ValueError:
            raise _MwFailure("badinteger", "Invalid value for integer parameter.") from None
        props = set(params.get("srprop", "size|wordcount|timestamp|snippet").split("|"))
        terms = _query_terms(srsearch)
        ranked = sorted(
            (
                (score, page)
                for page in pages
                if (score := _score(terms, [(page["title"], 5), (_wiki_text(page, False), 1)]))
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

    def page_props(params: Mapping[str, str], fv2: bool, wiki_base: str) -> dict[str, Any]:
        titles = [t for t in params.get("titles", "").split("|") if t.strip()]
        props = set(params.get("prop", "").split("|"))
        intro = "exintro" in params
        plain = "explaintext" in params
        try:
            sentences = _int_param(params, "exsentences", 0)
            chars = _int_param(params, "exchars", 0)
        except ValueError:
            raise _MwFailure("badinteger", "Invalid value for integer parameter.") from None
        if sentences and not 1 <= sentences <= 10:
            raise _MwFailure(
                "badinteger", f'Invalid value "{sentences}" for integer parameter "exsentences".'
            )
        normalized = []
        out_pages: list[dict[str, Any]] = []
        missing_count = 0
        for raw in titles:
            title = _normalise_title(raw)
            if title != raw:
                normalized.append({"fromencoded": False, "from": raw, "to": title})
            page = by_title.get(title)
            if page is None:
                missing_count += 1
                missing: dict[str, Any] = {"ns": 0, "title": title, "missing": True if fv2 else ""}
                missing["_key"] = str(-missing_count)
                out_pages.append(missing)
                continue
            entry: dict[str, Any] = {"pageid": page["pageid"], "ns": 0, "title": page["title"]}
            if "info" in props:
                entry.update(
                    {
                        "contentmodel": "wikitext",
                        "pagelanguage": "en",
                        "pagelanguagehtmlcode": "en",
                        "pagelanguagedir": "ltr",
                        "touched": page["timestamp"],
                        "length": len(_wiki_text(page, False).encode("utf-8")),
                    }
                )
                if "url" in params.get("inprop", "").split("|"):
                    url = f"{wiki_base}/wiki/{quote(page['title'].replace(' ', '_'))}"
                    entry["fullurl"] = url
                    entry["editurl"] = (
                        f"{wiki_base}/w/index.php?title={quote(page['title'])}&action=edit"
                    )
                    entry["canonicalurl"] = url
            if "extracts" in props:
                text = _wiki_text(page, intro)
                if sentences:
                    text = " ".join(_SENTENCE_END.split(text)[:sentences])
                if chars and len(text) > chars:
                    text = text[:chars].rstrip() + "..."
                if not plain:
                    text = "".join(
                        f"<p>{html.escape(par, quote=False)}</p>" for par in text.split("\n\n")
                    )
                entry["extract"] = text
            entry["_key"] = str(page["pageid"])
            out_pages.append(entry)
        query: dict[str, Any] = {}
        if normalized:
            query["normalized"] = normalized
        if fv2:
            query["pages"] = [{k: v for k, v in p.items() if k != "_key"} for p in out_pages]
        else:
            query["pages"] = {
                p["_key"]: {k: v for k, v in p.items() if k != "_key"} for p in out_pages
            }
        return query

    async def api(request: Request) -> Response:
        params = await _all_params(request)
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
                found, cont = search(params)
                query.update(found)
                if cont:
                    result["continue"] = cont
            if params.get("titles"):
                query.update(page_props(params, fv2, wiki_base))
        except _MwFailure as failure:
            return _mw_error(failure.code, failure.info, fv2)
        if query:
            result["query"] = query
        return JSONResponse(result)

    async def article(request: Request) -> Response:
        title = _normalise_title(request.path_params["title"])
        page = by_title.get(title)
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

    return [
        Route("/w/api.php", api, methods=["GET", "POST"]),
        Route("/wiki/{title:path}", article),
    ]


class _MwFailure(Exception):
    def __init__(self, code: str, info: str) -> None:
        super().__init__(info)
        self.code = code
        self.info = info


# --------------------------------------------------------------------------------------
# arXiv: export API (Atom 1.0)
# --------------------------------------------------------------------------------------

ATOM_NS = "http://www.w3.org/2005/Atom"
OPENSEARCH_NS = "http://a9.com/-/spec/opensearch/1.1/"
ARXIV_NS = "http://arxiv.org/schemas/atom"
_ARXIV_ID = re.compile(r"^(\d{4}\.\d{4,5}|[a-z][a-z.-]*(?:\.[A-Z]{2})?/\d{7})(v\d+)?$")
_ARXIV_CLAUSE = re.compile(r'(ANDNOT|AND|OR)(?=[\s(]|$)|(?:([a-z]+):)?("[^"]*"|[^\s()"]+)')
_ARXIV_SORTS = ("relevance", "lastUpdatedDate", "submittedDate")


def _arxiv_field(entry: Mapping[str, Any], field: str) -> str:
    authors = " ".join(a["name"] for a in entry["authors"])
    parts = {
        "ti": entry["title"],
        "au": authors,
        "abs": entry["summary"],
        "co": entry.get("comment", ""),
        "jr": entry.get("journal_ref", ""),
        "cat": " ".join(entry["categories"]),
        "id": entry["id"],
    }
    if field == "all":
        return " ".join(parts.values())
    return parts.get(field, "")


def _arxiv_clause_matches(entry: Mapping[str, Any], field: str, value: str) -> bool:
    text = _arxiv_field(entry, field)
    if field in ("cat", "id"):
        wanted = value.strip('"').lower()
        haystack = text.lower().split()
        return any(h == wanted or h.startswith(wanted.rstrip("*")) for h in haystack)
    if value.startswith('"'):
        phrase = " ".join(_tokens(value))
        return bool(phrase) and phrase in " ".join(_tokens(text))
    words = _tokens(value)
    available = set(_tokens(text))
    return bool(words) and all(w in available for w in words)


def _arxiv_search(entries: Sequence[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    """Evaluate ``ti:x AND au:y OR ...`` left to right (parentheses are ignored)."""
    selected: set[str] | None = None
    pending = "AND"
    for match in _ARXIV_CLAUSE.finditer(query.replace("(", " ").replace(")", " ")):
        op, field, value = match.groups()
        if op:
            pending = op
            continue
        field = field or "all"
        hits = {e["id"] for e in entries if _arxiv_clause_matches(e, field, value)}
        if selected is None:
            selected = hits
        elif pending == "AND":
            selected &= hits
        elif pending == "OR":
            selected |= hits
        else:  # ANDNOT
            selected -= hits
        pending = "AND"
    if not selected:
        return []
    terms = _query_terms(re.sub(r"\b[a-z]+:", " ", query))
    ranked = [e for e in entries if e["id"] in selected]
    ranked.sort(
        key=lambda e: (
            -sum(3 * (t in _tokens(e["title"])) + (t in _tokens(e["summary"])) for t in terms)
        )
    )
    return ranked


def _feed_head(query_desc: str, total: int, start: int, per_page: int) -> str:
    digest = hashlib.sha1(query_desc.encode()).hexdigest()[:27]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    self_link = "http://arxiv.org/api/query?" + quote(query_desc, safe="")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<feed xmlns="{ATOM_NS}" xmlns:opensearch="{OPENSEARCH_NS}" '
        f'xmlns:arxiv="{ARXIV_NS}">\n'
        f'  <link href={quoteattr(self_link)} rel="self" type="application/atom+xml"/>\n'
        f'  <title type="html">ArXiv Query: {escape(query_desc)}</title>\n'
        f"  <id>http://arxiv.org/api/{digest}</id>\n"
        f"  <updated>{now}</updated>\n"
        f"  <opensearch:totalResults>{total}</opensearch:totalResults>\n"
        f"  <opensearch:startIndex>{start}</opensearch:startIndex>\n"
        f"  <opensearch:itemsPerPage>{per_page}</opensearch:itemsPerPage>\n"
    )


def _wrap(text: str, width: int) -> str:
    """arXiv hard-wraps titles and abstracts; clients must collapse the whitespace."""
    return "\n  ".join(textwrap.wrap(text, width)) or text


def _arxiv_entry(entry: Mapping[str, Any]) -> str:
    vid = f"{entry['id']}v{entry.get('version', 1)}"
    lines = [
        "  <entry>",
        f"    <id>http://arxiv.org/abs/{vid}</id>",
        f"    <updated>{entry['updated']}</updated>",
        f"    <published>{entry['published']}</published>",
        f"    <title>{escape(_wrap(entry['title'], 70))}</title>",
        f"    <summary>  {escape(_wrap(entry['summary'], 78))}\n</summary>",
    ]
    for author in entry["authors"]:
        lines.append("    <author>")
        lines.append(f"      <name>{escape(author['name'])}</name>")
        if author.get("affiliation"):
            lines.append(
                f"      <arxiv:affiliation>{escape(author['affiliation'])}</arxiv:affiliation>"
            )
        lines.append("    </author>")
    if entry.get("doi"):
        lines.append(f"    <arxiv:doi>{escape(entry['doi'])}</arxiv:doi>")
        lines.append(
            f'    <link title="doi" href={quoteattr("http://dx.doi.org/" + entry["doi"])} '
            'rel="related"/>'
        )
    if entry.get("comment"):
        lines.append(f"    <arxiv:comment>{escape(entry['comment'])}</arxiv:comment>")
    if entry.get("journal_ref"):
        lines.append(f"    <arxiv:journal_ref>{escape(entry['journal_ref'])}</arxiv:journal_ref>")
    lines.append(f'    <link href="http://arxiv.org/abs/{vid}" rel="alternate" type="text/html"/>')
    lines.append(
        f'    <link title="pdf" href="http://arxiv.org/pdf/{vid}" rel="related" '
        'type="application/pdf"/>'
    )
    categories = entry["categories"]
    lines.append(
        f'    <arxiv:primary_category term="{escape(categories[0])}" scheme="{ARXIV_NS}"/>'
    )
    for cat in categories:
        lines.append(f'    <category term="{escape(cat)}" scheme="{ARXIV_NS}"/>')
    lines.append("  </entry>")
    return "\n".join(lines) + "\n"


def _atom(body: str) -> Response:
    return Response(body, media_type="application/atom+xml; charset=utf-8")


def _arxiv_error(query_desc: str, message: str) -> Response:
    """arXiv answers a malformed request with HTTP 200 and a one-entry feed titled Error."""
    anchor = "http://arxiv.org/api/errors#" + re.sub(r"\W+", "_", message)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = (
        _feed_head(query_desc, 1, 0, 1)
        + "  <entry>\n"
        + f"    <id>{escape(anchor)}</id>\n"
        + "    <title>Error</title>\n"
        + f"    <summary>{escape(message)}</summary>\n"
        + f"    <updated>{now}</updated>\n"
        + f'    <link href={quoteattr(anchor)} rel="alternate" type="text/html"/>\n'
        + "    <author>\n      <name>arXiv api core</name>\n    </author>\n"
        + "  </entry>\n</feed>\n"
    )
    return _atom(body)


def _arxiv_routes(data: Mapping[str, Any]) -> list[BaseRoute]:
    entries: list[dict[str, Any]] = list(data["entries"])
    by_id = {e["id"]: e for e in entries}

    async def query(request: Request) -> Response:
        params = await _all_params(request)
        search = params.get("search_query", "")
        id_list = [i.strip() for i in params.get("id_list", "").split(",") if i.strip()]
        desc = urlencode(
            {
                "search_query": search,
                "id_list": ",".join(id_list),
                "start": params.get("start", "0"),
                "max_results": params.get("max_results", "10"),
            },
            safe=":,",
        )
        try:
            start = _int_param(params, "start", 0)
        except ValueError:
            return _arxiv_error(desc, "start must be an integer")
        try:
            max_results = _int_param(params, "max_results", 10)
        except ValueError:
            return _arxiv_error(desc, "max_results must be an integer")
        if start < 0:
            return _arxiv_error(desc, "start must be non-negative")
        if max_results < 0:
            return _arxiv_error(desc, "max_results must be non-negative")
        if max_results > 30000:
            return _arxiv_error(desc, "max_results must be less than or equal to 30000")
        for raw in id_list:
            if not _ARXIV_ID.match(raw):
                return _arxiv_error(desc, f"incorrect id format for {raw}")
        if id_list:
            wanted = [by_id[i.split("v")[0]] for i in id_list if i.split("v")[0] in by_id]
            found = _arxiv_search(wanted, search) if search else wanted
        elif search:
            found = _arxiv_search(entries, search)
            sort_by = params.get("sortBy", "relevance")
            if sort_by in ("lastUpdatedDate", "submittedDate"):
                key = "updated" if sort_by == "lastUpdatedDate" else "published"
                found.sort(key=lambda e: e[key], reverse=params.get("sortOrder") != "ascending")
        else:
            found = []
        page = found[start : start + max_results]
        body = _feed_head(desc, len(found), start, len(page))
        body += "".join(_arxiv_entry(e) for e in page) + "</feed>\n"
        return _atom(body)

    return [Route("/api/query", query, methods=["GET", "POST"])]


# --------------------------------------------------------------------------------------
# PubMed: NCBI E-utilities
# --------------------------------------------------------------------------------------

_PUBTYPE_UI = {
    "Journal Article": "D016428",
    "Randomized Controlled Trial": "D016449",
    "Meta-Analysis": "D017418",
    "Systematic Review": "D000078182",
    "Observational Study": "D064888",
    "Comparative Study": "D003160",
    "Evaluation Study": "D023362",
}
_MONTHS = ("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec").split()
_EUTILS_HEADER_VERSION = "0.3"
_PUBMED_DOCTYPE = (
    '<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" '
    '"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">'
)


def _pubmed_text(article: Mapping[str, Any]) -> str:
    authors = " ".join(f"{a['last']} {a['fore']}" for a in article["authors"])
    abstract = " ".join(part["text"] for part in article["abstract"])
    keywords = " ".join(article.get("keywords", []))
    return f"{article['journal']} {authors} {abstract} {keywords}"


def _pubmed_matches(article: Mapping[str, Any], term: str) -> int:
    """PubMed-ish: ``[field]`` tags ignored, groups split on OR, NOT excludes, AND implied."""
    cleaned = re.sub(r"\[[^\]]*\]", " ", term)
    best = 0
    for group in re.split(r"\bOR\b", cleaned):
        positive, _, negative = group.partition(" NOT ")
        positive = re.sub(r"\bAND\b", " ", positive)
        fields = [(article["title"], 3), (_pubmed_text(article), 1)]
        score = _score(_query_terms(positive), fields)
        if score and negative.strip() and _score(_query_terms(negative), fields):
            score = 0
        best = max(best, score)
    return best


def _sortpubdate(article: Mapping[str, Any]) -> str:
    date = article["pubdate"]
    month = _MONTHS.index(date["month"]) + 1 if date.get("month") in _MONTHS else 1
    return f"{date['year']}/{month:02d}/{int(date.get('day') or 1):02d} 00:00"


def _pubdate_str(article: Mapping[str, Any]) -> str:
    date = article["pubdate"]
    return " ".join(x for x in (date["year"], date.get("month"), date.get("day")) if x)


def _eutils_json(payload: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(payload, status_code=status, media_type="application/json; charset=UTF-8")


def _eutils_xml(body: str, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="text/xml; charset=UTF-8")


def _efetch_article_xml(article: Mapping[str, Any]) -> str:
    date = article["pubdate"]
    date_xml = "".join(
        f"<{tag}>{escape(date[key])}</{tag}>"
        for tag, key in (("Year", "year"), ("Month", "month"), ("Day", "day"))
        if date.get(key)
    )
    first, _, last = article["pages"].partition("-")
    abstract = "".join(
        (
            f"<AbstractText Label={quoteattr(part['label'])} "
            f"NlmCategory={quoteattr(part['label'])}>{escape(part['text'])}</AbstractText>"
        )
        if part.get("label")
        else f"<AbstractText>{escape(part['text'])}</AbstractText>"
        for part in article["abstract"]
    )
    authors = "".join(
        '<Author ValidYN="Y">'
        f"<LastName>{escape(a['last'])}</LastName><ForeName>{escape(a['fore'])}</ForeName>"
        f"<Initials>{escape(a['initials'])}</Initials></Author>"
        for a in article["authors"]
    )
    pubtypes = "".join(
        (
            f'<PublicationType UI="{_PUBTYPE_UI[p]}">{escape(p)}</PublicationType>'
            if p in _PUBTYPE_UI
            else f"<PublicationType>{escape(p)}</PublicationType>"
        )
        for p in article.get("pubtypes", ["Journal Article"])
    )
    keywords = "".join(
        f'<Keyword MajorTopicYN="N">{escape(k)}</Keyword>' for k in article.get("keywords", [])
    )
    doi = article.get("doi", "")
    return (
        "<PubmedArticle>"
        '<MedlineCitation Status="MEDLINE" Owner="NLM" IndexingMethod="Automated">'
        f'<PMID Version="1">{article["pmid"]}</PMID>'
        '<Article PubModel="Print-Electronic"><Journal>'
        f'<ISSN IssnType="Electronic">{escape(article.get("issn", ""))}</ISSN>'
        '<JournalIssue CitedMedium="Internet">'
        f"<Volume>{escape(article['volume'])}</Volume><Issue>{escape(article['issue'])}</Issue>"
        f"<PubDate>{date_xml}</PubDate></JournalIssue>"
        f"<Title>{escape(article['journal'])}</Title>"
        f"<ISOAbbreviation>{escape(article['iso_abbrev'])}</ISOAbbreviation></Journal>"
        f"<ArticleTitle>{escape(article['title'])}</ArticleTitle>"
        f"<Pagination><StartPage>{escape(first)}</StartPage>"
        + (f"<EndPage>{escape(last)}</EndPage>" if last else "")
        + f"<MedlinePgn>{escape(article['pages'])}</MedlinePgn></Pagination>"
        + (f'<ELocationID EIdType="doi" ValidYN="Y">{escape(doi)}</ELocationID>' if doi else "")
        + f"<Abstract>{abstract}</Abstract>"
        f'<AuthorList CompleteYN="Y">{authors}</AuthorList>'
        "<Language>eng</Language>"
        f"<PublicationTypeList>{pubtypes}</PublicationTypeList></Article>"
        "<MedlineJournalInfo><Country>Oskaria</Country>"
        f"<MedlineTA>{escape(article['iso_abbrev'])}</MedlineTA></MedlineJournalInfo>"
        + (f'<KeywordList Owner="NOTNLM">{keywords}</KeywordList>' if keywords else "")
        + "</MedlineCitation><PubmedData><PublicationStatus>ppublish</PublicationStatus>"
        f'<ArticleIdList><ArticleId IdType="pubmed">{article["pmid"]}</ArticleId>'
        + (f'<ArticleId IdType="doi">{escape(doi)}</ArticleId>' if doi else "")
        + "</ArticleIdList></PubmedData></PubmedArticle>"
    )


def _efetch_article_text(index: int, article: Mapping[str, Any]) -> str:
    authors = ", ".join(f"{a['last']} {a['initials']}" for a in article["authors"])
    abstract = "\n\n".join(
        f"{part['label']}: {part['text']}" if part.get("label") else part["text"]
        for part in article["abstract"]
    )
    doi = f" doi: {article['doi']}." if article.get("doi") else ""
    return (
        f"{index}. {article['iso_abbrev']}. {_pubdate_str(article)};{article['volume']}"
        f"({article['issue']}):{article['pages']}.{doi}\n\n{article['title']}\n\n{authors}.\n\n"
        f"{abstract}\n\nPMID: {article['pmid']}\n"
    )


def _esummary_doc(article: Mapping[str, Any]) -> dict[str, Any]:
    authors = [
        {"name": f"{a['last']} {a['initials']}", "authtype": "Author", "clusterid": ""}
        for a in article["authors"]
    ]
    articleids = [{"idtype": "pubmed", "idtypen": 1, "value": article["pmid"]}]
    if article.get("doi"):
        articleids.append({"idtype": "doi", "idtypen": 3, "value": article["doi"]})
    return {
        "uid": article["pmid"],
        "pubdate": _pubdate_str(article),
        "epubdate": "",
        "source": article["iso_abbrev"],
        "authors": authors,
        "lastauthor": authors[-1]["name"] if authors else "",
        "title": article["title"],
        "sorttitle": article["title"].lower().rstrip("."),
        "volume": article["volume"],
        "issue": article["issue"],
        "pages": article["pages"],
        "lang": ["eng"],
        "nlmuniqueid": "",
        "issn": "",
        "essn": article.get("issn", ""),
        "pubtype": list(article.get("pubtypes", ["Journal Article"])),
        "recordstatus": "PubMed - indexed for MEDLINE",
        "pubstatus": "4",
        "articleids": articleids,
        "history": [],
        "references": [],
        "attributes": ["Has Abstract"],
        "pmcrefcount": "",
        "fulljournalname": article["journal"],
        "elocationid": f"doi: {article['doi']}" if article.get("doi") else "",
        "doctype": "citation",
        "srccontriblist": [],
        "booktitle": "",
        "medium": "",
        "edition": "",
        "publisherlocation": "",
        "publishername": "",
        "srcdate": "",
        "reportnumber": "",
        "availablefromurl": "",
        "locationlabel": "",
        "doccontriblist": [],
        "docdate": "",
        "bookname": "",
        "chapter": "",
        "sortpubdate": _sortpubdate(article),
        "sortfirstauthor": authors[0]["name"] if authors else "",
        "vernaculartitle": "",
    }


def _pubmed_routes(data: Mapping[str, Any]) -> list[BaseRoute]:
    articles: list[dict[str, Any]] = list(data["articles"])
    by_pmid = {a["pmid"]: a for a in articles}

    def header(kind: str) -> dict[str, str]:
        return {"type": kind, "version": _EUTILS_HEADER_VERSION}

    def ids_of(params: Mapping[str, str]) -> list[str]:
        return [i.strip() for i in params.get("id", "").split(",") if i.strip()]

    async def esearch(request: Request) -> Response:
        params = await _all_params(request)
        as_json = params.get("retmode", "xml") == "json"
        db = params.get("db", "pubmed")
        term = params.get("term", "").strip()
        error = None
        if db != "pubmed":
            error = f"Invalid db name specified: {db}"
        elif not term:
            error = "Empty term and query_key - nothing todo"
        try:
            retmax = min(max(_int_param(params, "retmax", 20), 0), 10000)
            retstart = max(_int_param(params, "retstart", 0), 0)
        except ValueError:
            error = error or "Invalid retmax or retstart value"
            retmax, retstart = 20, 0
        if error:
            if as_json:
                return _eutils_json(
                    {"header": header("esearch"), "esearchresult": {"ERROR": error}}
                )
            return _eutils_xml(
                '<?xml version="1.0" encoding="UTF-8" ?>\n'
                f"<eSearchResult><ERROR>{escape(error)}</ERROR></eSearchResult>"
            )
        scored = [(s, a) for a in articles if (s := _pubmed_matches(a, term))]
        if params.get("sort", "relevance") == "relevance":
            scored.sort(key=lambda pair: -pair[0])
        else:  # "pub_date" and the other orders: newest first
            scored.sort(key=lambda pair: _sortpubdate(pair[1]), reverse=True)
        ids = [a["pmid"] for _, a in scored][retstart : retstart + retmax]
        words = _query_terms(re.sub(r"\[[^\]]*\]|\b(AND|OR|NOT)\b", " ", term))
        translation = " AND ".join(f'"{w}"[All Fields]' for w in words)
        result: dict[str, Any] = {
            "count": str(len(scored)),
            "retmax": str(len(ids)),
            "retstart": str(retstart),
            "idlist": ids,
            "translationset": [],
            "querytranslation": translation,
        }
        if not scored:
            everything = " ".join(f"{a['title']} {_pubmed_text(a)}" for a in articles)
            known = set(_tokens(everything))
            missing = [w for w in words if w not in known]
            if missing:
                result["errorlist"] = {"phrasesnotfound": missing, "fieldsnotfound": []}
            result["warninglist"] = {
                "phrasesignored": [],
                "quotedphrasesnotfound": [],
                "outputmessages": ["No items found."],
            }
        if as_json:
            return _eutils_json({"header": header("esearch"), "esearchresult": result})
        id_xml = "".join(f"<Id>{i}</Id>" for i in ids)
        return _eutils_xml(
            '<?xml version="1.0" encoding="UTF-8" ?>\n'
            '<!DOCTYPE eSearchResult PUBLIC "-//NLM//DTD esearch 20060628//EN" '
            '"https://eutils.ncbi.nlm.nih.gov/eutils/dtd/20060628/esearch.dtd">\n'
            f"<eSearchResult><Count>{len(scored)}</Count><RetMax>{len(ids)}</RetMax>"
            f"<RetStart>{retstart}</RetStart><IdList>{id_xml}</IdList><TranslationSet/>"
            f"<QueryTranslation>{escape(translation)}</QueryTranslation></eSearchResult>"
        )

    async def esummary(request: Request) -> Response:
        params = await _all_params(request)
        if params.get("retmode", "xml") != "json":
            return _eutils_xml(
                '<?xml version="1.0" encoding="UTF-8" ?>\n<eSummaryResult><ERROR>This sandbox '
                "mimic serves esummary as retmode=json only</ERROR></eSummaryResult>",
                status=400,
            )
        if params.get("db", "pubmed") != "pubmed":
            db = params.get("db")
            return _eutils_json(
                {"header": header("esummary"), "error": f"Invalid db name specified: {db}"}
            )
        ids = ids_of(params)
        if not ids:
            return _eutils_json(
                {"header": header("esummary"), "error": "Empty id list - nothing todo"}
            )
        result: dict[str, Any] = {"uids": ids}
        for pmid in ids:
            article = by_pmid.get(pmid)
            result[pmid] = (
                _esummary_doc(article)
                if article
                else {"uid": pmid, "error": "cannot get document summary"}
            )
        return _eutils_json({"header": header("esummary"), "result": result})

    async def efetch(request: Request) -> Response:
        params = await _all_params(request)
        db = params.get("db", "")
        ids = ids_of(params)
        if db != "pubmed":
            message = f"Invalid db name specified: {db}" if db else "Database name is not set"
            return _eutils_xml(
                f"<eFetchResult><ERROR>{escape(message)}</ERROR></eFetchResult>", status=400
            )
        if not ids:
            return _eutils_xml(
                "<eFetchResult><ERROR>Empty id list - nothing todo</ERROR></eFetchResult>",
                status=400,
            )
        found = [by_pmid[i] for i in ids if i in by_pmid]
        if params.get("retmode", "xml") == "text":
            text = "\n\n".join(_efetch_article_text(n, a) for n, a in enumerate(found, start=1))
            return Response(text, media_type="text/plain; charset=UTF-8")
        body = (
            '<?xml version="1.0" ?>\n'
            + _PUBMED_DOCTYPE
            + "\n<PubmedArticleSet>"
            + "".join(_efetch_article_xml(a) for a in found)
            + "</PubmedArticleSet>\n"
        )
        return _eutils_xml(body)

    return [
        Route("/esearch.fcgi", esearch, methods=["GET", "POST"]),
        Route("/esummary.fcgi", esummary, methods=["GET", "POST"]),
        Route("/efetch.fcgi", efetch, methods=["GET", "POST"]),
    ]


# --------------------------------------------------------------------------------------
# YouTube: what youtube-transcript-api requests
# --------------------------------------------------------------------------------------

_GOOGLE_BAD_KEY = {
    "error": {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "errors": [
            {
                "message": "API key not valid. Please pass a valid API key.",
                "domain": "global",
                "reason": "badRequest",
            }
        ],
        "status": "INVALID_ARGUMENT",
    }
}
_GOOGLE_BAD_REQUEST = {
    "error": {
        "code": 400,
        "message": "Request contains an invalid argument.",
        "errors": [
            {
                "message": "Request contains an invalid argument.",
                "domain": "global",
                "reason": "badRequest",
            }
        ],
        "status": "INVALID_ARGUMENT",
    }
}
_YT_STATUS = {
    "private": {
        "status": "LOGIN_REQUIRED",
        "reason": "This video is private",
        "errorScreen": {
            "playerErrorMessageRenderer": {
                "reason": {"simpleText": "This video is private"},
                "subreason": {"runs": [{"text": "The owner has not shared this video with you."}]},
            }
        },
    },
    "age_restricted": {
        "status": "LOGIN_REQUIRED",
        "reason": "This video may be inappropriate for some users.",
    },
    "unavailable": {"status": "ERROR", "reason": "This video is unavailable"},
}


def _format_seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def _youtube_routes(data: Mapping[str, Any]) -> list[BaseRoute]:
    api_key: str = data["api_key"]
    videos = {v["video_id"]: v for v in data["videos"]}

    async def watch(request: Request) -> Response:
        video = videos.get(request.query_params.get("v", ""))
        title = f"{video['title']} - YouTube" if video else "YouTube"
        config = json.dumps(
            {
                "INNERTUBE_API_KEY": api_key,
                "INNERTUBE_API_VERSION": "v1",
                "INNERTUBE_CLIENT_NAME": "WEB",
                "INNERTUBE_CLIENT_VERSION": "2.20250101.00.00",
                "INNERTUBE_CONTEXT_CLIENT_NAME": 1,
                "HL": "en",
                "GL": "US",
            }
        )
        body = (
            '<!DOCTYPE html><html lang="en-US" dir="ltr"><head>'
            f"<title>{html.escape(title)}</title>"
            f'<meta property="og:title" content={quoteattr(video["title"] if video else "YouTube")}>'
            f'<script nonce="sandbox">ytcfg.set({config});</script>'
            '</head><body><div id="player"></div></body></html>'
        )
        return HTMLResponse(body, headers={"Content-Type": "text/html; charset=utf-8"})

    def caption_track(video: Mapping[str, Any], track: Mapping[str, Any]) -> dict[str, Any]:
        expire = int(time.time()) + 6 * 3600
        query: dict[str, str] = {
            "v": video["video_id"],
            "ei": "sandbox",
            "opi": "112496729",
            "xoaf": "5",
            "hl": "en",
            "ip": "0.0.0.0",
            "ipbits": "0",
            "expire": str(expire),
            "sparams": "ip,ipbits,expire,v,ei,opi,xoaf",
        }
        if track.get("kind") == "asr":
            query["caps"] = "asr"
        signature = hashlib.sha1(f"{video['video_id']}{expire}".encode()).hexdigest().upper()
        query.update({"signature": signature, "key": "yt8"})
        if track.get("kind"):
            query["kind"] = track["kind"]
        query["lang"] = track["language_code"]
        query["fmt"] = "srv3"
        renderer: dict[str, Any] = {
            # the real host, as YouTube sends it: the client maps it to its endpoint
            "baseUrl": "https://www.youtube.com/api/timedtext?" + urlencode(query, safe=","),
            "name": {"runs": [{"text": track["name"]}]},
            "vssId": ("a." if track.get("kind") == "asr" else ".") + track["language_code"],
            "languageCode": track["language_code"],
            "isTranslatable": False,
            "trackName": "",
        }
        if track.get("kind"):
            renderer["kind"] = track["kind"]
        return renderer

    async def player(request: Request) -> Response:
        if request.query_params.get("key") != api_key:
            return JSONResponse(_GOOGLE_BAD_KEY, status_code=400)
        try:
            payload = json.loads(await request.body())
            video_id = payload["videoId"]
            if not isinstance(video_id, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse(_GOOGLE_BAD_REQUEST, status_code=400)
        video = videos.get(video_id)
        response: dict[str, Any] = {
            "responseContext": {"visitorData": "CgtzYW5kYm94", "serviceTrackingParams": []}
        }
        status = "unavailable" if video is None else video.get("status", "ok")
        if status != "ok":
            response["playabilityStatus"] = _YT_STATUS[status]
            return JSONResponse(response)
        assert video is not None
        response["playabilityStatus"] = {"status": "OK", "playableInEmbed": True}
        tracks = video.get("captions") or []
        if tracks:
            response["captions"] = {
                "playerCaptionsTracklistRenderer": {
                    "captionTracks": [caption_track(video, t) for t in tracks],
                    "audioTracks": [{"captionTrackIndices": list(range(len(tracks)))}],
                    "translationLanguages": [],
                    "defaultAudioTrackIndex": 0,
                }
            }
        response["videoDetails"] = {
            "videoId": video_id,
            "title": video["title"],
            "lengthSeconds": str(video["length_seconds"]),
            "channelId": video["channel_id"],
            "isOwnerViewing": False,
            "shortDescription": "",
            "isCrawlable": True,
            "allowRatings": True,
            "viewCount": "0",
            "author": video["author"],
            "isPrivate": False,
            "isLiveContent": False,
        }
        return JSONResponse(response)

    async def timedtext(request: Request) -> Response:
        params = request.query_params
        video = videos.get(params.get("v", ""))
        tracks = (video or {}).get("captions") or []
        lang, kind = params.get("lang", ""), params.get("kind", "")
        track = next(
            (t for t in tracks if t["language_code"] == lang and t.get("kind", "") == kind), None
        )
        if track is None:
            return Response("", status_code=404, media_type="text/html; charset=UTF-8")
        if params.get("fmt") == "srv3":
            body = "".join(
                f'<p t="{int(start * 1000)}" d="{int(dur * 1000)}">{escape(text)}</p>'
                for start, dur, text in track["lines"]
            )
            xml = (
                '<?xml version="1.0" encoding="utf-8" ?><timedtext format="3"><body>'
                f"{body}</body></timedtext>"
            )
        else:
            # the classic format HTML-escapes the text once more inside the XML
            body = "".join(
                f'<text start="{_format_seconds(start)}" dur="{_format_seconds(dur)}">'
                f"{escape(html.escape(text))}</text>"
                for start, dur, text in track["lines"]
            )
            xml = f'<?xml version="1.0" encoding="utf-8" ?><transcript>{body}</transcript>'
        return Response(xml, media_type="text/xml; charset=UTF-8")

    return [
        Route("/watch", watch),
        Route("/youtubei/v1/player", player, methods=["POST"]),
        Route("/api/timedtext", timedtext),
    ]


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def default_data_dir() -> Path:
    """``resources/sandbox``: where the offline sandbox keeps its data."""
    from mastif.core.paths import resources_dir  # late: keeps this module import light

    return resources_dir() / "sandbox"


def mimic_routes(data_dir: Path | None = None) -> list[BaseRoute]:
    """Starlette routes serving the four API mimics under :data:`PREFIXES`.

    ``data_dir`` is the sandbox data directory (default :func:`default_data_dir`); the
    corpus is read once, here, so a broken file fails at startup rather than mid-run.
    """
    root = (data_dir if data_dir is not None else default_data_dir()) / KNOWLEDGE_DIR
    builders: dict[str, Callable[[Mapping[str, Any]], list[BaseRoute]]] = {
        "wikipedia": _wikipedia_routes,
        "arxiv": _arxiv_routes,
        "pubmed": _pubmed_routes,
        "youtube": _youtube_routes,
    }
    return [
        Mount(PREFIXES[name], routes=build(_load(root / f"{name}.json")))
        for name, build in builders.items()
    ]


def mimic_documents(data_dir: Path | None = None) -> list[SearchDocument]:
    """The encyclopedia mimic's article pages as LoopSearch documents.

    The sandbox's search engine indexes every page a sandbox user can open, and the
    ``/api/wikipedia/wiki/{title}`` article pages are such pages: a plain ``web_search``
    finds them as it finds a shop's product pages on the real web.
    """
    root = (data_dir if data_dir is not None else default_data_dir()) / KNOWLEDGE_DIR
    pages = _load(root / "wikipedia.json")["pages"]
    return [
        SearchDocument(
            path=f"{PREFIXES['wikipedia']}/wiki/{quote(p['title'].replace(' ', '_'))}",
            title=f"{p['title']} - Wikipedia",
            summary=str(p["intro"]),
            text=str(p.get("body", "")),
            site="Wikipedia",
        )
        for p in pages
    ]
