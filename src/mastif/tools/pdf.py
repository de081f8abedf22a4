"""The ``pdf_reader`` tool: the text of a PDF at a URL, page by page.

The PDF is downloaded through the policy-checked :class:`~mastif.tools.http.HttpFetcher` in
this process and parsed (:func:`read_pdf`: pypdf, page selection, formatting, the cap) in a
child process with a CPU-time limit, a memory budget and no network
(:func:`~mastif.tools.isolation.run_isolated`), never in this one. A file that is not a
PDF, a damaged one or one over a parsing limit is a :class:`~mastif.tools.base.ToolError`.
"""

from __future__ import annotations

import io
import re

import httpx

from mastif.core.textclip import MAX_TEXT_CHARS, clip_text
from mastif.tools.apitext import require_text
from mastif.tools.base import Tool, ToolError, object_schema, text_parameter
from mastif.tools.http import HttpFetcher
from mastif.tools.isolation import ChildLimitExceeded, ChildLimits, run_isolated

#: Most pages ``pdf_reader`` extracts in one call (text extraction is CPU-bound).
MAX_PDF_PAGES = 20
DEFAULT_PDF_PAGES = 10


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
    return clip_text("\n".join([head, *body]), MAX_TEXT_CHARS)


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
        url = require_text(url, "url")
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
    parameters = object_schema(
        {
            "url": text_parameter("Full http(s) URL of the PDF file."),
            "pages": text_parameter(
                "Optional pages, e.g. '3', '2-5' or '1,4-6' (default: the "
                f"first {DEFAULT_PDF_PAGES})."
            ),
        },
        ["url"],
    )
    return Tool("pdf_reader", description, parameters, pdf_reader)
