"""Local stand-ins for the public knowledge APIs the research tools call, one module each.

The ``wikipedia``, ``arxiv``, ``pubmed`` and ``youtube_transcript`` tools talk to real
services (MediaWiki Action API, arXiv export API, NCBI E-utilities, YouTube through
``youtube-transcript-api``). Runs on an offline cluster, and the tests, cannot reach them,
so these mimics serve the *same wire formats* — field names, nesting, XML namespaces,
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

One module per API, ``wikipedia.py``, ``arxiv.py``, ``pubmed.py`` and ``youtube.py``; what
they share (loading the corpus, reading parameters, matching) is ``common.py``. This package
imports only its own modules, :mod:`mastif.web.search` and :mod:`mastif.core`.

May import: mastif.core (and mastif.web, its own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from starlette.routing import BaseRoute, Mount

from mastif.core.paths import resources_dir
from mastif.web.mimics.arxiv import ArXiv
from mastif.web.mimics.common import load_corpus
from mastif.web.mimics.pubmed import PubMed
from mastif.web.mimics.wikipedia import Wikipedia, article_documents
from mastif.web.mimics.youtube import YouTube
from mastif.web.search import SearchDocument

KNOWLEDGE_DIR = "knowledge"
PREFIXES: dict[str, str] = {
    "wikipedia": "/api/wikipedia",
    "arxiv": "/api/arxiv",
    "pubmed": "/api/pubmed",
    "youtube": "/api/youtube",
}
"""Where each mimic is mounted; :meth:`KnowledgeEndpoints.sandbox` uses the same paths."""


class _Mimic(Protocol):
    def routes(self) -> list[BaseRoute]: ...


_MIMICS: dict[str, Callable[[Mapping[str, Any]], _Mimic]] = {
    "wikipedia": Wikipedia,
    "arxiv": ArXiv,
    "pubmed": PubMed,
    "youtube": YouTube,
}


def default_data_dir() -> Path:
    """``resources/sandbox``: where the offline sandbox keeps its data."""
    return resources_dir() / "sandbox"


def mimic_routes(data_dir: Path | None = None) -> list[BaseRoute]:
    """Starlette routes serving the four API mimics under :data:`PREFIXES`.

    ``data_dir`` is the sandbox data directory (default :func:`default_data_dir`); the
    corpus is read once, here, so a broken file fails at startup rather than mid-run.
    """
    root = (data_dir if data_dir is not None else default_data_dir()) / KNOWLEDGE_DIR
    return [
        Mount(PREFIXES[name], routes=mimic(load_corpus(root / f"{name}.json")).routes())
        for name, mimic in _MIMICS.items()
    ]


def mimic_documents(data_dir: Path | None = None) -> list[SearchDocument]:
    """The encyclopedia mimic's article pages as LoopSearch documents.

    The sandbox's search engine indexes every page a sandbox user can open, and the
    ``/api/wikipedia/wiki/{title}`` article pages are such pages: a plain ``web_search``
    finds them as it finds a shop's product pages on the real web.
    """
    root = (data_dir if data_dir is not None else default_data_dir()) / KNOWLEDGE_DIR
    return article_documents(load_corpus(root / "wikipedia.json"), PREFIXES["wikipedia"])
