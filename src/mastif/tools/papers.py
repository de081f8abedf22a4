"""The paper-search tools: ``arxiv`` (arXiv export API, Atom) and ``pubmed`` (NCBI
E-utilities: ``esearch`` for PMIDs, then ``efetch`` PubMed XML).

Both ask the API at their :class:`mastif.tools.knowledge.KnowledgeEndpoints` URL (the
public host or the offline sandbox's mimic, which serves the same formats) through the
policy-checked :class:`~mastif.tools.http.HttpFetcher`, parse the answer (XML without
entity expansion) and list the hits as compact text.
"""

from __future__ import annotations

import re
from typing import Any
from xml.etree.ElementTree import Element

from mastif.core.textclip import clip_text
from mastif.tools.apitext import clean, clip, json_body, require_text, xml_root
from mastif.tools.base import Tool, ToolError, count_parameter, object_schema, text_parameter
from mastif.tools.http import HttpFetcher

ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV = "{http://arxiv.org/schemas/atom}"
OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"

#: Longest abstract/summary shown per search hit: several hits must fit one answer.
ITEM_SUMMARY_CHARS = 700


def _search_parameters(query_description: str, items: str) -> dict[str, Any]:
    """The parameters of a paper search: ``query`` and ``max_results`` (1..10)."""
    return object_schema(
        {
            "query": text_parameter(query_description),
            "max_results": count_parameter(f"How many {items} to return (default 5).", maximum=10),
        },
        ["query"],
    )


# --------------------------------------------------------------------------------------
# arxiv
# --------------------------------------------------------------------------------------

_ARXIV_ID = re.compile(
    r"^(?:arxiv:)?(\d{4}\.\d{4,5}(?:v\d+)?|[a-z][a-z.-]*(?:\.[A-Z]{2})?/\d{7}(?:v\d+)?)$",
    re.IGNORECASE,
)
_ARXIV_URL_ID = re.compile(r"arxiv\.org/(?:abs|pdf)/([^?#\s]+?)(?:\.pdf)?(?:[?#]|$)")
_ARXIV_SYNTAX = re.compile(r"\b(?:ti|au|abs|co|jr|cat|rn|id|all):|\b(?:AND|OR|ANDNOT)\b")
_ARXIV_STOPWORDS = frozenset(
    "a an and are as at by for from in into is of on or the to with about".split()
)


def arxiv_search_query(query: str) -> str:
    """Turn plain words into ``all:w1 AND all:w2``; pass arXiv syntax through unchanged.

    arXiv ORs loose words, which buries the paper a model is looking for; ANDing the
    meaningful words is what a careful human would type.
    """
    if _ARXIV_SYNTAX.search(query):
        return query
    words = re.findall(r'"[^"]+"|[\w.-]+', query)
    kept = [w for w in words if w.lower() not in _ARXIV_STOPWORDS] or words
    return " AND ".join(f"all:{w}" for w in kept)


def _arxiv_id(query: str) -> str | None:
    """An arXiv identifier given as the query (bare, ``arXiv:``-prefixed or a URL)."""
    text = query.strip()
    url = _ARXIV_URL_ID.search(text)
    if url:
        text = url.group(1)
    match = _ARXIV_ID.match(text)
    return match.group(1) if match else None


