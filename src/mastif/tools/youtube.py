"""The ``youtube_transcript`` tool: captions of a YouTube video via ``youtube-transcript-api``.

The library brings its own ``requests`` session, so it gets one (:func:`youtube_session`)
whose transport adapter (:class:`PolicyAdapter`) sends every request through the
policy-checked :class:`~mastif.tools.http.HttpFetcher` and rewrites the YouTube host to the
configured endpoint (:attr:`mastif.tools.knowledge.KnowledgeEndpoints.youtube`: the real
site or the offline sandbox's mimic).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.etree.ElementTree import ParseError

import requests
from requests.adapters import HTTPAdapter

from mastif.core.textclip import clip_text
from mastif.tools.apitext import clean, clip, require_text
from mastif.tools.base import Tool, ToolError, object_schema, text_parameter
from mastif.tools.http import MAX_REDIRECTS, HttpFetcher

#: The real YouTube origin, as ``youtube-transcript-api`` hard-codes it.
YOUTUBE_ORIGIN = "https://www.youtube.com"

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
    return clip(clean(text.strip().split("\n\n")[0]), limit)


def make_youtube_transcript_tool(fetcher: HttpFetcher, base_url: str) -> Tool:
    """``youtube_transcript``: captions of a YouTube video via ``youtube-transcript-api``."""
    from youtube_transcript_api import YouTubeTranscriptApi
    from youtube_transcript_api._errors import CouldNotRetrieveTranscript, NoTranscriptFound

    def youtube_transcript(video: str, language: str = "en") -> str:
        video_id = parse_video_id(require_text(video, "video"))
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
        lines = [f"[{_timestamp(s.start)}] {clean(s.text)}" for s in fetched if clean(s.text)]
        if not lines:
            raise ToolError(f"the transcript of YouTube video {video_id} is empty")
        kind = "auto-generated" if fetched.is_generated else "manual"
        head = f"Transcript of YouTube video {video_id} ({fetched.language}, {kind}):"
        return clip_text("\n".join([head, *lines]))

    description = (
        "Use this tool when you need what is said in a YouTube video: give the video id or "
        "URL and it returns the spoken transcript with timestamps. Do NOT use it for "
        "videos on other sites, for a video's comments or view counts, or to search for "
        "videos."
    )
    parameters = object_schema(
        {
            "video": text_parameter("The video id (e.g. 'dQw4w9WgXcQ') or its YouTube URL."),
            "language": text_parameter(
                "Preferred caption language code (default 'en'); another available language "
                "is used if that one is missing."
            ),
        },
        ["video"],
    )
    return Tool("youtube_transcript", description, parameters, youtube_transcript)
