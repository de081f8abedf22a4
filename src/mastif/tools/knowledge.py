"""Research tools backed by public APIs: ``wikipedia``, ``arxiv``, ``pubmed``,
``youtube_transcript`` and ``pdf_reader``.

Each tool calls the real service's documented API (MediaWiki Action API, arXiv export API,
NCBI E-utilities, YouTube through ``youtube-transcript-api``, any PDF URL) and turns the
answer into compact plain text a small model can read. Where the service lives is a
:class:`KnowledgeEndpoints` value: the defaults are the public hosts, and
:meth:`KnowledgeEndpoints.sandbox` points every tool at the offline sandbox's mimics
(:mod:`mastif.web.mimics`), which serve the same formats — so the parsing in the tools'
modules is the code that runs live, not a test double.

Every request goes through :class:`~mastif.tools.http.HttpFetcher` (SSRF policy on every
URL and redirect, timeouts, size cap). ``youtube-transcript-api`` brings its own
``requests`` session, so it gets one whose transport adapter applies the same policy and
rewrites the YouTube host to the configured endpoint. A downloaded PDF is parsed in a
child process with a CPU-time limit, a memory budget and no network
(:func:`mastif.tools.pdf.read_pdf`), never in this one. Failures — no match, HTTP errors,
unparsable answers, a video without captions, a file that is not a PDF, a PDF over a
parsing limit — raise :class:`~mastif.tools.base.ToolError`, never a success carrying an
error string.

One module per tool family: :mod:`~mastif.tools.wikipedia`, :mod:`~mastif.tools.papers`
(``arxiv``, ``pubmed``), :mod:`~mastif.tools.youtube` and :mod:`~mastif.tools.pdf`, with
the answer parsing they share in :mod:`~mastif.tools.apitext`; this module holds where the
services live and builds the five tools together.
"""

from __future__ import annotations

from dataclasses import dataclass

from mastif.tools.base import Tool
from mastif.tools.http import HttpFetcher
from mastif.tools.papers import make_arxiv_tool, make_pubmed_tool
from mastif.tools.pdf import make_pdf_reader_tool
from mastif.tools.wikipedia import make_wikipedia_tool
from mastif.tools.youtube import YOUTUBE_ORIGIN, make_youtube_transcript_tool


@dataclass(frozen=True)
class KnowledgeEndpoints:
    """Base URLs of the services; swap them to run against the offline mimics."""

    wikipedia: str = "https://en.wikipedia.org"
    arxiv: str = "https://export.arxiv.org"
    pubmed: str = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
    youtube: str = YOUTUBE_ORIGIN

    @classmethod
    def sandbox(cls, base_url: str) -> KnowledgeEndpoints:
        """The mimics mounted by :func:`mastif.web.mimics.mimic_routes` at ``base_url``."""
        base = base_url.rstrip("/")
        return cls(
            wikipedia=f"{base}/api/wikipedia",
            arxiv=f"{base}/api/arxiv",
            pubmed=f"{base}/api/pubmed",
            youtube=f"{base}/api/youtube",
        )


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