def parse_arxiv_feed(content: bytes) -> tuple[int, list[dict[str, Any]]]:
    """``(total_results, entries)`` from an arXiv Atom feed; :class:`ToolError` on the
    error feed arXiv sends (HTTP 200, one entry titled ``Error``) or on non-Atom bodies
    such as the plain-text ``Rate exceeded.``."""
    root = xml_root(content, "arXiv")
    if root.tag != f"{ATOM}feed":
        raise ToolError(f"arXiv returned an unexpected document <{root.tag}>")
    entries: list[dict[str, Any]] = []
    for entry in root.findall(f"{ATOM}entry"):
        entry_id = clean(entry.findtext(f"{ATOM}id"))
        title = clean(entry.findtext(f"{ATOM}title"))
        summary = clean(entry.findtext(f"{ATOM}summary"))
        if title == "Error" and "/api/errors" in entry_id:
            raise ToolError(f"arXiv API error: {summary or entry_id}")
        primary = entry.find(f"{ARXIV}primary_category")
        entries.append(
            {
                "id": entry_id.rsplit("/abs/", 1)[-1],
                "url": entry_id,
                "title": title,
                "summary": summary,
                "published": clean(entry.findtext(f"{ATOM}published"))[:10],
                "authors": [
                    clean(a.findtext(f"{ATOM}name")) for a in entry.findall(f"{ATOM}author")
                ],
                "category": primary.get("term", "") if primary is not None else "",
                "journal_ref": clean(entry.findtext(f"{ARXIV}journal_ref")),
                "doi": clean(entry.findtext(f"{ARXIV}doi")),
            }
        )
    total_text = root.findtext(f"{OPENSEARCH}totalResults")
    total = int(total_text) if total_text and total_text.strip().isdigit() else len(entries)
    return total, entries


def _format_authors(names: list[str], limit: int = 4) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


#: one hit of a paper search: its title, identifiers and date, authors, and further lines
Hit = tuple[str, str, list[str], list[str]]


def _hit_listing(head: str, hits: list[Hit]) -> str:
    """A paper search's answer: ``head``, then each hit numbered, one block each."""
    blocks = [head]
    for n, (title, facts, authors, more) in enumerate(hits, start=1):
        lines = [f"{n}. {title}", f"   {facts}", f"   authors: {_format_authors(authors)}"]
        blocks.append("\n".join(lines + [f"   {line}" for line in more]))
    return clip_text("\n\n".join(blocks))


