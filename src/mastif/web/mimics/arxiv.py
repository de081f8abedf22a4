"""The arXiv mimic: the export API's Atom 1.0 feed (``/api/query``).

``search_query`` with field prefixes (``ti:``, ``au:``, ``abs:``, ``cat:``, ...) and
``AND``/``OR``/``ANDNOT``, ``id_list``, paging and sorting; a malformed request is answered,
as arXiv does, with HTTP 200 and a one-entry feed titled Error.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode
from xml.sax.saxutils import escape, quoteattr

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mastif.web.mimics.common import all_params, int_param, query_terms, stemmed_tokens

ATOM_NS = "http://www.w3.org/2005/Atom"
OPENSEARCH_NS = "http://a9.com/-/spec/opensearch/1.1/"
ARXIV_NS = "http://arxiv.org/schemas/atom"
_ARXIV_ID = re.compile(r"^(\d{4}\.\d{4,5}|[a-z][a-z.-]*(?:\.[A-Z]{2})?/\d{7})(v\d+)?$")
_ARXIV_CLAUSE = re.compile(r'(ANDNOT|AND|OR)(?=[\s(]|$)|(?:([a-z]+):)?("[^"]*"|[^\s()"]+)')


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
        phrase = " ".join(stemmed_tokens(value))
        return bool(phrase) and phrase in " ".join(stemmed_tokens(text))
    words = stemmed_tokens(value)
    available = set(stemmed_tokens(text))
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
    terms = query_terms(re.sub(r"\b[a-z]+:", " ", query))
    ranked = [e for e in entries if e["id"] in selected]
    ranked.sort(
        key=lambda e: (
            -sum(
                3 * (t in stemmed_tokens(e["title"])) + (t in stemmed_tokens(e["summary"]))
                for t in terms
            )
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


class ArXiv:
    """The export API over one corpus of entries."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.entries: list[dict[str, Any]] = list(data["entries"])
        self.by_id = {e["id"]: e for e in self.entries}

    async def query(self, request: Request) -> Response:
        params = await all_params(request)
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
            start = int_param(params, "start", 0)
        except ValueError:
            return _arxiv_error(desc, "start must be an integer")
        try:
            max_results = int_param(params, "max_results", 10)
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
            wanted = [self.by_id[i.split("v")[0]] for i in id_list if i.split("v")[0] in self.by_id]
            found = _arxiv_search(wanted, search) if search else wanted
        elif search:
            found = _arxiv_search(self.entries, search)
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

    def routes(self) -> list[BaseRoute]:
        return [Route("/api/query", self.query, methods=["GET", "POST"])]
