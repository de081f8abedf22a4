"""Research tools backed by public APIs: ``wikipedia``, ``arxiv``, ``pubmed``,
``youtube_transcript`` and ``pdf_reader``.

Each tool calls the real service's documented API (MediaWiki Action API, arXiv export API,
NCBI E-utilities, YouTube through ``youtube-transcript-api``, any PDF URL) and turns the
answer into compact plain text a small model can read. Where the service lives is a
:class:`KnowledgeEndpoints` value: the defaults are the public hosts, and
:meth:`KnowledgeEndpoints.sandbox` points every tool at the offline sandbox's mimics
(:mod:`mastif.web.mimic`), which serve the same formats — so the parsing below is
the code that runs live, not a test double.

Every request goes through :class:`~mastif.tools.http.HttpFetcher` (SSRF policy on every
URL and redirect, timeouts, size cap). ``youtube-transcript-api`` brings its own
``requests`` session, so it gets one whose transport adapter applies the same policy and
rewrites the YouTube host to the configured endpoint. A downloaded PDF is parsed in a
child process with a CPU-time limit, a memory budget and no network (:func:`read_pdf`),
never in this one. Failures — no match, HTTP errors, unparsable answers, a video without
captions, a file that is not a PDF, a PDF over a parsing limit — raise
:class:`~mastif.tools.base.ToolError`, never a success carrying an error string.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit
from xml.etree.ElementTree import Element, ParseError

import httpx
import requests
from defusedxml import DefusedXmlException
from defusedxml import ElementTree as SafeET
from requests.adapters import HTTPAdapter

from mastif.tools.base import MAX_OUTPUT_CHARS, Tool, ToolError
from mastif.tools.base import object_schema as _schema
from mastif.tools.base import truncate_output as _truncate
from mastif.tools.http import MAX_REDIRECTS, HttpFetcher
from mastif.tools.isolation import ChildLimitExceeded, ChildLimits, run_isolated

#: The real YouTube origin, as ``youtube-transcript-api`` hard-codes it.
YOUTUBE_ORIGIN = "https://www.youtube.com"

ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV = "{http://arxiv.org/schemas/atom}"
OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"

#: Longest abstract/summary shown per search hit: several hits must fit one answer.
ITEM_SUMMARY_CHARS = 700
#: Most pages ``pdf_reader`` extracts in one call (text extraction is CPU-bound).
MAX_PDF_PAGES = 20
DEFAULT_PDF_PAGES = 10


@dataclass(frozen=True)
class KnowledgeEndpoints:
    """Base URLs of the services; swap them to run against the offline mimics."""

    wikipedia: str = "https://en.wikipedia.org"
    arxiv: str = "https://export.arxiv.org"
    pubmed: str = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
    youtube: str = YOUTUBE_ORIGIN

    @classmethod
    def sandbox(cls, base_url: str) -> KnowledgeEndpoints:
        """The mimics mounted by :func:`mastif.web.mimic.mimic_routes` at ``base_url``."""
        base = base_url.rstrip("/")
        return cls(
            wikipedia=f"{base}/api/wikipedia",
            arxiv=f"{base}/api/arxiv",
            pubmed=f"{base}/api/pubmed",
            youtube=f"{base}/api/youtube",
        )


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _clean(text: str | None) -> str:
    """Collapse whitespace: arXiv hard-wraps, XML indents, models do not need either."""
    return " ".join((text or "").split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _json_body(response: httpx.Response, service: str) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ToolError(
            f"{service} returned something other than JSON "
            f"(content-type {response.headers.get('content-type', 'unknown')})"
        ) from None


def _xml_root(content: bytes, service: str) -> Element:
    """Parse untrusted XML without entity expansion (defusedxml), with a clear error."""
    try:
        root: Element = SafeET.fromstring(content)
    except (ParseError, DefusedXmlException) as exc:
        preview = _clean(content[:120].decode("utf-8", "replace"))
        raise ToolError(f"{service} returned unparsable XML ({exc}): {preview!r}") from None
    return root


def _require_text(value: str, name: str) -> str:
    value = value.strip()
    if not value:
        raise ToolError(f"{name} must not be empty")
    return value


# --------------------------------------------------------------------------------------
# wikipedia
# --------------------------------------------------------------------------------------


def make_wikipedia_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``wikipedia``: MediaWiki Action API search, then the article's plain-text intro."""
    api = f"{base_url.rstrip('/')}/w/api.php"

    def call(params: dict[str, str | int]) -> dict[str, Any]:
        data = _json_body(fetcher.get(api, params=params), "Wikipedia")
        if not isinstance(data, dict):
            raise ToolError("Wikipedia returned an unexpected JSON value")
        if "error" in data:  # MediaWiki reports API errors with HTTP 200
            error = data["error"]
            raise ToolError(f"Wikipedia API error {error.get('code')}: {error.get('info')}")
        return data

    def wikipedia(query: str, sentences: int = 5) -> str:
        query = _require_text(query, "query")
        found = call(
            {
                "action": "query",
                "list": "search",
                "srsearch": query,
                "srlimit": 5,
                "srprop": "snippet",
                "format": "json",
                "formatversion": 2,
            }
        )
        hits = found.get("query", {}).get("search", [])
        if not hits:
            raise ToolError(f"no Wikipedia article matches {query!r}; try fewer or other words")
        title = str(hits[0]["title"])
        pages = (
            call(
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
                }
            )
            .get("query", {})
            .get("pages", [])
        )
        page = pages[0] if pages else {}
        extract = _clean(page.get("extract"))
        if page.get("missing") or not extract:
            raise ToolError(f"Wikipedia has no text for the article {title!r}")
        title = str(page.get("title", title))
        url = f"{base_url.rstrip('/')}/wiki/{quote(title.replace(' ', '_'))}"
        lines = [title, url, "", extract]
        others = [str(h["title"]) for h in hits[1:]]
        if others:
            lines += ["", "Other matching articles: " + "; ".join(others)]
        return _truncate("\n".join(lines))

    description = (
        "Use this tool when you need encyclopedic facts about a named thing: a place, "
        "person, organisation, species or concept. It finds the best-matching Wikipedia "
        "article and returns its introduction. Do NOT use it for recent news, scientific "
        "papers (use arxiv or pubmed) or pages at a given URL."
    )
    parameters = _schema(
        {
            "query": {
                "type": "string",
                "description": "Article name or a few keywords, e.g. 'Eiffel Tower'.",
            },
            "sentences": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10,
                "description": "How many sentences of the introduction to return (default 5).",
            },
        },
        ["query"],
    )
    return Tool("wikipedia", description, parameters, wikipedia)


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
    root = _xml_root(content, "arXiv")
    if root.tag != f"{ATOM}feed":
        raise ToolError(f"arXiv returned an unexpected document <{root.tag}>")
    entries: list[dict[str, Any]] = []
    for entry in root.findall(f"{ATOM}entry"):
        entry_id = _clean(entry.findtext(f"{ATOM}id"))
        title = _clean(entry.findtext(f"{ATOM}title"))
        summary = _clean(entry.findtext(f"{ATOM}summary"))
        if title == "Error" and "/api/errors" in entry_id:
            raise ToolError(f"arXiv API error: {summary or entry_id}")
        primary = entry.find(f"{ARXIV}primary_category")
        entries.append(
            {
                "id": entry_id.rsplit("/abs/", 1)[-1],
                "url": entry_id,
                "title": title,
                "summary": summary,
                "published": _clean(entry.findtext(f"{ATOM}published"))[:10],
                "authors": [
                    _clean(a.findtext(f"{ATOM}name")) for a in entry.findall(f"{ATOM}author")
                ],
                "category": primary.get("term", "") if primary is not None else "",
                "journal_ref": _clean(entry.findtext(f"{ARXIV}journal_ref")),
                "doi": _clean(entry.findtext(f"{ARXIV}doi")),
            }
        )
    total_text = root.findtext(f"{OPENSEARCH}totalResults")
    total = int(total_text) if total_text and total_text.strip().isdigit() else len(entries)
    return total, entries