def make_arxiv_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``arxiv``: the arXiv export API (Atom) searched by keywords or looked up by id."""
    api = f"{base_url.rstrip('/')}/api/query"

    def arxiv(query: str, max_results: int = 5) -> str:
        query = require_text(query, "query")
        paper_id = _arxiv_id(query)
        params: dict[str, str | int] = {"start": 0, "max_results": max_results}
        if paper_id:
            params["id_list"] = paper_id
        else:
            params.update({"search_query": arxiv_search_query(query), "sortBy": "relevance"})
        total, entries = parse_arxiv_feed(fetcher.get(api, params=params).content)
        if not entries:
            raise ToolError(f"no arXiv papers match {query!r}; try fewer or other keywords")
        hits = [
            (
                e["title"],
                f"id: {e['id']} | published: {e['published']} | {e['category']}",
                e["authors"],
                ([f"journal: {e['journal_ref']}"] if e["journal_ref"] else [])
                + [f"summary: {clip(e['summary'], ITEM_SUMMARY_CHARS)}"],
            )
            for e in entries
        ]
        return _hit_listing(f"arXiv: {len(entries)} of {total} results for {query!r}", hits)

    description = (
        "Use this tool when you need research papers (preprints) in physics, mathematics, "
        "computer science or related fields: it searches arXiv by keywords or an arXiv id "
        "and returns titles, authors, dates and abstracts. Do NOT use it for medical "
        "literature (use pubmed) or general facts (use wikipedia)."
    )
    parameters = _search_parameters(
        "Keywords, e.g. 'speculative decoding CPU', an arXiv id such as '2401.07733', or "
        "arXiv syntax like 'au:Smith AND ti:graph'.",
        "papers",
    )
    return Tool("arxiv", description, parameters, arxiv)


# --------------------------------------------------------------------------------------
# pubmed
# --------------------------------------------------------------------------------------


def _pubmed_date(article: Element) -> str:
    date = article.find("./MedlineCitation/Article/Journal/JournalIssue/PubDate")
    if date is None:
        return ""
    medline = date.findtext("MedlineDate")
    if medline:
        return clean(medline)
    parts = (date.findtext(tag) for tag in ("Year", "Month", "Day"))
    return " ".join(p for p in parts if p)


def _all_text(element: Element | None) -> str:
    """Text including nested markup: PubMed titles and abstracts carry <i>, <sup>, ..."""
    return clean("".join(element.itertext())) if element is not None else ""


def parse_pubmed_articles(content: bytes) -> list[dict[str, Any]]:
    """Records from an efetch ``PubmedArticleSet`` (PubMed XML)."""
    root = xml_root(content, "PubMed")
    if root.tag != "PubmedArticleSet":
        error = root.findtext("ERROR")
        raise ToolError(f"PubMed efetch error: {error}" if error else "unexpected PubMed XML")
    records = []
    for article in root.findall("PubmedArticle"):
        citation = article.find("MedlineCitation")
        art = citation.find("Article") if citation is not None else None
        if citation is None or art is None:
            continue
        authors = []
        for author in art.findall("./AuthorList/Author"):
            last = author.findtext("LastName") or author.findtext("CollectiveName") or ""
            initials = author.findtext("Initials") or ""
            authors.append(clean(f"{last} {initials}"))
        sections = []
        for part in art.findall("./Abstract/AbstractText"):
            text = _all_text(part)
            label = part.get("Label")
            sections.append(f"{label}: {text}" if label else text)
        records.append(
            {
                "pmid": clean(citation.findtext("PMID")),
                "title": _all_text(art.find("ArticleTitle")),
                "journal": clean(art.findtext("./Journal/Title")),
                "date": _pubmed_date(article),
                "authors": authors,
                "doi": clean(art.findtext("./ELocationID[@EIdType='doi']")),
                "abstract": " ".join(sections),
            }
        )
    return records


def make_pubmed_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``pubmed``: E-utilities ``esearch`` for PMIDs, then ``efetch`` PubMed XML records."""
    base = base_url.rstrip("/")

    def pubmed(query: str, max_results: int = 5) -> str:
        query = require_text(query, "query")
        search = json_body(
            fetcher.get(
                f"{base}/esearch.fcgi",
                params={
                    "db": "pubmed",
                    "term": query,
                    "retmode": "json",
                    "retmax": max_results,
                    "sort": "relevance",
                    "tool": "mastif",
                },
            ),
            "PubMed",
        )
        result = search.get("esearchresult", {}) if isinstance(search, dict) else {}
        if "ERROR" in result:
            raise ToolError(f"PubMed search error: {result['ERROR']}")
        ids = [str(i) for i in result.get("idlist", [])]
        if not ids:
            raise ToolError(f"no PubMed articles match {query!r}; try fewer or other keywords")
        fetched = fetcher.get(
            f"{base}/efetch.fcgi",
            params={
                "db": "pubmed",
                "id": ",".join(ids),
                "retmode": "xml",
                "rettype": "abstract",
                "tool": "mastif",
            },
        )
        records = parse_pubmed_articles(fetched.content)
        if not records:
            raise ToolError(f"PubMed returned no records for PMIDs {', '.join(ids)}")
        count = result.get("count", len(ids))
        hits = [
            (
                r["title"],
                f"PMID: {r['pmid']} | {r['journal']} | {r['date']}",
                r["authors"],
                ([f"doi: {r['doi']}"] if r["doi"] else [])
                + (
                    [f"abstract: {clip(r['abstract'], ITEM_SUMMARY_CHARS)}"]
                    if r["abstract"]
                    else []
                ),
            )
            for r in records
        ]
        return _hit_listing(f"PubMed: {len(records)} of {count} results for {query!r}", hits)

    description = (
        "Use this tool when you need biomedical or health research: it searches PubMed and "
        "returns article titles, journals, dates, authors and abstracts (e.g. trial sizes, "
        "outcomes). Do NOT use it for physics or computer-science papers (use arxiv) or "
        "for general facts (use wikipedia)."
    )
    parameters = _search_parameters(
        "Keywords, e.g. 'vitamin D respiratory infection children'.", "articles"
    )
    return Tool("pubmed", description, parameters, pubmed)