def _format_authors(names: list[str], limit: int = 4) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def make_arxiv_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``arxiv``: the arXiv export API (Atom) searched by keywords or looked up by id."""
    api = f"{base_url.rstrip('/')}/api/query"

    def arxiv(query: str, max_results: int = 5) -> str:
        query = _require_text(query, "query")
        paper_id = _arxiv_id(query)
        params: dict[str, str | int] = {"start": 0, "max_results": max_results}
        if paper_id:
            params["id_list"] = paper_id
        else:
            params.update({"search_query": arxiv_search_query(query), "sortBy": "relevance"})
        total, entries = parse_arxiv_feed(fetcher.get(api, params=params).content)
        if not entries:
            raise ToolError(f"no arXiv papers match {query!r}; try fewer or other keywords")
        blocks = [f"arXiv: {len(entries)} of {total} results for {query!r}"]
        for n, e in enumerate(entries, start=1):
            lines = [
                f"{n}. {e['title']}",
                f"   id: {e['id']} | published: {e['published']} | {e['category']}",
                f"   authors: {_format_authors(e['authors'])}",
            ]
            if e["journal_ref"]:
                lines.append(f"   journal: {e['journal_ref']}")
            lines.append(f"   summary: {_clip(e['summary'], ITEM_SUMMARY_CHARS)}")
            blocks.append("\n".join(lines))
        return _truncate("\n\n".join(blocks))

    description = (
        "Use this tool when you need research papers (preprints) in physics, mathematics, "
        "computer science or related fields: it searches arXiv by keywords or an arXiv id "
        "and returns titles, authors, dates and abstracts. Do NOT use it for medical "
        "literature (use pubmed) or general facts (use wikipedia)."
    )
    parameters = _schema(
        {
            "query": {
                "type": "string",
                "description": "Keywords, e.g. 'speculative decoding CPU', an arXiv id such "
                "as '2401.07733', or arXiv syntax like 'au:Smith AND ti:graph'.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10,
                "description": "How many papers to return (default 5).",
            },
        },
        ["query"],
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
        return _clean(medline)
    parts = (date.findtext(tag) for tag in ("Year", "Month", "Day"))
    return " ".join(p for p in parts if p)


def _all_text(element: Element | None) -> str:
    """Text including nested markup: PubMed titles and abstracts carry <i>, <sup>, ..."""
    return _clean("".join(element.itertext())) if element is not None else ""


def parse_pubmed_articles(content: bytes) -> list[dict[str, Any]]:
    """Records from an efetch ``PubmedArticleSet`` (PubMed XML)."""
    root = _xml_root(content, "PubMed")
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
            authors.append(_clean(f"{last} {initials}"))
        sections = []
        for part in art.findall("./Abstract/AbstractText"):
            text = _all_text(part)
            label = part.get("Label")
            sections.append(f"{label}: {text}" if label else text)
        records.append(
            {
                "pmid": _clean(citation.findtext("PMID")),
                "title": _all_text(art.find("ArticleTitle")),
                "journal": _clean(art.findtext("./Journal/Title")),
                "date": _pubmed_date(article),
                "authors": authors,
                "doi": _clean(art.findtext("./ELocationID[@EIdType='doi']")),
                "abstract": " ".join(sections),
            }
        )
    return records


def make_pubmed_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``pubmed``: E-utilities ``esearch`` for PMIDs, then ``efetch`` PubMed XML records."""
    base = base_url.rstrip("/")

    def pubmed(query: str, max_results: int = 5) -> str:
        query = _require_text(query, "query")
        search = _json_body(
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
        blocks = [f"PubMed: {len(records)} of {count} results for {query!r}"]
        for n, r in enumerate(records, start=1):
            lines = [
                f"{n}. {r['title']}",
                f"   PMID: {r['pmid']} | {r['journal']} | {r['date']}",
                f"   authors: {_format_authors(r['authors'])}",
            ]
            if r["doi"]:
                lines.append(f"   doi: {r['doi']}")
            if r["abstract"]:
                lines.append(f"   abstract: {_clip(r['abstract'], ITEM_SUMMARY_CHARS)}")
            blocks.append("\n".join(lines))
        return _truncate("\n\n".join(blocks))

    description = (
        "Use this tool when you need biomedical or health research: it searches PubMed and "
        "returns article titles, journals, dates, authors and abstracts (e.g. trial sizes, "
        "outcomes). Do NOT use it for physics or computer-science papers (use arxiv) or "
        "for general facts (use wikipedia)."
    )
    parameters = _schema(
        {
            "query": {
                "type": "string",
                "description": "Keywords, e.g. 'vitamin D respiratory infection children'.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10,
                "description": "How many articles to return (default 5).",
            },
        },
        ["query"],
    )
    return Tool("pubmed", description, parameters, pubmed)


# --------------------------------------------------------------------------------------
# youtube_transcript
# --------------------------------------------------------------------------------------

_VIDEO_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")
_YOUTUBE_PATH_KINDS = ("shorts", "embed", "live", "v", "e")


def parse_video_id(video: str) -> str:
    """The 11-character id from a bare id or any common YouTube URL form.

    The library wants the id, not a URL, and models pass either.
    """
    text = video.strip()
    if _VIDEO_ID.match(text):
        return text
    parts = urlsplit(text if "://" in text else f"https://{text}")
    host = (parts.hostname or "").lower()
    segments = [s for s in parts.path.split("/") if s]
    candidate = ""
    if host == "youtu.be" and segments:
        candidate = segments[0]
    elif "v" in parse_qs(parts.query):
        candidate = parse_qs(parts.query)["v"][0]
    elif len(segments) >= 2 and segments[0] in _YOUTUBE_PATH_KINDS:
        candidate = segments[1]
    if _VIDEO_ID.match(candidate):
        return candidate
    raise ToolError(
        f"{video!r} is not a YouTube video id or URL; give the 11-character id "
        "(e.g. 'dQw4w9WgXcQ') or a link like https://www.youtube.com/watch?v=..."
    )


class PolicyAdapter(HTTPAdapter):
    """A ``requests`` transport that sends through :class:`~mastif.tools.http.HttpFetcher`
    and can relocate YouTube.

    ``youtube-transcript-api`` speaks ``requests``; this adapter hands every request to the
    fetcher instead of urllib3, so the library's calls meet the same rules as every other
    web tool: the URL policy on every redirect hop (followed by the fetcher, pinned to the
    checked address: no DNS rebinding), one overall deadline, a streamed cap on decoded
    bytes, and ``host:port`` cookies sent only to their own address. A URL on
    :data:`YOUTUBE_ORIGIN` is first rewritten to ``youtube_base`` when one is set. Error
    statuses come back as responses (the library reads them itself).
    """

    #: headers the fetcher sets itself (body length and coding, the connection)
    _OWN_HEADERS = frozenset({"content-length", "accept-encoding", "connection", "host"})

    def __init__(self, fetcher: HttpFetcher, youtube_base: str | None) -> None:
        super().__init__(max_retries=0)
        self.fetcher = fetcher
        self.youtube_base = youtube_base.rstrip("/") if youtube_base else None

    def relocate(self, url: str) -> str:
        if self.youtube_base and (url == YOUTUBE_ORIGIN or url.startswith(YOUTUBE_ORIGIN + "/")):
            return self.youtube_base + url[len(YOUTUBE_ORIGIN) :]
        return url

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, *args: Any, **kwargs: Any
    ) -> requests.Response:
        url = self.relocate(str(request.url))
        body = request.body.encode() if isinstance(request.body, str) else request.body
        answer = self.fetcher.request(
            str(request.method),
            url,
            headers={
                k: v for k, v in request.headers.items() if k.lower() not in self._OWN_HEADERS
            },
            content=body,
            raise_for_status=False,
        )
        response = requests.Response()
        response.status_code = answer.status_code
        response.reason = answer.reason_phrase
        response.headers = requests.structures.CaseInsensitiveDict(answer.headers)
        response._content = answer.content  # what requests itself sets when it reads a body
        response.encoding = answer.encoding
        response.url = str(answer.url)
        response.request = request
        return response


def youtube_session(fetcher: HttpFetcher, youtube_base: str) -> requests.Session:
    """A ``requests`` session for ``youtube-transcript-api`` that obeys ``fetcher``'s rules
    (policy, timeout, per-address cookies) and talks to ``youtube_base``."""
    relocated = youtube_base.rstrip("/") != YOUTUBE_ORIGIN
    session = requests.Session()
    session.max_redirects = MAX_REDIRECTS
    adapter = PolicyAdapter(fetcher, youtube_base if relocated else None)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _timestamp(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _first_paragraph(text: str, limit: int = 300) -> str:
    return _clip(_clean(text.strip().split("\n\n")[0]), limit)


def make_youtube_transcript_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``youtube_transcript``: captions of a YouTube video via ``youtube-transcript-api``."""
    from youtube_transcript_api import YouTubeTranscriptApi
    from youtube_transcript_api._errors import CouldNotRetrieveTranscript, NoTranscriptFound

    def youtube_transcript(video: str, language: str = "en") -> str:
        video_id = parse_video_id(_require_text(video, "video"))
        api = YouTubeTranscriptApi(http_client=youtube_session(fetcher, base_url))
        try:
            available = api.list(video_id)
            wanted = [language.strip() or "en"]
            if wanted[0] != "en":
                wanted.append("en")
            try:
                transcript = available.find_transcript(wanted)
            except NoTranscriptFound:
                transcript = next(iter(available), None)  # better some language than none
                if transcript is None:
                    raise
            fetched = transcript.fetch()
        except CouldNotRetrieveTranscript as exc:
            raise ToolError(
                f"no transcript for YouTube video {video_id}: {_first_paragraph(exc.cause)}"
            ) from None
        except requests.Timeout:
            raise ToolError(
                f"timed out after {fetcher.timeout_s:g}s fetching the transcript of {video_id}"
            ) from None
        except requests.RequestException as exc:
            raise ToolError(f"could not reach YouTube: {type(exc).__name__}: {exc}") from None
        except ParseError as exc:
            raise ToolError(f"YouTube sent transcript data that is not valid XML: {exc}") from None
        lines = [f"[{_timestamp(s.start)}] {_clean(s.text)}" for s in fetched if _clean(s.text)]
        if not lines:
            raise ToolError(f"the transcript of YouTube video {video_id} is empty")
        kind = "auto-generated" if fetched.is_generated else "manual"
        head = f"Transcript of YouTube video {video_id} ({fetched.language}, {kind}):"
        return _truncate("\n".join([head, *lines]))

    description = (
        "Use this tool when you need what is said in a YouTube video: give the video id or "
        "URL and it returns the spoken transcript with timestamps. Do NOT use it for "
        "videos on other sites, for a video's comments or view counts, or to search for "
        "videos."
    )
    parameters = _schema(
        {
            "video": {
                "type": "string",
                "description": "The video id (e.g. 'dQw4w9WgXcQ') or its YouTube URL.",
            },
            "language": {
                "type": "string",
                "description": "Preferred caption language code (default 'en'); another "
                "available language is used if that one is missing.",
            },
        },
        ["video"],
    )
    return Tool("youtube_transcript", description, parameters, youtube_transcript)


# --------------------------------------------------------------------------------------
# pdf_reader
# --------------------------------------------------------------------------------------


def parse_page_range(spec: str, n_pages: int) -> list[int]:
    """1-based page numbers from ``'3'``, ``'2-5'`` or ``'1,4-6'``, checked against the
    document, so a model's off-by-one gets a precise message rather than silence."""
    pages: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise ToolError(f"bad pages {spec!r}: use e.g. '3', '2-5' or '1,4-6'")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first < 1 or last < first:
            raise ToolError(f"bad page range {part!r} in {spec!r}")
        if first > n_pages:
            raise ToolError(f"page {first} does not exist: the PDF has {n_pages} pages")
        pages.extend(p for p in range(first, min(last, n_pages) + 1) if p not in pages)
    if not pages:
        raise ToolError(f"bad pages {spec!r}: use e.g. '3', '2-5' or '1,4-6'")
    if len(pages) > MAX_PDF_PAGES:
        raise ToolError(f"at most {MAX_PDF_PAGES} pages per call; ask for a smaller range")
    return pages


def _looks_like_pdf(response: httpx.Response) -> bool:
    """The ``%PDF-`` header (readers accept it within the first KiB) or a PDF content
    type; servers mislabel files both ways, so either is enough to try parsing."""
    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return ctype in ("application/pdf", "application/x-pdf") or b"%PDF-" in response.content[:1024]


#: CPU seconds one ``pdf_reader`` call may spend parsing (RLIMIT_CPU in the child): a
#: 36-page, 256 KB manual takes 0.3 s for its first 10 pages and 0.5 s for 20; a 7 KB PDF
#: whose one 2 MB content stream is shared by 10 pages took 32-52 s before this limit.
PDF_CPU_S = 10
#: Memory (MB) the parsing child may add to what it inherits (RLIMIT_AS): the manual above
#: adds ~12 MB; pypdf decodes one stream up to 75 MB, and a 70 MB one took ~120 MB.
PDF_MEMORY_MB = 512
#: Wall-clock seconds the parent waits for the child, a little above the CPU limit so that
#: on an idle machine the clearer CPU message is the one given.
PDF_TIMEOUT_S = 15.0


def read_pdf(content: bytes, url: str, pages: str) -> str:
    """The text of ``pages`` of the PDF ``content`` (fetched from ``url``), formatted for
    the model and capped. Untrusted input and CPU-bound: :func:`make_pdf_reader_tool` runs
    it in a limited child process (:func:`~mastif.tools.isolation.run_isolated`)."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ToolError(f"{url} is a password-protected PDF")
        total = len(reader.pages)
        if total == 0:
            raise ToolError(f"{url} is a PDF without pages")
        wanted = (
            parse_page_range(pages, total)
            if pages.strip()
            else list(range(1, min(total, DEFAULT_PDF_PAGES) + 1))
        )
        texts = [(n, (reader.pages[n - 1].extract_text() or "").strip()) for n in wanted]
    except (ToolError, MemoryError):
        raise  # a MemoryError is the memory limit, reported as such by the parent
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types on broken files
        raise ToolError(
            f"{url} is a damaged or unreadable PDF: {type(exc).__name__}: {exc}"
        ) from None
    if not any(text for _, text in texts):
        raise ToolError(
            f"no extractable text on pages {wanted[0]}-{wanted[-1]} of {url} "
            "(it may be scanned images)"
        )
    shown = f"pages {wanted[0]}-{wanted[-1]}" if len(wanted) > 1 else f"page {wanted[0]}"
    head = f"PDF {url} ({total} pages; showing {shown})"
    body = [f"--- page {n} ---\n{text or '(no text on this page)'}" for n, text in texts]
    if not pages.strip() and total > len(wanted):
        body.append(f"... {total - len(wanted)} more pages; ask for them with 'pages'")
    return _truncate("\n".join([head, *body]), MAX_OUTPUT_CHARS)


def make_pdf_reader_tool(
    fetcher: HttpFetcher,
    cpu_s: int = PDF_CPU_S,
    memory_mb: int = PDF_MEMORY_MB,
    timeout_s: float = PDF_TIMEOUT_S,
) -> Tool:
    """``pdf_reader``: download a PDF through the policy-checked fetcher (in this process),
    then extract its text in a child process limited to ``cpu_s`` CPU seconds and
    ``memory_mb`` MB, without network, killed after ``timeout_s``; only the capped text
    comes back."""
    import pypdf  # noqa: F401 - imported before forking, so each child starts warm

    limits = ChildLimits(cpu_s=cpu_s, memory_mb=memory_mb, workdir=False, network=False)

    def pdf_reader(url: str, pages: str = "") -> str:
        url = _require_text(url, "url")
        response = fetcher.get(url, headers={"Accept": "application/pdf,*/*;q=0.5"})
        if not _looks_like_pdf(response):
            ctype = response.headers.get("content-type", "unknown")
            raise ToolError(
                f"{url} is not a PDF (content-type {ctype}); use a web page tool for HTML"
            )
        try:
            return run_isolated(read_pdf, (response.content, url, pages), timeout_s, limits)
        except ChildLimitExceeded as exc:
            if exc.kind == "cpu":
                raise ToolError(
                    f"the PDF {url} took more than {cpu_s} s of CPU to parse (the "
                    "pdf_reader limit); it may be built to be slow, or ask for fewer pages"
                ) from None
            if exc.kind == "memory":
                raise ToolError(
                    f"the PDF {url} needed more than {memory_mb} MB of memory to parse "
                    "(the pdf_reader limit)"
                ) from None
            raise ToolError(
                f"the PDF {url} was not parsed within {timeout_s:g} s; ask for fewer pages"
            ) from None

    description = (
        "Use this tool when you have the URL of a PDF document and need its text, page by "
        "page. Optionally give pages like '2-4'. Do NOT use it for HTML web pages or to "
        "search for documents; it only reads a PDF you already have a link to."
    )
    parameters = _schema(
        {
            "url": {"type": "string", "description": "Full http(s) URL of the PDF file."},
            "pages": {
                "type": "string",
                "description": "Optional pages, e.g. '3', '2-5' or '1,4-6' (default: the "
                f"first {DEFAULT_PDF_PAGES}).",
            },
        },
        ["url"],
    )
    return Tool("pdf_reader", description, parameters, pdf_reader)


# --------------------------------------------------------------------------------------
# All together
# --------------------------------------------------------------------------------------

KNOWLEDGE_TOOL_NAMES: tuple[str, ...] = (
    "wikipedia",
    "arxiv",
    "pubmed",
    "youtube_transcript",
    "pdf_reader",
)


def make_knowledge_tools(fetcher: HttpFetcher, endpoints: KnowledgeEndpoints) -> list[Tool]:
    """The five research tools, all fetching through ``fetcher`` from ``endpoints``."""
    return [
        make_wikipedia_tool(fetcher, endpoints.wikipedia),
        make_arxiv_tool(fetcher, endpoints.arxiv),
        make_pubmed_tool(fetcher, endpoints.pubmed),
        make_youtube_transcript_tool(fetcher, endpoints.youtube),
        make_pdf_reader_tool(fetcher),
    ]
